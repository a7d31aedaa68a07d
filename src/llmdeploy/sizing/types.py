"""Request and result types of the sizing stage."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

from llmdeploy.catalog import ec2
from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
from llmdeploy.errors import Notice
from llmdeploy.sizing.kv import KvLayout, KvPolicy

QUANTIZATIONS = ("none", "fp8", "int8", "int4-awq", "int4-gptq")
KV_DTYPES = ("auto", "fp8")


@dataclass(frozen=True)
class PipelineStage:
    """One pipeline-parallel stage of a replica: its decoder layers ``[first_layer,
    first_layer + layers)`` of the model (the engine's split, ``Engine.pipeline_split``)."""

    index: int
    count: int  # stages in the replica (the pipeline-parallel degree)
    first_layer: int
    layers: int

    @property
    def first(self) -> bool:
        return self.index == 0

    @property
    def last(self) -> bool:
        return self.index == self.count - 1


class EngineSizing(Protocol):
    """What the size stage asks of a serving engine. A request carries its engine (the callers
    look it up in :mod:`llmdeploy.engines.registry`), so sizing never looks one up itself;
    :class:`llmdeploy.engines.base.Engine` extends this interface."""

    name: str  # the spec's engine.type
    # Spec `quantization` values the engine makes from a 16-bit checkpoint itself.
    runtime_quantizations: frozenset[str]

    def memory_budget(
        self,
        req: SizingRequest,
        arch: Architecture,
        quant: CheckpointQuant | None,
        total_gib: float,
        max_model_len: int,
    ) -> MemoryBudget:
        """Per-GPU budget: weights, activation peak, non-torch memory, graphs, KV cache left."""
        ...

    def pipeline_split(
        self, version: str | None, num_layers: int, pp: int
    ) -> tuple[int, ...] | None:
        """Decoder layers of each pipeline stage, first stage first, for ``version`` (None: the
        default one); None when llmdeploy serves this engine without pipeline parallelism."""
        ...


@dataclass(frozen=True)
class SizingRequest:
    architecture: Architecture
    engine: EngineSizing  # the engine whose memory model sizes it (Sizing.engine: its name)
    gpu: ec2.Gpu | None = None
    gpu_total_gib: float | None = None  # explicit usable total (overrides the GPU table)
    gpus_per_instance: int | None = None
    nvlink: bool = False
    instance: ec2.Instance | None = None
    tp: int = 1
    pp: int = 1  # pipeline-parallel stages of one replica
    nodes: int = 1  # nodes of one replica (> 1: one pod and one pipeline stage per node)
    stage: PipelineStage | None = None  # the one stage this request sizes (None: all of them)
    quantization: str = "none"
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"  # --dtype: auto | bfloat16 | float16 | float32
    max_model_len: int | None = None  # None: the model's max_position_embeddings
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    gpu_memory_utilization: float | None = None  # None: the engine version's default
    engine_version: str | None = None  # the version the engine's memory model is keyed on
    engine_variant: str | None = None  # an engine's choice of memory model (TRT-LLM backend)
    # what this spec's engine quantizes by itself; None: the engine's runtime_quantizations
    runtime_quantizations: frozenset[str] | None = None
    enforce_eager: bool = False
    prefix_caching: bool = True  # decides the state-space cache mode of hybrid models
    data_parallel: int = 1  # data-parallel ranks inside the pod (each TP GPUs)
    expert_parallel: bool = False  # whole experts per rank (--enable-expert-parallel)
    # multimodal: items per prompt by modality (None: the engine's default), profiling, encoder TP
    mm_limits: tuple[tuple[str, int], ...] | None = None
    mm_skip_profiling: bool = False
    mm_encoder_tp_mode: str = "weights"
    kv_cache_free_gpu_mem_fraction: float = 0.9
    slo_concurrent_requests: int = 16
    slo_input_tokens: int = 512
    slo_output_tokens: int = 256
    # how the SLO's load arrives (perf.workloads): closed-loop | steady | poisson, and the
    # peak request rate of an open loop (None: a load of slo_concurrent_requests clients)
    slo_arrival: str = "steady"
    slo_requests_per_s: float | None = None

    @property
    def gpus_per_pod(self) -> int:
        """GPUs one pod requests: TP x DP x PP inside one node; across nodes one pod (one
        stage, TP GPUs) per node."""
        return self.tp * max(1, self.data_parallel) * (self.pp if self.nodes == 1 else 1)

    @property
    def first_stage(self) -> bool:
        """Whether the GPU sized holds the first stage (the input embedding)."""
        return self.stage is None or self.stage.first

    @property
    def last_stage(self) -> bool:
        """Whether the GPU sized holds the last stage (final norm, ``lm_head``, sampler)."""
        return self.stage is None or self.stage.last


def on_instance(base: SizingRequest, inst: ec2.Instance) -> SizingRequest:
    """``base`` sized on ``inst``: its GPU, GPU count and interconnect."""
    return dataclasses.replace(
        base,
        instance=inst,
        gpu=inst.gpu,
        gpus_per_instance=inst.gpu_count,
        nvlink=inst.nvlink,
        gpu_total_gib=None,
    )


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
    price_usd_hr: float | None  # of one replica: the instance's price x its nodes
    nodes: int = 1


@dataclass(frozen=True)
class StageSizing:
    """One pipeline stage's own figures, per GPU; the replica's KV cache is the smallest
    stage's (vLLM gives every worker the fewest blocks any worker has)."""

    index: int
    first_layer: int
    layers: int
    holds: tuple[str, ...]  # the extra modules on this stage: embedding, lm_head
    weights_gib: float
    activation_gib: float
    kv_cache_gib: float
    kv_bytes_per_token_per_gpu: int
    num_gpu_blocks: int
    fits: bool


@dataclass(frozen=True)
class Sizing:
    fits: bool
    instance: ec2.Instance | None
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
    # GiB of the checkpoint's weight files as stored: what a download writes to the model cache
    # and what the server reads back. For runtime FP8 this is the 16-bit checkpoint.
    checkpoint_gib: float = 0.0
    notices: tuple[Notice, ...] = ()  # what the sizing assumed about the spec's checkpoint
    data_parallel: int = 1
    expert_parallel: bool = False
    state_bytes_per_sequence: int = 0  # state-space layers' constant state, per GPU
    kv_layout: KvLayout | None = None
    pp: int = 1
    nodes: int = 1
    # every stage of a pipeline-parallel replica; the figures above are those of ``binding_stage``
    stages: tuple[StageSizing, ...] = ()
    binding_stage: int = 0


@dataclass(frozen=True)
class MemoryBudget:
    """What an engine's memory model contributes to a sizing (GiB per GPU unless noted).

    ``reasons`` say why it cannot start, ``assumptions`` what the numbers rest on; both are
    reported in this order after the engine-independent ones.
    """

    version: str
    gmu: float | None
    max_gmu: float | None
    budget: float
    weights: float
    act: float
    non_torch: float
    graphs: float
    graphs_in_budget: bool  # CUDA-graph memory is subtracted inside the budget
    kv: float
    batched: int
    seqs: int
    breakdown: tuple[tuple[str, float], ...]
    layout_arch: Architecture
    block: int
    kv_policy: KvPolicy | None = None  # None: every layer full attention, ``block`` tokens
    reasons: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
