"""Plan decisions for the vLLM OpenAI-compatible server: its container, volumes, model loading
and the autoscaling query."""

from __future__ import annotations

from llmdeploy.catalog.ec2 import Instance
from llmdeploy.engines.vllm import flags, group
from llmdeploy.engines.vllm.distributed import Distributed, multinode_backend
from llmdeploy.engines.vllm.options import HTTP_PORT, MODEL_DIR, server_args
from llmdeploy.engines.vllm.spec import VllmEngine
from llmdeploy.plan.group import efa_devices, group_env
from llmdeploy.plan.loading import cache_gib, model_loading
from llmdeploy.plan.names import meta_for
from llmdeploy.plan.pod import (
    NODE_START_SECONDS,
    gpus_per_pod,
    liveness_probe,
    pod_resources,
    read_gib,
    readiness_probe,
    shm_size,
    startup_budget_seconds,
    startup_probe,
    workload_plan,
)
from llmdeploy.plan.prometheus import signal_window_seconds
from llmdeploy.plan.types import ConfigEntry, Container, EngineParts, EnvVar, Mount, Port, Volume
from llmdeploy.sizing.types import Sizing
from llmdeploy.spec.sections import Spec

# vLLM images run as root by default; we run as an unprivileged user with HOME and caches on
# writable emptyDirs, so the root filesystem can stay read-only.
RUN_AS_USER = 10001


def _image(engine: VllmEngine) -> str:
    return engine.image or f"vllm/vllm-openai:v{engine.version}"


# HOME (compile and Hub caches when the weights are on a shared volume) and /tmp.
HOME_GIB = 20
TMP_GIB = 10
# Container logs and the (read-only) root's few writes also count against the pod's
# ephemeral-storage limit, on top of the disk-backed emptyDirs.
LOGS_GIB = 2


def quantization_flag(spec: Spec, sizing: Sizing) -> str | None:
    """``--quantization`` only for FP8 made at load from a 16-bit checkpoint. A pre-quantized
    checkpoint gets none: vLLM reads the method from its quantization_config, and a flag that
    differs is refused (ModelConfig._verify_quantization, vllm/config/model.py@v0.19.0). The
    sizing stage has already refused every other combination (sizing/checkpoint.py)."""
    prequantized = sizing.request.architecture.quantization is not None
    return "fp8" if spec.quantization == "fp8" and not prequantized else None


