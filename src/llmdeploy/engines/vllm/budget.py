"""vLLM's GPU-memory budget, by version: what it subtracts before the KV cache.

Formulas, their sources and the calibration residuals: ``docs/sizing.md`` (facts by version in
``shared/reference/vllm.md`` §1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
from llmdeploy.engines.vllm.flags import Version, parse_version
from llmdeploy.engines.vllm.spec import DEFAULT_VLLM_VERSION
from llmdeploy.sizing import gpu_memory
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.parallel import hopper
from llmdeploy.sizing.types import MemoryBudget, SizingRequest


@dataclass(frozen=True)
class VllmFacts:
    """What changes across vLLM releases (each row cited in docs/sizing.md)."""

    version: Version
    v1: bool  # V1 engine is the default from 0.8.0
    large_batch_defaults: bool  # >= 70 GiB non-A100 GPUs: 8192 tokens / 1024 seqs (>= 0.9.0)
    sampler_bytes: float  # profiled sampler bytes per (request x vocab) element
    non_torch_tp1_gib: float
    default_gmu: float
    cudagraph_in_budget: bool  # >= 0.21: estimated CUDA-graph memory is subtracted

    @property
    def label(self) -> str:
        return ".".join(str(p) for p in self.version)


def vllm_facts(version: str) -> VllmFacts:
    v = parse_version(version)
    return VllmFacts(
        version=v,
        v1=v >= (0, 8, 0),
        large_batch_defaults=v >= (0, 9, 0),
        # sort-based native top-k/top-p sampler until 0.16; 0.17 dropped the profiled peak
        # (Qwen3-14B 5.64 -> 2.23 GiB at 1024 x 151936 logits); calibrated, docs/sizing.md
        sampler_bytes=14.9 if v >= (0, 17, 0) else 38.4,
        non_torch_tp1_gib=0.25 if v >= (0, 18, 0) or v < (0, 8, 0) else 0.13,
        # 0.9 through 0.19.1, 0.92 from 0.20.0 (each release's own parser; engines/vllm/flags.py)
        default_gmu=0.92 if v >= (0, 20, 0) else 0.9,
        cudagraph_in_budget=v >= (0, 21, 0),
    )


def vllm_budget(
    req: SizingRequest,
    arch: Architecture,
    quant: CheckpointQuant | None,
    total: float,
    length: int,
) -> MemoryBudget:
    """vLLM's budget: total x gpu_memory_utilization - weights - activation peak - non-torch
    [- CUDA graphs from 0.21]; what is left is the KV cache (docs/sizing.md)."""
    reasons: list[str] = []
    assumptions: list[str] = []
    tp = max(1, req.tp)
    version = req.engine_version or DEFAULT_VLLM_VERSION
    facts = vllm_facts(version)
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
    act = (
        mem.activation_bytes(
            arch,
            quant,
            tp,
            batched,
            min(seqs, batched),
            dt,
            sampler_bytes=facts.sampler_bytes,
            moe_workspace=facts.v1,
        )
        / mem.GIB
    )
    non_torch = mem.non_torch_gib(facts.non_torch_tp1_gib, tp, req.nvlink, hopper(req))
    graphs = 0.0 if req.enforce_eager else mem.cudagraph_gib(arch)
    budget = total * gmu
    kv = budget - weights - act - non_torch - (graphs if facts.cudagraph_in_budget else 0.0)
    outside = gpu_memory.CUDA_CONTEXT_GIB + (0.0 if facts.cudagraph_in_budget else graphs)
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
    return MemoryBudget(
        version=version,
        gmu=gmu,
        max_gmu=max_gmu,
        budget=budget,
        weights=weights,
        act=act,
        non_torch=non_torch,
        graphs=graphs,
        graphs_in_budget=facts.cudagraph_in_budget,
        kv=kv,
        batched=batched,
        seqs=seqs,
        breakdown=mem.breakdown_gib(parts),
        layout_arch=arch,
        block=block,
        reasons=tuple(reasons),
        assumptions=tuple(assumptions),
    )
