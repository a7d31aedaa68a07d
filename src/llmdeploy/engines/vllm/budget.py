"""vLLM's GPU-memory budget, by version: what it subtracts before the KV cache.

Formulas, their sources and the calibration residuals: ``docs/sizing.md`` (facts by version in
``engines/vllm/facts.py`` and ``shared/reference/vllm.md`` §1).
"""

from __future__ import annotations

import dataclasses
import math

from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
from llmdeploy.engines.vllm import facts as vf
from llmdeploy.engines.vllm.facts import VllmFacts, vllm_facts
from llmdeploy.engines.vllm.flags import DEFAULT_VLLM_VERSION
from llmdeploy.engines.vllm.multimodal import multimodal_plan
from llmdeploy.sizing import gpu_memory
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.kv import KvPolicy
from llmdeploy.sizing.parallel import hopper
from llmdeploy.sizing.types import MemoryBudget, SizingRequest

__all__ = ["VllmFacts", "vllm_budget", "vllm_facts"]


def _batch_defaults(
    req: SizingRequest,
    arch: Architecture,
    facts: VllmFacts,
    total: float,
    length: int,
    notes: list[str],
) -> tuple[int, int]:
    # `vllm serve` (UsageContext.OPENAI_API_SERVER) without --max-num-batched-tokens: 8192 on a
    # GPU of at least 70 GiB whose name lacks "a100", 2048 otherwise (vllm-project/vllm@v0.24.0
    # vllm/engine/arg_utils.py EngineArgs.get_batch_defaults, PR #17885); the budget llmdeploy
    # decides from the SLO arrives as req.max_num_batched_tokens (perf/token_budget.py)
    large = (
        facts.large_batch_defaults
        and total >= 70
        and not (req.gpu is not None and "a100" in req.gpu.model.lower())
    )
    if facts.v1:
        batched = req.max_num_batched_tokens or (8192 if large else 2048)
        floor = vf.mm_prefix_min_batched_tokens(req.engine_version or DEFAULT_VLLM_VERSION, arch)
        if not req.max_num_batched_tokens and floor > batched:
            notes.append(
                f"{arch.name}: max_num_batched_tokens raised to {floor}, its largest "
                "multimodal item (a prefix-LM model batches one item whole)"
            )
            batched = floor
        return batched, req.max_num_seqs or min(1024 if large else 256, batched)
    # V0: no chunked prefill below 32k context -> the whole context in one step
    batched = req.max_num_batched_tokens or (2048 if length > 32768 else max(length, 2048))
    notes.append(
        f"vLLM {facts.label} (V0 engine): activation profiled over {batched} "
        "tokens; V0 accounting is approximate"
    )
    return batched, req.max_num_seqs or min(256, batched)


def _kv_policy(
    req: SizingRequest,
    arch: Architecture,
    facts: VllmFacts,
    version: str,
    cc: int,
    notes: list[str],
) -> tuple[KvPolicy, list[str]]:
    reasons: list[str] = []
    block = vf.mla_block_size(version, cc) if arch.is_mla else 16
    mode = vf.mamba_mode(arch, req.prefix_caching)
    if arch.has_state_space:
        if vf.parse_version(version) < (0, 17, 0):
            reasons.append(
                f"hybrid state-space models are sized for vLLM >= 0.17.0 (its mamba cache "
                f"modes); {version} lays their state out differently"
            )
        notes.append(
            f"state-space layers: mamba cache mode {mode!r} "
            + ("(prefix caching on)" if req.prefix_caching else "(prefix caching off)")
        )
    if arch.cross_attention_tokens and vf.parse_version(version) > (0, 10, 2):
        reasons.append(
            f"{arch.name}: encoder-decoder (cross-attention) models were removed from vLLM "
            "after 0.10.2 (PR #24907); pin engine.version 0.10.2 or older"
        )
    ratio = vf.group_ratio(version) if facts.v1 else None  # V0: one pool, every layer full
    return KvPolicy(block, ratio, mode), reasons


