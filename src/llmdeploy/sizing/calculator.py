"""GPU-memory sizing: does this model fit this GPU at this TP degree, and how much KV cache is left.

Pure arithmetic over the request and the catalogs; no I/O besides loading those, no printing.
Types are in :mod:`llmdeploy.sizing.types`; each engine's budget model is its
``memory_budget`` (``engines/<name>/budget.py``); the per-GPU memory model is
:mod:`llmdeploy.sizing.memory`, hardware facts :mod:`llmdeploy.sizing.gpu_memory`, TP rules
:mod:`llmdeploy.sizing.parallel`. Requests from a spec or the quick-mode options are built in
:mod:`llmdeploy.sizing.requests`; instance choice and suggestions in
:mod:`llmdeploy.sizing.suggest`. Formulas and their sources: ``docs/sizing.md``.
"""

from __future__ import annotations

import dataclasses
import math

from llmdeploy.sizing import gpu_memory, pipeline
from llmdeploy.sizing import kv as kvm
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.parallel import tp_problems
from llmdeploy.sizing.types import Sizing, SizingRequest


def _gpu_total(req: SizingRequest, assumptions: list[str]) -> tuple[float | None, str]:
    if req.gpu_total_gib is not None:
        assumptions.append(f"GPU memory {req.gpu_total_gib} GiB as given (torch-reported total)")
        return req.gpu_total_gib, f"{req.gpu_total_gib} GiB GPU"
    if req.gpu is None:
        return None, "unknown GPU"
    found = gpu_memory.gpu_memory(req.gpu)
    if found is None:
        return None, req.gpu.model
    assumptions.append(f"{req.gpu.model}: usable {found.total_gib} GiB ({found.source})")
    return found.total_gib, req.gpu.model


def compute(req: SizingRequest) -> Sizing:
    """Size one configuration (no suggestions); a pipeline-parallel replica stage by stage
    (:mod:`llmdeploy.sizing.pipeline`)."""
    if req.stage is not None or (req.pp == 1 and req.nodes == 1):
        return _compute_one(req)
    problems = pipeline.layout_problems(req)
    found = pipeline.stages(req)
    if found is None or not all(stage.layers for stage in found):
        # no stages to size (the engine has none, or more stages than layers): the replica as
        # one stage, refused with the reasons
        single = _compute_one(dataclasses.replace(req, pp=1, nodes=1))
        return pipeline.refused(req, single, problems if found else (pipeline.NO_PIPELINE,))
    parts = [(stage, _compute_one(pipeline.stage_request(req, stage))) for stage in found]
    return pipeline.combine(req, parts, problems)


