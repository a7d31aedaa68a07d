"""Assembling the plan: everything engine-independent around an engine's part (NodePool,
EC2NodeClass, Service, ServiceAccount, PDB, NetworkPolicy, monitors, the KEDA ScaledObject),
which objects exist and in what order.

Input: a validated spec, the chosen instance, and the :class:`EngineParts` the engine's
``plan`` returned. Output: a frozen :class:`~llmdeploy.plan.types.Plan` that templates only fill
in. Nothing here imports an engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmdeploy import __version__
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.plan.names import labels_for, pool_name
from llmdeploy.plan.nodes import nodeclass_plan, nodepool_plan
from llmdeploy.plan.types import (
    KV,
    ConfigEntry,
    ExtraFile,
    JobPlan,
    Meta,
    MonitorPlan,
    NetpolPlan,
    Plan,
    Port,
    Resource,
    ScalerPlan,
    WorkloadPlan,
)
from llmdeploy.spec.sections import Spec

# Object order: infrastructure first, then namespaced plumbing, workload, then autoscalers
# (Helm's install order, extended with the custom kinds). "Kind/variant" is a second object of
# a kind, in its own file (`serviceaccount-engine-build.yaml`).
KIND_ORDER = (
    "EC2NodeClass",
    "NodePool",
    "NetworkPolicy",
    "NetworkPolicy/engine-build",
    "PodDisruptionBudget",
    "ServiceAccount",
    "ServiceAccount/engine-build",
    "ConfigMap",
    "Service",
    "Deployment",
    "Job",
    "ServiceMonitor",
    "PodMonitor",
    "ScaledObject",
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


def monitor_plan(
    spec: Spec, port: str, labels: tuple[KV, ...], path: str = "/metrics"
) -> MonitorPlan | None:
    m = spec.monitoring
    if m.kind == "none":
        return None
    extra = tuple(KV(k, v) for k, v in sorted(m.labels.items()))
    return MonitorPlan(
        kind=m.kind, labels=labels + extra, port=port, path=path, interval=m.interval
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
    for entry in KIND_ORDER:
        if plan_has.get(entry, False):
            kind, _, variant = entry.partition("/")
            stem = f"{kind.lower()}-{variant}" if variant else kind.lower()
            out.append(Resource(kind=kind, filename=f"{stem}.yaml", template=f"k8s/{stem}.yaml.j2"))
    return tuple(out)


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
    config_map_data: tuple[ConfigEntry, ...] = ()
    extra_files: tuple[ExtraFile, ...] = ()
    monitor_path: str = "/metrics"  # the HTTP path Prometheus scrapes on monitor_port
    job: JobPlan | None = None  # a Job next to the workload (TensorRT-LLM's engine build)


def assemble(spec: Spec, instance: Instance, parts: EngineParts, header_command: str) -> Plan:
    infra_labels = labels_for(spec, "gpu-capacity", parts.version)
    name = pool_name(spec)
    monitor = monitor_plan(spec, parts.monitor_port, parts.meta.labels, parts.monitor_path)
    netpol = netpol_plan(spec, parts.client_ports, parts.metrics_ports)
    has = {
        "EC2NodeClass": True,
        "NodePool": True,
        "NetworkPolicy": netpol is not None,
        "NetworkPolicy/engine-build": netpol is not None and parts.job is not None,
        "PodDisruptionBudget": True,
        "ServiceAccount": True,
        "ServiceAccount/engine-build": parts.job is not None
        and parts.job.service_account_meta is not None,
        "ConfigMap": bool(parts.config_map_data),
        "Service": True,
        "Deployment": True,
        "Job": parts.job is not None,
        "ServiceMonitor": monitor is not None and monitor.kind == "ServiceMonitor",
        "PodMonitor": monitor is not None and monitor.kind == "PodMonitor",
        "ScaledObject": spec.autoscaling.enabled,
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
        job=parts.job,
    )


def generator_version() -> str:
    return __version__
