"""Engine budget models (vLLM by version, TensorRT-LLM) and the TP validity rules.

Each engine turns a request into :class:`EngineParts`: the per-GPU budget, its non-KV terms and
the KV memory left. Formulas: ``docs/sizing.md``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from llmdeploy import size_hw
from llmdeploy import size_memory as mem
from llmdeploy.models import Architecture, CheckpointQuant
from llmdeploy.size_types import DEFAULT_TRTLLM_VERSION, DEFAULT_VLLM_VERSION, SizingRequest


def tp_problems(arch: Architecture, tp: int, req: SizingRequest) -> list[str]:
    """Why vLLM would refuse this TP degree (divisibility rules of its parallel layers)."""
    out: list[str] = []
    if tp < 1:
        return [f"tensor parallel {tp} must be >= 1"]
    if req.gpus_per_instance is not None and tp > req.gpus_per_instance:
        where = req.instance.name if req.instance else "the instance"
        out.append(f"tensor parallel {tp} exceeds the {req.gpus_per_instance} GPU(s) of {where}")
    if arch.num_attention_heads % tp:
        out.append(
            f"tensor parallel {tp} does not divide the {arch.num_attention_heads} attention heads"
        )
    kv = arch.num_kv_heads
    if not arch.is_mla and (tp % kv if tp >= kv else kv % tp):
        out.append(
            f"tensor parallel {tp} and the {kv} KV heads: one must divide the other "
            "(KV heads are split, or replicated when TP > KV heads)"
        )
    for label, width in (
        ("intermediate size", arch.intermediate_size),
        ("MoE intermediate size", arch.moe_intermediate_size),
    ):
        if width and width % tp:
            out.append(f"tensor parallel {tp} does not divide the {label} {width}")
    q, _ = mem.effective_quant(arch, req.quantization)
    if q is not None and q.group_size and q.method in {"awq", "gptq", "w4a16", "fp8-block"}:
        for label, width in (
            ("intermediate size", arch.intermediate_size),
            ("MoE intermediate size", arch.moe_intermediate_size),
        ):
            if width and width % tp == 0 and (width // tp) % q.group_size:
                out.append(
                    f"{label} {width} / TP {tp} = {width // tp} is not a multiple of the "
                    f"{q.method} group size {q.group_size}"
                )
    return out


def hopper(req: SizingRequest) -> bool:
    """Compute capability >= 9.0 (NVLink SHARP / symmetric-memory all-reduce); unknown -> yes."""
    if req.gpu is None:
        return True
    major = req.gpu.compute_capability.split(".")[0].rstrip("?")
    return not major.isdigit() or int(major) >= 9


@dataclass(frozen=True)
class EngineParts:
    """What an engine's budget model contributes (GiB per GPU unless noted)."""

    version: str
    gmu: float | None
    max_gmu: float | None
    budget: float
    weights: float
    act: float
    non_torch: float
    graphs: float
    kv: float
    batched: int
    seqs: int
    breakdown: tuple[tuple[str, float], ...]
    layout_arch: Architecture
    block: int


