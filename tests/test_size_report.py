"""The numbers ``llmdeploy size`` prints, against what real vLLM start-ups logged (the in-repo
calibration cases, each with its source) or what vLLM's own code decides: each test reads the
printed JSON or table, never the calculator's constants."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import load_script
from llmdeploy.catalog.architecture import CheckpointQuant
from llmdeploy.cli import commands as cli
from llmdeploy.cli import size_report
from llmdeploy.sizing import calculator, requests
from test_models import LLAMA_8B

REPORT = load_script("scripts/calibration_report.py")
# every case the calculator sizes (the refused ones are listed in test_size.EXCLUDED)
CASES = {
    str(c["id"]): c
    for c in REPORT.load_cases(REPORT.DEFAULT_PATH)
    if not REPORT.evaluate(c).excluded
}


def size_json(*args: str, code: int = 0) -> dict[str, Any]:
    result = CliRunner().invoke(cli.app, ["size", *args, "--json"])
    assert result.exit_code == code, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def engine_default_seqs(out: dict[str, Any]) -> int:
    """vLLM's own max_num_seqs default as ``size`` states it: the limit it sized with, or, where
    llmdeploy raised it to what the KV cache holds, the default the decision names."""
    decided = out.get("batch_limit_decided")
    if decided:
        m = re.search(r"not the default (\d+)", decided)
        assert m, decided
        return int(m.group(1))
    return int(out["max_num_seqs"])


def case_json(case_id: str) -> dict[str, Any]:
    """What ``size --json`` prints for a calibration case's own request."""
    sizing = calculator.compute(REPORT.request_for_case(CASES[case_id]))
    out: dict[str, Any] = json.loads(json.dumps(size_report.to_json(sizing)))
    return out


# --- batch defaults: vLLM EngineArgs.get_batch_defaults ------------------------------------------
# vllm-project/vllm PR #17885 (vllm/engine/arg_utils.py, 0.9.0 and later): on a GPU with at least
# 70 GiB whose name does not contain "a100", `vllm serve` defaults to 8192 batched tokens and 1024
# sequences; otherwise (A100 80GB included) 2048 and 256 (docs/sizing.md §2).


@pytest.mark.parametrize(
    ("gpu", "tokens", "seqs"),
    [("h100", 8192, 1024), ("a100-80", 2048, 256), ("a100-40", 2048, 256), ("l40s", 2048, 256)],
)
def test_batch_defaults_follow_vllms_gpu_rule(gpu: str, tokens: int, seqs: int) -> None:
    out = size_json("--model", "llama-3.1-8b", "--gpu", gpu)
    assert (out["max_num_batched_tokens"], engine_default_seqs(out)) == (tokens, seqs)
    table = CliRunner().invoke(cli.app, ["size", "--model", "llama-3.1-8b", "--gpu", gpu])
    assert f"activation peak ({tokens} tokens)" in table.stdout


def test_batch_defaults_before_0_9_do_not_depend_on_the_gpu() -> None:
    for gpu in ("h100", "a100-80"):
        out = size_json("--model", "llama-3.1-8b", "--gpu", gpu, "--engine-version", "0.8.5")
        assert (out["max_num_batched_tokens"], engine_default_seqs(out)) == (2048, 256)


# --- non-torch memory --------------------------------------------------------------------------


def test_non_torch_memory_matches_every_logged_start_up() -> None:
    logged = {k: c for k, c in CASES.items() if c.get("non_torch_gib") is not None}
    assert len(logged) >= 8
    for key, case in logged.items():
        assert case_json(key)["non_torch_gib"] == pytest.approx(case["non_torch_gib"], abs=0.05)


@pytest.mark.parametrize(
    ("instance", "expected", "code"),
    [
        # A100 NVLink without SHARP / symmetric-memory all-reduce: 0.25 + 0.5 (docs/sizing.md §6,
        # unverified); the README's p4d table prints it
        ("p4d.24xlarge", 0.75, 0),
        ("g5.12xlarge", 0.40, 4),  # PCIe: NCCL only, 0.25 + 0.15 (70B does not fit the A10G)
        ("p5.48xlarge", 2.20, 0),  # NVSwitch Hopper: 0.25 + 1.75 + 0.05 x 4 (logged 2.21 at TP 4)
    ],
)
def test_non_torch_memory_at_tp4_by_interconnect(instance: str, expected: float, code: int) -> None:
    out = size_json("--model", "llama-3-70b", "--instance", instance, "--tp", "4", code=code)
    assert out["non_torch_gib"] == expected


