"""Triton server side of the TensorRT-LLM deployment: paths, ports, launcher arguments, the
tensorrt_llm / pre- / postprocessing model parameters, and the KEDA queue metric.

Sources: NVIDIA/TensorRT-LLM ``triton_backend/`` (1.2-era): ``scripts/launch_triton_server.py``
@ 0a2e2c1f, ``all_models/inflight_batcher_llm/*/config.pbtxt`` @ 2a9abd95 / 08dc37e3 / 89fd9b74,
``inflight_batcher_llm/src/model_instance_state.cc`` (parameter defaults) and
``src/custom_metrics_reporter/custom_metrics_reporter.cc`` (metric labels).
"""

from __future__ import annotations

from llmdeploy.engines.trtllm.releases import version_key
from llmdeploy.engines.trtllm.spec import TrtllmEngine
from llmdeploy.plan.types import KV

IMAGE = "nvcr.io/nvidia/tritonserver:{v}-trtllm-python-py3"
# the fetch init container; the same pin as engines.vllm.plan
AWS_CLI_IMAGE = "amazon/aws-cli:2.22.0"
TRITONSERVER = "/opt/tritonserver/bin/tritonserver"
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
TRTLLM_MODEL = "tensorrt_llm"

MODEL_ROOT = "/models"
ENGINE_DIR = f"{MODEL_ROOT}/engine"
TOKENIZER_DIR = f"{MODEL_ROOT}/tokenizer"
REPO_DIR = f"{MODEL_ROOT}/triton-repo"
BUILD_INFO = f"{MODEL_ROOT}/build-info.json"
CONFIG_DIR = "/etc/llmdeploy"
MODEL_VOLUME, CONFIG_VOLUME, TMP_VOLUME = "models", "trtllm-config", "tmp"
FETCH_SCRIPT, ASSEMBLE_SCRIPT = "fetch-artifacts.sh", "assemble-model-repo.sh"
REPO_MODELS = ("ensemble", "preprocessing", TRTLLM_MODEL, "postprocessing")
PYTHON_MODELS = ("preprocessing", "postprocessing")
# The backend's model templates in the serving image: tensorrtllm_backend
# dockerfile/Dockerfile.triton.trt_llm_backend (WORKDIR /app; COPY .../all_models all_models);
# NVIDIA/TensorRT-LLM docker/Dockerfile.multi, tritonrelease stage (/app/tensorrt_llm/...).
ALL_MODELS_CANDIDATES = (
    "/app/all_models/inflight_batcher_llm",
    "/app/tensorrt_llm/triton_backend/all_models/inflight_batcher_llm",
)


def waiting_query(trtllm: str, namespace: str, name: str, window: int) -> tuple[str, str]:
    """PromQL for queued requests per deployment, each pod's gauge averaged over the last
    ``window`` seconds (one scrape's burst does not scale out), and why this metric
    (trtllm.md §5)."""
    sel = f'namespace="{namespace}",pod=~"{name}-[a-z0-9]+-[a-z0-9]+",model="{TRTLLM_MODEL}"'
    if version_key(trtllm) >= version_key("0.18.2"):
        return (
            f'sum(avg_over_time(nv_trt_llm_request_metrics{{{sel},request_type="waiting"}}'
            f"[{window}s]))",
            "nv_trt_llm_request_metrics request_type=waiting exists from Triton 25.04 / "
            "TensorRT-LLM 0.18.2 (custom_metrics_reporter.cc request_labels_).",
        )
    return (
        f"sum(clamp_min(avg_over_time(nv_trt_llm_request_metrics{{{sel},"
        f'request_type="active"}}[{window}s]) - ignoring(request_type) '
        f"avg_over_time(nv_trt_llm_request_metrics{{{sel},"
        f'request_type="scheduled"}}[{window}s]), 0))',
        "no waiting gauge before 0.18.2: active minus scheduled requests approximates the "
        "queue (inference); nv_inference_pending_request_count stays low because the "
        "batcher queues internally.",
    )


def _flag(on: bool) -> str:
    return "true" if on else "false"


