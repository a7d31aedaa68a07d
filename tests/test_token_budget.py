"""The per-step token budget is a decision (issue 22 item 2; docs/performance-model.md, "Token
budget"): vLLM ``--max-num-batched-tokens`` / TensorRT-LLM ``max_num_tokens``, the spec's
``serving.maxNumBatchedTokens``, chosen from the SLO when the spec leaves it out.

The engines' own defaults, at the pinned releases:

- vLLM 0.24.0 ``vllm/engine/arg_utils.py`` ``EngineArgs.get_batch_defaults`` (read in the
  ``vllm-0.24.0`` wheel from PyPI): for ``UsageContext.OPENAI_API_SERVER`` (``vllm serve``) 8192
  when ``current_platform.get_device_total_memory() >= 70 * GiB_bytes`` and ``"a100"`` is not in
  the device name, 2048 otherwise (PR #17885: a larger budget reduced A100 throughput).
  ``_set_default_max_num_seqs_and_batched_tokens_args`` applies it only when the user gave none.
- TensorRT-LLM: ``trtllm-serve --max_num_tokens`` defaults to
  ``BuildConfig.model_fields["max_num_tokens"].default`` (NVIDIA/TensorRT-LLM
  ``tensorrt_llm/commands/serve.py`` @ 00209af1, ``get_llm_args``), and ``BuildConfig``'s
  ``max_num_tokens`` is 8192 (``tensorrt_llm/builder.py`` @ 008b2b8d), on every GPU.

What vLLM accepts (vllm 0.24.0 ``vllm/config/scheduler.py``
``SchedulerConfig.verify_max_model_len``): ``max_num_batched_tokens >= max_num_seqs``, and
``>= max_model_len`` unless chunked prefill is on (always on in V1).

The memory consequence is hand-computed from the sizing formula. The decisions' targets are
derived from the model itself (a target between what two budgets give at one load, after
asserting which way the mechanism goes), so a refit of the constants moves the numbers, not
the outcome.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

import test_batch_limits
from llmdeploy.catalog import models
from llmdeploy.cli import commands as cli
from llmdeploy.engines import registry
from llmdeploy.engines.vllm import extra as vllm_extra
from llmdeploy.perf import api, inputs, workloads
from llmdeploy.perf.assess import planning_margin
from llmdeploy.perf.token_budget import CANDIDATES, candidates, with_tokens
from llmdeploy.perf.uncertainty import uncertainty_for
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.requests import size_spec
from llmdeploy.spec.load import load_spec_file
from llmdeploy.spec.sections import Spec
from test_batch_limits import _render

# Llama 3.1 8B, 16-bit, one GPU: 64 concurrent requests of 8192 + 256 tokens
SPEC = """\
apiVersion: llmdeploy.dev/v1alpha1
kind: ModelDeployment
name: long-prompts
model:
  id: meta-llama/Llama-3.1-8B-Instruct
  architecture: llama-3.1-8b
engine:
  type: {engine}
hardware:
  instanceType: {instance}
  tensorParallel: 1
serving:
  maxModelLen: 32768
{extra}slo:
  concurrentRequests: 64
  inputTokens: 8192
  outputTokens: 256
  ttftMs: {ttft}
  itlMs: {itl}
autoscaling:
  minReplicas: 1
  maxReplicas: 100
cluster:
  name: example-eks
  kubernetesVersion: "1.35"
  nodeRole: KarpenterNodeRole-example-eks
"""
LOOSE = 60_000  # a target nothing here comes near


def _write(tmp_path: Path, *, instance: str, ttft: int, itl: int, extra: str = "",
           engine: str = "vllm") -> Path:  # fmt: skip
    path = tmp_path / "spec.yaml"
    text = SPEC.format(engine=engine, instance=instance, ttft=ttft, itl=itl, extra=extra)
    path.write_text(text, encoding="utf-8")
    return path


def _size(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = test_batch_limits._size(path)  # size --json, exit 0 or 8
    return doc


def _flag(rendered: str) -> int | None:
    """The value of vLLM's ``--max-num-batched-tokens`` in the rendered container args."""
    m = re.search(r'- "--max-num-batched-tokens"\n\s*- "(\d+)"\n', rendered)
    return int(m.group(1)) if m else None


