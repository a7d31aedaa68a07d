"""TensorRT-LLM's GPU-memory budget: the KV fraction of the memory free after load."""

from __future__ import annotations

import dataclasses

from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
from llmdeploy.sizing import gpu_memory
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.parallel import hopper
from llmdeploy.sizing.types import MemoryBudget, SizingRequest

DEFAULT_TRTLLM_VERSION = "1.2.1"  # inside the default Triton image (engines/trtllm/spec.py)


def trtllm_budget(
    req: SizingRequest,
    arch: Architecture,
    quant: CheckpointQuant | None,
    total: float,
    length: int,
) -> MemoryBudget:
    """TensorRT-LLM's budget: the KV cache gets ``kv_cache_free_gpu_mem_fraction`` of what is
    free after the engine is loaded (shared/reference/trtllm.md §2.4)."""
    del length  # the engine's KV pool does not depend on the request length
    reasons: list[str] = []
    assumptions: list[str] = []
    tp = max(1, req.tp)
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
    # logits in fp32 (4 B per request x vocab element), no fused-MoE workspaces kept
    act = (
        mem.activation_bytes(
            arch, quant, tp, batched, seqs, dt, sampler_bytes=4.0, moe_workspace=False
        )
        / mem.GIB
    )
    non_torch = mem.non_torch_gib(0.25, tp, req.nvlink, hopper(req))
    free = total - gpu_memory.CUDA_CONTEXT_GIB - weights - act - non_torch
    kv = free * req.kv_cache_free_gpu_mem_fraction
    assumptions.append(
        "TensorRT-LLM: KV = kv_cache_free_gpu_mem_fraction x memory free after "
        "load (trtllm.md §2.4); every layer sized as full attention; "
        "32 tokens per block"
    )
    layout_arch = dataclasses.replace(arch, layer_attention=("full",) * arch.num_layers)
    budget = total - gpu_memory.CUDA_CONTEXT_GIB - max(0.0, free) + max(0.0, kv)
    return MemoryBudget(
        version=version,
        gmu=None,
        max_gmu=None,
        budget=budget,
        weights=weights,
        act=act,
        non_torch=non_torch,
        graphs=0.0,
        graphs_in_budget=False,
        kv=kv,
        batched=batched,
        seqs=seqs,
        breakdown=mem.breakdown_gib(parts),
        layout_arch=layout_arch,
        block=32,
        reasons=tuple(reasons),
        assumptions=tuple(assumptions),
    )
