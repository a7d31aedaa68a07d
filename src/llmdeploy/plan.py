"""The plan stage: every decision about what is rendered, and nothing else.

Input: a validated spec, the sizing verdict (instance, weights). Output: a frozen
:class:`~llmdeploy.plan_types.Plan` that templates only fill in. Names, labels, resources,
tolerations, flags and which objects exist are all decided here. Engine-specific decisions
live in :mod:`llmdeploy.plan_vllm` and :mod:`llmdeploy.trtllm`.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from llmdeploy import __version__
from llmdeploy.catalog import Instance
from llmdeploy.plan_types import (
    KV,
    Budget,
    Container,
    ExtraFile,
    Meta,
    MonitorPlan,
    NetpolPlan,
    NodeClassPlan,
    NodePoolPlan,
    Plan,
    Port,
    Probe,
    Requirement,
    Resource,
    Resources,
    ScalerPlan,
    Toleration,
    Volume,
    WorkloadPlan,
)
from llmdeploy.spec import Spec

MANAGED_BY = "llmdeploy"
PART_OF = "llmdeploy"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT = Toleration(key=GPU_RESOURCE, operator="Exists", effect="NoSchedule", value=None)

# /dev/shm: NCCL and the CUDA IPC buffers of the tensor-parallel workers live there. 2 GiB per
# GPU in the pod, at least 2 GiB, capped at 32 GiB (NVIDIA runs Triton with --shm-size=2g per
# process; vLLM's docs use --ipc=host or several GiB for TP > 1).
SHM_GIB_PER_GPU = 2
SHM_GIB_MAX = 32

# Object order: infrastructure first, then namespaced plumbing, workload, then autoscalers
# (Helm's install order, extended with the custom kinds).
KIND_ORDER = (
    "EC2NodeClass",
    "NodePool",
    "NetworkPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "ConfigMap",
    "Service",
    "Deployment",
    "ServiceMonitor",
    "PodMonitor",
    "ScaledObject",
)


def dns_name(*parts: str, limit: int = 63) -> str:
    """Join parts into a DNS-1123 label, truncated with a stable hash suffix when too long."""
    name = "-".join(p for p in parts if p)
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def labels_for(spec: Spec, component: str, version: str) -> tuple[KV, ...]:
    """All six recommended labels (kubernetes.io common-labels)."""
    return (
        KV("app.kubernetes.io/name", spec.engine.type),
        KV("app.kubernetes.io/instance", spec.name),
        KV("app.kubernetes.io/version", version),
        KV("app.kubernetes.io/component", component),
        KV("app.kubernetes.io/part-of", PART_OF),
        KV("app.kubernetes.io/managed-by", MANAGED_BY),
    )


def selector_for(spec: Spec) -> tuple[KV, ...]:
    """Selectors are immutable: only name and instance, never version."""
    return (
        KV("app.kubernetes.io/name", spec.engine.type),
        KV("app.kubernetes.io/instance", spec.name),
    )


def engine_version(spec: Spec) -> str:
    if spec.engine.type == "vllm":
        return spec.engine.version
    return spec.engine.triton_version


def pods_per_node(instance: Instance, tp: int) -> int:
    return instance.pods_per_node(tp)


def pod_resources(instance: Instance, tp: int, ephemeral_gib: int | None) -> Resources:
    """CPU and memory as this pod's share of the node's allocatable, never more than fits
    (``catalog.Instance.pod_share``); whole cores, requests equal limits (Guaranteed QoS)."""
    cpu_milli, mem_mib = instance.pod_share(tp)
    cpu = max(1, cpu_milli // 1000)
    mem_gib = max(4, mem_mib // 1024)
    return Resources(
        cpu=str(cpu),
        memory=f"{mem_gib}Gi",
        ephemeral_storage=f"{ephemeral_gib}Gi" if ephemeral_gib else None,
        gpus=tp,
    )


def shm_size(tp: int) -> str:
    return f"{min(SHM_GIB_MAX, max(2, SHM_GIB_PER_GPU * tp))}Gi"


def startup_budget_seconds(spec: Spec, model_gib: float, downloads_in_main: bool) -> int:
    """Seconds the startupProbe allows: download (if the server downloads), load, warm-up.

    model_gib is the whole checkpoint as stored (all shards). Bandwidths are Gbit/s.
    """
    st = spec.startup
    if st.override_seconds is not None:
        return st.override_seconds
    gbits = model_gib * 2**30 * 8 / 1e9
    seconds = gbits / st.disk_read_gbps + st.warmup_seconds
    if downloads_in_main:
        seconds += gbits / st.download_gbps
    return int(math.ceil(seconds * st.safety_factor / 60.0) * 60)


def startup_probe(path: str, port: str, budget_seconds: int) -> Probe:
    period = 10
    return Probe(
        path=path,
        port=port,
        period=period,
        failure_threshold=max(3, math.ceil(budget_seconds / period)),
        timeout=5,
    )


def readiness_probe(path: str, port: str) -> Probe:
    return Probe(path=path, port=port, period=10, failure_threshold=3, timeout=5)


def liveness_probe(path: str, port: str) -> Probe:
    # A busy server answers health checks late, not never: 6 x 20 s = 2 minutes of silence
    # before a restart, so a long prefill burst does not kill a healthy pod.
    return Probe(path=path, port=port, period=20, failure_threshold=6, timeout=10)


def nodepool_plan(
    spec: Spec, instance: Instance, name: str, labels: tuple[KV, ...]
) -> NodePoolPlan:
    reqs = [
        Requirement("node.kubernetes.io/instance-type", "In", (instance.name,)),
        Requirement("karpenter.k8s.aws/instance-family", "In", (instance.family,)),
        Requirement("karpenter.k8s.aws/instance-gpu-manufacturer", "In", ("nvidia",)),
        Requirement("karpenter.k8s.aws/instance-gpu-name", "In", (instance.gpu.karpenter_name,)),
        Requirement("karpenter.sh/capacity-type", "In", tuple(spec.cluster.capacity_types)),
        Requirement("kubernetes.io/arch", "In", (instance.arch,)),
        Requirement("kubernetes.io/os", "In", ("linux",)),
    ]
    return NodePoolPlan(
        name=name,
        labels=labels,
        requirements=tuple(reqs),
        taints=(Toleration(GPU_RESOURCE, "Equal", "NoSchedule", "true"),),
        # nvidia.com/gpu.present lets the stock NVIDIA device-plugin chart schedule onto these
        # nodes without node-feature-discovery.
        node_labels=(
            KV("llmdeploy.dev/gpu", instance.gpu.karpenter_name),
            KV("nvidia.com/gpu.present", "true"),
        ),
        expire_after=spec.cluster.expire_after,
        # Cap on draining a node that expires while pods carry karpenter.sh/do-not-disrupt.
        termination_grace_period="1h",
        # GPU nodes are only consolidated when empty: replacing an under-used node would evict
        # a serving model and repeat a long load. Scale-in happens through KEDA instead.
        consolidation_policy="WhenEmpty",
        consolidate_after="10m",
        budgets=(Budget("1"),),
        gpu_limit=spec.cluster.gpu_limit,
        weight=50,
    )


# Container images and system files on the root volume, GiB (vLLM and Triton images are 10-20 GB).
ROOT_VOLUME_SYSTEM_GIB = 80


def root_volume_gib(spec: Spec, instance: Instance, pod_ephemeral_gib: int) -> int:
    """Root EBS size. With local NVMe (RAID0) pods' ephemeral storage lives there; without it,
    the root volume must hold the images plus every pod's model cache on the node."""
    if instance.local_nvme_gb > 0:
        return spec.cluster.root_volume_gib
    pods = pods_per_node(instance, spec.hardware.tensor_parallel)
    return max(spec.cluster.root_volume_gib, ROOT_VOLUME_SYSTEM_GIB + pods * pod_ephemeral_gib)


