"""Triton + TensorRT-LLM: every decision for the engine build and the Triton server.

``plan_trtllm`` turns a spec into a frozen :class:`TrtllmPlan`; the helpers at the bottom name the
templates (this engine's ``templates/``) the render stage fills from it. Facts and their sources:
``shared/reference/trtllm.md`` and :mod:`llmdeploy.engines.trtllm.flags` (flag table by version).

Layout (one pod, ``world_size`` GPUs):

- init ``fetch-artifacts`` (AWS CLI image, IRSA credentials): S3 → ``/models/{engine,tokenizer}``;
- init ``assemble-model-repo`` (the serving image itself, so the Python models match the backend):
  copies ``preprocessing``/``postprocessing`` ``1/`` from the image's ``all_models`` and the
  rendered ``config.pbtxt`` files from the ConfigMap into ``/models/triton-repo``;
- ``tritonserver``: one rank per GPU under ``mpirun`` (leader mode), as
  ``triton_backend/scripts/launch_triton_server.py`` builds it, but as the container's own
  command so PID 1 stays alive (the launcher ends with a non-waiting ``subprocess.Popen``).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmdeploy.catalog.ec2 import Instance
from llmdeploy.engines.trtllm import checks
from llmdeploy.engines.trtllm.build import (
    BUILD_ROOT,
    EXAMPLES_CANDIDATES,
    TOKENIZER_FILES,
    TRTLLM_GIT,
    BuildStep,
    build_step,
    capability,
    checkpoint_step,
    converter_for,
)
from llmdeploy.engines.trtllm.checks import trtllm_for_triton
from llmdeploy.engines.trtllm.serving import (
    ALL_MODELS_CANDIDATES,
    ASSEMBLE_SCRIPT,
    AWS_CLI_IMAGE,
    BUILD_INFO,
    CONFIG_DIR,
    CONFIG_VOLUME,
    ENGINE_DIR,
    FETCH_SCRIPT,
    GRPC_PORT,
    HTTP_PORT,
    IMAGE,
    METRICS_PORT,
    MODEL_ROOT,
    MODEL_VOLUME,
    POSTPROCESSING_PARAMETERS,
    PREPROCESSING_PARAMETERS,
    PYTHON_MODELS,
    REPO_DIR,
    REPO_MODELS,
    TMP_VOLUME,
    TOKENIZER_DIR,
    server_args,
    tensorrt_llm_parameters,
    waiting_query,
)
from llmdeploy.engines.trtllm.spec import TrtllmEngine
from llmdeploy.errors import Diagnostic, SpecError
from llmdeploy.plan.prometheus import signal_window_seconds
from llmdeploy.plan.types import KV, ConfigEntry, EnvVar, Mount, Port, TemplateText
from llmdeploy.spec.sections import Spec


@dataclass(frozen=True)
class InitContainerSpec:
    """What the Deployment needs for one init container (resources are the caller's choice)."""

    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[EnvVar, ...]
    mounts: tuple[Mount, ...]
    # runs under `timeout`, sized for the engine cache's download (a hung copy is retried)
    downloads: bool = False


@dataclass(frozen=True)
class TrtllmPlan:
    name: str
    namespace: str
    header_command: str
    triton_version: str
    trtllm_version: str
    trtllm_git_tag: str
    trtllm_git_url: str
    image: str  # build image == serving image: the same TensorRT-LLM
    instance_type: str
    gpu_model: str
    compute_capability: str
    model_id: str
    model_revision: str | None
    model_s3_uri: str | None  # HF checkpoint source when modelLoading.mode is s3
    converter: str  # llama | qwen
    quantization: str
    kv_cache_dtype: str
    checkpoint_dtype: str
    recipe: str
    tp: int
    pp: int
    world_size: int
    max_batch_size: int
    max_input_len: int
    max_seq_len: int
    max_num_tokens: int
    kv_cache_reuse: bool
    chunked_context: bool
    paged_context_fmha: bool
    kv_cache_free_gpu_mem_fraction: float
    decoupled: bool
    batch_scheduler_policy: str
    instance_count: int  # pre/postprocessing Python model instances
    tensorrt_llm_parameters: tuple[KV, ...]
    preprocessing_parameters: tuple[KV, ...]
    postprocessing_parameters: tuple[KV, ...]
    artifacts_s3_uri: str
    engine_s3_uri: str
    tokenizer_s3_uri: str
    build_info_s3_uri: str
    build_root: str
    hf_dir: str
    checkpoint_dir: str
    engine_out_dir: str
    tokenizer_out_dir: str
    examples_candidates: tuple[str, ...]
    example_dirs: tuple[str, ...]  # sparse checkout of the matching git tag, if not in the image
    all_models_candidates: tuple[str, ...]
    tokenizer_files: tuple[str, ...]
    build_steps: tuple[BuildStep, ...]
    build_info: tuple[KV, ...]  # written next to the engine, checked by the init container
    server_command: tuple[str, ...]
    server_args: tuple[str, ...]
    server_mounts: tuple[Mount, ...]
    ports: tuple[Port, ...]
    readiness_path: str
    liveness_path: str
    keda_query: str
    keda_threshold: str
    keda_rationale: str
    init_containers: tuple[InitContainerSpec, ...]


def plan_trtllm(
    spec: Spec, instance: Instance, name: str, *, header_command: str = "llmdeploy render"
) -> TrtllmPlan:
    engine = spec.engine
    if not isinstance(engine, TrtllmEngine):
        raise SpecError([Diagnostic("plan_trtllm needs engine.type trtllm")])
    trtllm = trtllm_for_triton(engine.triton_version)
    problems = [d for d in checks.problems(spec, (instance,)) if d.severity == "error"]
    if problems:
        raise SpecError(problems)
    gpu = instance.gpu
    cc = capability(gpu.compute_capability)
    converter = converter_for(spec.model.architecture)
    assert converter is not None
    tp = spec.hardware.tensor_parallel
    seq_len = spec.serving.max_model_len
    input_len = engine.max_input_len or seq_len
    num_tokens = spec.serving.max_num_batched_tokens or checks.DEFAULT_MAX_NUM_TOKENS
    chunked = spec.serving.chunked_prefill

    quant, reuse = spec.quantization, spec.serving.prefix_caching
    paged_context_fmha = reuse or chunked  # KV reuse and chunked context both need it
    if quant in ("int4-awq", "int4-gptq"):
        dtype = "float16"  # NVIDIA's AWQ/GPTQ recipes (trtllm.md §2.2)
    else:
        dtype = "bfloat16" if cc >= (8, 0) else "float16"  # Turing has no BF16
    root = f"{BUILD_ROOT}/{name}"
    hf_dir, ckpt_dir = f"{root}/hf", f"{root}/checkpoint"
    engine_out, tok_out = f"{root}/engine", f"{root}/tokenizer"
    ckpt_step, recipe = checkpoint_step(spec, converter, dtype, tp, trtllm, hf_dir, ckpt_dir)
    engine_step = build_step(
        tp,
        trtllm,
        dtype,
        quant,
        ckpt_dir,
        engine_out,
        (engine.max_batch_size, input_len, seq_len, num_tokens),
        paged_context_fmha,
    )
    assert engine.artifacts_s3_uri is not None  # the spec requires it on the engine path
    s3 = engine.artifacts_s3_uri.rstrip("/")
    image = IMAGE.format(v=engine.triton_version)
    loading = spec.model.loading
    build_info = (
        KV("model", spec.model.id),
        KV("revision", spec.model.revision or ""),
        KV("image", image),
        KV("tensorrt_llm", trtllm),
        KV("world_size", str(tp)),
        KV("compute_capability", gpu.compute_capability.rstrip("?")),
        KV("quantization", quant),
        KV("kv_cache_dtype", spec.kv_cache_dtype),
        KV("max_batch_size", str(engine.max_batch_size)),
        KV("max_input_len", str(input_len)),
        KV("max_seq_len", str(seq_len)),
        KV("max_num_tokens", str(num_tokens)),
        KV("paged_context_fmha", str(paged_context_fmha).lower()),
    )
    query, rationale = waiting_query(trtllm, spec.namespace, name, signal_window_seconds(spec))
    models_rw, config_ro = Mount(MODEL_VOLUME, MODEL_ROOT), Mount(CONFIG_VOLUME, CONFIG_DIR, True)
    init = (
        InitContainerSpec(
            "fetch-artifacts",
            AWS_CLI_IMAGE,
            ("bash",),
            (f"{CONFIG_DIR}/{FETCH_SCRIPT}",),
            (EnvVar("HOME", "/tmp"),),
            (models_rw, config_ro, Mount(TMP_VOLUME, "/tmp")),
            downloads=True,
        ),
        InitContainerSpec(
            "assemble-model-repo",
            image,
            ("bash",),
            (f"{CONFIG_DIR}/{ASSEMBLE_SCRIPT}",),
            (),
            (models_rw, config_ro),
        ),
    )
    return TrtllmPlan(
        name=name,
        namespace=spec.namespace,
        header_command=header_command,
        triton_version=engine.triton_version,
        trtllm_version=trtllm,
        trtllm_git_tag=f"v{trtllm}",
        trtllm_git_url=TRTLLM_GIT,
        image=image,
        instance_type=instance.name,
        gpu_model=gpu.model,
        compute_capability=gpu.compute_capability.rstrip("?"),
        model_id=spec.model.id,
        model_revision=spec.model.revision,
        model_s3_uri=loading.s3_uri if loading.mode == "s3" else None,
        converter=converter,
        quantization=quant,
        kv_cache_dtype=spec.kv_cache_dtype,
        checkpoint_dtype=dtype,
        recipe=recipe,
        tp=tp,
        pp=1,
        world_size=tp,
        max_batch_size=engine.max_batch_size,
        max_input_len=input_len,
        max_seq_len=seq_len,
        max_num_tokens=num_tokens,
        kv_cache_reuse=reuse,
        chunked_context=chunked,
        paged_context_fmha=paged_context_fmha,
        kv_cache_free_gpu_mem_fraction=engine.kv_cache_free_gpu_mem_fraction,
        decoupled=engine.decoupled,
        batch_scheduler_policy=engine.batch_scheduler_policy,
        instance_count=max(1, min(8, engine.max_batch_size // 16)),
        tensorrt_llm_parameters=tensorrt_llm_parameters(engine, reuse, chunked),
        preprocessing_parameters=PREPROCESSING_PARAMETERS,
        postprocessing_parameters=POSTPROCESSING_PARAMETERS,
        artifacts_s3_uri=s3,
        engine_s3_uri=f"{s3}/engine/",
        tokenizer_s3_uri=f"{s3}/tokenizer/",
        build_info_s3_uri=f"{s3}/build-info.json",
        build_root=root,
        hf_dir=hf_dir,
        checkpoint_dir=ckpt_dir,
        engine_out_dir=engine_out,
        tokenizer_out_dir=tok_out,
        examples_candidates=EXAMPLES_CANDIDATES,
        example_dirs=tuple(
            f"examples/{s.script.rpartition('/')[0]}" for s in (ckpt_step, engine_step) if s.script
        ),
        all_models_candidates=ALL_MODELS_CANDIDATES,
        tokenizer_files=TOKENIZER_FILES,
        build_steps=(ckpt_step, engine_step),
        build_info=build_info,
        server_command=("mpirun",),
        server_args=server_args(tp),
        server_mounts=(Mount(MODEL_VOLUME, MODEL_ROOT, read_only=True),),
        ports=(Port("http", HTTP_PORT), Port("grpc", GRPC_PORT), Port("metrics", METRICS_PORT)),
        readiness_path="/v2/health/ready",
        liveness_path="/v2/health/live",
        keda_query=query,
        keda_threshold=str(spec.autoscaling.queue_threshold),
        keda_rationale=rationale,
        init_containers=init,
    )


# --- files rendered from the plan (by the render stage, from templates/) --------------------


def _build_info(p: TrtllmPlan) -> dict[str, str]:
    return {kv.key: kv.value for kv in p.build_info}


def build_script(p: TrtllmPlan) -> TemplateText:
    return TemplateText("trtllm/build-engine.sh.j2", (("p", p), ("build_info", _build_info(p))))


def fetch_script(p: TrtllmPlan) -> TemplateText:
    return TemplateText(
        "trtllm/fetch-artifacts.sh.j2",
        (
            ("p", p),
            ("engine_dir", ENGINE_DIR),
            ("tokenizer_dir", TOKENIZER_DIR),
            ("build_info_path", BUILD_INFO),
        ),
    )


def init_script(p: TrtllmPlan) -> TemplateText:
    """The assemble-model-repo init container's script (runs in the serving image)."""
    return TemplateText(
        "trtllm/assemble-model-repo.sh.j2",
        (
            ("p", p),
            ("build_info", _build_info(p)),
            ("models", REPO_MODELS),
            ("python_models", PYTHON_MODELS),
            ("engine_dir", ENGINE_DIR),
            ("tokenizer_dir", TOKENIZER_DIR),
            ("repo_dir", REPO_DIR),
            ("config_dir", CONFIG_DIR),
            ("build_info_path", BUILD_INFO),
        ),
    )


def model_repository(p: TrtllmPlan) -> dict[str, TemplateText]:
    """Relative path in the Triton model repository → its config.pbtxt."""
    return {
        f"{m}/config.pbtxt": TemplateText(f"trtllm/{m}.config.pbtxt.j2", (("p", p),))
        for m in REPO_MODELS
    }


def configmap_data(p: TrtllmPlan) -> tuple[ConfigEntry, ...]:
    """ConfigMap keys (mounted at CONFIG_DIR) for the two init containers."""
    files = [
        ConfigEntry(FETCH_SCRIPT, fetch_script(p)),
        ConfigEntry(ASSEMBLE_SCRIPT, init_script(p)),
    ]
    files += [ConfigEntry(path.replace("/", "."), t) for path, t in model_repository(p).items()]
    return tuple(files)