# --- activation peak and CUDA graphs -----------------------------------------------------------


# Residuals beyond 0.2 GiB, each explained in docs/sizing.md §5 (bounded at 0.3).
ACTIVATION_RESIDUALS = {
    "llmd-v0190-kimi-vl-a3b-h100-tp2": "-0.21 GiB, not separated",
}


def test_activation_peak_matches_every_logged_start_up() -> None:
    logged = {k: c for k, c in CASES.items() if c.get("activation_peak_gib") is not None}
    assert len(logged) >= 8
    for key, case in logged.items():
        # e.g. -0.18 GiB: Mistral-Small W8A8's int8 activation buffers (§5)
        bound = 0.3 if key in ACTIVATION_RESIDUALS else 0.2
        error = case_json(key)["activation_gib"] - case["activation_peak_gib"]
        assert abs(error) <= bound, (key, error)
        assert key not in ACTIVATION_RESIDUALS or abs(error) > 0.2, f"{key} is within 0.2 now"


def test_cuda_graph_estimate_against_every_logged_capture() -> None:
    """docs/sizing.md §6: ``0.6 + 0.015 x layers``, rms error about 0.25 GiB, none off by more
    than 0.6 GiB, not biased."""
    logged = {k: c for k, c in CASES.items() if c.get("cudagraph_gib") is not None}
    assert len(logged) >= 8
    errors = [case_json(k)["cudagraph_gib"] - c["cudagraph_gib"] for k, c in logged.items()]
    assert max(abs(e) for e in errors) <= 0.6, errors
    assert math.sqrt(sum(e * e for e in errors) / len(errors)) <= 0.3, errors
    assert abs(sum(errors) / len(errors)) <= 0.1, errors


def test_from_0_21_the_cuda_graph_estimate_comes_out_of_the_kv_cache() -> None:
    args = ("--model", "llama-3.1-8b", "--gpu", "h100", "--gpu-memory-utilization", "0.9")
    before = size_json(*args, "--engine-version", "0.20.0")
    after = size_json(*args, "--engine-version", "0.21.0")
    assert after["cudagraph_gib"] > 0.5
    assert after["kv_cache_gib_per_gpu"] == pytest.approx(
        before["kv_cache_gib_per_gpu"] - after["cudagraph_gib"], abs=0.011
    )


# --- float32 -------------------------------------------------------------------------------------

FP32 = "llmd-v0190-llama31-8b-fp32-h100-tp1"  # vLLM 0.19.0 --dtype float32, H100, logged


def test_a_float32_run_sizes_weights_and_kv_cache_at_4_bytes() -> None:
    case, out = CASES[FP32], case_json(FP32)
    assert out["weights_gib_per_gpu"] == pytest.approx(case["weights_gib"], abs=0.02)
    assert out["kv_cache_gib_per_gpu"] == pytest.approx(case["available_kv_cache_gib"], abs=0.05)
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 x 2 (K and V) x 4 B
    assert out["kv_bytes_per_token_per_gpu"] == 32 * 8 * 128 * 2 * 4
    assert out["kv_cache_tokens"] == pytest.approx(case["kv_cache_tokens"], rel=0.002)
    assert out["max_concurrency"] == pytest.approx(case["max_concurrency"], abs=0.05)


def test_a_float32_checkpoint_is_served_in_16_bit_by_default(tmp_path: Path) -> None:
    """dtype "auto" runs a float32 checkpoint in 16-bit (vLLM ModelConfig._get_and_verify_dtype,
    shared/reference/vllm.md §3): the KV cache is 16-bit, the download is 4 bytes a parameter."""
    config = {k: v for k, v in LLAMA_8B.items() if k != "torch_dtype"}
    (tmp_path / "bf16").mkdir()
    (tmp_path / "fp32").mkdir()
    (tmp_path / "bf16" / "config.json").write_text(
        json.dumps({**config, "torch_dtype": "bfloat16"})
    )
    (tmp_path / "fp32" / "config.json").write_text(json.dumps({**config, "torch_dtype": "float32"}))
    bf16 = size_json("--model", str(tmp_path / "bf16" / "config.json"), "--gpu", "h100")
    fp32 = size_json("--model", str(tmp_path / "fp32" / "config.json"), "--gpu", "h100")
    assert fp32["kv_bytes_per_token_per_gpu"] == bf16["kv_bytes_per_token_per_gpu"] == 131072
    assert fp32["weights_gib_per_gpu"] == bf16["weights_gib_per_gpu"]
    assert fp32["checkpoint_gib"] == pytest.approx(2 * bf16["checkpoint_gib"], rel=1e-3)


