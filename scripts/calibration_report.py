#!/usr/bin/env python3
"""Per-case error table of the GPU-memory calculator against real vLLM start-up logs.

Usage: python scripts/calibration_report.py [--calibration PATH] [--breakdown]
(or env LLMDEPLOY_CALIBRATION; default tests/data/calibration/vllm-startup.yaml in the repo).

For every case: predicted vs observed weights GiB and KV-cache GiB (per GPU), the block count
and token capacity the observed KV GiB gives with our bytes per token (exact up to the log's
0.01 GiB rounding), and max concurrency where the log gives it. Values a row lists under
``inferred`` fill its nulls (marked ``*`` in the table). Cases the calculator cannot model are
listed with the reason instead of numbers.

``--breakdown``: the components vLLM logs besides the KV cache (activation peak, non-torch memory,
CUDA-graph pool), observed against predicted, for every case that logs them.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from llmdeploy.catalog.models import load_architecture
from llmdeploy.engines import registry
from llmdeploy.errors import LlmdeployError
from llmdeploy.sizing import calculator
from llmdeploy.sizing import gpu_memory as size_hw
from llmdeploy.sizing import kv as kvm
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.types import SizingRequest

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PATH = REPO / "tests" / "data" / "calibration" / "vllm-startup.yaml"
BASELINE_MAX_MODEL_LEN = 8192  # the sweep's baseline when a report row omits it

_GPU_WORDS = (
    ("H200", "h200"),
    ("H100", "h100"),
    ("B200", "b200"),
    ("L40S", "l40s"),
    ("A10G", "a10g"),
    ("L4", "l4"),
    ("T4", "t4"),
)


@dataclasses.dataclass(frozen=True)
class Row:
    id: str
    weights_obs: float | None
    weights_pred: float | None
    kv_obs: float | None
    kv_pred: float | None
    blocks_obs: int | None
    blocks_from_obs_kv: int | None
    blocks_tolerance: int
    block: int
    tokens_obs: int | None
    tokens_from_obs_kv: int | None
    conc_obs: float | None
    conc_pred: float | None
    excluded: str | None = None
    conc_tolerance: float = 0.02
    inferred: bool = False  # some inputs were inferred from context (the row's `inferred`)

    @staticmethod
    def err(pred: float | None, obs: float | None) -> float | None:
        if pred is None or obs is None or obs == 0:
            return None
        return (pred - obs) / obs * 100


def calibration_path(cli: str | None = None) -> Path:
    if cli:
        return Path(cli)
    env = os.environ.get("LLMDEPLOY_CALIBRATION")
    return Path(env) if env else DEFAULT_PATH


def load_cases(path: Path) -> list[dict[str, Any]]:
    data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    return list(data or [])


def _gpu_key(name: str) -> str | None:
    upper = name.upper()
    if "A100" in upper:
        return "a100_80" if "80" in upper else "a100_40"
    for word, key in _GPU_WORDS:
        if word in upper:
            return key
    return None


def _quantization(text: str | None, checkpoint_quantized: bool) -> str:
    if not text or checkpoint_quantized:
        return "none"
    low = text.lower()
    for word, value in (
        ("awq", "int4-awq"),
        ("gptq", "int4-gptq"),
        ("int8", "int8"),
        ("w8a8", "int8"),
        ("fp8", "fp8"),
    ):
        if word in low:
            return value
    raise ValueError(f"quantization {text!r} is not one the calculator models")


def _dtype(text: object) -> str:
    word = str(text or "auto").split()[0].lower()
    return word if word in {"float32", "float16", "bfloat16"} else "auto"


def with_inferred(case: dict[str, Any]) -> dict[str, Any]:
    """The row with its ``inferred`` values filling the nulls they name."""
    extra = {k: v for k, v in (case.get("inferred") or {}).items() if k != "reason"}
    return {**case, **{k: v for k, v in extra.items() if case.get(k) in (None, "") or k == "model"}}


def request_for_case(case: dict[str, Any]) -> SizingRequest:
    """The SizingRequest reproducing one logged start-up (its own total, gmu, TP, version)."""
    case = with_inferred(case)
    if int(case.get("pp") or 1) != 1:
        raise ValueError("pipeline parallelism is not modelled")
    # a measured geometry is a config.json beside the cases (geometries/KEY), as it was served
    arch = load_architecture(str(case["model"]), base_dir=DEFAULT_PATH.parent)
    gpu_name = str(case.get("gpu", "")).upper()
    key = _gpu_key(gpu_name)
    gpu = size_hw.gpu_by_key(key) if key else None
    tp = int(case.get("tp") or 1)
    return SizingRequest(
        architecture=arch,
        gpu=gpu,
        gpu_total_gib=float(case["gpu_total_gib"]),
        nvlink=gpu is not None and size_hw.gpu_has_nvlink(gpu) and "PCIE" not in gpu_name,
        tp=tp,
        quantization=_quantization(case.get("quantization"), arch.quantization is not None),
        kv_cache_dtype="fp8" if str(case.get("kv_cache_dtype")) == "fp8" else "auto",
        dtype=_dtype(case.get("dtype")),
        max_model_len=int(case.get("max_model_len") or BASELINE_MAX_MODEL_LEN),
        max_num_batched_tokens=case.get("max_num_batched_tokens"),
        gpu_memory_utilization=float(case["gpu_memory_utilization"]),
        engine=registry.get("vllm"),
        engine_version=str(case["vllm_version"]),
    )


def evaluate(case: dict[str, Any]) -> Row:
    cid = str(case["id"])
    try:
        req = request_for_case(case)
        result = calculator.compute(req)
    except (LlmdeployError, ValueError) as exc:
        message = exc.message if isinstance(exc, LlmdeployError) else str(exc)
        return Row(
            cid, None, None, None, None, None, None, 0, 16, None, None, None, None, excluded=message
        )
    layout = result.kv_layout
    assert layout is not None
    block_bytes = layout.block_bytes
    kv_obs = case.get("available_kv_cache_gib")
    blocks_obs = case.get("num_gpu_blocks")
    from_obs = int(float(kv_obs) * mem.GIB) // block_bytes if kv_obs is not None else None
    tolerance = int(0.005 * mem.GIB // block_bytes) + 1
    tokens_obs = case.get("kv_cache_tokens") or case.get("kv_cache_tokens_derived")
    uniform = set(layout.groups) == {"full"}
    tokens_from_obs = from_obs * layout.block_size if from_obs is not None and uniform else None
    conc_obs = case.get("max_concurrency")
    conc_pred = None
    conc_tolerance = 0.02
    if conc_obs is not None and from_obs is not None:
        per_request = kvm.pages_per_request(
            req.architecture, layout, result.max_model_len, result.max_num_batched_tokens
        )
        conc_pred = round(from_obs / per_request, 2)
        conc_tolerance = max(0.02, tolerance / per_request)
    return Row(
        cid,
        case.get("weights_gib"),
        round(result.weights_gib_per_gpu, 2),
        kv_obs,
        round(result.kv_cache_gib_per_gpu, 2),
        blocks_obs,
        from_obs,
        tolerance,
        layout.block_size,
        int(tokens_obs) if tokens_obs else None,
        tokens_from_obs,
        conc_obs,
        conc_pred,
        conc_tolerance=round(conc_tolerance, 4),
        inferred=bool(case.get("inferred")),
    )


def _fmt(value: float | int | None, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def table(rows: Sequence[Row]) -> str:
    head = (
        "| case | weights obs | pred | err % | KV obs | pred | err % | blocks obs | "
        "blocks(obs KV) | tokens obs | tokens(obs KV) | conc obs | conc(obs KV) |"
    )
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        if r.excluded:
            lines.append(f"| {r.id} | excluded: {r.excluded} |" + " |" * 11)
            continue
        mark = " *" if r.inferred else ""
        lines.append(
            f"| {r.id}{mark} | {_fmt(r.weights_obs, '.2f')} | {_fmt(r.weights_pred, '.2f')} | "
            f"{_fmt(Row.err(r.weights_pred, r.weights_obs), '+.2f')} | {_fmt(r.kv_obs, '.2f')} | "
            f"{_fmt(r.kv_pred, '.2f')} | {_fmt(Row.err(r.kv_pred, r.kv_obs), '+.2f')} | "
            f"{_fmt(r.blocks_obs)} | {_fmt(r.blocks_from_obs_kv)} | {_fmt(r.tokens_obs)} | "
            f"{_fmt(r.tokens_from_obs_kv)} | {_fmt(r.conc_obs)} | {_fmt(r.conc_pred)} |"
        )
    errs_w = [abs(e) for r in rows if (e := Row.err(r.weights_pred, r.weights_obs)) is not None]
    errs_k = [abs(e) for r in rows if (e := Row.err(r.kv_pred, r.kv_obs)) is not None]
    if errs_w and errs_k:
        lines.append("")
        lines.append(
            f"weights: mean |err| {sum(errs_w) / len(errs_w):.2f} %, max "
            f"{max(errs_w):.2f} % over {len(errs_w)} cases; KV GiB: mean |err| "
            f"{sum(errs_k) / len(errs_k):.2f} %, max {max(errs_k):.2f} % over "
            f"{len(errs_k)} cases"
        )
    return "\n".join(lines)


_PARTS = (
    ("activation", "activation_peak_gib", "activation_gib"),
    ("non-torch", "non_torch_gib", "non_torch_gib"),
    ("CUDA graphs", "cudagraph_gib", "cudagraph_gib"),
)


def breakdown(cases: Sequence[dict[str, Any]]) -> str:
    """Logged vs predicted activation peak, non-torch memory and CUDA-graph pool (GiB)."""
    head = "| case |" + "".join(f" {name} obs | pred |" for name, _, _ in _PARTS)
    lines = [head, "|" + "---|" * (1 + 2 * len(_PARTS))]
    errors: dict[str, list[tuple[float, str]]] = {name: [] for name, _, _ in _PARTS}
    for case in cases:
        if all(case.get(logged) is None for _, logged, _ in _PARTS):
            continue
        try:
            result = calculator.compute(request_for_case(case))
        except (LlmdeployError, ValueError):
            continue
        cells = []
        for name, logged, predicted in _PARTS:
            obs, pred = case.get(logged), round(getattr(result, predicted), 2)
            cells += [_fmt(obs, ".2f"), _fmt(pred, ".2f")]
            if obs is not None:
                errors[name].append((pred - float(obs), str(case["id"])))
        lines.append(f"| {case['id']} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, errs in errors.items():
        if not errs:
            continue
        worst, where = max(errs, key=lambda e: abs(e[0]))
        rms = (sum(e * e for e, _ in errs) / len(errs)) ** 0.5
        lines.append(
            f"{name}: rms err {rms:.2f} GiB, largest {worst:+.2f} GiB ({where}) "
            f"over {len(errs)} cases"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--calibration",
        help="calibration YAML (default: $LLMDEPLOY_CALIBRATION or "
        "tests/data/calibration/vllm-startup.yaml)",
    )
    parser.add_argument(
        "--breakdown", action="store_true", help="activation, non-torch and CUDA graphs instead"
    )
    args = parser.parse_args(argv)
    path = calibration_path(args.calibration)
    if not path.is_file():
        sys.stderr.write(f"calibration file not found: {path}\n")
        return 2
    cases = load_cases(path)
    if args.breakdown:
        sys.stdout.write(f"calibration: {path.name} (breakdown)\n\n{breakdown(cases)}\n")
        return 0
    rows = [evaluate(case) for case in cases]
    sys.stdout.write(f"calibration: {path.name} ({len(rows)} cases)\n\n{table(rows)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
