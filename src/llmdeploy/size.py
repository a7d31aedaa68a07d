"""GPU-memory sizing: does this model fit this GPU at this TP degree, and how much KV cache is left.

Pure arithmetic over the spec and the catalogs (``models``, ``catalog``); no I/O besides loading
those, no printing. Types are in :mod:`llmdeploy.size_types`, the engines' budget models in
:mod:`llmdeploy.size_engines`, the per-GPU memory model in :mod:`llmdeploy.size_memory`, hardware
facts in :mod:`llmdeploy.size_hw`, suggestions and instance choice in
:mod:`llmdeploy.size_suggest`. Formulas and their sources: ``docs/sizing.md``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING

from llmdeploy import catalog, size_hw
from llmdeploy import size_memory as mem
from llmdeploy.errors import UsageError
from llmdeploy.models import load_architecture
from llmdeploy.size_engines import hopper, tp_problems, trtllm_parts, vllm_parts
from llmdeploy.size_types import (
    DEFAULT_TRTLLM_VERSION,
    DEFAULT_VLLM_VERSION,
    ENGINES,
    KV_DTYPES,
    QUANTIZATIONS,
    Sizing,
    SizingRequest,
    Suggestion,
)

if TYPE_CHECKING:
    from llmdeploy.spec import Spec

__all__ = [
    "DEFAULT_TRTLLM_VERSION",
    "DEFAULT_VLLM_VERSION",
    "ENGINES",
    "KV_DTYPES",
    "QUANTIZATIONS",
    "Sizing",
    "SizingRequest",
    "Suggestion",
    "compute",
    "hopper",
    "request_for_instance",
    "request_from_options",
    "size",
    "size_spec",
    "tp_problems",
]


def _gpu_total(req: SizingRequest, assumptions: list[str]) -> tuple[float | None, str]:
    if req.gpu_total_gib is not None:
        assumptions.append(f"GPU memory {req.gpu_total_gib} GiB as given (torch-reported total)")
        return req.gpu_total_gib, f"{req.gpu_total_gib} GiB GPU"
    if req.gpu is None:
        return None, "unknown GPU"
    found = size_hw.gpu_memory(req.gpu)
    if found is None:
        return None, req.gpu.model
    assumptions.append(f"{req.gpu.model}: usable {found.total_gib} GiB ({found.source})")
    return found.total_gib, req.gpu.model


def size(req: SizingRequest) -> Sizing:
    """Size one configuration, with suggestions when it does not fit or cannot carry the SLO."""
    result = compute(req)
    if result.fits and result.replicas_for_slo in (1, None):
        return result
    from llmdeploy import size_suggest

    return dataclasses.replace(result, suggestions=size_suggest.suggestions(req, result))


def compute(req: SizingRequest) -> Sizing:
    """Size one configuration (no suggestions)."""
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
    length = req.max_model_len or arch.max_position_embeddings
    if length > arch.max_position_embeddings:
        reasons.append(
            f"max model length {length} exceeds the model's max_position_embeddings "
            f"{arch.max_position_embeddings}"
        )
    kv_bytes = 1 if req.kv_cache_dtype == "fp8" else mem.dtype_bytes(req.dtype)
    tp = max(1, req.tp)
    if req.engine == "trtllm":
        parts = trtllm_parts(req, arch, q, tp, total, kv_bytes, reasons, assumptions)
    else:
        parts = vllm_parts(req, arch, q, tp, total, length, reasons, assumptions)
    version, gmu, budget, weights = parts.version, parts.gmu, parts.budget, parts.weights
    max_gmu = parts.max_gmu
    act, non_torch, graphs, kv_gib = parts.act, parts.non_torch, parts.graphs, parts.kv
    batched, seqs, breakdown = parts.batched, parts.seqs, parts.breakdown
    layout_arch, block = parts.layout_arch, parts.block
    layout = mem.kv_layout(layout_arch, tp, kv_bytes, block)
    blocks = max(0, int(kv_gib * mem.GIB) // layout.page_bytes_per_layer // layout.group_size)
    per_request = mem.pages_per_request(layout_arch, layout, length, batched)
    concurrency = blocks / per_request if per_request else 0.0
    # hybrid models: blocks count pages of one group; report what full-length requests hold
    tokens = blocks * block if set(layout.groups) == {"full"} else int(concurrency * length)
    if kv_gib <= 0:
        reasons.append(
            f"no memory left for the KV cache: {weights:.2f} GiB weights + "
            f"{act:.2f} activation + {non_torch:.2f} non-torch"
            + (
                f" + {graphs:.2f} CUDA graphs"
                if req.engine == "vllm" and graphs and mem.vllm_facts(version).cudagraph_in_budget
                else ""
            )
            + f" exceed the {budget:.2f} GiB budget per GPU"
        )
    elif blocks < per_request:
        need = per_request * layout.page_bytes_per_layer * layout.group_size / mem.GIB
        reasons.append(
            f"one request of {length} tokens needs {need:.2f} GiB of KV cache per "
            f"GPU but only {kv_gib:.2f} GiB is available"
        )
    slo_len = min(req.slo_input_tokens + req.slo_output_tokens, length)
    slo_pages = mem.pages_per_request(layout_arch, layout, slo_len, batched)
    per_replica = min(blocks // slo_pages, seqs) if slo_pages else 0
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
        context_gib=size_hw.CUDA_CONTEXT_GIB,
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
        engine=req.engine,
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
    )


def _r(value: float) -> float:
    return round(value, 4)


def request_for_instance(base: SizingRequest, inst: catalog.Instance) -> SizingRequest:
    return dataclasses.replace(
        base,
        instance=inst,
        gpu=inst.gpu,
        gpus_per_instance=inst.gpu_count,
        nvlink=inst.nvlink,
        gpu_total_gib=None,
    )


def size_spec(spec: Spec, spec_dir: Path | None = None, *, suggest: bool = True) -> Sizing:
    """Size a spec; for ``instanceFamily`` pick the cheapest size that fits. ``suggest=False``
    skips the (re-sized) suggestions, which ``render`` only needs when the spec does not fit."""
    from llmdeploy import size_suggest

    arch = load_architecture(spec.model.architecture, spec_dir)
    engine = spec.engine
    if engine.type == "trtllm":
        version = size_hw.trtllm_version_for_triton(engine.triton_version)
        extra = dict(
            engine="trtllm",
            engine_version=version,
            kv_cache_free_gpu_mem_fraction=engine.kv_cache_free_gpu_mem_fraction,
            max_num_seqs=engine.max_batch_size,
        )
    else:
        extra = dict(
            engine="vllm",
            engine_version=engine.version,
            enforce_eager=engine.enforce_eager,
            max_num_seqs=spec.serving.max_num_seqs,
        )
    base = SizingRequest(
        architecture=arch,
        tp=spec.hardware.tensor_parallel,
        quantization=spec.quantization,
        kv_cache_dtype=spec.kv_cache_dtype,
        max_model_len=spec.serving.max_model_len,
        max_num_batched_tokens=spec.serving.max_num_batched_tokens,
        gpu_memory_utilization=spec.serving.gpu_memory_utilization,
        slo_concurrent_requests=spec.slo.concurrent_requests,
        slo_input_tokens=spec.slo.input_tokens,
        slo_output_tokens=spec.slo.output_tokens,
        **extra,  # type: ignore[arg-type]
    )
    return size_suggest.size_for_hardware(
        base, spec.hardware.instance_type, spec.hardware.instance_family, suggest=suggest
    )


def request_from_options(
    model: str,
    instance: str | None = None,
    gpu: str | None = None,
    gpu_memory_gib: float | None = None,
    tp: int = 1,
    quantization: str = "none",
    kv_cache_dtype: str = "auto",
    max_model_len: int | None = None,
    gpu_memory_utilization: float | None = None,
    engine: str = "vllm",
    engine_version: str | None = None,
    base_dir: Path | None = None,
) -> SizingRequest:
    """The request of quick mode (``llmdeploy size --model ...``); bad options -> UsageError."""
    for label, value, allowed in (
        ("--quantization", quantization, QUANTIZATIONS),
        ("--kv-cache-dtype", kv_cache_dtype, KV_DTYPES),
        ("--engine", engine, ENGINES),
    ):
        if value not in allowed:
            raise UsageError(f"{label} {value!r}: expected one of {', '.join(allowed)}")
    if tp < 1:
        raise UsageError(f"--tp {tp}: must be >= 1")
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise UsageError("--gpu-memory-utilization must be in (0, 1]")
    arch = load_architecture(model, base_dir)
    base = SizingRequest(
        architecture=arch,
        tp=tp,
        quantization=quantization,
        kv_cache_dtype=kv_cache_dtype,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        engine="trtllm" if engine == "trtllm" else "vllm",
        engine_version=engine_version,
    )
    if instance is not None:
        inst = catalog.instance(instance)
        if inst is None:
            raise UsageError(f"unknown instance type {instance!r}")
        return request_for_instance(base, inst)
    if gpu is not None:
        found = size_hw.gpu_by_key(gpu)
        if found is None:
            raise UsageError(
                f"unknown GPU {gpu!r}: expected one of {', '.join(size_hw.gpu_keys())}"
            )
        return dataclasses.replace(base, gpu=found, nvlink=size_hw.gpu_has_nvlink(found))
    if gpu_memory_gib is None or not math.isfinite(gpu_memory_gib) or gpu_memory_gib <= 0:
        raise UsageError("give one of --instance, --gpu or --gpu-memory-gib (> 0)")
    # interconnect unknown: NVLink's larger all-reduce buffers are the cautious assumption
    return dataclasses.replace(base, gpu_total_gib=gpu_memory_gib, nvlink=tp > 1)