def nodeclass_plan(
    spec: Spec, instance: Instance, name: str, labels: tuple[KV, ...], pod_ephemeral_gib: int
) -> NodeClassPlan:
    return NodeClassPlan(
        name=name,
        labels=labels,
        role=spec.cluster.node_role,
        ami_alias=spec.cluster.ami_alias,
        discovery_tag=spec.cluster.discovery_tag or spec.cluster.name,
        root_volume=f"{root_volume_gib(spec, instance, pod_ephemeral_gib)}Gi",
        instance_store_raid0=instance.local_nvme_gb > 0,
        tags=(KV("llmdeploy.dev/deployment", f"{spec.namespace}.{spec.name}"),),
    )


def scaler_plan(spec: Spec, query: str) -> ScalerPlan:
    a = spec.autoscaling
    return ScalerPlan(
        min_replicas=a.min_replicas,
        max_replicas=a.max_replicas,
        polling_interval=a.polling_interval,
        cooldown_period=a.cooldown_period,
        server_address=a.prometheus_address,
        query=query,
        threshold=str(a.waiting_requests_per_replica),
        # A GPU replica takes minutes to become ready: add at most 2 per 2 minutes, and remove
        # one per 5 minutes after the stabilization window, so a short lull does not drop
        # capacity that takes long to get back.
        scale_up_pods=2,
        scale_up_period=120,
        scale_down_window=a.scale_down_stabilization,
        scale_down_pods=1,
        scale_down_period=300,
    )


def monitor_plan(spec: Spec, port: str, labels: tuple[KV, ...]) -> MonitorPlan | None:
    m = spec.monitoring
    if m.kind == "none":
        return None
    extra = tuple(KV(k, v) for k, v in sorted(m.labels.items()))
    return MonitorPlan(
        kind=m.kind, labels=labels + extra, port=port, path="/metrics", interval=m.interval
    )


