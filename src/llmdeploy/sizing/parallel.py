"""Parallelism rules every engine shares: which tensor-parallel degrees a model's layers allow,
and whether the GPU has the Hopper-class interconnect features the communication buffers use."""

from __future__ import annotations

from llmdeploy.catalog.architecture import Architecture
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.types import SizingRequest


def moe_split(arch: Architecture, req: SizingRequest) -> int:
    """Ranks one routed expert is split over: none with expert parallelism (whole experts per
    rank), else TP x DP (vLLM flattens the MoE TP group over the data-parallel ranks:
    fused_moe/config.py ``flatten_tp_across_dp_and_pcp``)."""
    ranks = max(1, req.tp) * max(1, req.data_parallel)
    return 1 if req.expert_parallel and arch.is_moe and ranks > 1 else ranks


def tp_problems(arch: Architecture, tp: int, req: SizingRequest) -> list[str]:
    """Why vLLM would refuse this TP (x DP) layout (divisibility rules of its parallel layers)."""
    out: list[str] = []
    if tp < 1:
        return [f"tensor parallel {tp} must be >= 1"]
    dp = max(1, req.data_parallel)
    gpus = tp * dp
    if req.gpus_per_instance is not None and gpus > req.gpus_per_instance:
        where = req.instance.name if req.instance else "the instance"
        layout = f"tensor parallel {tp}" + (f" x data parallel {dp} = {gpus}" if dp > 1 else "")
        out.append(f"{layout} exceeds the {req.gpus_per_instance} GPU(s) of {where}")
    if req.expert_parallel and arch.is_moe and gpus > arch.num_experts:
        out.append(
            f"expert parallelism over {gpus} GPUs leaves some without any of the "
            f"{arch.num_experts} experts"
        )
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
    split = moe_split(arch, req)
    widths = (
        ("intermediate size", arch.intermediate_size, tp, "TP"),
        ("MoE intermediate size", arch.moe_intermediate_size, split, "TP x DP" if dp > 1 else "TP"),
    )
    for label, width, ways, name in widths:
        if width and width % ways:
            out.append(f"{name} {ways} does not divide the {label} {width}")
    q, _ = mem.effective_quant(arch, req.quantization)
    if q is not None and q.group_size and q.method in {"awq", "gptq", "w4a16", "fp8-block"}:
        for label, width, ways, name in widths:
            if width and ways > 1 and width % ways == 0 and (width // ways) % q.group_size:
                out.append(
                    f"{label} {width} / {name} {ways} = {width // ways} is not a multiple of "
                    f"the {q.method} group size {q.group_size}"
                )
    return out


def hopper(req: SizingRequest) -> bool:
    """Compute capability >= 9.0 (NVLink SHARP / symmetric-memory all-reduce); unknown -> yes."""
    if req.gpu is None:
        return True
    major = req.gpu.compute_capability.split(".")[0].rstrip("?")
    return not major.isdigit() or int(major) >= 9
