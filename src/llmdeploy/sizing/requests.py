"""Sizing requests: from a spec (``llmdeploy size spec.yaml``, ``render``) or from the quick-mode
options (``llmdeploy size --model ... --instance ...``)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING

from llmdeploy import versions
from llmdeploy.catalog import ec2 as catalog
from llmdeploy.catalog.models import load_architecture
from llmdeploy.engines import registry
from llmdeploy.errors import UnsupportedVersionError, UsageError
from llmdeploy.sizing import gpu_memory
from llmdeploy.sizing.checkpoint import resolve as resolve_checkpoint
from llmdeploy.sizing.suggest import size_for_hardware
from llmdeploy.sizing.types import KV_DTYPES, QUANTIZATIONS, Sizing, SizingRequest, on_instance

if TYPE_CHECKING:
    from llmdeploy.spec.sections import Spec


def size_spec(spec: Spec, spec_dir: Path | None = None, *, suggest: bool = True) -> Sizing:
    """Size a spec; for ``instanceFamily`` pick the cheapest size that fits. ``suggest=False``
    skips the (re-sized) suggestions, which ``render`` only needs when the spec does not fit."""
    from llmdeploy.spec.cluster import reserve_of  # the spec models: not for quick mode

    engine = registry.get(spec.engine.type)
    extra = engine.sizing_fields(spec)
    runtime = extra.get("runtime_quantizations", engine.runtime_quantizations)
    assert isinstance(runtime, frozenset)
    checkpoint = resolve_checkpoint(spec, spec_dir, runtime)
    mm = spec.serving.multimodal
    base = SizingRequest(
        architecture=checkpoint.architecture,
        tp=spec.hardware.tensor_parallel,
        data_parallel=spec.hardware.data_parallel,
        expert_parallel=spec.serving.expert_parallel,
        prefix_caching=spec.serving.prefix_caching,
        mm_limits=tuple(sorted(mm.limit_per_prompt.items()))
        if mm is not None and mm.limit_per_prompt is not None
        else None,
        mm_skip_profiling=mm.skip_profiling if mm is not None else False,
        mm_encoder_tp_mode=mm.encoder_tensor_parallel if mm is not None else "weights",
        quantization=spec.quantization,
        kv_cache_dtype=spec.kv_cache_dtype,
        max_model_len=spec.serving.max_model_len,
        max_num_batched_tokens=spec.serving.max_num_batched_tokens,
        gpu_memory_utilization=spec.serving.gpu_memory_utilization,
        slo_concurrent_requests=spec.slo.concurrent_requests,
        slo_input_tokens=spec.slo.input_tokens,
        slo_output_tokens=spec.slo.output_tokens,
        slo_arrival=spec.slo.arrival_pattern,
        slo_requests_per_s=spec.slo.requests_per_second,
        engine=engine,
        **extra,  # type: ignore[arg-type]
    )
    sizing = size_for_hardware(
        base,
        spec.hardware.instance_type,
        spec.hardware.instance_family,
        suggest=suggest,
        reserve=reserve_of(spec),
        nodes=spec.hardware.nodes_per_replica,
        pipeline=spec.hardware.pipeline_parallel,
    )
    return dataclasses.replace(sizing, notices=checkpoint.notices)


def request_from_options(
    model: str,
    instance: str | None = None,
    gpu: str | None = None,
    gpu_memory_gib: float | None = None,
    tp: int = 1,
    quantization: str = "none",
    dp: int = 1,
    expert_parallel: bool = False,
    kv_cache_dtype: str = "auto",
    pp: int | None = None,
    nodes: int = 1,
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
        ("--engine", engine, registry.names()),
    ):
        if value not in allowed:
            raise UsageError(f"{label} {value!r}: expected one of {', '.join(allowed)}")
    if tp < 1:
        raise UsageError(f"--tp {tp}: must be >= 1")
    if dp < 1:
        raise UsageError(f"--dp {dp}: must be >= 1")
    if engine_version is not None:
        try:  # an image tag's v0.19.0 is release 0.19.0 (llmdeploy.versions)
            engine_version = versions.canonical(engine_version)
        except UnsupportedVersionError as exc:
            raise UsageError(f"--engine-version: {exc.message}") from None
    if nodes < 1 or (pp is not None and pp < 1):
        raise UsageError("--nodes and --pp must be >= 1")
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise UsageError("--gpu-memory-utilization must be in (0, 1]")
    arch = load_architecture(model, base_dir)
    base = SizingRequest(
        architecture=arch,
        tp=tp,
        data_parallel=dp,
        expert_parallel=expert_parallel,
        pp=pp if pp is not None else nodes,
        nodes=nodes,
        quantization=quantization,
        kv_cache_dtype=kv_cache_dtype,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        engine=registry.get(engine),
        engine_version=engine_version,
    )
    if instance is not None:
        inst = catalog.instance(instance)
        if inst is None:
            raise UsageError(f"unknown instance type {instance!r}")
        return on_instance(base, inst)
    if gpu is not None:
        found = gpu_memory.gpu_by_key(gpu)
        if found is None:
            raise UsageError(
                f"unknown GPU {gpu!r}: expected one of {', '.join(gpu_memory.gpu_keys())}"
            )
        return dataclasses.replace(base, gpu=found, nvlink=gpu_memory.gpu_has_nvlink(found))
    if gpu_memory_gib is None or not math.isfinite(gpu_memory_gib) or gpu_memory_gib <= 0:
        raise UsageError("give one of --instance, --gpu or --gpu-memory-gib (> 0)")
    # interconnect unknown: NVLink's larger all-reduce buffers are the cautious assumption
    return dataclasses.replace(base, gpu_total_gib=gpu_memory_gib, nvlink=tp * dp > 1)