def vllm_budget(
    req: SizingRequest,
    arch: Architecture,
    quant: CheckpointQuant | None,
    total: float,
    length: int,
) -> MemoryBudget:
    """vLLM's budget: total x gpu_memory_utilization - weights - activation peak - non-torch
    [- CUDA graphs where the runner profiles them]; what is left is the KV cache
    (docs/sizing.md)."""
    reasons: list[str] = []
    notes: list[str] = []
    tp, dp = max(1, req.tp), max(1, req.data_parallel)
    version = req.engine_version or DEFAULT_VLLM_VERSION
    facts = vllm_facts(version, arch, quantized=quant is not None)
    if facts.runner_v2:
        notes.append(
            f"vLLM {version} runs {arch.name} on Model Runner V2: "
            + (
                "its CUDA graphs are captured outside the budget"
                if not facts.cudagraph_in_budget
                else "its CUDA-graph estimate is subtracted"
            )
            + f", dummy sampler {facts.sampler_bytes:g} B per (request x vocab)"
        )
    gmu = req.gpu_memory_utilization or facts.default_gmu
    batched, seqs = _batch_defaults(req, arch, facts, total, length, notes)
    cc = vf.compute_major(req.gpu.compute_capability if req.gpu else None)
    dt = mem.dtype_bytes(req.dtype)
    mm = multimodal_plan(
        arch,
        version,
        tp,
        batched,
        seqs,
        length,
        dict(req.mm_limits) if req.mm_limits is not None else None,
        req.mm_skip_profiling,
        req.mm_encoder_tp_mode,
        dt,
    )
    reasons.extend(mm.problems)
    notes.extend(mm.notes)
    loaded = dataclasses.replace(arch, encoders=mm.encoders) if arch.encoders else arch
    layout = vf.mxfp4_layout(version, cc)
    if quant is not None and quant.method == "mxfp4":
        swizzle = ", in triton_kernels' Hopper layout" if layout.hopper_swizzle else ""
        notes.append(
            f"MXFP4 experts on the {layout.backend} MoE backend: padded to {layout.align}{swizzle}"
        )
    ep = req.expert_parallel and arch.is_moe and tp * dp > 1
    zeros = vf.group_zero_bytes(version, cc, quant)
    if zeros is not None:
        notes.append("AWQ on Machete (Hopper, vLLM >= 0.24): zero points held as 16-bit values")
    sharding = mem.Sharding(
        tp=tp,
        moe=tp * dp,
        expert_parallel=ep,
        mxfp4_align=layout.align,
        mxfp4_hopper_swizzle=layout.hopper_swizzle,
        mxfp4_value_prepad=layout.value_prepad,
        encoder_tp=mm.encoder_tp,
        group_zero_bytes=zeros,
        load_max_split=vf.load_max_split_bytes(version),
        rope_fp32=vf.rope_cache_fp32(arch),
    )
    stage = {"first_stage": req.first_stage, "last_stage": req.last_stage}
    parts = mem.weight_breakdown(loaded, quant, tp, dt=dt, sharding=sharding, **stage)
    weights = sum(parts.values()) / mem.GIB
    act = (
        mem.activation_bytes(
            loaded,
            quant,
            tp,
            batched,
            min(seqs, batched),
            dt,
            sampler_bytes=facts.sampler_bytes,
            moe_workspace=facts.v1,
            encoder=mm.profile,
            moe_ranks=1 if ep else tp * dp,
            **stage,
        )
        / mem.GIB
    )
    # data-parallel ranks talk over the same NVLink: the all-reduce/all-to-all buffers follow
    # the GPUs that exchange data (TP x DP for MoE layers)
    comm = tp * dp if arch.is_moe else tp
    non_torch = mem.non_torch_gib(facts.non_torch_tp1_gib, comm, req.nvlink, hopper(req))
    # MRv1 subtracts what it profiles (0.21+); otherwise the pool is captured outside the budget
    profiled = facts.cudagraph_in_budget and not facts.runner_v2
    graphs = vf.cudagraph_estimate_gib(arch.num_layers) if profiled else mem.cudagraph_gib(arch)
    graphs = 0.0 if req.enforce_eager else graphs
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
        notes.append(
            f"{req.gpu.model} has no FP8 tensor cores: vLLM runs fp8 weights "
            "weight-only (Marlin); memory is the same"
        )
    problem = vf.quantization_problem(version, quant)
    if problem:
        reasons.append(problem)
    if quant is not None and quant.method == "bnb-8bit" and arch.is_moe:
        # BitsAndBytesMoEMethod._create_weights_8bit raises NotImplementedError
        # (vLLM 0.24.0:model_executor/layers/quantization/bitsandbytes.py)
        reasons.append(
            f"vLLM has no 8-bit bitsandbytes kernel for the experts of {arch.name} (only "
            "4-bit bitsandbytes MoE loads); serve a 4-bit bitsandbytes, AWQ or GPTQ checkpoint, "
            "or the 16-bit one with quantization: fp8"
        )
    policy, kv_reasons = _kv_policy(req, arch, facts, version, cc, notes)
    reasons.extend(kv_reasons)
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
        layout_arch=loaded,
        block=policy.block_size,
        kv_policy=policy,
        reasons=tuple(reasons),
        assumptions=tuple(notes),
    )
