"""The vLLM server's arguments for a spec: shared by the plan and the engine's pre-sizing check,
which verifies that the pinned version accepts every one of them."""

from __future__ import annotations

from llmdeploy.engines.vllm import flags
from llmdeploy.engines.vllm.distributed import Distributed, distributed_options
from llmdeploy.engines.vllm.facts import vllm_facts
from llmdeploy.engines.vllm.spec import VllmEngine
from llmdeploy.spec.sections import Spec

HTTP_PORT = 8000
MODEL_DIR = "/models"


def model_source(spec: Spec) -> str:
    """What the server loads. huggingface: the Hub id (downloaded at start); s3: synced into
    /models/model by the init container; pvc: the volume's root holds the model files."""
    return {
        "huggingface": spec.model.id,
        "s3": f"{MODEL_DIR}/model",
        "pvc": MODEL_DIR,
    }[spec.model.loading.mode]


def server_args(
    spec: Spec, quantization: str | None, dist: Distributed | None = None
) -> tuple[str, ...]:
    """The server's arguments for the pinned version (UnsupportedFlagError when that version's
    parser does not accept one of them); ``quantization`` is the ``--quantization`` value,
    ``dist`` this pod's part in a pipeline-parallel or multi-node replica."""
    engine = spec.engine
    assert isinstance(engine, VllmEngine)
    model = model_source(spec)
    opts = vllm_options(spec, model, quantization)
    opts.update(distributed_options(dist or Distributed()))
    # the user's own options last (engines/vllm/extra.py checked each against the release)
    return flags.build_args(engine.version, model, opts) + tuple(engine.extra_args)


def vllm_options(spec: Spec, model_arg: str, quantization: str | None) -> dict[str, object]:
    engine = spec.engine
    assert isinstance(engine, VllmEngine)
    s = spec.serving
    gmu = s.gpu_memory_utilization
    if gmu is None:
        # The version's own default, the same figure the sizing check used.
        gmu = vllm_facts(engine.version).default_gmu
    mm = s.multimodal
    dp = spec.hardware.data_parallel
    opts: dict[str, object] = {
        "host": "0.0.0.0",
        "port": HTTP_PORT,
        "served_model_name": spec.model.served_name or spec.model.id,
        "tensor_parallel_size": spec.hardware.tensor_parallel,
        # every data-parallel rank in this pod: vLLM starts one engine core per rank and
        # balances requests across them behind the one API server
        "data_parallel_size": dp if dp > 1 else None,
        "enable_expert_parallel": True if s.expert_parallel else None,
        "gpu_memory_utilization": gmu,
        "max_model_len": s.max_model_len,
        "max_num_batched_tokens": s.max_num_batched_tokens,
        "max_num_seqs": s.max_num_seqs,
        "enable_chunked_prefill": True if s.chunked_prefill else None,
        "enable_prefix_caching": s.prefix_caching,
        "kv_cache_dtype": "fp8" if spec.kv_cache_dtype == "fp8" else None,
        "quantization": quantization,
        "enforce_eager": True if engine.enforce_eager else None,
        "limit_mm_per_prompt": dict(mm.limit_per_prompt)
        if mm is not None and mm.limit_per_prompt is not None
        else None,
        "skip_mm_profiling": True if mm is not None and mm.skip_profiling else None,
        "mm_encoder_tp_mode": "data"
        if mm is not None and mm.encoder_tensor_parallel == "data"
        else None,
        "revision": spec.model.revision if spec.model.loading.mode == "huggingface" else None,
        "download_dir": f"{MODEL_DIR}/hub" if spec.model.loading.mode == "huggingface" else None,
    }
    return opts
