"""Batch limits the spec leaves out are decisions (issue 22 item 2; docs/performance-model.md,
"Batch limits are decisions"): what the engine is told on its command line is the number of
sequences of the SLO's lengths the sized KV cache holds, rounded up to 8.

What the engines do with it: vLLM schedules at most ``--max-num-seqs`` sequences a step and
admits a request only when its prompt fits the free KV blocks
(vllm-project/vllm@v0.24.0, vllm/v1/core/sched/scheduler.py, ``schedule``: ``if
len(self.running) == self.max_num_running_reqs: break``; ``allocate_slots`` returning None),
so a limit below what the cache holds leaves the rest unused; TensorRT-LLM's
``guaranteed_no_evict`` scheduler admits up to ``max_batch_size`` requests whose prompt +
output fit (NVIDIA/TensorRT-LLM, docs "Useful Runtime Options", capacity scheduler policy)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from llmdeploy.cli import commands as cli

REPO = Path(__file__).resolve().parents[1]


def _size(path: Path) -> dict[str, object]:
    result = CliRunner().invoke(cli.app, ["size", str(path), "--json"])
    assert result.exit_code in (0, 8), result.stderr
    doc: dict[str, object] = json.loads(result.stdout)
    return doc


def _render(path: Path, out: Path) -> str:
    result = CliRunner().invoke(cli.app, ["render", str(path), "-o", str(out), "--force"])
    assert result.exit_code == 0, result.stderr
    return "".join(p.read_text(encoding="utf-8") for p in sorted(out.iterdir()) if p.is_file())


def _held(doc: dict[str, object]) -> int:
    """Requests of the SLO's prompt + output length the printed KV cache holds."""
    tokens, slo = doc["kv_cache_tokens"], doc["slo"]
    assert isinstance(slo, dict) and isinstance(tokens, int)
    return tokens // int(slo["tokens_per_request"])


def _covers(n: int, held: int, cap: int) -> bool:
    """The decided limit is a multiple of 8 that covers what the cache holds: decided on the
    first sizing, it may exceed what the second (which pays the limit's own CUDA-graph and
    activation memory) holds by a few per cent, never fall below it."""
    return n % 8 == 0 and (n == cap or held <= n < held * 1.03 + 8)


def test_trtllm_without_max_batch_size_gets_what_its_kv_cache_holds(tmp_path: Path) -> None:
    text = (REPO / "presets" / "llama3-8b-trtllm-g6e.yaml").read_text(encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    spec.write_text(text.replace("  maxBatchSize: 128\n", ""), encoding="utf-8")
    doc = _size(spec)
    n = doc["max_num_seqs"]
    assert isinstance(n, int)
    held = _held(doc)
    # not the old fixed 64: the cache holds several hundred 2048+512-token requests
    assert held > 64
    assert _covers(n, held, 2048)
    assert "engine.maxBatchSize" in str(doc["batch_limit_decided"])
    rendered = _render(spec, tmp_path / "deploy")
    assert re.search(rf'- "--max_batch_size"\n\s*- "{n}"\n', rendered), (
        "the decided limit is not on trtllm-serve's command line"
    )
    assert f"max_batch_size: {n}" in rendered  # and its CUDA graphs are captured up to it


def test_an_explicit_limit_is_kept(tmp_path: Path) -> None:
    doc = _size(REPO / "presets" / "llama3-8b-trtllm-g6e.yaml")
    assert doc["max_num_seqs"] == 128 and "batch_limit_decided" not in doc


def test_vllm_default_below_the_cache_is_raised_and_rendered(tmp_path: Path) -> None:
    # one L40S (48 GB, vLLM's default 256 sequences below 70 GiB) holding 8B's KV for many
    # short requests: the default would leave most of the cache unused
    text = (REPO / "presets" / "llama3-8b-vllm-g6e.yaml").read_text(encoding="utf-8")
    text = text.replace("inputTokens: 4096", "inputTokens: 128")
    text = text.replace("outputTokens: 512", "outputTokens: 128")
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    doc = _size(spec)
    held = _held(doc)
    assert held > 256
    n = doc["max_num_seqs"]
    assert isinstance(n, int) and n > 256 and _covers(n, held, 1024)
    assert "serving.maxNumSeqs" in str(doc["batch_limit_decided"])
    rendered = _render(spec, tmp_path / "deploy")
    assert re.search(rf'- "--max-num-seqs"\n\s*- "{n}"\n', rendered)


def test_vllm_default_that_covers_the_cache_is_left_alone() -> None:
    doc = _size(REPO / "presets" / "llama3-8b-vllm-g6e.yaml")  # 4096+512 tokens: ~45 held
    assert _held(doc) <= 256
    assert doc["max_num_seqs"] == 256 and "batch_limit_decided" not in doc