# --- the vLLM facts by release, at each boundary (docs/sizing.md §2 and its sources) ----------

BOUNDARIES = [
    # (last release before, first release with): what changes in the printed sizing
    ("0.7.3", "0.8.0"),  # V1 engine: chunked prefill always on, 2048 batched tokens
    ("0.8.5", "0.9.0"),  # large-GPU batch defaults: 8192 tokens, 1024 sequences
    ("0.16.0", "0.17.0"),  # sampler peak 38.4 -> 14.9 B per (request x vocab) element
    ("0.17.1", "0.18.0"),  # non-torch memory at TP 1: 0.13 -> 0.25 GiB
    ("0.19.1", "0.20.0"),  # default gpu_memory_utilization 0.9 -> 0.92
    ("0.20.2", "0.21.0"),  # the CUDA-graph estimate is subtracted from the budget
]


def _at(version: str, *more: str, code: int = 0) -> dict[str, Any]:
    return size_json(
        "--model", "qwen3-14b", "--gpu", "h100", "--max-model-len", "8192",
        "--engine-version", version, *more, code=code,
    )  # fmt: skip


@pytest.mark.parametrize(("before", "since"), BOUNDARIES)
def test_each_vllm_fact_changes_at_its_release(before: str, since: str) -> None:
    keys = (
        "max_num_batched_tokens", "max_num_seqs", "activation_gib", "non_torch_gib",
        "gpu_memory_utilization", "kv_cache_gib_per_gpu", "max_gpu_memory_utilization",
    )  # fmt: skip
    old, new = _at(before), _at(since)
    changed = {k for k in keys if old[k] != new[k]}
    expected = {
        # and the TP-1 non-torch memory, 0.25 GiB before V1, 0.13 from 0.8 to 0.17
        "0.8.0": {
            "max_num_batched_tokens",
            "activation_gib",
            "non_torch_gib",
            "kv_cache_gib_per_gpu",
        },
        "0.9.0": {
            "max_num_batched_tokens",
            "max_num_seqs",
            "activation_gib",
            "kv_cache_gib_per_gpu",
        },
        "0.17.0": {"activation_gib", "kv_cache_gib_per_gpu"},
        "0.18.0": {"non_torch_gib", "kv_cache_gib_per_gpu"},
        "0.20.0": {"gpu_memory_utilization", "kv_cache_gib_per_gpu"},
        "0.21.0": {"kv_cache_gib_per_gpu", "max_gpu_memory_utilization"},
    }[since]
    assert changed == expected, (old, new)
    assert (old["gpu_memory_utilization"], new["gpu_memory_utilization"]) == (
        (0.9, 0.92) if since == "0.20.0" else (old["gpu_memory_utilization"],) * 2
    )
    if since == "0.18.0":
        assert (old["non_torch_gib"], new["non_torch_gib"]) == (0.13, 0.25)
    if since == "0.9.0":
        assert (new["max_num_batched_tokens"], new["max_num_seqs"]) == (8192, 1024)


def test_the_headroom_rule_and_its_largest_utilization() -> None:
    """docs/sizing.md §2: the CUDA context (and, before 0.21, the CUDA graphs) must fit outside
    the budget; the largest gpu_memory_utilization printed is the one that leaves them room."""
    for version in ("0.20.2", "0.21.0"):
        out = _at(version)
        outside = out["context_gib"] + (0 if version == "0.21.0" else out["cudagraph_gib"])
        total = out["gpu_total_gib"]
        assert (
            out["max_gpu_memory_utilization"] == math.floor((total - outside) / total * 100) / 100
        )
        tight = _at(version, "--gpu-memory-utilization", "0.995", code=4)
        left = total - total * 0.995
        assert tight["fits"] is False
        assert tight["reasons"][0] == (
            f"gpu_memory_utilization 0.995 leaves {left:.2f} GiB outside the budget, but the "
            f"CUDA context and CUDA graphs need {outside:.2f} GiB there: lower it (or enforce "
            "eager mode)"
        )


