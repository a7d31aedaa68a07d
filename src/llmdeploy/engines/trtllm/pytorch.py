"""Kubernetes plan for the PyTorch-backend path: one ``trtllm-serve`` container, from the
decisions in :mod:`llmdeploy.engines.trtllm.serve`."""

from __future__ import annotations

from llmdeploy.catalog.ec2 import Instance
from llmdeploy.engines.trtllm.serve import (
    CONFIG_DIR,
    HEALTH_PATH,
    HTTP_PORT,
    METRICS_PATH,
    OPTIONS_FILE,
    ServePlan,
    serve_plan,
)
from llmdeploy.engines.trtllm.spec import TrtllmEngine
from llmdeploy.plan.loading import MODEL_DIR, cache_gib, model_loading
from llmdeploy.plan.names import meta_for
from llmdeploy.plan.pod import (
    liveness_probe,
    pod_resources,
    readiness_probe,
    shm_size,
    startup_budget_seconds,
    startup_probe,
    workload_plan,
)
from llmdeploy.plan.types import (
    ConfigEntry,
    Container,
    EngineParts,
    EnvVar,
    Mount,
    Port,
    TemplateText,
    Volume,
)
from llmdeploy.sizing.types import Sizing
from llmdeploy.spec.sections import Spec

# The release image runs as root by default; the pod runs as an unprivileged user with HOME,
# caches and TMPDIR on writable emptyDirs, so the root filesystem stays read-only (as for vLLM;
# inference: not verified on a GPU node, docs/security.md).
RUN_AS_USER = 10001
HOME = "/home/trtllm"


# HOME (JIT and compile caches) and /tmp (OpenMPI's session directory, Prometheus' multiprocess
# files); container logs count against ephemeral-storage too.
HOME_GIB, TMP_GIB, LOGS_GIB = 20, 10, 2


def model_source(spec: Spec) -> str:
    """huggingface: the Hub id, downloaded by the server; s3: synced into /models/model by the
    init container; pvc: the volume's root holds the model files."""
    return {"huggingface": spec.model.id, "s3": f"{MODEL_DIR}/model", "pvc": MODEL_DIR}[
        spec.model.loading.mode
    ]


def engine_env(spec: Spec) -> dict[str, str]:
    engine = spec.engine
    assert isinstance(engine, TrtllmEngine)
    return engine.env


def plan_trtllm_serve(spec: Spec, instance: Instance, sizing: Sizing) -> EngineParts:
    tp = spec.hardware.tensor_parallel
    loading = spec.model.loading
    # Whether trtllm-serve's own Hub download skips Meta's `original/` copy of the weights (as
    # vLLM's does) was not established: in huggingface mode the cache holds both.
    download = sizing.checkpoint_gib * (2 if loading.mode == "huggingface" else 1)
    weights = model_loading(spec, cache_gib(download), RUN_AS_USER)
    s = serve_plan(spec, instance, sizing.request.architecture, model_source(spec))
    meta = meta_for(spec, "inference-server", s.trtllm_version)
    env = [
        EnvVar("HOME", HOME),
        EnvVar("USER", "trtllm"),  # getpass.getuser() without a passwd entry for the UID
        EnvVar("TMPDIR", "/tmp"),
        EnvVar("HF_HOME", f"{MODEL_DIR}/hf" if loading.mode == "huggingface" else f"{HOME}/hf"),
        EnvVar("XDG_CACHE_HOME", f"{HOME}/.cache"),
        # The LLM API's worker ranks talk over OpenMPI's shared-memory transport; its
        # single-copy (CMA) mode needs ptrace rights the dropped capabilities do not give.
        EnvVar("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
    ]
    mounts = [
        Mount("dshm", "/dev/shm"),
        Mount("home", HOME),
        Mount("tmp", "/tmp"),
        Mount("trtllm-config", CONFIG_DIR, read_only=True),
    ]
    volumes = [
        Volume("dshm", "memory", size_limit=shm_size(tp)),
        Volume("home", "emptyDir", size_limit=f"{HOME_GIB}Gi"),
        Volume("tmp", "emptyDir", size_limit=f"{TMP_GIB}Gi"),
        Volume("trtllm-config", "configMap", config_map=spec.name),
    ]
    env += weights.env
    # the user's own variables (engines/trtllm/extra.py refused names llmdeploy sets)
    env += [EnvVar(name, value) for name, value in sorted(engine_env(spec).items())]
    mounts += weights.mounts
    volumes += weights.volumes
    # The pod's ephemeral-storage covers every disk-backed emptyDir at its sizeLimit plus logs.
    ephemeral_gib = HOME_GIB + TMP_GIB + weights.disk_gib + LOGS_GIB
    # trtllm-serve reads (and in huggingface mode first downloads) the checkpoint as stored.
    budget = startup_budget_seconds(
        spec, sizing.checkpoint_gib, downloads_in_main=loading.mode == "huggingface"
    )
    server = Container(
        name="trtllm-serve",
        image=s.image,
        command=("trtllm-serve",),
        args=s.args,
        env=tuple(env),
        ports=(Port("http", HTTP_PORT),),
        mounts=tuple(mounts),
        resources=pod_resources(spec, instance, ephemeral_gib),
        startup_probe=startup_probe(HEALTH_PATH, "http", budget),
        readiness_probe=readiness_probe(HEALTH_PATH, "http"),
        liveness_probe=liveness_probe(HEALTH_PATH, "http"),
        read_only_root=True,
        run_as_user=RUN_AS_USER,
        pre_stop_sleep=10,
    )
    return EngineParts(
        engine="trtllm",
        version=s.trtllm_version,
        meta=meta,
        workload=workload_plan(
            spec, meta, weights.init_containers, (server,), tuple(volumes), RUN_AS_USER
        ),
        service_ports=(Port("http", HTTP_PORT),),
        monitor_port="http",  # one port for the API, /health and /prometheus/metrics
        monitor_path=METRICS_PATH,
        client_ports=(HTTP_PORT,),
        metrics_ports=(HTTP_PORT,),
        scaler_query=s.keda_query,
        pod_ephemeral_gib=ephemeral_gib,
        config_map_data=(ConfigEntry(OPTIONS_FILE, options_file(s)),),
    )


def options_file(s: ServePlan) -> TemplateText:
    """The --extra_llm_api_options YAML: top-level keys, then one mapping per section."""
    top = tuple((key, value) for section, key, value in s.options if not section)
    sections: dict[str, list[tuple[str, object]]] = {}
    for section, key, value in s.options:
        if section:
            sections.setdefault(section, []).append((key, value))
    return TemplateText(
        "trtllm/extra-llm-api-options.yaml.j2",
        (
            ("s", s),
            ("top", top),
            ("sections", tuple((name, tuple(items)) for name, items in sections.items())),
        ),
    )
