"""Request and result types of the sizing stage (re-exported by :mod:`llmdeploy.size`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from llmdeploy import catalog
from llmdeploy.models import Architecture

DEFAULT_VLLM_VERSION = "0.19.0"
DEFAULT_TRTLLM_VERSION = "1.2.1"
QUANTIZATIONS = ("none", "fp8", "int8", "int4-awq", "int4-gptq")
KV_DTYPES = ("auto", "fp8")
ENGINES = ("vllm", "trtllm")


@dataclass(frozen=True)
class SizingRequest:
    architecture: Architecture
    gpu: catalog.Gpu | None = None
    gpu_total_gib: float | None = None  # explicit usable total (overrides the GPU table)
    gpus_per_instance: int | None = None
    nvlink: bool = False
    instance: catalog.Instance | None = None
    tp: int = 1
    quantization: str = "none"
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"  # --dtype: auto | bfloat16 | float16 | float32
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    gpu_memory_utilization: float | None = None  # None: the engine version's default
    engine: Literal["vllm", "trtllm"] = "vllm"
    engine_version: str | None = None  # vLLM version, or TensorRT-LLM version for trtllm
    enforce_eager: bool = False
    kv_cache_free_gpu_mem_fraction: float = 0.9
    slo_concurrent_requests: int = 16
    slo_input_tokens: int = 512
    slo_output_tokens: int = 256


@dataclass(frozen=True)
class Suggestion:
    """A concrete change to the request, re-sized to report its own outcome."""

    change: str  # e.g. "tensorParallel: 8"
    field: str  # spec path of the main change, e.g. "hardware.tensorParallel"
    value: str
    changes: tuple[tuple[str, str], ...]  # every (spec path, value) the outcome assumes
    fits: bool
    kv_cache_gib_per_gpu: float
    max_concurrency: float
    slo_requests_per_replica: int
    replicas_for_slo: int | None
    instance: str | None
    price_usd_hr: float | None


@dataclass(frozen=True)
class Sizing:
    fits: bool
    instance: catalog.Instance | None
    gpu: str
    gpu_total_gib: float
    budget_gib: float
    weights_gib_per_gpu: float
    activation_gib: float
    non_torch_gib: float
    cudagraph_gib: float
    context_gib: float
    kv_cache_gib_per_gpu: float
    kv_bytes_per_token_per_gpu: int
    kv_cache_tokens: int
    num_gpu_blocks: int
    block_size: int
    max_concurrency: float
    slo_tokens_per_replica_needed: int
    slo_requests_per_replica: int
    replicas_for_slo: int | None
    reasons: tuple[str, ...]
    suggestions: tuple[Suggestion, ...]
    model: str
    engine: str
    engine_version: str
    tp: int
    quantization: str
    kv_cache_dtype: str
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    gpu_memory_utilization: float | None
    max_gpu_memory_utilization: float | None  # largest value leaving room for context + graphs
    weights_breakdown_gib: tuple[tuple[str, float], ...]
    kv_cache_groups: tuple[str, ...]
    assumptions: tuple[str, ...]
    request: SizingRequest