def _p99(spec: Spec, tokens: int, per_replica: int) -> tuple[float, float, tuple[float, float]]:
    """(p99 TTFT, p99 ITL) in ms of one replica of ``spec`` sized with budget ``tokens`` at
    ``per_replica`` steady clients, and the (TTFT, ITL) margins ``assess`` plans with."""
    variant = with_tokens(spec, tokens)
    sizing = size_spec(variant, None, suggest=False)
    assert sizing.instance is not None and sizing.max_num_batched_tokens == tokens
    run = registry.get(variant.engine.type).engine_run(sizing, variant)
    assert run is not None
    slo = spec.slo
    load = workloads.workload("steady", slo.input_tokens, slo.output_tokens,
                              concurrency=per_replica)  # fmt: skip
    e = api.estimate(inputs.hardware(sizing.instance), inputs.geometry(sizing.request.architecture),
                     run.deployment, load, run.constants)  # fmt: skip
    unc = uncertainty_for(run.constants.engine, sizing.instance.gpu.arch, "steady")
    return e.ttft_p99_ms, e.itl_p99_ms, (planning_margin("ttft", unc), planning_margin("itl", unc))


def _between(low: float, high: float, margin: float) -> int:
    """The whole-ms target nearest halfway whose planned value (target / (1 + margin), as
    ``assess`` tightens it) lies strictly between ``low`` and ``high`` (targets are integers:
    where the two are less than a millisecond apart, rounding halfway could leave the window)."""
    lo, hi = low * (1 + margin), high * (1 + margin)
    inside = [t for t in range(math.floor(lo), math.ceil(hi) + 1) if lo < t < hi]
    assert inside, (low, high, margin)
    return min(inside, key=lambda t: abs(t - (lo + hi) / 2))


def _reach(curve: list[float], planned: float) -> int:
    """Clients per replica a search over 1, 2, ... reaches before the first load whose p99
    misses ``planned`` (what ``assess`` does: it stops at the first miss)."""
    n = 0
    for value in curve:
        if value > planned:
            break
        n += 1
    return n


def _tight_ttft(path: Path) -> int:
    """A TTFT target for the L40S spec at ``path`` (budget left out, loose targets) under which
    16384 reaches more clients per replica than the default 2048 (so fewer replicas for the
    64), the search over 1 to 8 clients stopping at the first miss, as ``assess`` does. Under
    load an 8192-token prompt takes four steps with 2048, each behind the running decodes, and
    one with 16384. (The p99 of a few clients is one collision's luck, so the window is read
    from both curves rather than at one load; at 16 per replica the replica queues prompts
    whatever its budget, and the two curves come within a few % of each other.)"""
    spec = load_spec_file(path).spec
    loads = range(1, 9)
    small = [_p99(spec, 2048, c)[0] for c in loads]
    big = [_p99(spec, 16384, c)[0] for c in loads]
    m_ttft = _p99(spec, 2048, 1)[2][0]
    points = sorted(set(small + big))
    windows = [
        (lo, hi)
        for lo, hi in itertools.pairwise(points)
        if hi - lo > 1.0 and _reach(big, lo) > _reach(small, lo) >= 1
    ]
    assert windows, (small, big)
    lo, hi = max(windows, key=lambda w: _reach(big, w[0]) - _reach(small, w[0]))
    return _between(lo, hi, m_ttft)


def _tight_itl(path: Path) -> int:
    """An ITL target for the H100 spec at ``path`` (budget left out, loose targets) that 2048
    meets and the default 8192 misses at 32 clients per replica (64 over 2 replicas), once the
    model says the smaller budget gives the lower p99 ITL there."""
    spec = load_spec_file(path).spec
    _, itl_default, (_, m_itl) = _p99(spec, 8192, 32)
    _, itl_small, _ = _p99(spec, 2048, 32)
    assert itl_small < itl_default, (itl_small, itl_default)
    return _between(itl_small, itl_default, m_itl)


# --- the engines' defaults ---------------------------------------------------------------------


