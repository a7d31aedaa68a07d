"""The KV-cache capacity the performance model batches with is the one ``size`` prints (issue 26).

Each case runs ``llmdeploy size --json`` end to end with the simulation spied on: every call of
``perf.sim.simulate`` records the KV capacity (tokens) it was given. A replica the model covers
must be simulated with exactly the ``kv_cache_tokens`` the same command printed (for a
full-attention model that is also ``num_gpu_blocks x block_size``, vLLM's own "GPU KV cache
size", vllm/v1/core/kv_cache_utils.py ``_report_kv_cache_config``); a layout the model does not
cover (data parallelism inside a pod, pipeline stages) must not be simulated at all, and says
why. Engines: vLLM, TensorRT-LLM's engine path and its PyTorch backend; layouts: one GPU, TP,
TP with expert parallelism, data parallelism, pipeline parallelism; a hybrid sliding-window
model, whose capacity is full-length requests' tokens (``max_concurrency x max_model_len``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from llmdeploy.cli import commands as cli
from llmdeploy.perf import api, sim

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def simulated(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The KV capacities (tokens) of every simulation run while the test runs."""
    seen: list[int] = []
    real = sim.simulate

    def spy(sm: Any, si: sim.SimInput) -> sim.SimResult:
        seen.append(si.kv_capacity_tokens)
        return real(sm, si)

    monkeypatch.setattr(api, "simulate", spy)
    api.estimate.cache_clear()  # a memoised point would skip the simulation
    yield seen
    api.estimate.cache_clear()


def _size(args: list[str]) -> dict[str, Any]:
    result = CliRunner().invoke(cli.app, ["size", *args, "--json"])
    assert result.exit_code in (0, 8), (args, result.stderr)  # fits (8: misses an SLO)
    out: dict[str, Any] = json.loads(result.stdout)
    return out


QUICK = [
    # (model, instance, extra options, hybrid)
    ("llama-3.1-8b", "g6e.xlarge", [], False),
    ("llama-3.1-8b", "p5.48xlarge", ["--tp", "2"], False),
    ("qwen3-30b-a3b", "p5.48xlarge", ["--tp", "2", "--expert-parallel"], False),
    ("mixtral-8x7b", "p5.48xlarge", ["--tp", "2"], False),
    ("gpt-oss-20b", "p5.48xlarge", [], True),
    ("llama-3.1-8b", "p5.48xlarge", ["--engine", "trtllm"], False),
    ("llama-3.1-8b", "p5.48xlarge", ["--engine", "trtllm", "--tp", "2"], False),
    (
        "qwen3-30b-a3b",
        "p5.48xlarge",
        ["--engine", "trtllm", "--tp", "2", "--expert-parallel"],
        False,
    ),
]


@pytest.mark.parametrize(("model", "instance", "extra", "hybrid"), QUICK)
def test_perf_batches_with_the_kv_tokens_size_prints(
    simulated: list[int], model: str, instance: str, extra: list[str], hybrid: bool
) -> None:
    out = _size(["--model", model, "--instance", instance, "--max-model-len", "8192", *extra])
    assert out["fits"], out["reasons"]
    perf = out["performance"]
    assert perf["unsupported"] is None
    tokens = out["kv_cache_tokens"]
    assert simulated, "the performance model ran no simulation"
    assert set(simulated) == {tokens}
    if hybrid:  # pages of one group: full-length requests' tokens
        assert len(set(out["kv_cache_groups"])) > 1
        assert abs(tokens / out["max_model_len"] - out["max_concurrency"]) <= 0.005  # rounding
        assert tokens != out["num_gpu_blocks"] * out["block_size"]
    else:
        assert tokens == out["num_gpu_blocks"] * out["block_size"]


@pytest.mark.parametrize(
    ("extra", "ranks"),
    [
        (["--tp", "2", "--dp", "2"], 2),
        (["--tp", "2", "--dp", "2", "--expert-parallel"], 2),
        (["--tp", "8", "--nodes", "2"], 1),
        (["--engine", "trtllm", "--tp", "2", "--dp", "2"], 2),
    ],
)
def test_dp_and_pp_layouts_batch_with_every_ranks_printed_kv_tokens(
    simulated: list[int], extra: list[str], ranks: int
) -> None:
    """Data parallelism: each DP rank has its own pool of the printed size (sizing: per rank)
    and the replica batches over all of them; pipeline parallelism: the binding stage's pool,
    the one printed (docs/performance-model.md, "Layouts beyond one tensor-parallel group")."""
    model = "qwen3-30b-a3b" if "--expert-parallel" in extra else "llama-3-70b"
    out = _size(["--model", model, "--instance", "p5.48xlarge", "--max-model-len", "8192", *extra])
    assert out["fits"], out["reasons"]
    assert out["performance"]["unsupported"] is None
    assert simulated, "the performance model ran no simulation"
    assert set(simulated) == {out["kv_cache_tokens"] * ranks}


def test_trtllm_pytorch_backend_batches_with_the_printed_kv_tokens(
    simulated: list[int], tmp_path: Path
) -> None:
    spec = yaml.safe_load((REPO / "presets" / "llama3-8b-trtllm-g6e.yaml").read_text("utf-8"))
    spec["engine"] = {"type": "trtllm", "backend": "pytorch"}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    out = _size([str(path)])
    assert out["fits"], out["reasons"]
    assert out["performance"]["unsupported"] is None
    assert simulated and set(simulated) == {out["kv_cache_tokens"]}
    assert out["kv_cache_tokens"] == out["num_gpu_blocks"] * out["block_size"]


def test_trtllm_pipeline_layout_is_refused_before_any_simulation(simulated: list[int]) -> None:
    """llmdeploy serves TensorRT-LLM without pipeline stages: the sizing refuses the layout, so
    there is no replica for the performance model to batch."""
    result = CliRunner().invoke(
        cli.app,
        ["size", "--model", "llama-3-70b", "--instance", "p5.48xlarge", "--engine", "trtllm",
         "--tp", "8", "--nodes", "2", "--max-model-len", "8192", "--json"],
    )  # fmt: skip
    assert result.exit_code == 4, result.stderr
    out = json.loads(result.stdout)
    assert out["reasons"] == ["the engine is served without pipeline parallelism by llmdeploy"]
    assert out["performance"] is None  # the perf stage runs only on a configuration that fits
    assert simulated == []
