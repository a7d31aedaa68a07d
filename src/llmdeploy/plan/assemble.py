"""Assembling the plan: everything engine-independent around an engine's part (NodePool,
EC2NodeClass, Service, ServiceAccount, PDB, NetworkPolicy, monitors, the KEDA ScaledObject),
which objects exist and in what order.

Input: a validated spec, the chosen instance, and the :class:`EngineParts` the engine's
``plan`` returned. Output: a frozen :class:`~llmdeploy.plan.types.Plan` that templates only fill
in. Nothing here imports an engine.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from llmdeploy import __version__
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.errors import Notice, SpecFieldError
from llmdeploy.plan.alerts import alerts_plan
from llmdeploy.plan.group import LWS_API_VERSION, LWS_KIND, group_plan, leader_selector
from llmdeploy.plan.names import labels_for, pool_name
from llmdeploy.plan.nodes import nodeclass_plan, nodepool_plan
from llmdeploy.plan.pod import (
    MAX_BACKOFF_SECONDS,
    gpus_per_pod,
    pods_per_node,
    progress_deadline_seconds,
)
from llmdeploy.plan.prometheus import PrometheusPlan, prometheus_plan, signal_window_seconds
from llmdeploy.plan.rollout import rollout_plan
from llmdeploy.plan.types import (
    KV,
    ConfigEntry,
    ExtraFile,
    GroupPlan,
    JobPlan,
    Meta,
    MonitorPlan,
    NetpolPlan,
    Plan,
    Port,
    Resource,
    ScalerPlan,
    TemplateText,
    WorkloadPlan,
)
from llmdeploy.spec.sections import Spec

# Object order: infrastructure first, then namespaced plumbing, workload, then autoscalers
# (Helm's install order, extended with the custom kinds). "Kind/variant" is a second object of
# a kind, in its own file (`serviceaccount-engine-build.yaml`, `networkpolicy-prometheus.yaml`).
KIND_ORDER = (
    "EC2NodeClass",
    "NodePool",
    "NetworkPolicy",
    "NetworkPolicy/engine-build",
    "NetworkPolicy/prometheus",  # in Prometheus's namespace: lets the KEDA operator query it
    "PodDisruptionBudget",
    "ServiceAccount",
    "ServiceAccount/engine-build",
    "Role/prometheus",
    "RoleBinding/prometheus",
    "ConfigMap",
    "Service",
    "Deployment",
    "Job",
    "LeaderWorkerSet",
    "ServiceMonitor",
    "PodMonitor",
    "PrometheusRule",
    "TriggerAuthentication",
    "ScaledObject",
)
# KEDA fallback behavior: while the metric cannot be read keep the current count, or the
# fallback replicas if higher (kedacore/keda@v2.20.2 pkg/fallback/fallback.go doFallback).
FALLBACK_BEHAVIOR = "currentReplicasIfHigher"
# Alerts for Prometheus servers without the operator (Amazon Managed Prometheus takes this file:
# aws amp create-rule-groups-namespace --data fileb://prometheus-rules.yml).
RULES_FILE = "prometheus-rules.yml"


# How often the HPA asks KEDA's metrics server for the metric (kube-controller-manager
# --horizontal-pod-autoscaler-sync-period, 15 s by default). Each of those reads and each of
# KEDA's own polls counts a failure toward the fallback (kedacore/keda@v2.20.2
# pkg/scaling/scale_handler.go: processMetricsWithFallback from GetScaledObjectMetrics and
# getScalerState; pkg/fallback/fallback.go IncrementFailure).
HPA_SYNC_SECONDS = 15
# The fallback threshold when fallback.replicas is minReplicas (a floor the HPA keeps anyway).
DEFAULT_FALLBACK_FAILURES = 3


def fallback_failures(spec: Spec, cold_start_seconds: int) -> tuple[int, tuple[Notice, ...]]:
    """KEDA's fallback.failureThreshold, and a warning when it would fire during a cold start.

    A fresh deploy has no queue series until its first replica serves (an empty result, a
    failed read with ignoreNullValues "false"), for up to one replica's cold start. When the
    fallback raises the fleet above minReplicas, the threshold covers the reads KEDA makes in
    that time, so a first deploy does not start ``fallback.replicas`` replicas; while reads fail
    before it, the HPA keeps the current count (it cannot compute a recommendation)."""
    a = spec.autoscaling
    reads = math.ceil(cold_start_seconds / a.polling_interval) + math.ceil(
        cold_start_seconds / HPA_SYNC_SECONDS
    )
    raises = (a.fallback.replicas or a.min_replicas) > a.min_replicas
    chosen = a.fallback.failure_threshold
    if chosen is None:
        return (reads if raises else DEFAULT_FALLBACK_FAILURES), ()
    if raises and chosen < reads:
        return chosen, (
            Notice(
                "autoscaling.fallback.failureThreshold",
                f"a fresh deploy has no queue metric for up to {cold_start_seconds} s (one "
                f"replica's cold start), about {reads} failed reads: after {chosen} KEDA "
                f"applies the fallback and starts {a.fallback.replicas} replicas before the "
                "first one serves",
                hint=f"leave failureThreshold out (it is then {reads}), or set "
                "fallback.replicas to minReplicas",
            ),
        )
    return chosen, ()


def scaler_plan(
    spec: Spec,
    query: str,
    prom: PrometheusPlan,
    cold_start_seconds: int,
    group: GroupPlan | None = None,
) -> tuple[ScalerPlan, tuple[Notice, ...]]:
    """KEDA's ScaledObject: the Deployment, or the LeaderWorkerSet through its scale
    subresource, whose replicas are whole groups (its HPA selector picks the leaders:
    ``+kubebuilder:subresource:scale:...selectorpath=.status.hpaPodSelector``)."""
    a = spec.autoscaling
    api_version, kind = ("apps/v1", "Deployment") if group is None else (LWS_API_VERSION, LWS_KIND)
    failures, notices = fallback_failures(spec, cold_start_seconds)
    return ScalerPlan(
        min_replicas=a.min_replicas,
        max_replicas=a.max_replicas,
        polling_interval=a.polling_interval,
        cooldown_period=a.cooldown_period,
        server_address=prom.address,
        query=query,
        threshold=str(a.queue_threshold),
        # Only the 0 <-> 1 step uses it (active iff value > activationThreshold,
        # prometheus_scaler.go GetMetricsAndActivity); minReplicas >= 1, written out anyway.
        activation_threshold="0",
        # With the default (true) an empty result reads as 0 with no error, so a broken scrape
        # scales the fleet in and the fallback never applies (prometheus_scaler.go
        # ExecutePromQuery); "false" makes it a failed read that counts toward the fallback,
        # whose threshold outlasts a cold start (fallback_failures).
        ignore_null_values="false",
        fallback_failures=failures,
        fallback_replicas=a.fallback.replicas or a.min_replicas,
        fallback_behavior=FALLBACK_BEHAVIOR,
        # A burst must last the stabilization window before the HPA adds a replica (it takes
        # the lowest recommendation of the window, kubernetes/kubernetes
        # pkg/controller/podautoscaler/horizontal.go stabilizeRecommendationWithBehaviors).
        # the signal window plus one HPA sync by default: a single scrape, however high,
        # raises the recommendation for less than the window, and never for all of it
        scale_up_window=(
            a.scale_up_stabilization
            if a.scale_up_stabilization is not None
            else signal_window_seconds(spec) + HPA_SYNC_SECONDS
        ),
        # A GPU replica takes minutes to become ready: add at most 2 replicas (1 group of
        # several nodes) per 2 minutes, and remove one per 5 minutes after the stabilization
        # window, so a short lull does not drop capacity that takes long to get back.
        scale_up_pods=2 if group is None else 1,
        scale_up_period=120,
        scale_down_window=a.scale_down_stabilization,
        scale_down_pods=1,
        scale_down_period=300,
        aws_region=prom.aws_region,
        auth_ref=prom.trigger_auth.name if prom.trigger_auth else None,
        target_api_version=api_version,
        target_kind=kind,
    ), notices


def selection_labels(spec: Spec, prom: PrometheusPlan) -> tuple[KV, ...]:
    """Labels the Prometheus selects monitors and rules by: the flavour's (release=...) and
    `monitoring.labels`; a user label may not contradict the flavour's."""
    flavour = {kv.key: kv.value for kv in prom.monitor_labels}
    extra = list(prom.monitor_labels)
    for key, value in sorted(spec.monitoring.labels.items()):
        if key in flavour and flavour[key] != value:
            raise SpecFieldError(
                f"monitoring.labels.{key}",
                f"label {key}={value} contradicts {key}={flavour[key]}, which "
                f"monitoring.prometheus ({spec.monitoring.prometheus.flavor}) selects monitors by",
                hint=f"drop {key} from monitoring.labels",
            )
        if key not in flavour:
            extra.append(KV(key, value))
    return tuple(extra)


