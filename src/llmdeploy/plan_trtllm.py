"""Kubernetes plan for Triton + TensorRT-LLM, from the engine decisions in :mod:`trtllm`."""

from __future__ import annotations

import math

from llmdeploy import trtllm
from llmdeploy.catalog import Instance
from llmdeploy.plan import (
    GPU_TAINT,
    dns_name,
    labels_for,
    liveness_probe,
    meta_for,
    monitor_plan,
    netpol_plan,
    nodeclass_plan,
    nodepool_plan,
    pod_resources,
    readiness_probe,
    resource_list,
    scaler_plan,
    shm_size,
    startup_budget_seconds,
    startup_probe,
)
from llmdeploy.plan_types import (
    KV,
    Container,
    EnvVar,
    ExtraFile,
    Mount,
    Plan,
    Resources,
    Volume,
    WorkloadPlan,
)
from llmdeploy.spec import Spec, TrtllmEngine
from llmdeploy.trtllm_serving import CONFIG_VOLUME, MODEL_VOLUME, TMP_VOLUME

# NGC Triton images carry an unprivileged `triton-server` user (uid 1000).
RUN_AS_USER = 1000


def _engine_cache_gib(weights_gib_total: float) -> int:
    # Engine + tokenizer + model repository, with 20% and 10 GiB of headroom.
    return math.ceil(weights_gib_total * 1.2 + 10)


def plan_triton(
    spec: Spec, instance: Instance, weights_gib_total: float, header_command: str
) -> Plan:
    engine = spec.engine
    assert isinstance(engine, TrtllmEngine)
    tp = spec.hardware.tensor_parallel
    t = trtllm.plan_trtllm(spec, instance, spec.name, header_command=header_command)
    meta = meta_for(spec, "inference-server")
    infra_labels = labels_for(spec, "gpu-capacity", engine.triton_version)
    pool_name = dns_name("llmdeploy", spec.namespace, spec.name)
    cache_gib = _engine_cache_gib(weights_gib_total)
    ephemeral_gib = 30 + cache_gib

    init = tuple(
        Container(
            name=c.name,
            image=c.image,
            command=c.command,
            args=c.args,
            env=c.env,
            ports=(),
            mounts=c.mounts,
            resources=Resources(cpu="2", memory="8Gi", ephemeral_storage=None, gpus=0),
            read_only_root=True,
            run_as_user=RUN_AS_USER,
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
        resources=pod_resources(instance, tp, ephemeral_gib),
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
    workload = WorkloadPlan(
        pod_labels=meta.labels,
        pod_annotations=(KV("karpenter.sh/do-not-disrupt", "true"),),
        replicas=max(1, spec.autoscaling.min_replicas),
        service_account=spec.name,
        node_selector=(KV("karpenter.sh/nodepool", pool_name),),
        tolerations=(GPU_TAINT,),
        init_containers=init,
        containers=(server,),
        volumes=volumes,
        termination_grace=120,
        fs_group=RUN_AS_USER,
        topology_key="topology.kubernetes.io/zone",
    )
    ports = {p.name: p.port for p in t.ports}
    monitor = monitor_plan(spec, "metrics", meta.labels)
    netpol = netpol_plan(spec, (ports["http"], ports["grpc"]), (ports["metrics"],))
    has = {
        "EC2NodeClass": True,
        "NodePool": True,
        "NetworkPolicy": netpol is not None,
        "PodDisruptionBudget": True,
        "ServiceAccount": True,
        "ConfigMap": True,
        "Service": True,
        "Deployment": True,
        "ServiceMonitor": monitor is not None and monitor.kind == "ServiceMonitor",
        "PodMonitor": monitor is not None and monitor.kind == "PodMonitor",
        "ScaledObject": True,
    }
    sa_annotations: tuple[KV, ...] = ()
    if spec.service_account.iam_role_arn:
        sa_annotations = (KV("eks.amazonaws.com/role-arn", spec.service_account.iam_role_arn),)
    scaler = scaler_plan(spec, t.keda_query)
    return Plan(
        name=spec.name,
        engine="trtllm",
        meta=meta,
        nodepool=nodepool_plan(spec, instance, pool_name, infra_labels),
        nodeclass=nodeclass_plan(spec, instance, pool_name, infra_labels, ephemeral_gib),
        workload=workload,
        service_ports=t.ports,
        service_account_annotations=sa_annotations,
        scaler=scaler,
        monitor=monitor,
        netpol=netpol,
        pdb_max_unavailable=1,
        config_map_data=trtllm.configmap_data(t),
        resources=resource_list(has),
        extra_files=(ExtraFile("build-engine.sh", trtllm.build_script(t), executable=True),),
        header_command=header_command,
    )