def _breakdown(parts: dict[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple((k, round(v / mem.GIB, 4)) for k, v in parts.items() if v)


def vllm_parts(
    req: SizingRequest,
    arch: Architecture,
    quant: CheckpointQuant | None,
    tp: int,
    total: float,
    length: int,
    reasons: list[str],
    assumptions: list[str],
) -> EngineParts:
    version = req.engine_version or DEFAULT_VLLM_VERSION
    facts = mem.vllm_facts(version)
    gmu = req.gpu_memory_utilization or facts.default_gmu
    large = (
        facts.large_batch_defaults
        and total >= 70
        and not (req.gpu is not None and "a100" in req.gpu.model.lower())
    )
    if facts.v1:
        batched = req.max_num_batched_tokens or (8192 if large else 2048)
        seqs = req.max_num_seqs or min(1024 if large else 256, batched)
    else:  # V0: no chunked prefill below 32k context -> the whole context in one step
        batched = req.max_num_batched_tokens or (2048 if length > 32768 else max(length, 2048))
        seqs = req.max_num_seqs or min(256, batched)
        assumptions.append(
            f"vLLM {version} (V0 engine): activation profiled over {batched} "
            "tokens; V0 accounting is approximate"
        )
    dt = mem.dtype_bytes(req.dtype)
    parts = mem.weight_breakdown(arch, quant, tp, dt=dt)
    weights = sum(parts.values()) / mem.GIB
    act = mem.activation_bytes(arch, quant, tp, facts, batched, min(seqs, batched), dt) / mem.GIB
    non_torch = mem.non_torch_gib(facts.non_torch_tp1_gib, tp, req.nvlink, hopper(req))
    graphs = 0.0 if req.enforce_eager else mem.cudagraph_gib(arch)
    budget = total * gmu
    kv = budget - weights - act - non_torch - (graphs if facts.cudagraph_in_budget else 0.0)
    outside = size_hw.CUDA_CONTEXT_GIB + (0.0 if facts.cudagraph_in_budget else graphs)
    max_gmu = math.floor((total - outside) / total * 100) / 100 if total > outside else None
    if total and budget + outside > total + 1e-9:
        reasons.append(
            f"gpu_memory_utilization {gmu} leaves {total - budget:.2f} GiB outside "
            f"the budget, but the CUDA context and CUDA graphs need {outside:.2f} GiB "
            "there: lower it (or enforce eager mode)"
        )
    if quant is not None and quant.method == "fp8" and req.gpu is not None and not req.gpu.fp8:
        assumptions.append(
            f"{req.gpu.model} has no FP8 tensor cores: vLLM runs fp8 weights "
            "weight-only (Marlin); memory is the same"
        )
    block = 64 if arch.is_mla and facts.v1 else 16
    return EngineParts(
        version,
        gmu,
        max_gmu,
        budget,
        weights,
        act,
        non_torch,
        graphs,
        kv,
        batched,
        seqs,
        _breakdown(parts),
        arch,
        block,
    )


def trtllm_parts(
    req: SizingRequest,
    arch: Architecture,
    quant: CheckpointQuant | None,
    tp: int,
    total: float,
    kv_bytes: int,
    reasons: list[str],
    assumptions: list[str],
) -> EngineParts:
    version = req.engine_version or DEFAULT_TRTLLM_VERSION
    if (
        quant is not None
        and quant.method in {"fp8", "fp8-block"}
        and req.gpu is not None
        and not req.gpu.fp8
    ):
        reasons.append(
            f"TensorRT-LLM FP8 needs FP8 tensor cores (Ada/Hopper); {req.gpu.model} has none"
        )
    if arch.is_mla or (quant is not None and quant.method == "mxfp4"):
        reasons.append(
            "the Triton TensorRT-LLM backend path (trtllm-build) is not modelled for "
            "this architecture (MLA / MXFP4 experts); use engine vllm"
        )
    # checkpoints converted with convert_checkpoint.py default to a replicated embedding
    dt = mem.dtype_bytes(req.dtype)
    parts = mem.weight_breakdown(arch, quant, tp, parallel_embedding=False, dt=dt)
    weights = sum(parts.values()) / mem.GIB
    batched = req.max_num_batched_tokens or 8192  # trtllm-build --max_num_tokens default
    seqs = req.max_num_seqs or 64
    facts = mem.vllm_facts("0.0.0")
    act = (
        mem.activation_bytes(
            arch, quant, tp, dataclasses.replace(facts, sampler_bytes=4.0), batched, seqs, dt
        )
        / mem.GIB
    )
    non_torch = mem.non_torch_gib(0.25, tp, req.nvlink, hopper(req))
    free = total - size_hw.CUDA_CONTEXT_GIB - weights - act - non_torch
    kv = free * req.kv_cache_free_gpu_mem_fraction
    assumptions.append(
        "TensorRT-LLM: KV = kv_cache_free_gpu_mem_fraction x memory free after "
        "load (trtllm.md §2.4); every layer sized as full attention; "
        "32 tokens per block"
    )
    layout_arch = dataclasses.replace(arch, layer_attention=("full",) * arch.num_layers)
    budget = total - size_hw.CUDA_CONTEXT_GIB - max(0.0, free) + max(0.0, kv)
    del kv_bytes
    return EngineParts(
        version,
        None,
        None,
        budget,
        weights,
        act,
        non_torch,
        0.0,
        kv,
        batched,
        seqs,
        _breakdown(parts),
        layout_arch,
        32,
    )
