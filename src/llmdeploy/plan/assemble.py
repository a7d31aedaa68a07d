"""Assembling the plan: everything engine-independent around an engine's part (NodePool,
EC2NodeClass, Service, ServiceAccount, PDB, NetworkPolicy, monitors, the KEDA ScaledObject of
``plan.scaling``), which objects exist and in what order.

Input: a validated spec, the chosen instance, and the :class:`EngineParts` the engine's
``plan`` returned. Output: a frozen :class:`~llmdeploy.plan.types.Plan` that templates only fill
in. Nothing here imports an engine.
"""

from __future__ import annotations

import dataclasses

from llmdeploy import __version__
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.errors import SpecFieldError
from llmdeploy.plan.alerts import alerts_plan
from llmdeploy.plan.group import group_plan, leader_selector
from llmdeploy.plan.names import labels_for, namespace_labels, pool_name
from llmdeploy.plan.nodes import nodeclass_plan, nodepool_plan
from llmdeploy.plan.pod import (
    MAX_BACKOFF_SECONDS,
    gpus_per_pod,
    pods_per_node,
    progress_deadline_seconds,
)
from llmdeploy.plan.prometheus import PrometheusPlan, prometheus_plan
from llmdeploy.plan.rollout import rollout_plan
from llmdeploy.plan.scaling import scaler_plan
from llmdeploy.plan.types import (
    KV,
    EngineParts,
    ExtraFile,
    MonitorPlan,
    NetpolPlan,
    Plan,
    Resource,
    TemplateText,
)
from llmdeploy.spec.sections import Spec

# Object order: infrastructure first, then namespaced plumbing, workload, then autoscalers
# (Helm's install order, extended with the custom kinds). "Kind/variant" is a second object of
# a kind, in its own file (`serviceaccount-engine-build.yaml`, `networkpolicy-prometheus.yaml`).
KIND_ORDER = (
    "Namespace",
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
# Argo CD's sync waves (argocd.argoproj.io/sync-wave; Argo CD applies a lower wave first and
# waits for it to be healthy, argo-cd docs user-guide/sync-waves): the Namespace before all;
# the kinds whose CRDs other charts install and that depend on nothing here (Karpenter's node
# classes and pools, the monitors, rules and KEDA's TriggerAuthentication) before the workload,
# so its pods find a NodePool; the ScaledObject after it, once its scale target exists.
# Every other object stays in wave 0 (no annotation).
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
SYNC_WAVES: dict[str, str] = {
    "Namespace": "-2",
    "EC2NodeClass": "-1",
    "NodePool": "-1",
    "ServiceMonitor": "-1",
    "PodMonitor": "-1",
    "PrometheusRule": "-1",
    "TriggerAuthentication": "-1",
    "ScaledObject": "1",
}
# Alerts for Prometheus servers without the operator (Amazon Managed Prometheus takes this file:
# aws amp create-rule-groups-namespace --data fileb://prometheus-rules.yml).
RULES_FILE = "prometheus-rules.yml"


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


def resource_list(plan_has: dict[str, bool], sync_waves: bool = True) -> tuple[Resource, ...]:
    out = []
    for entry in KIND_ORDER:
        if plan_has.get(entry, False):
            kind, _, variant = entry.partition("/")
            stem = f"{kind.lower()}-{variant}" if variant else kind.lower()
            wave = SYNC_WAVES.get(entry) if sync_waves else None
            annotations = (KV(SYNC_WAVE, wave),) if wave is not None else ()
            out.append(
                Resource(
                    kind=kind,
                    filename=f"{stem}.yaml",
                    template=f"k8s/{stem}.yaml.j2",
                    annotations=annotations,
                )
            )
    return tuple(out)


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
        "Namespace": spec.gitops.namespace,
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
        resources=resource_list(has, spec.gitops.sync_waves),
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
        namespace_labels=namespace_labels(),
    )


def generator_version() -> str:
    return __version__