def _compute_one(req: SizingRequest) -> Sizing:
    """Size one GPU's share: of the whole model, or of one pipeline stage (``req.stage``)."""
    arch = req.architecture
    reasons: list[str] = []
    assumptions: list[str] = list(arch.notes)
    total, gpu_name = _gpu_total(req, assumptions)
    if total is None:
        reasons.append(f"usable memory of {gpu_name} is not known: pass --gpu-memory-gib")
        total = 0.0
    q, qproblem = mem.effective_quant(arch, req.quantization)
    if qproblem:
        reasons.append(qproblem)
    reasons.extend(tp_problems(arch, req.tp, req))
    reasons.extend(_layout_problems(req))
    length = req.max_model_len or arch.max_position_embeddings
    if length > arch.max_position_embeddings:
        reasons.append(
            f"max model length {length} exceeds the model's max_position_embeddings "
            f"{arch.max_position_embeddings}"
        )
    kv_bytes = 1 if req.kv_cache_dtype == "fp8" else mem.dtype_bytes(req.dtype)
    tp = max(1, req.tp)
    parts = req.engine.memory_budget(req, arch, q, total, length)
    reasons.extend(parts.reasons)
    assumptions.extend(parts.assumptions)
    version, gmu, budget, weights = parts.version, parts.gmu, parts.budget, parts.weights
    max_gmu = parts.max_gmu
    act, non_torch, graphs, kv_gib = parts.act, parts.non_torch, parts.graphs, parts.kv
    batched, seqs, breakdown = parts.batched, parts.seqs, parts.breakdown
    layout_arch, block = parts.layout_arch, parts.block
    policy = parts.kv_policy or kvm.KvPolicy(block, None)
    layout = kvm.kv_layout(layout_arch, tp, kv_bytes, policy, mem.dtype_bytes(req.dtype))
    block = layout.block_size
    blocks = max(0, int(kv_gib * mem.GIB) // layout.block_bytes)
    per_request = kvm.pages_per_request(layout_arch, layout, length, batched)
    concurrency = blocks / per_request if per_request else 0.0
    # hybrid models: blocks count pages of one group; report what full-length requests hold
    tokens = blocks * block if set(layout.groups) == {"full"} else int(concurrency * length)
    if kv_gib <= 0:
        reasons.append(
            f"no memory left for the KV cache: {weights:.2f} GiB weights + "
            f"{act:.2f} activation + {non_torch:.2f} non-torch"
            + (f" + {graphs:.2f} CUDA graphs" if graphs and parts.graphs_in_budget else "")
            + f" exceed the {budget:.2f} GiB budget per GPU"
        )
    elif blocks < per_request:
        need = per_request * layout.block_bytes / mem.GIB
        reasons.append(
            f"one request of {length} tokens needs {need:.2f} GiB of KV cache per "
            f"GPU but only {kv_gib:.2f} GiB is available"
        )
    slo_len = min(req.slo_input_tokens + req.slo_output_tokens, length)
    slo_pages = kvm.pages_per_request(layout_arch, layout, slo_len, batched)
    # every data-parallel rank has its own KV pool and scheduler; a replica (pod) holds all
    dp = max(1, req.data_parallel)
    per_replica = dp * min(blocks // slo_pages, seqs) if slo_pages else 0
    needed = req.slo_concurrent_requests * (req.slo_input_tokens + req.slo_output_tokens)
    replicas = math.ceil(req.slo_concurrent_requests / per_replica) if per_replica else None
    return Sizing(
        fits=not reasons,
        instance=req.instance,
        gpu=gpu_name,
        gpu_total_gib=round(total, 2),
        budget_gib=_r(budget),
        weights_gib_per_gpu=_r(weights),
        activation_gib=_r(act),
        non_torch_gib=_r(non_torch),
        cudagraph_gib=_r(graphs),
        context_gib=gpu_memory.CUDA_CONTEXT_GIB,
        kv_cache_gib_per_gpu=_r(kv_gib),
        kv_bytes_per_token_per_gpu=layout.bytes_per_token_per_gpu,
        kv_cache_tokens=tokens,
        num_gpu_blocks=blocks,
        block_size=block,
        max_concurrency=round(concurrency, 2),
        slo_tokens_per_replica_needed=needed,
        slo_requests_per_replica=per_replica,
        replicas_for_slo=replicas,
        reasons=tuple(reasons),
        suggestions=(),
        model=arch.name,
        engine=req.engine.name,
        engine_version=version,
        tp=req.tp,
        quantization=q.label if q else "none (16-bit)",
        kv_cache_dtype=req.kv_cache_dtype,
        max_model_len=length,
        max_num_batched_tokens=batched,
        max_num_seqs=seqs,
        gpu_memory_utilization=gmu,
        max_gpu_memory_utilization=max_gmu,
        weights_breakdown_gib=breakdown,
        kv_cache_groups=layout.groups,
        assumptions=tuple(assumptions),
        request=req,
        checkpoint_gib=_r(mem.checkpoint_bytes(arch) / mem.GIB),
        data_parallel=max(1, req.data_parallel),
        expert_parallel=req.expert_parallel,
        state_bytes_per_sequence=layout.state_bytes_per_layer
        * layout_arch.layer_attention.count("mamba"),
        kv_layout=layout,
    )


def _layout_problems(req: SizingRequest) -> list[str]:
    """Spec settings the model cannot use."""
    arch = req.architecture
    out = []
    if req.expert_parallel and not arch.is_moe:
        out.append(f"serving.expertParallel needs a mixture-of-experts model; {arch.name} is dense")
    mm_set = (
        req.mm_limits is not None or req.mm_skip_profiling or req.mm_encoder_tp_mode != "weights"
    )
    if mm_set and not arch.multimodal:
        out.append(f"serving.multimodal is set but {arch.name} has no multimodal encoder")
    return out


def _r(value: float) -> float:
    return round(value, 4)