def monitor_plan(
    spec: Spec, port: str, labels: tuple[KV, ...], path: str = "/metrics"
) -> MonitorPlan | None:
    m = spec.monitoring
    if m.kind == "none":
        return None
    return MonitorPlan(kind=m.kind, labels=labels, port=port, path=path, interval=m.interval)


def netpol_plan(
    spec: Spec,
    client_ports: tuple[int, ...],
    metrics_ports: tuple[int, ...],
    prom: PrometheusPlan,
    peers: tuple[KV, ...] = (),
) -> NetpolPlan | None:
    n = spec.network
    if not n.network_policy:
        return None
    clients = n.client_namespaces if n.client_namespaces is not None else (spec.namespace,)
    return NetpolPlan(
        client_namespaces=tuple(clients),
        client_ports=client_ports,
        scraper_namespace=prom.scraper_namespace,
        scraper_labels=prom.scraper_labels,
        metrics_ports=metrics_ports,
        peer_selector=peers,
        client_cidrs=n.load_balancer_cidrs,
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
    # PromQL for the fullest replica's KV-cache use (a fraction), for the KV-cache-full alert
    kv_usage_query: str | None = None
    reads_s3: bool = False  # the pods read S3 (IRSA or Pod Identity credentials needed)
    monitor_path: str = "/metrics"  # the HTTP path Prometheus scrapes on monitor_port
    job: JobPlan | None = None  # a Job next to the workload (TensorRT-LLM's engine build)
    # the worker pods of a replica on ``nodes`` nodes (the leader is ``workload``)
    worker: WorkloadPlan | None = None
    nodes: int = 1
    notices: tuple[Notice, ...] = ()  # the engine's notes and warnings, located at a field


def require_aws_identity(spec: Spec, parts: EngineParts) -> None:
    """Pods that read S3 need credentials of their own. The EC2NodeClass keeps the default
    httpPutResponseHopLimit 1 (IMDSv2), which the instance profile's credentials cannot cross
    into a container (EKS user guide, nodes/launch-templates.adoc); IRSA or EKS Pod Identity
    deliver them to the pod instead."""
    sa = spec.service_account
    if parts.reads_s3 and not (sa.iam_role_arn or sa.pod_identity):
        raise SpecFieldError(
            "serviceAccount.iamRoleArn",
            "the pods read S3 but have no AWS identity: with IMDSv2 and a hop limit of 1 the "
            "node's instance-profile credentials do not reach containers",
            hint="set serviceAccount.iamRoleArn (IRSA) or serviceAccount.podIdentity: true "
            "(an EKS Pod Identity association for this ServiceAccount)",
        )


def assemble(spec: Spec, instance: Instance, parts: EngineParts, header_command: str) -> Plan:
    require_aws_identity(spec, parts)
    infra_labels = labels_for(spec, "gpu-capacity", parts.version)
    name = pool_name(spec)
    prom = prometheus_plan(spec)
    selected_by = parts.meta.labels + selection_labels(spec, prom)
    monitor = monitor_plan(spec, parts.monitor_port, selected_by, parts.monitor_path)
    workload, group = parts.workload, None
    if pods_per_node(instance, gpus_per_pod(spec)) > 1:
        # Several replicas share a node, as the cost figure packs them (perf.assess
        # fleet_nodes): no zone spread, which Karpenter treats as required until a pod cannot
        # be placed (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/provisioning/scheduling/
        # preferences.go Relax), so it would launch a node per zone for pods one node holds.
        workload = dataclasses.replace(workload, topology_key=None)
    if parts.worker is not None:
        # no zone spread: the NodePool keeps every node of the group in one zone
        workload = dataclasses.replace(workload, topology_key=None)
        worker = dataclasses.replace(parts.worker, topology_key=None)
        group = group_plan(parts.meta, parts.nodes, worker)
    # the pods of a group reach each other on every port (the distributed store, NCCL, Ray)
    peers = parts.meta.selector if group is not None else ()
    netpol = netpol_plan(spec, parts.client_ports, parts.metrics_ports, prom, peers)
    scaled = spec.autoscaling.enabled
    alerts = alerts_plan(
        spec,
        parts.workload,
        parts.scaler_query,
        parts.kv_usage_query,
        selected_by,
    )
    extra_files = parts.extra_files
    if alerts is not None and not prom.operator_rules:
        context = (("alerts", alerts), ("deployment", f"{spec.namespace}/{spec.name}"))
        rules = TemplateText("k8s/prometheus-rules.yml.j2", context)
        extra_files += (ExtraFile(RULES_FILE, rules),)
    has = {
        "EC2NodeClass": True,
        "NodePool": True,
        "NetworkPolicy": netpol is not None,
        "NetworkPolicy/engine-build": netpol is not None and parts.job is not None,
        "NetworkPolicy/prometheus": prom.query_access is not None and scaled,
        "PodDisruptionBudget": True,
        "ServiceAccount": True,
        "ServiceAccount/engine-build": parts.job is not None
        and parts.job.service_account_meta is not None,
        "Role/prometheus": prom.rbac is not None and monitor is not None,
        "RoleBinding/prometheus": prom.rbac is not None and monitor is not None,
        "ConfigMap": bool(parts.config_map_data),
        "Service": True,
        "Deployment": group is None,
        "LeaderWorkerSet": group is not None,
        "Job": parts.job is not None,
        "ServiceMonitor": monitor is not None and monitor.kind == "ServiceMonitor",
        "PodMonitor": monitor is not None and monitor.kind == "PodMonitor",
        "PrometheusRule": alerts is not None and prom.operator_rules,
        "TriggerAuthentication": prom.trigger_auth is not None and scaled,
        "ScaledObject": scaled,
    }
    # One serving pod's cold start; a pod of a new engine waits for its build Job, then for the
    # kubelet's next retry of the artifacts' copy.
    cold_start = progress_deadline_seconds(
        workload, parts.job.active_deadline_seconds + MAX_BACKOFF_SECONDS if parts.job else 0
    )
    scaler, scaler_notices = scaler_plan(spec, parts.scaler_query, prom, cold_start, group)
    rollout = rollout_plan(spec, instance)  # a LeaderWorkerSet's: plan.group
    if group is None and rollout.notice is not None:
        scaler_notices += (rollout.notice,)
    sa_annotations: tuple[KV, ...] = ()
    if spec.service_account.iam_role_arn:
        sa_annotations = (KV("eks.amazonaws.com/role-arn", spec.service_account.iam_role_arn),)
    return Plan(
        name=spec.name,
        engine=parts.engine,
        meta=parts.meta,
        nodepool=nodepool_plan(spec, instance, name, infra_labels),
        nodeclass=nodeclass_plan(spec, instance, name, infra_labels, parts.pod_ephemeral_gib),
        workload=workload,
        service_ports=parts.service_ports,
        service_account_annotations=sa_annotations,
        scaler=scaler,
        monitor=monitor,
        netpol=netpol,
        pdb_max_unavailable=1,
        config_map_data=parts.config_map_data,
        resources=resource_list(has),
        serving_selector=leader_selector(parts.meta) if group is not None else parts.meta.selector,
        group=group,
        extra_files=extra_files,
        header_command=header_command,
        notices=prom.notices + parts.notices + scaler_notices,
        prometheus_rbac=prom.rbac,
        query_access=prom.query_access,
        trigger_auth=prom.trigger_auth,
        alerts=alerts,
        job=parts.job,
        progress_deadline=cold_start,
        max_surge=rollout.max_surge,
        max_unavailable=rollout.max_unavailable,
    )


def generator_version() -> str:
    return __version__
