"""The PyTorch-backend path (``engine.backend: pytorch``): no engine build; trtllm-serve loads the
checkpoint (16-bit, or a ModelOpt FP8/NVFP4 export) and serves the OpenAI API.

Facts and sources (/work/notes/trtllm-llmapi.md, docs/trtllm.md):

- Command line: ``trtllm-serve MODEL --host 0.0.0.0 ...`` with no ``serve`` word (0.17/0.18 have
  no subcommands; from 0.19 a first argument that is not a subcommand runs ``serve``). Every flag
  and every key of the ``--extra_llm_api_options`` YAML is checked against
  :mod:`llmdeploy.engines.trtllm.flags` for the pinned version; the YAML is applied after the
  flags, so ``kv_cache_config`` is set only there (it replaces the flags' one).
- TP > 1 on one node: the LLM API starts its worker ranks itself (``MpiPoolSession``, mpi4py
  spawn) when the process was not started by ``mpirun``; no ``mpirun`` and no
  ``trtllm-llmapi-launch`` (that wrapper is for ranks started by ``mpirun``/``srun``, multi-node).
  NVIDIA runs the image with ``--ipc host``: here ``/dev/shm`` is a memory ``emptyDir``.
- Health: ``GET /health`` answers once the model is loaded (the server only serves after
  ``LLM(...)`` returns). Metrics: ``/metrics`` is JSON iteration statistics; Prometheus text is
  at ``/prometheus/metrics`` on the same port, mounted only when ``return_perf_metrics`` is true
  (``tensorrt_llm/serve/openai_server.py`` ``mount_metrics``).
- TensorRT-LLM 1.1/1.2 export five unprefixed Prometheus metrics (PR #5785;
  ``tensorrt_llm/metrics/collector.py`` @ 89fd9b74: ``request_success_total``,
  ``e2e_request_latency_seconds``, ``time_to_first_token_seconds``,
  ``time_per_output_token_seconds``, ``request_queue_time_seconds``); the queue gauge
  ``trtllm_num_requests_waiting`` and the ``trtllm_`` prefix arrive with PR #12545 (2026-03,
  for 1.3). So the KEDA query reads the queue-time histogram (Little's law, below).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.catalog.models import load_architecture
from llmdeploy.engines.trtllm.build import capability, converter_for
from llmdeploy.engines.trtllm.flags import require
from llmdeploy.engines.trtllm.releases import DEFAULT_TRTLLM_VERSION
from llmdeploy.engines.trtllm.spec import TrtllmEngine
from llmdeploy.errors import Diagnostic, LlmdeployError, SpecError
from llmdeploy.plan.prometheus import signal_window_seconds
from llmdeploy.spec.sections import Spec

IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:{v}"
HTTP_PORT = 8000
HEALTH_PATH = "/health"
METRICS_PATH = "/prometheus/metrics"
CONFIG_DIR = "/etc/llmdeploy"
OPTIONS_FILE = "extra-llm-api-options.yaml"
# The queue-time histogram of 1.1/1.2 (collector.py @ 89fd9b74; no trtllm_ prefix before #12545).
QUEUE_TIME_SUM = "request_queue_time_seconds_sum"

# (section or "" for top level, key, value): the --extra_llm_api_options YAML, in file order.
Option = tuple[str, str, object]


@dataclass(frozen=True)
class ServePlan:
    """Everything the trtllm-serve container and its YAML are rendered from."""

    trtllm_version: str
    image: str
    model_arg: str
    args: tuple[str, ...]  # after `trtllm-serve`
    options: tuple[Option, ...]
    keda_query: str
    keda_rationale: str


def _is_loadable(quant: CheckpointQuant) -> bool:
    """Checkpoint formats the 1.2-era PyTorch backend reads (model_config.py
    ``load_hf_quant_config``): ModelOpt exports (labels from catalog.hf_config) and block-scaled
    FP8 (DeepSeek-V3 style). compressed-tensors loading is a later addition; HF AutoAWQ/GPTQ
    checkpoints were not verified."""
    return quant.label.startswith("modelopt ") or quant.method == "fp8-block"


def problems(spec: Spec, hardware: Sequence[Instance]) -> list[Diagnostic]:
    """What only the PyTorch path cannot serve, known before sizing (the checks both paths
    share are in :mod:`llmdeploy.engines.trtllm.checks`)."""
    out: list[Diagnostic] = []
    try:  # the catalog name behind an alias such as nvidia/...-FP8
        name = load_architecture(spec.model.architecture).name
    except LlmdeployError:
        name = spec.model.architecture  # reported by the shared checks
    if converter_for(name) is None:
        out.append(
            Diagnostic(
                f"`model.architecture` {spec.model.architecture!r}: llmdeploy wires the "
                "TensorRT-LLM PyTorch path for the Llama, Mistral, Mixtral and Qwen families only",
                field="model.architecture",
                hint="use a catalog name such as llama-3.3-70b, or engine.type vllm",
            )
        )
    hw = spec.hardware
    where = "hardware.instanceType" if hw.instance_type else "hardware.instanceFamily"
    if hardware and all(capability(i.gpu.compute_capability) < (8, 0) for i in hardware):
        gpu = hardware[0].gpu
        out.append(
            Diagnostic(
                f"`{where}` {hw.instance_type or hw.instance_family}: {gpu.model} (compute "
                f"capability {gpu.compute_capability}); the PyTorch path is rendered for Ampere "
                "and newer only",
                field=where,
                hint="use an Ampere, Ada or Hopper instance, or engine.type vllm",
            )
        )
    if spec.model.revision is not None and spec.model.loading.mode == "huggingface":
        out.append(
            Diagnostic(
                "`model.revision`: trtllm-serve up to 1.2.x has no --revision, so the server "
                "would download the default branch",
                field="model.revision",
                hint="stage the pinned files in S3 or a volume (model.loading.mode s3 or pvc)",
            )
        )
    return out


def _checkpoint_problems(arch: Architecture) -> list[Diagnostic]:
    """The checkpoint as the sizing stage resolved it (``model.id``'s published repo or
    ``model.architecture``): a format the 1.2-era PyTorch backend reads."""
    quant = arch.quantization
    if quant is None or _is_loadable(quant):
        return []
    return [
        Diagnostic(
            f"`model.id`: a {quant.label} checkpoint is not a format llmdeploy verified for the "
            "TensorRT-LLM 1.2 PyTorch backend (ModelOpt FP8/NVFP4 exports, block FP8)",
            field="model.id",
            hint="use a ModelOpt export (e.g. nvidia/<model>-FP8), backend engine, or vllm",
        )
    ]


def _num_tokens(spec: Spec) -> int:
    return spec.serving.max_num_batched_tokens or 8192


def serve_plan(spec: Spec, instance: Instance, arch: Architecture, model_arg: str) -> ServePlan:
    """The trtllm-serve command line, its YAML and the KEDA query; SpecError on any problem."""
    engine = spec.engine
    assert isinstance(engine, TrtllmEngine)
    version = engine.version or DEFAULT_TRTLLM_VERSION  # its range is checked by the spec
    found = _checkpoint_problems(arch)
    if found:
        raise SpecError(found)
    flags: list[tuple[str, str | None]] = [
        ("--host", "0.0.0.0"),
        ("--port", str(HTTP_PORT)),
        ("--backend", "pytorch"),
        ("--tp_size", str(spec.hardware.tensor_parallel)),
        ("--pp_size", "1"),
        ("--max_batch_size", str(engine.max_batch_size)),
        ("--max_num_tokens", str(_num_tokens(spec))),
        ("--max_seq_len", str(spec.serving.max_model_len)),
        ("--extra_llm_api_options", f"{CONFIG_DIR}/{OPTIONS_FILE}"),
    ]
    args: list[str] = [model_arg]
    for flag, value in flags:
        require("trtllm-serve", flag, value, version)
        args += [flag] if value is None else [flag, value]
    args += engine.extra_args  # the user's own (engines/trtllm/extra.py checked each flag)
    options: tuple[Option, ...] = (
        ("kv_cache_config", "free_gpu_memory_fraction", engine.kv_cache_free_gpu_mem_fraction),
        ("kv_cache_config", "enable_block_reuse", spec.serving.prefix_caching),
        ("kv_cache_config", "dtype", "fp8" if spec.kv_cache_dtype == "fp8" else "auto"),
        # CUDA graphs for every batch size up to max_batch_size, padded to the next captured one
        ("cuda_graph_config", "enable_padding", True),
        ("cuda_graph_config", "max_batch_size", engine.max_batch_size),
        ("", "enable_chunked_prefill", spec.serving.chunked_prefill),
        ("", "return_perf_metrics", True),  # mounts /prometheus/metrics
    )
    for section, key, setting in options:
        dotted = f"{section}.{key}" if section else key
        shown = str(setting).lower() if isinstance(setting, bool) else str(setting)
        require("llm-api", dotted, shown, version)
    query, rationale = queue_query(spec)
    return ServePlan(
        trtllm_version=version,
        image=IMAGE.format(v=version),
        model_arg=model_arg,
        args=tuple(args),
        options=options,
        keda_query=query,
        keda_rationale=rationale,
    )


def queue_query(spec: Spec) -> tuple[str, str]:
    """PromQL for the mean number of queued requests per deployment, and why.

    Little's law: requests waiting = arrival rate x mean wait, which is the rate at which queue
    time accrues, ``rate(request_queue_time_seconds_sum)``. TensorRT-LLM observes the wait when
    a request finishes, so the signal lags by one request's duration (inference). The window is
    at least four scrape intervals, so ``rate()`` always has samples.
    """
    window = signal_window_seconds(spec)
    sel = f'namespace="{spec.namespace}",pod=~"{spec.name}-[a-z0-9]+-[a-z0-9]+"'
    return (
        f"sum(rate({QUEUE_TIME_SUM}{{{sel}}}[{window}s]))",
        "TensorRT-LLM 1.2 has no queue gauge on /prometheus/metrics (trtllm_num_requests_waiting "
        "comes with PR #12545, 1.3); the accrual rate of request_queue_time_seconds is the mean "
        "number of waiting requests (Little's law).",
    )