def test_the_default_is_the_engines_own(tmp_path: Path) -> None:
    # vLLM serve: 2048 on an L40S (48 GB) and on an A100 80GB, 8192 on an H100 80GB
    for instance, expected in (("g6e.2xlarge", 2048), ("p4de.24xlarge", 2048),
                               ("p5.4xlarge", 8192)):  # fmt: skip
        path = _write(tmp_path, instance=instance, ttft=LOOSE, itl=LOOSE)
        if instance.startswith("p4de"):  # 8 GPUs: TP 8
            path.write_text(path.read_text().replace("tensorParallel: 1", "tensorParallel: 8"))
        sizing = size_spec(load_spec_file(path).spec, None, suggest=False)
        assert sizing.max_num_batched_tokens == expected, instance
    # TensorRT-LLM (trtllm-serve, PyTorch backend): 8192 on any GPU
    path = _write(tmp_path, instance="g6e.2xlarge", ttft=LOOSE, itl=LOOSE, engine="trtllm")
    path.write_text(path.read_text().replace("type: trtllm", "type: trtllm\n  backend: pytorch"))
    assert size_spec(load_spec_file(path).spec, None, suggest=False).max_num_batched_tokens == 8192


def test_candidates_are_what_the_engine_accepts(tmp_path: Path) -> None:
    spec = load_spec_file(_write(tmp_path, instance="g6e.2xlarge", ttft=LOOSE, itl=LOOSE)).spec
    sizing = size_spec(spec, None, suggest=False)
    assert sizing.max_num_seqs == 256 and sizing.max_model_len == 32768
    assert candidates(sizing) == CANDIDATES == (2048, 4096, 8192, 16384)
    # at least max_num_seqs (ValueError below it): 4096 goes, the default stays whatever
    # (it is vLLM's own choice), at most max_num_seqs x max_model_len (a warning above it)
    assert candidates(dataclasses.replace(sizing, max_num_seqs=5000)) == (2048, 8192, 16384)
    assert candidates(dataclasses.replace(sizing, max_num_seqs=2, max_model_len=2048)) == (
        2048,
        4096,
    )
    # without chunked prefill at least max_model_len (ValueError): only the default is left
    assert candidates(sizing, chunked_prefill=False) == (2048,)


# --- the memory it costs -----------------------------------------------------------------------


def test_a_bigger_budget_costs_kv_cache_by_the_activation_formula(tmp_path: Path) -> None:
    # vLLM's profiling run is one dummy forward of max_num_batched_tokens tokens
    # (vllm/v1/worker/gpu_model_runner.py@v0.19.0 profile_run): its peak grows with the budget
    # and the KV cache shrinks by as much. Llama 3.1 8B, 16-bit, TP 1 (sizing/memory.py
    # activation_bytes): forward transients tokens x 2 B x (2 x 4096 + 3 x 14336) and the
    # retained hidden states tokens x 4096 x 2 B, i.e. 110,592 B per token; the sampler's
    # 256 requests x 128,256 vocab x 6 B = 197 MB stays below the 2048-token forward (210 MB).
    # One token of KV cache: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B.
    spec = load_spec_file(_write(tmp_path, instance="g6e.2xlarge", ttft=LOOSE, itl=LOOSE)).spec
    small = size_spec(with_tokens(spec, 2048), None, suggest=False)
    big = size_spec(with_tokens(spec, 16384), None, suggest=False)
    per_token = 2 * (2 * 4096 + 3 * 14336) + 4096 * 2
    assert per_token == 110_592
    assert 256 * 128_256 * 6 < 2048 * (2 * (2 * 4096 + 3 * 14336))  # the forward is the peak
    arch = models.load_architecture("llama-3.1-8b", None)
    assert (arch.num_layers, arch.num_kv_heads, arch.head_dim) == (32, 8, 128)
    assert (arch.hidden_size, arch.intermediate_size, arch.vocab_size) == (4096, 14336, 128_256)
    lost = (16384 - 2048) * per_token
    assert lost == 1_585_446_912
    # (the sizing reports GiB to 4 decimals)
    assert abs((big.activation_gib - small.activation_gib) * mem.GIB - lost) < 1e-4 * mem.GIB
    # 12,096 tokens = 756 blocks of 16: the cache loses exactly the activation's growth
    assert small.kv_cache_tokens - big.kv_cache_tokens == lost // 131_072 == 12_096


# --- the decision ------------------------------------------------------------------------------


def test_the_default_is_kept_unrendered_when_nothing_beats_it(tmp_path: Path) -> None:
    # loose targets: the replicas its KV cache needs for the peak already meet them
    path = _write(tmp_path, instance="g6e.2xlarge", ttft=LOOSE, itl=LOOSE)
    doc = _size(path)
    assert doc["max_num_batched_tokens"] == 2048 and "token_budget_decided" not in doc
    assert _flag(_render(path, tmp_path / "deploy")) is None  # vLLM's default: no flag


