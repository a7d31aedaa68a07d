"""Kubernetes plan for Triton + TensorRT-LLM (backend engine), from the engine decisions in
:mod:`llmdeploy.engines.trtllm.decisions`, and its build Job (``engines/trtllm/job.py``)."""

from __future__ import annotations

import math

from llmdeploy.catalog.amis import AL2023_NVIDIA_DRIVER_BRANCH, AL2023_NVIDIA_DRIVER_CUDA
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.engines.trtllm import decisions as trtllm
from llmdeploy.engines.trtllm.job import BUILD_SCRIPT, plan_build_job
from llmdeploy.engines.trtllm.releases import TRITON_CUDA
from llmdeploy.engines.trtllm.serving import CONFIG_VOLUME, MODEL_VOLUME, TMP_VOLUME
from llmdeploy.engines.trtllm.spec import TrtllmEngine
from llmdeploy.errors import Notice
from llmdeploy.plan.names import meta_for
from llmdeploy.plan.pod import (
    checkpoint_gib,
    fetch_deadline_seconds,
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
    ExtraFile,
    Mount,
    Resources,
    Volume,
)
from llmdeploy.sizing.types import Sizing
from llmdeploy.spec.sections import Spec

# NGC Triton images carry an unprivileged `triton-server` user (uid 1000).
RUN_AS_USER = 1000


def _engine_cache_gib(weights_gib_total: float) -> int:
    # Engine + tokenizer + model repository, with 20% and 10 GiB of headroom.
    return math.ceil(weights_gib_total * 1.2 + 10)


def plan_triton(spec: Spec, instance: Instance, sizing: Sizing, header_command: str) -> EngineParts:
    engine = spec.engine
    assert isinstance(engine, TrtllmEngine)
    tp = spec.hardware.tensor_parallel
    weights_gib_total = checkpoint_gib(spec, sizing)
    t = trtllm.plan_trtllm(spec, instance, spec.name, header_command=header_command)
    meta = meta_for(spec, "inference-server", engine.triton_version)
    cache_gib = _engine_cache_gib(weights_gib_total)
    ephemeral_gib = 30 + cache_gib

    # The artifacts' copy runs under `timeout` (coreutils, in the AWS CLI image), sized like the
    # vLLM S3 sync for the engine cache: a hung copy is killed and retried by the kubelet.
    deadline = fetch_deadline_seconds(spec, cache_gib)
    init = tuple(
        Container(
            name=c.name,
            image=c.image,
            command=("timeout", str(deadline), *c.command) if c.downloads else c.command,
            args=c.args,
            env=c.env,
            ports=(),
            mounts=c.mounts,
            resources=Resources(cpu="2", memory="8Gi", ephemeral_storage=None, gpus=0),
            read_only_root=True,
            run_as_user=RUN_AS_USER,
            deadline_seconds=deadline if c.downloads else None,
        )
        for c in t.init_containers
    )
    # The engine is already on local disk when the server starts: only loading counts.
    budget = startup_budget_seconds(spec, weights_gib_total, downloads_in_main=False)
    server = Container(
        name="triton",
        image=t.image,
        command=t.server_command,
        args=t.server_args,
        env=(
            EnvVar("HOME", "/tmp"),
            EnvVar("USER", "triton-server"),
            EnvVar("TMPDIR", "/tmp"),
            # OpenMPI inside a container: shared memory, no ssh launcher, no TTY warnings.
            EnvVar("OMPI_MCA_plm", "isolated"),
            EnvVar("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
            EnvVar("OMPI_MCA_rmaps_base_oversubscribe", "yes"),
        ),
        ports=t.ports,
        mounts=(
            *t.server_mounts,
            Mount("dshm", "/dev/shm"),
            Mount(TMP_VOLUME, "/tmp"),
        ),
        resources=pod_resources(spec, instance, ephemeral_gib),
        startup_probe=startup_probe(t.readiness_path, "http", budget),
        readiness_probe=readiness_probe(t.readiness_path, "http"),
        liveness_probe=liveness_probe(t.liveness_path, "http"),
        # OpenMPI and the Python backend stubs write outside /tmp (docs/security.md).
        read_only_root=False,
        run_as_user=RUN_AS_USER,
        pre_stop_sleep=10,
    )
    volumes = (
        Volume("dshm", "memory", size_limit=shm_size(tp)),
        Volume(TMP_VOLUME, "emptyDir", size_limit="10Gi"),
        Volume(MODEL_VOLUME, "emptyDir", size_limit=f"{cache_gib}Gi"),
        Volume(CONFIG_VOLUME, "configMap", config_map=spec.name),
    )
    ports = {p.name: p.port for p in t.ports}
    script = trtllm.build_script(t)
    config: tuple[ConfigEntry, ...] = trtllm.configmap_data(t)
    job = None
    if engine.build_job.enabled:
        job = plan_build_job(spec, instance, sizing, t)
        config += (ConfigEntry(BUILD_SCRIPT, script),)
    return EngineParts(
        engine="trtllm",
        version=engine.triton_version,
        meta=meta,
        workload=workload_plan(spec, meta, init, (server,), volumes, RUN_AS_USER),
        service_ports=t.ports,
        monitor_port="metrics",
        client_ports=(ports["http"], ports["grpc"]),
        metrics_ports=(ports["metrics"],),
        scaler_query=t.keda_query,
        pod_ephemeral_gib=ephemeral_gib,
        config_map_data=config,
        extra_files=(ExtraFile(BUILD_SCRIPT, script, executable=True),),
        job=job,
        # fetch-artifacts copies the engine from artifactsS3Uri: IRSA or Pod Identity, as for
        # vLLM's S3 sync (plan.assemble.require_aws_identity)
        reads_s3=True,
        notices=driver_notices(spec, engine),
    )


def driver_notices(spec: Spec, engine: TrtllmEngine) -> tuple[Notice, ...]:
    """A Triton image built on a newer CUDA minor than the AL2023 NVIDIA AMI's driver runs
    under CUDA minor-version compatibility: every CUDA 13.x application on a driver >= 580,
    "with limited feature-set" (docs.nvidia.com/deploy/cuda-compatibility/
    minor-version-compatibility.html): said, not refused."""
    cuda = TRITON_CUDA.get(engine.triton_version)
    alias = spec.cluster.ami_alias
    if cuda is None or (alias is not None and not alias.startswith("al2023@")):
        return ()
    driver = AL2023_NVIDIA_DRIVER_CUDA
    if cuda[0] != driver[0] or cuda <= driver:
        return ()
    return (
        Notice(
            "engine.tritonVersion",
            f"Triton {engine.triton_version} is built on CUDA {cuda[0]}.{cuda[1]}; the AL2023 "
            f"NVIDIA AMI's driver {AL2023_NVIDIA_DRIVER_BRANCH} is CUDA {driver[0]}.{driver[1]}'s, "
            "so it runs under CUDA minor-version compatibility: features that need a newer "
            "driver are unavailable, and PTX newer than the driver cannot be JIT-compiled",
            severity="note",
        ),
    )