def plan_vllm(spec: Spec, instance: Instance, sizing: Sizing) -> EngineParts:
    engine = spec.engine
    assert isinstance(engine, VllmEngine)
    loading = spec.model.loading
    meta = meta_for(spec, "inference-server", engine.version)
    checkpoint_gib = sizing.checkpoint_gib
    # The S3 sync gets the server's CPU and up to 8 GiB: init containers run before it, so the
    # pod's request is the larger of the two and those cores cost nothing extra.
    share = pod_resources(spec, instance, None)
    fetch = (share.cpu, f"{min(8, int(share.memory.removesuffix('Gi')))}Gi")
    weights = model_loading(spec, cache_gib(checkpoint_gib), RUN_AS_USER, fetch)

    nodes = sizing.nodes
    dist = Distributed(sizing.pp, nodes, multinode_backend(engine) if nodes > 1 else None)
    quantization = quantization_flag(spec, sizing)
    args = server_args(spec, quantization, dist)
    efa = efa_devices(spec, instance, nodes)

    env = [
        EnvVar("HOME", "/home/vllm"),
        EnvVar("USER", "vllm"),  # getpass.getuser() without a passwd entry for uid 1000
        # The Hub cache sits with the weights when the server downloads them; otherwise in HOME
        # (the shared volume is mounted read-only).
        EnvVar("HF_HOME", f"{MODEL_DIR}/hf" if loading.mode != "pvc" else "/home/vllm/hf"),
        EnvVar("XDG_CACHE_HOME", "/home/vllm/.cache"),
        EnvVar("VLLM_NO_USAGE_STATS", "1"),
        EnvVar("DO_NOT_TRACK", "1"),
        *group_env(instance, nodes, efa),
    ]
    if engine.api_key_secret is not None:
        # Read by vLLM in every release llmdeploy renders (vllm/envs.py VLLM_API_KEY; the
        # api_server adds its authentication middleware when it is set). From the Secret, so
        # the key is neither in the manifest nor in the process arguments.
        key = engine.api_key_secret
        env.append(EnvVar("VLLM_API_KEY", secret_name=key.name, secret_key=key.key))
    mounts = [
        Mount("dshm", "/dev/shm"),
        Mount("home", "/home/vllm"),
        Mount("tmp", "/tmp"),
    ]
    volumes = [
        Volume("dshm", "memory", size_limit=shm_size(gpus_per_pod(spec))),
        Volume("home", "emptyDir", size_limit=f"{HOME_GIB}Gi"),
        Volume("tmp", "emptyDir", size_limit=f"{TMP_GIB}Gi"),
    ]
    env += weights.env
    # the user's own variables (engines/vllm/extra.py refused names llmdeploy sets)
    env += [EnvVar(name, value) for name, value in sorted(engine.env.items())]
    mounts += weights.mounts
    volumes += weights.volumes

    # The pod's ephemeral-storage limit covers every disk-backed emptyDir at its sizeLimit plus
    # the logs: the kubelet evicts a pod whose emptyDirs and containers together exceed it
    # (https://kubernetes.io/docs/concepts/storage/ephemeral-storage/).
    ephemeral_gib = HOME_GIB + TMP_GIB + weights.disk_gib + LOGS_GIB
    # vLLM reads (and in huggingface mode first downloads) the checkpoint as stored; each
    # pipeline stage reads only its own layers, but every pod downloads every file.
    budget = startup_budget_seconds(
        spec,
        checkpoint_gib,
        downloads_in_main=loading.mode == "huggingface",
        read_gib=read_gib(spec, sizing),
    )
    if nodes > 1 and spec.startup.override_seconds is None:
        # The leader's probes cover the group, and its startupProbe starts once its own init
        # containers are done; the slowest worker's node may come up a node start later and
        # then sync for its whole deadline before it joins.
        budget += NODE_START_SECONDS + sum(c.deadline_seconds or 0 for c in weights.init_containers)
    config: tuple[ConfigEntry, ...] = ()
    if group.uses_scripts(dist):
        config, scripts_volume = group.scripts(spec)
        volumes.append(scripts_volume)
    server = Container(
        name="vllm",
        image=_image(engine),
        command=flags.command_for(engine.version),
        args=args,
        env=tuple(env),
        ports=(Port("http", HTTP_PORT),),
        mounts=tuple(mounts),
        resources=pod_resources(spec, instance, ephemeral_gib, efa=efa),
        startup_probe=startup_probe("/health", "http", budget),
        readiness_probe=readiness_probe("/health", "http"),
        liveness_probe=liveness_probe("/health", "http"),
        read_only_root=True,
        run_as_user=RUN_AS_USER,
        pre_stop_sleep=10,
    )
    served = spec.model.served_name or spec.model.id
    selector = f'{{namespace="{spec.namespace}",model_name="{_promql_escape(served)}"}}'
    # each replica's queue gauge averaged over the signal window: one scrape's burst moves it
    # by a quarter at most (docs/production.md §8)
    waiting = flags.metric_name(engine.version, "waiting")
    query = f"sum(avg_over_time({waiting}{selector}[{signal_window_seconds(spec)}s]))"
    init, worker = weights.init_containers, None
    if nodes > 1:
        worker_init, worker_server = group.worker(spec, server, quantization, dist)
        worker = workload_plan(
            spec, meta, (*init, *worker_init), (worker_server,), tuple(volumes), RUN_AS_USER
        )
        server = group.leader(server, dist)
    return EngineParts(
        engine="vllm",
        version=engine.version,
        meta=meta,
        workload=workload_plan(spec, meta, init, (server,), tuple(volumes), RUN_AS_USER),
        service_ports=(Port("http", HTTP_PORT),),
        monitor_port="http",  # vLLM serves /metrics on the API port
        client_ports=(HTTP_PORT,),
        metrics_ports=(HTTP_PORT,),
        scaler_query=query,
        pod_ephemeral_gib=ephemeral_gib,
        reads_s3=spec.model.loading.mode == "s3",
        kv_usage_query=f"max({flags.metric_name(engine.version, 'kv_usage')}{selector})",
        config_map_data=config,
        worker=worker,
        nodes=nodes,
    )


def _promql_escape(value: str) -> str:
    """Escape a string for a PromQL double-quoted label matcher."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