def test_a_tight_ttft_under_load_gets_a_bigger_budget(tmp_path: Path) -> None:
    # L40S, vLLM's default 2048: a 8192-token prompt takes four steps, each behind the running
    # decodes; 16384 takes it in one. The model must say 16384 keeps a p99 TTFT target at more
    # clients per replica; such a target then needs fewer replicas with the bigger budget,
    # which is what gets rendered
    ttft = _tight_ttft(_write(tmp_path, instance="g6e.2xlarge", ttft=LOOSE, itl=LOOSE))
    path = _write(tmp_path, instance="g6e.2xlarge", ttft=ttft, itl=LOOSE)
    doc = _size(path)
    decided = doc["max_num_batched_tokens"]
    assert decided > 2048, doc.get("token_budget_decided")
    why = doc["token_budget_decided"]
    assert why.startswith(f"serving.maxNumBatchedTokens {decided}: ") and "default 2048" in why
    # it is what vLLM is told, and the KV cache is the one sized with it
    assert _flag(_render(path, tmp_path / "deploy")) == decided
    resized = size_spec(with_tokens(load_spec_file(path).spec, decided), None, suggest=False)
    assert doc["kv_cache_tokens"] == resized.kv_cache_tokens
    human = CliRunner().invoke(cli.app, ["size", str(path)])
    assert f"token budget (decided): serving.maxNumBatchedTokens {decided}:" in human.stdout


def test_a_tight_itl_gets_a_smaller_budget(tmp_path: Path) -> None:
    # H100, vLLM's default 8192: every step carrying an 8192-token chunk stalls the running
    # decodes; with 2048 the same prefill is spread thin. At 32 clients per replica the model
    # must say 2048 gives the lower p99 ITL; a target between the two then takes two replicas
    # with the smaller budget and more with the default
    itl = _tight_itl(_write(tmp_path, instance="p5.4xlarge", ttft=LOOSE, itl=LOOSE))
    path = _write(tmp_path, instance="p5.4xlarge", ttft=LOOSE, itl=itl)
    doc = _size(path)
    decided = doc["max_num_batched_tokens"]
    assert decided < 8192, doc.get("token_budget_decided")
    assert "default 8192" in doc["token_budget_decided"]
    assert _flag(_render(path, tmp_path / "deploy")) == decided
    # an option vLLM 0.24.0's server parser registers (cli_options.json, read from its wheel)
    assert vllm_extra.known("--max-num-batched-tokens", "0.24.0")


def test_the_choice_flips_with_the_slo(tmp_path: Path) -> None:
    # one L40S spec, two SLOs: a tight TTFT target takes a bigger budget than vLLM's 2048
    # (above); a tight ITL target with a loose TTFT one keeps the smallest, the default
    loose = _write(tmp_path, instance="g6e.2xlarge", ttft=LOOSE, itl=LOOSE)
    spec = load_spec_file(loose).spec
    _, itl_default, (_, m_itl) = _p99(spec, 2048, 16)
    _, itl_big, _ = _p99(spec, 16384, 16)
    assert itl_default < itl_big  # the bigger budget's stalls
    tight_ttft = _write(tmp_path, instance="g6e.2xlarge", ttft=_tight_ttft(loose), itl=LOOSE)
    assert _size(tight_ttft)["max_num_batched_tokens"] > 2048
    tight_itl = _write(tmp_path, instance="g6e.2xlarge", ttft=LOOSE,
                       itl=_between(itl_default, itl_big, m_itl))  # fmt: skip
    doc = _size(tight_itl)
    assert doc["max_num_batched_tokens"] == 2048 and "token_budget_decided" not in doc


def test_an_explicit_budget_is_kept(tmp_path: Path) -> None:
    # the tight-TTFT spec that gets a bigger budget, with the user's own 2048: kept, rendered,
    # and judged as it is (no silent change)
    ttft = _tight_ttft(_write(tmp_path, instance="g6e.2xlarge", ttft=LOOSE, itl=LOOSE))
    path = _write(tmp_path, instance="g6e.2xlarge", ttft=ttft, itl=LOOSE,
                  extra="  maxNumBatchedTokens: 2048\n")  # fmt: skip
    doc = _size(path)
    assert doc["max_num_batched_tokens"] == 2048 and "token_budget_decided" not in doc
    assert _flag(_render(path, tmp_path / "deploy")) == 2048  # the user's, so rendered