def tensorrt_llm_parameters(engine: TrtllmEngine, reuse: bool, chunked: bool) -> tuple[KV, ...]:
    """The tensorrt_llm model's parameters, in upstream order (config.pbtxt @2a9abd95).

    "" leaves the backend default (unset/optional in model_instance_state.cc); explicit values
    repeat the defaults that code documents, except the ones this deployment decides.
    """
    return (
        KV("max_beam_width", "1"),
        KV("FORCE_CPU_ONLY_INPUT_TENSORS", "no"),
        KV("gpt_model_type", "inflight_fused_batching"),
        KV("gpt_model_path", ENGINE_DIR),
        KV("encoder_model_path", ""),
        KV("max_tokens_in_paged_kv_cache", ""),
        KV("max_attention_window_size", ""),
        KV("sink_token_length", ""),
        KV("batch_scheduler_policy", engine.batch_scheduler_policy),
        KV("kv_cache_free_gpu_mem_fraction", str(engine.kv_cache_free_gpu_mem_fraction)),
        KV("cross_kv_cache_fraction", ""),
        KV("kv_cache_host_memory_bytes", ""),
        KV("kv_cache_onboard_blocks", "true"),
        KV("exclude_input_in_output", "true"),
        KV("cancellation_check_period_ms", "100"),
        KV("stats_check_period_ms", "100"),
        KV("iter_stats_max_iterations", ""),
        KV("request_stats_max_iterations", ""),
        KV("enable_kv_cache_reuse", _flag(reuse)),  # the backend's default is true
        KV("normalize_log_probs", "true"),
        KV("enable_chunked_context", _flag(chunked)),
        KV("gpu_device_ids", ""),  # leader mode: rank i uses local GPU i
        KV("participant_ids", ""),
        KV("num_nodes", "1"),
        KV("lora_cache_optimal_adapter_size", "8"),
        KV("lora_cache_max_adapter_size", "64"),
        KV("lora_cache_gpu_memory_fraction", ""),
        KV("lora_cache_host_memory_bytes", ""),
        KV("lora_prefetch_dir", ""),
        KV("decoding_mode", ""),  # top_k_top_p with beam width 1
        KV("executor_worker_path", "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker"),
        KV("lookahead_window_size", ""),
        KV("lookahead_ngram_size", ""),
        KV("lookahead_verification_set_size", ""),
        KV("medusa_choices", ""),
        KV("eagle_choices", ""),
        KV("gpu_weights_percent", "1.0"),
        KV("enable_context_fmha_fp32_acc", "false"),
        KV("multi_block_mode", "true"),
        KV("cuda_graph_mode", "false"),
        KV("cuda_graph_cache_size", "0"),
        KV("speculative_decoding_fast_logits", "false"),
        KV("tokenizer_dir", ""),  # only for guided decoding, which stays off
        KV("guided_decoding_backend", ""),
        KV("xgrammar_tokenizer_info_path", ""),
    )


# preprocessing/1/model.py: "" multimodal path = text only; max_num_images only for multimodal.
PREPROCESSING_PARAMETERS = (
    KV("tokenizer_dir", TOKENIZER_DIR),
    KV("add_special_tokens", "true"),
    KV("multimodal_model_path", ""),
    KV("gpt_model_path", ENGINE_DIR),
    KV("max_num_images", ""),
    KV("hf_model_path", ""),
)
POSTPROCESSING_PARAMETERS = (KV("tokenizer_dir", TOKENIZER_DIR), KV("skip_special_tokens", "true"))


def server_args(world_size: int) -> tuple[str, ...]:
    """mpirun arguments: one tritonserver per rank, as launch_triton_server.py get_cmd builds.

    Every rank gets the same ports and ``--disable-auto-complete-config``; ranks > 0 load only
    ``tensorrt_llm`` (explicit mode) and never return from model load (worker ranks block in
    the executor and exit when the leader shuts down: model_instance_state.cc), so they never
    bind the ports. Each rank needs its own Python-backend shared-memory prefix.
    """
    args: list[str] = ["--allow-run-as-root"]
    for rank in range(world_size):
        if rank:
            args.append(":")
        args += [
            "-n",
            "1",
            TRITONSERVER,
            f"--model-repository={REPO_DIR}",
            f"--grpc-port={GRPC_PORT}",
            f"--http-port={HTTP_PORT}",
            f"--metrics-port={METRICS_PORT}",
        ]
        if rank:
            args += ["--model-control-mode=explicit", f"--load-model={TRTLLM_MODEL}"]
        args += [
            "--disable-auto-complete-config",
            f"--backend-config=python,shm-region-prefix-name=prefix{rank}_",
        ]
    return tuple(args)
