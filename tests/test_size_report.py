"""The numbers ``llmdeploy size`` prints, against what real vLLM start-ups logged (the in-repo
calibration cases, each with its source) or what vLLM's own code decides: each test reads the
printed JSON or table, never the calculator's constants."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import load_script
from llmdeploy.cli import commands as cli
from llmdeploy.cli import size_report
from llmdeploy.sizing import calculator
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
    assert (out["max_num_batched_tokens"], out["max_num_seqs"]) == (tokens, seqs)
    table = CliRunner().invoke(cli.app, ["size", "--model", "llama-3.1-8b", "--gpu", gpu])
    assert f"activation peak ({tokens} tokens)" in table.stdout


def test_batch_defaults_before_0_9_do_not_depend_on_the_gpu() -> None:
    for gpu in ("h100", "a100-80"):
        out = size_json("--model", "llama-3.1-8b", "--gpu", gpu, "--engine-version", "0.8.5")
        assert (out["max_num_batched_tokens"], out["max_num_seqs"]) == (2048, 256)


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
    "llmd-v0190-mixtral-8x7b-h100-tp2": "the fused-MoE workspace term is high for 8 wide experts",
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