def test_a_kv_cache_that_does_not_fit_names_the_cuda_graphs_only_when_they_count() -> None:
    for version, named in (("0.20.2", False), ("0.21.0", True)):
        out = size_json(
            "--model", "llama-3-70b", "--gpu", "a10g", "--tp", "4", "--engine-version", version,
            code=4,
        )  # fmt: skip
        (reason,) = [r for r in out["reasons"] if r.startswith("no memory left")]
        assert ("CUDA graphs" in reason) is named, reason


MRV2_NOTE = (
    "vLLM {} runs llama-3.1-8b on Model Runner V2: {}, dummy sampler {} B per (request x vocab)"
)
OUTSIDE, SUBTRACTED = (
    "its CUDA graphs are captured outside the budget",
    "its CUDA-graph estimate is subtracted",
)


@pytest.mark.parametrize(
    ("version", "quantization", "note"),
    [
        ("0.23.0", "none", MRV2_NOTE.format("0.23.0", OUTSIDE, 6)),
        ("0.23.0", "fp8", None),  # quantized: Model Runner V1, which subtracts its graphs
        ("0.29.0", "none", MRV2_NOTE.format("0.29.0", SUBTRACTED, 2)),
    ],
)  # fmt: skip
def test_the_model_runner_and_what_its_kv_cache_is_left_after(
    version: str, quantization: str, note: str | None
) -> None:
    """vLLM 0.23 runs a listed architecture on Model Runner V2 unless it is MoE or quantized
    (config/vllm.py ``use_v2_model_runner``); V1 subtracts its CUDA-graph estimate from 0.21,
    V2 only from 0.29 (docs/sizing.md §2). The printed note says which, and the printed KV
    cache is the budget less exactly the terms it names."""
    out = size_json(
        "--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "8192",
        "--quantization", quantization, "--engine-version", version,
    )  # fmt: skip
    assert [a for a in out["assumptions"] if "Model Runner V2" in a] == ([note] if note else [])
    graphs_counted = note is None or "subtracted" in note
    left = out["budget_gib"] - out["weights_gib_per_gpu"] - out["activation_gib"]
    left -= out["non_torch_gib"] + (out["cudagraph_gib"] if graphs_counted else 0.0)
    assert out["cudagraph_gib"] > 0.5  # so the two cases cannot agree by accident
    # five figures, each printed to 0.01 GiB
    assert out["kv_cache_gib_per_gpu"] == pytest.approx(left, abs=0.025)


def _layout(model: str, *layout: str) -> dict[str, Any]:
    return size_json("--model", model, "--gpu", "h100", "--max-model-len", "8192", *layout)


MEMORY = ("weights_gib_per_gpu", "activation_gib", "non_torch_gib")


def test_data_parallel_ranks_share_only_the_moe_layers() -> None:
    """A dense model's DP ranks are independent engines: each GPU holds what one TP-1 engine
    does. An MoE model's DP ranks form one MoE group over TP x DP GPUs (vLLM
    fused_moe/config.py ``flatten_tp_across_dp_and_pcp``): its MoE workspace and
    communication buffers are those of TP 2, and with expert parallelism the whole-expert
    workspace, however the GPUs are split (docs/sizing.md §3.2)."""
    dense = _layout("llama-3.1-8b", "--dp", "2")
    assert [dense[k] for k in MEMORY] == [_layout("llama-3.1-8b")[k] for k in MEMORY]
    moe, tp2 = _layout("mixtral-8x7b", "--dp", "2"), _layout("mixtral-8x7b", "--tp", "2")
    whole = _layout("mixtral-8x7b", "--dp", "2", "--expert-parallel")
    assert moe["activation_gib"] == tp2["activation_gib"] < whole["activation_gib"]
    assert moe["non_torch_gib"] == tp2["non_torch_gib"] > dense["non_torch_gib"]
    ep_tp2 = _layout("mixtral-8x7b", "--tp", "2", "--expert-parallel")
    assert whole["activation_gib"] == ep_tp2["activation_gib"]