def test_trtllm_serve_is_told_the_decided_budget(tmp_path: Path) -> None:
    # trtllm-serve (PyTorch backend) on an H100, its default max_num_tokens 8192: as for vLLM,
    # a tight ITL target between what 2048 and 8192 give at 32 clients per replica takes the
    # smaller budget, and `--max_num_tokens` says it (the build path's trtllm-build
    # --max_num_tokens reads the same field: engines/trtllm/decisions.py)
    def write(itl: int) -> Path:
        path = _write(tmp_path, instance="p5.4xlarge", ttft=LOOSE, itl=itl, engine="trtllm")
        text = path.read_text().replace("type: trtllm", "type: trtllm\n  backend: pytorch")
        path.write_text(text, encoding="utf-8")
        return path

    path = write(_tight_itl(write(LOOSE)))
    doc = _size(path)
    decided = doc["max_num_batched_tokens"]
    assert decided < 8192 and "default 8192" in doc["token_budget_decided"]
    rendered = _render(path, tmp_path / "deploy")
    assert re.search(rf'- "--max_num_tokens"\n\s*- "{decided}"\n', rendered), decided


def test_plan_decides_it_per_candidate_and_render_decides_the_same(tmp_path: Path) -> None:
    # every configuration plan ranks is planned with its own budget (its JSON row says which);
    # --write leaves the field out, as it does the batch limits, and `size` of the written
    # spec decides the budget the winner's row names
    ttft = _tight_ttft(_write(tmp_path, instance="g6e.2xlarge", ttft=LOOSE, itl=LOOSE))
    path = _write(tmp_path, instance="g6e.2xlarge", ttft=ttft, itl=LOOSE)
    path.write_text(path.read_text().replace("instanceType: g6e.2xlarge", "instanceFamily: g6e"))
    best = tmp_path / "best.yaml"
    result = CliRunner().invoke(
        cli.app, ["plan", str(path), "--family", "g6e", "--json", "--write", str(best)]
    )
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)["configurations"]
    assert {r["max_num_batched_tokens"] for r in rows} - {2048}, "no candidate decided a budget"
    assert "maxNumBatchedTokens" not in best.read_text(encoding="utf-8")
    assert _size(best)["max_num_batched_tokens"] == rows[0]["max_num_batched_tokens"]


