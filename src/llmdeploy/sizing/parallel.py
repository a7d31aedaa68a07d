"""Parallelism rules every engine shares: which tensor-parallel degrees a model's layers allow,
and whether the GPU has the Hopper-class interconnect features the communication buffers use."""

from __future__ import annotations

from llmdeploy.catalog.architecture import Architecture
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.types import SizingRequest


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