def test_expert_parallelism_holds_whole_experts_padded_as_on_one_gpu() -> None:
    """With expert parallelism each of N GPUs holds 1/N of the experts, each whole: gpt-oss's
    MXFP4 experts keep the padding of one GPU, where TP splits every expert and pads each
    share (docs/sizing.md, MXFP4)."""
    out = _layout("gpt-oss-120b")
    one = out["weights_breakdown_gib"]["experts"]
    # the padding comes from the MoE backend, which the report names
    assert [a for a in out["assumptions"] if a.startswith("MXFP4 experts on the ")] == [
        "MXFP4 experts on the Triton MoE backend: padded to (64, 1), in triton_kernels' Hopper "
        "layout"
    ]
    for tp in (2, 4):
        ep = _layout("gpt-oss-120b", "--tp", str(tp), "--expert-parallel")
        split = _layout("gpt-oss-120b", "--tp", str(tp))
        # up to 2 MiB a tensor apart: each rank's stacked tensors round to their own blocks
        blocks = 36 * 8 * 2 / 1024
        assert ep["weights_breakdown_gib"]["experts"] == pytest.approx(one / tp, abs=blocks)
        assert split["weights_breakdown_gib"]["experts"] > one / tp + 0.5


KV_RULE = "(KV heads are split, or replicated when TP > KV heads)"


@pytest.mark.parametrize(
    ("layout", "reasons"),
    [
        (("llama-3.1-8b", "--gpu", "h100", "--tp", "3"), [
            "tensor parallel 3 does not divide the 32 attention heads",
            f"tensor parallel 3 and the 8 KV heads: one must divide the other {KV_RULE}",
            "TP 3 does not divide the intermediate size 14336",
        ]),
        (("mixtral-8x7b", "--gpu", "h100", "--dp", "3"), [
            "TP x DP 3 does not divide the MoE intermediate size 14336",
        ]),
        (("Qwen/Qwen3-235B-A22B-FP8", "--gpu", "h100", "--tp", "8"), [
            "MoE intermediate size 1536 / TP 8 = 192 is not a multiple of the fp8-block group "
            "size 128",
        ]),
        (("Qwen/Qwen3-235B-A22B-FP8", "--gpu", "h100", "--tp", "8", "--expert-parallel"), []),
        (("mixtral-8x7b", "--gpu", "h100", "--dp", "16", "--expert-parallel"), [
            "expert parallelism over 16 GPUs leaves some without any of the 8 experts",
        ]),
        (("mixtral-8x7b", "--gpu", "h100", "--dp", "8", "--expert-parallel"), []),
        (("llama-3.1-8b", "--instance", "p4d.24xlarge", "--tp", "4", "--dp", "4"), [
            "tensor parallel 4 x data parallel 4 = 16 exceeds the 8 GPU(s) of p4d.24xlarge",
        ]),
        (("llama-3.1-8b", "--instance", "p4d.24xlarge", "--tp", "16"), [
            "tensor parallel 16 exceeds the 8 GPU(s) of p4d.24xlarge",
        ]),
    ],
)  # fmt: skip
def test_layouts_vllm_refuses_are_refused_with_the_rule(
    layout: tuple[str, ...], reasons: list[str]
) -> None:
    """vLLM's divisibility rules of its parallel layers (docs/sizing.md §3.2): attention and KV
    heads by TP, dense MLP width by TP, expert width by TP x DP without expert parallelism and
    not at all with it, a quantization group inside each share; expert parallelism needs an
    expert per GPU; a pod's TP x DP GPUs on one instance."""
    model, *rest = layout
    out = size_json("--model", model, *rest, "--max-model-len", "8192", code=4 if reasons else 0)
    assert out["reasons"] == reasons