def test_quick_mode_decides_it_from_the_target_options(tmp_path: Path) -> None:
    # `size --model` with the same H100 case as above: the request has no budget, so the
    # target options decide it as a spec's slo does (the same 56 ms target of the docs example)
    itl = _tight_itl(_write(tmp_path, instance="p5.4xlarge", ttft=LOOSE, itl=LOOSE))
    args = ["size", "--model", "llama-3.1-8b", "--instance", "p5.4xlarge", "--max-model-len",
            "32768", "--concurrency", "64", "--input-tokens", "8192", "--output-tokens", "256",
            "--ttft-ms", str(LOOSE), "--itl-ms", str(itl)]  # fmt: skip
    result = CliRunner().invoke(cli.app, [*args, "--json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["max_num_batched_tokens"] < 8192
    assert doc["token_budget_decided"].startswith(
        f"max_num_batched_tokens {doc['max_num_batched_tokens']}: "
    )
    # without targets there is nothing to trade: vLLM's default
    plain = CliRunner().invoke(cli.app, [*args[:-4], "--json"])
    assert json.loads(plain.stdout)["max_num_batched_tokens"] == 8192


def test_trtllm_build_is_told_the_decided_budget(tmp_path: Path) -> None:
    # the engine path: max_num_tokens is a build setting (trtllm-build --max_num_tokens, in
    # build-engine.sh, and the build-info the serving pod checks the engine against)
    def write(itl: int) -> Path:
        path = _write(tmp_path, instance="p5.4xlarge", ttft=LOOSE, itl=itl, engine="trtllm")
        store = "s3://example-model-store/llama31-8b-bf16-tp1"
        text = path.read_text().replace("type: trtllm", f"type: trtllm\n  artifactsS3Uri: {store}")
        role = "arn:aws:iam::111122223333:role/example-eks-llm-artifacts-read"
        path.write_text(text + f"serviceAccount:\n  iamRoleArn: {role}\n", encoding="utf-8")
        return path

    path = write(_tight_itl(write(LOOSE)))
    decided = _size(path)["max_num_batched_tokens"]
    assert decided < 8192
    rendered = _render(path, tmp_path / "deploy")
    assert f"  --max_num_tokens {decided} \\\n" in rendered
    assert f'"max_num_tokens": "{decided}"' in rendered


def test_plan_pruning_keeps_the_top_exact_with_decided_budgets(tmp_path: Path) -> None:
    # plan's bounds (the nodes the KV cache alone needs; the price over the throughput ceiling)
    # come before any simulation, so they are those of the smallest candidate budget (the most
    # KV cache): the pruned search's top 3 are the unpruned search's, budgets included, on a
    # spec whose candidates decide every budget from 2048 to 16384 (L40S default 2048, H100 8192)
    from llmdeploy.perf.search import search

    ttft = _tight_ttft(_write(tmp_path, instance="g6e.2xlarge", ttft=LOOSE, itl=LOOSE))
    path = _write(tmp_path, instance="g6e.2xlarge", ttft=ttft, itl=LOOSE)
    path.write_text(path.read_text().replace("instanceType: g6e.2xlarge", "instanceFamily: g6e"))
    spec = load_spec_file(path).spec
    for rank_by in ("usd-per-hour", "usd-per-1m-tokens"):
        full = search(spec, None, families=["g6e", "p5"], top=100, rank_by=rank_by)
        short = search(spec, None, families=["g6e", "p5"], top=3, rank_by=rank_by)
        assert full.pruned == 0 and short.pruned > 0
        assert {c.sizing.max_num_batched_tokens for c in full.candidates} == set(CANDIDATES)
        tops = [[(c.changes, c.metric(rank_by), c.sizing.max_num_batched_tokens)
                 for c in r.candidates[:3]] for r in (short, full)]  # fmt: skip
        assert tops[0] == tops[1]


def test_plans_bound_uses_the_budget_with_the_most_kv_cache(tmp_path: Path) -> None:
    # H100, default 8192, a latency target: the bound is the 2048-token sizing's. Its KV
    # cache is larger by less than on the L40S: with 1024 sequences (vLLM's default there) the
    # sampler, 1024 x 128,256 x 6 B = 788,004,864 B, is the peak at 2048 tokens, so the peak
    # falls from the 8192-token forward, 8192 x 102,400 B = 838,860,800 B, to it, and the
    # retained hidden states by 6144 x 8192 B: 101,187,584 B, 772 tokens of 131,072 B (768
    # in whole blocks of 16). L40S, default 2048 already the smallest: its own; no target, or
    # a budget the spec sets: its own
    from llmdeploy.perf.token_budget import most_kv

    def sized(instance: str, itl: int | None, extra: str = "") -> tuple[Spec, Any]:
        path = _write(tmp_path, instance=instance, ttft=LOOSE, itl=itl or LOOSE, extra=extra)
        if itl is None:  # no latency target at all
            text = path.read_text()
            path.write_text(text.replace(f"  ttftMs: {LOOSE}\n  itlMs: {LOOSE}\n", ""))
        spec = load_spec_file(path).spec
        return spec, size_spec(spec, None, suggest=False)

    spec, sizing = sized("p5.4xlarge", 56)
    low = most_kv(spec, sizing, None)
    assert (sizing.max_num_batched_tokens, low.max_num_batched_tokens) == (8192, 2048)
    assert sizing.max_num_seqs == 1024
    gained = 8192 * 102_400 - 1024 * 128_256 * 6 + (8192 - 2048) * 4096 * 2
    assert gained == 101_187_584 == 772 * 131_072
    assert abs(low.kv_cache_tokens - sizing.kv_cache_tokens - 772) < 16
    assert (low.replicas_for_slo or 1) <= (sizing.replicas_for_slo or 1)
    for instance, itl, extra in (("g6e.2xlarge", 56, ""), ("p5.4xlarge", None, ""),
                                 ("p5.4xlarge", 56, "  maxNumBatchedTokens: 8192\n")):  # fmt: skip
        spec, sizing = sized(instance, itl, extra)
        assert most_kv(spec, sizing, None) is sizing, (instance, itl, extra)