def netpol_plan(
    spec: Spec, client_ports: tuple[int, ...], metrics_ports: tuple[int, ...]
) -> NetpolPlan | None:
    n = spec.network
    if not n.network_policy:
        return None
    clients = n.client_namespaces if n.client_namespaces is not None else (spec.namespace,)
    return NetpolPlan(
        client_namespaces=tuple(clients),
        client_ports=client_ports,
        prometheus_namespace=n.prometheus_namespace,
        metrics_ports=metrics_ports,
    )


def resource_list(plan_has: dict[str, bool]) -> tuple[Resource, ...]:
    out = []
    for kind in KIND_ORDER:
        if plan_has.get(kind, False):
            out.append(
                Resource(
                    kind=kind,
                    filename=f"{kind.lower()}.yaml",
                    template=f"k8s/{kind.lower()}.yaml.j2",
                )
            )
    return tuple(out)


def meta_for(spec: Spec, component: str) -> Meta:
    return Meta(
        name=spec.name,
        namespace=spec.namespace,
        labels=labels_for(spec, component, engine_version(spec)),
        selector=selector_for(spec),
    )


def pool_name(spec: Spec) -> str:
    """NodePool and EC2NodeClass name; pods select it through karpenter.sh/nodepool."""
    return dns_name("llmdeploy", spec.namespace, spec.name)


def workload_plan(
    spec: Spec,
    meta: Meta,
    init_containers: tuple[Container, ...],
    containers: tuple[Container, ...],
    volumes: tuple[Volume, ...],
    fs_group: int,
) -> WorkloadPlan:
    """Pod-level decisions shared by every engine."""
    return WorkloadPlan(
        pod_labels=meta.labels,
        # Voluntary disruption (consolidation, drift) waits until the pod is gone; expiry still
        # replaces the node after NodePool terminationGracePeriod.
        pod_annotations=(KV("karpenter.sh/do-not-disrupt", "true"),),
        replicas=max(1, spec.autoscaling.min_replicas),
        service_account=spec.name,
        node_selector=(KV("karpenter.sh/nodepool", pool_name(spec)),),
        tolerations=(GPU_TAINT,),
        init_containers=init_containers,
        containers=containers,
        volumes=volumes,
        termination_grace=120,
        fs_group=fs_group,
        topology_key="topology.kubernetes.io/zone",
    )


@dataclass(frozen=True)
class EngineParts:
    """What an engine planner decides; ``assemble`` adds everything engine-independent."""

    engine: str
    version: str
    meta: Meta
    workload: WorkloadPlan
    service_ports: tuple[Port, ...]
    monitor_port: str  # the port name Prometheus scrapes
    client_ports: tuple[int, ...]
    metrics_ports: tuple[int, ...]
    scaler_query: str
    pod_ephemeral_gib: int
    config_map_data: tuple[KV, ...] = ()
    extra_files: tuple[ExtraFile, ...] = ()


def assemble(spec: Spec, instance: Instance, parts: EngineParts, header_command: str) -> Plan:
    infra_labels = labels_for(spec, "gpu-capacity", parts.version)
    name = pool_name(spec)
    monitor = monitor_plan(spec, parts.monitor_port, parts.meta.labels)
    netpol = netpol_plan(spec, parts.client_ports, parts.metrics_ports)
    has = {
        "EC2NodeClass": True,
        "NodePool": True,
        "NetworkPolicy": netpol is not None,
        "PodDisruptionBudget": True,
        "ServiceAccount": True,
        "ConfigMap": bool(parts.config_map_data),
        "Service": True,
        "Deployment": True,
        "ServiceMonitor": monitor is not None and monitor.kind == "ServiceMonitor",
        "PodMonitor": monitor is not None and monitor.kind == "PodMonitor",
        "ScaledObject": True,
    }
    sa_annotations: tuple[KV, ...] = ()
    if spec.service_account.iam_role_arn:
        sa_annotations = (KV("eks.amazonaws.com/role-arn", spec.service_account.iam_role_arn),)
    return Plan(
        name=spec.name,
        engine=parts.engine,
        meta=parts.meta,
        nodepool=nodepool_plan(spec, instance, name, infra_labels),
        nodeclass=nodeclass_plan(spec, instance, name, infra_labels, parts.pod_ephemeral_gib),
        workload=parts.workload,
        service_ports=parts.service_ports,
        service_account_annotations=sa_annotations,
        scaler=scaler_plan(spec, parts.scaler_query),
        monitor=monitor,
        netpol=netpol,
        pdb_max_unavailable=1,
        config_map_data=parts.config_map_data,
        resources=resource_list(has),
        extra_files=parts.extra_files,
        header_command=header_command,
    )


def generator_version() -> str:
    return __version__


def make_plan(
    spec: Spec, instance: Instance, weights_gib_total: float, header_command: str
) -> Plan:
    """Dispatch to the engine's planner."""
    if spec.engine.type == "vllm":
        from llmdeploy.plan_vllm import plan_vllm

        return plan_vllm(spec, instance, weights_gib_total, header_command)
    from llmdeploy.plan_trtllm import plan_triton

    return plan_triton(spec, instance, weights_gib_total, header_command)