def test_kv_tokens_are_blocks_times_block_size_and_a_long_request_says_what_it_needs() -> None:
    """vLLM logs "GPU KV cache size: N tokens" as num_gpu_blocks x block_size for a model of
    full-attention layers, whatever max_model_len is (1000 is no multiple of the 16-token
    block); a request longer than the cache is refused with its own KV size."""
    out = size_json("--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "1000")
    assert out["kv_cache_groups"] == ["full"]
    assert out["kv_cache_tokens"] == out["num_gpu_blocks"] * out["block_size"]
    args = ("--model", "llama-3.1-8b", "--instance", "g5.xlarge", "--max-model-len", "131072")
    long = size_json(*args, code=4)
    need = 131072 * long["kv_bytes_per_token_per_gpu"] / 2**30  # 131072 is a block multiple
    assert long["reasons"] == [
        f"one request of 131072 tokens needs {need:.2f} GiB of KV cache per GPU but only "
        f"{long['kv_cache_gib_per_gpu']:.2f} GiB is available"
    ]


def test_a_checkpoint_format_older_than_the_release_is_refused() -> None:
    """gpt-oss's MXFP4 checkpoint loads from vLLM 0.10.1, whose quantization registry first
    lists ``mxfp4`` (each release's own ``--quantization`` choices, engines/vllm/flags.py)."""
    old = size_json("--model", "gpt-oss-20b", "--gpu", "h100", "--engine-version", "0.10.0", code=4)
    assert old["reasons"] == [
        "vLLM 0.10.0 has no 'mxfp4' quantization method for this checkpoint (mxfp4 experts)"
    ]
    new = size_json("--model", "gpt-oss-20b", "--gpu", "h100", "--engine-version", "0.10.1")
    assert new["fits"]


@pytest.mark.parametrize(("gib", "tokens"), [(70.0, 8192), (69.99, 2048)])
def test_the_large_gpu_defaults_start_at_70_gib(gib: float, tokens: int) -> None:
    out = size_json("--model", "llama-3.1-8b", "--gpu-memory-gib", str(gib))
    assert out["max_num_batched_tokens"] == tokens


@pytest.mark.parametrize(
    ("length", "tokens"), [(1024, 2048), (4096, 4096), (32768, 32768), (32769, 2048)]
)
def test_v0_profiles_the_whole_context_up_to_32k(length: int, tokens: int) -> None:
    out = size_json(
        "--model", "llama-3.1-8b", "--gpu", "h100", "--engine-version", "0.7.3",
        "--max-model-len", str(length),
    )  # fmt: skip
    assert (out["max_num_batched_tokens"], engine_default_seqs(out)) == (tokens, 256)
    assert (
        f"vLLM 0.7.3 (V0 engine): activation profiled over {tokens} tokens; V0 accounting is "
        "approximate"
    ) in out["assumptions"]


def test_fp8_on_a_gpu_without_fp8_is_weight_only_and_says_so() -> None:
    out = size_json("--model", "llama-3.1-8b", "--gpu", "a100-80", "--quantization", "fp8")
    assert (
        "NVIDIA A100 SXM4 80GB has no FP8 tensor cores: vLLM runs fp8 weights weight-only "
        "(Marlin); memory is the same"
    ) in out["assumptions"]
    h100 = size_json("--model", "llama-3.1-8b", "--gpu", "h100", "--quantization", "fp8")
    assert not [a for a in h100["assumptions"] if "FP8 tensor cores" in a]
    assert h100["weights_gib_per_gpu"] == out["weights_gib_per_gpu"]


# --- TensorRT-LLM: the KV fraction of what is free (docs/sizing.md §7) ----------------------

TRT_PRESETS = {"engine": "llama3-70b-trtllm-int4awq-p4d", "pytorch": "llama33-70b-trtllm-fp8-p5"}


@pytest.mark.parametrize("backend", ["engine", "pytorch"])
def test_trtllm_kv_cache_is_the_fraction_of_what_is_left(backend: str) -> None:
    out = size_json("--preset", TRT_PRESETS[backend])
    graphs = out["cudagraph_gib"]
    assert (graphs > 0.5) is (backend == "pytorch")  # captured before the profiling run
    free = out["gpu_total_gib"] - out["context_gib"] - out["weights_gib_per_gpu"]
    free -= out["activation_gib"] + out["non_torch_gib"] + graphs
    assert out["kv_cache_gib_per_gpu"] == pytest.approx(0.9 * free, abs=0.03)
    assert out["block_size"] == 32 and out["kv_cache_groups"] == ["full"]
    seqs = 128 if backend == "pytorch" else out["max_num_seqs"]
    assert (out["max_num_batched_tokens"], out["max_num_seqs"]) == (8192, seqs)
    assert out["gpu_memory_utilization"] is None and out["max_gpu_memory_utilization"] is None
    expected = (
        "TensorRT-LLM PyTorch backend: KV = free_gpu_memory_fraction x (total - peak"
        if backend == "pytorch"
        else "TensorRT-LLM: KV = kv_cache_free_gpu_mem_fraction x memory free after load"
    )
    assert any(a.startswith(expected) for a in out["assumptions"]), out["assumptions"]


def test_trtllm_replicates_the_input_embedding() -> None:
    """convert_checkpoint.py without --use_parallel_embedding: every rank holds the whole
    input embedding (vLLM shards it), so TensorRT-LLM's weights per GPU are larger at TP > 1."""
    args = ("--model", "llama-3-70b", "--instance", "p4d.24xlarge", "--tp", "4")
    vllm = size_json(*args)
    trt = size_json(*args, "--engine", "trtllm")
    embedding = 128256 * 8192 * 2 / 2**30  # vocab x hidden x 2 B
    assert trt["weights_gib_per_gpu"] - vllm["weights_gib_per_gpu"] == pytest.approx(
        embedding * (1 - 1 / 4), abs=0.01
    )


def _trt(model: str, gpu: str, **changes: Any) -> dict[str, Any]:
    """The sizing of a TensorRT-LLM request as ``size --json`` prints it. The PyTorch backend
    and the checkpoints below are not reachable in quick mode, and a spec asking for them on a
    GPU without FP8 is refused before sizing (spec/checks.py): the budget's own refusals are
    the last line, tested here directly."""
    req = requests.request_from_options(model, gpu=gpu, engine="trtllm")
    sizing = calculator.compute(dataclasses.replace(req, **changes))
    out: dict[str, Any] = json.loads(json.dumps(size_report.to_json(sizing)))
    return out


def test_trtllm_refuses_what_it_cannot_run() -> None:
    quick = size_json(
        "--model", "llama-3.1-8b", "--gpu", "a100-80", "--engine", "trtllm",
        "--quantization", "fp8", code=4,
    )  # fmt: skip
    a100 = "NVIDIA A100 SXM4 80GB"
    assert (
        f"TensorRT-LLM FP8 needs FP8 tensor cores (Ada/Hopper); {a100} has none"
        in (quick["reasons"])
    )
    assert size_json(
        "--model", "llama-3.1-8b", "--gpu", "h100", "--engine", "trtllm", "--quantization", "fp8"
    )["fits"]
    kv = "an FP8 KV cache needs FP8 tensor cores (Ada/Hopper); {} has none"
    for variant, refused in (("pytorch", True), ("engine", False)):
        out = _trt("llama-3.1-8b", "a100-80", engine_variant=variant, kv_cache_dtype="fp8")
        assert (kv.format(a100) in out["reasons"]) is refused
    assert _trt("llama-3.1-8b", "h100", engine_variant="pytorch", kv_cache_dtype="fp8")["fits"]
    arch = requests.request_from_options("llama-3.1-8b", gpu="h100").architecture
    nvfp4 = dataclasses.replace(
        arch, quantization=CheckpointQuant("nvfp4", 4, 16, 0.5 + 1 / 16, label="nvfp4")
    )
    for gpu, refused in (("h100", True), ("b200", False)):
        out = _trt("llama-3.1-8b", gpu, engine_variant="pytorch", architecture=nvfp4)
        hit = [r for r in out["reasons"] if r.startswith("NVFP4 checkpoints need Blackwell GPUs")]
        assert bool(hit) is refused, out["reasons"]
    for variant, path in (
        ("pytorch", "PyTorch-backend path"),
        ("engine", "Triton TensorRT-LLM backend path (trtllm-build)"),
    ):
        out = _trt("deepseek-v3", "h200", engine_variant=variant)
        assert (
            f"the {path} is not modelled for this architecture (MLA, MXFP4 experts, "
            "state-space layers, cross-attention); use engine vllm"
        ) in out["reasons"]
    assert not [r for r in _trt("llama-3.1-8b", "h100")["reasons"] if "not modelled" in r]


# --- usable memory, interconnect, and what the calculator reports about them ---------------


def test_a_gpu_without_a_measurement_or_a_sibling_takes_the_lowest_measured_ratio() -> None:
    from llmdeploy.catalog.ec2 import Gpu
    from llmdeploy.sizing import gpu_memory

    new = Gpu("new_gpu", "NVIDIA New GPU", "Blackwell", "12.0", 97887, None, True, "new")
    found = gpu_memory.gpu_memory(new)
    t4 = gpu_memory.gpu_by_key("t4")
    assert found is not None and t4 is not None and t4.mem_mib_nvidia_smi is not None
    ratio = 14.56 / (t4.mem_mib_nvidia_smi / 1024)  # the T4's, the lowest of the measured GPUs
    assert found.total_gib == round(97887 / 1024 * ratio, 2)
    assert found.source == (
        f"derived: nvidia-smi 97887 MiB x {ratio:.4f} (torch/nvidia-smi ratio measured on "
        "NVIDIA T4; no sibling named, so the lowest ratio measured on any GPU); not measured on "
        "this GPU"
    )
    a100 = gpu_memory.gpu_memory(gpu_memory.gpu_by_key("a100-40"))  # type: ignore[arg-type]
    assert a100 is not None and "no sibling named" not in a100.source


def test_gpus_are_found_by_key_or_model_name_and_listed_when_unknown() -> None:
    by_name = size_json(
        "--model", "llama-3.1-8b", "--gpu", "NVIDIA A10G", "--max-model-len", "8192"
    )
    assert by_name["gpu"] == "NVIDIA A10G"
    result = CliRunner().invoke(cli.app, ["size", "--model", "llama-3.1-8b", "--gpu", "x100"])
    assert result.exit_code == 2
    assert "unknown GPU 'x100': expected one of a100-40, a100-80, a10g, b200" in result.stderr


@pytest.mark.parametrize(("gpu", "non_torch"), [("a10g", 0.40), ("a100-40", 0.75), ("h100", 2.20)])
def test_quick_mode_takes_the_interconnect_of_the_gpus_multi_gpu_instances(
    gpu: str, non_torch: float
) -> None:
    out = size_json("--model", "llama-3.1-8b", "--gpu", gpu, "--tp", "4")
    assert out["non_torch_gib"] == non_torch


def test_what_the_calculator_reports_about_its_inputs() -> None:
    given = size_json("--model", "llama-3.1-8b", "--gpu-memory-gib", "70")
    assert "GPU memory 70.0 GiB as given (torch-reported total)" in given["assumptions"]
    unknown = size_json("--model", "llama-3.1-8b", "--instance", "p3dn.24xlarge", code=4)
    assert unknown["gpu_total_gib"] == 0
    assert (
        "usable memory of NVIDIA V100 SXM2 32GB is not known: pass --gpu-memory-gib"
        in unknown["reasons"]
    )
    long = size_json(
        "--model", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "200000", code=4
    )
    assert (
        "max model length 200000 exceeds the model's max_position_embeddings 131072"
        in long["reasons"]
    )
    conflict = size_json(
        "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--quantization", "int4-awq",
        code=4,
    )  # fmt: skip
    assert any(r.startswith("the checkpoint is already quantized") for r in conflict["reasons"])


def test_blocks_and_tokens_as_printed() -> None:
    """Blocks are whole pages of the KV pool; full-attention models hold blocks x 16 tokens,
    hybrid ones what their full-length requests hold (docs/sizing.md §4)."""
    full = size_json("--preset", "llama3-70b-vllm-p4d")
    pool = int(full["kv_cache_gib_per_gpu"] * 2**30)
    page = full["kv_bytes_per_token_per_gpu"] * full["block_size"]
    assert isinstance(full["num_gpu_blocks"], int)
    assert abs(full["num_gpu_blocks"] - pool // page) <= 2  # the printed GiB is rounded
    assert full["kv_cache_tokens"] == full["num_gpu_blocks"] * full["block_size"]
    hybrid = size_json("--model", "gemma-2-9b", "--gpu", "h100", "--max-model-len", "8192")
    assert hybrid["kv_cache_groups"] == ["sliding", "full"]
    assert hybrid["kv_cache_tokens"] == pytest.approx(
        hybrid["max_concurrency"] * hybrid["max_model_len"], abs=hybrid["max_model_len"] * 0.01
    )
    assert hybrid["kv_cache_tokens"] != hybrid["num_gpu_blocks"] * hybrid["block_size"]
    none = size_json("--model", "llama-3-70b", "--instance", "g5.12xlarge", "--tp", "4", code=4)
    assert (none["num_gpu_blocks"], none["kv_cache_tokens"], none["max_concurrency"]) == (0, 0, 0)
