"""Frozen data the plan stage produces and the templates read. No logic here."""

from __future__ import annotations

from dataclasses import dataclass, field

from llmdeploy.errors import Notice


@dataclass(frozen=True)
class KV:
    key: str
    value: str


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str | None = None
    secret_name: str | None = None
    secret_key: str | None = None
    secret_optional: bool = False


@dataclass(frozen=True)
class Port:
    name: str
    port: int


@dataclass(frozen=True)
class Mount:
    name: str
    path: str
    read_only: bool = False
    sub_path: str | None = None


@dataclass(frozen=True)
class Probe:
    path: str
    port: str
    period: int
    failure_threshold: int
    timeout: int = 1
    initial_delay: int = 0
    success_threshold: int = 1


@dataclass(frozen=True)
class Resources:
    cpu: str
    memory: str
    ephemeral_storage: str | None
    gpus: int
    efa: int = 0  # vpc.amazonaws.com/efa devices


@dataclass(frozen=True)
class Container:
    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[EnvVar, ...]
    ports: tuple[Port, ...]
    mounts: tuple[Mount, ...]
    resources: Resources
    startup_probe: Probe | None = None
    readiness_probe: Probe | None = None
    liveness_probe: Probe | None = None
    read_only_root: bool = True
    run_as_user: int | None = None
    pre_stop_sleep: int | None = None
    # an init container: the longest it runs (the `timeout` its command runs under), for the
    # Deployment's progress deadline; None: no deadline of its own, as good as instant
    deadline_seconds: int | None = None


@dataclass(frozen=True)
class Volume:
    name: str
    kind: str  # emptyDir | memory | pvc | configMap | secret
    size_limit: str | None = None
    claim: str | None = None
    config_map: str | None = None
    secret: str | None = None  # Secret name (kind secret)
    read_only: bool = False
    items: tuple[KV, ...] = ()  # configMap key -> path


@dataclass(frozen=True)
class Toleration:
    key: str
    operator: str
    effect: str
    value: str | None = None


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Meta:
    name: str
    namespace: str
    labels: tuple[KV, ...]
    selector: tuple[KV, ...]


@dataclass(frozen=True)
class Budget:
    nodes: str
    reasons: tuple[str, ...] = ()  # empty: every reason


@dataclass(frozen=True)
class NodePoolPlan:
    name: str
    labels: tuple[KV, ...]
    requirements: tuple[Requirement, ...]
    taints: tuple[Toleration, ...]
    node_labels: tuple[KV, ...]
    expire_after: str
    termination_grace_period: str
    consolidation_policy: str
    consolidate_after: str
    budgets: tuple[Budget, ...]
    gpu_limit: int
    weight: int


@dataclass(frozen=True)
class ReservationTerm:
    """One EC2NodeClass capacityReservationSelectorTerms entry: its tags, and its other fields
    (id, ownerID, instanceMatchCriteria) as key-value entries in the CRD's spelling."""

    tags: tuple[KV, ...]
    entries: tuple[KV, ...]


@dataclass(frozen=True)
class BlockDevice:
    device_name: str
    size: str
    root_volume: bool  # the volume Karpenter counts as the node's ephemeral storage


@dataclass(frozen=True)
class NodeClassPlan:
    name: str
    labels: tuple[KV, ...]
    role: str
    ami_alias: str
    discovery_tag: str
    block_devices: tuple[BlockDevice, ...]
    instance_store_raid0: bool
    tags: tuple[KV, ...]
    reservation_terms: tuple[ReservationTerm, ...] = ()
    subnet_ids: tuple[str, ...] = ()  # empty: the subnets with the discovery tag
    placement_group: str | None = None  # a cluster placement group, by name


@dataclass(frozen=True)
class WorkloadPlan:
    pod_labels: tuple[KV, ...]
    pod_annotations: tuple[KV, ...]
    replicas: int | None  # None: an autoscaler owns spec.replicas
    service_account: str
    node_selector: tuple[KV, ...]
    tolerations: tuple[Toleration, ...]
    init_containers: tuple[Container, ...]
    containers: tuple[Container, ...]
    volumes: tuple[Volume, ...]
    termination_grace: int
    fs_group: int | None
    topology_key: str | None  # spread pods over this node label (None: no spread)


@dataclass(frozen=True)
class JobPlan:
    """A run-to-completion Job on the GPU NodePool (TensorRT-LLM's engine build), with the
    ServiceAccount it runs as when that is its own."""

    meta: Meta  # meta.name carries a hash of the inputs: same inputs, same (immutable) Job
    service_account: str
    service_account_meta: Meta | None  # render this ServiceAccount (None: an existing one)
    service_account_annotations: tuple[KV, ...]
    network_policy_meta: Meta  # its NetworkPolicy (no ingress), when NetworkPolicies render
    backoff_limit: int
    active_deadline_seconds: int
    ttl_seconds_after_finished: int | None
    fail_job_exit_codes: tuple[int, ...]  # podFailurePolicy: exit codes no retry can fix
    pod_labels: tuple[KV, ...]
    pod_annotations: tuple[KV, ...]
    node_selector: tuple[KV, ...]
    tolerations: tuple[Toleration, ...]
    init_containers: tuple[Container, ...]
    containers: tuple[Container, ...]
    volumes: tuple[Volume, ...]
    fs_group: int | None
    termination_grace: int


@dataclass(frozen=True)
class ScalerPlan:
    min_replicas: int
    max_replicas: int
    polling_interval: int
    cooldown_period: int
    server_address: str
    query: str
    threshold: str
    activation_threshold: str
    ignore_null_values: str  # "false": a missing series is an error, so the fallback applies
    fallback_failures: int
    fallback_replicas: int
    fallback_behavior: str
    scale_up_window: int
    scale_up_pods: int
    scale_up_period: int
    scale_down_window: int
    scale_down_pods: int
    scale_down_period: int
    # the object KEDA scales through its scale subresource
    target_api_version: str
    target_kind: str
    aws_region: str | None = None  # Amazon Managed Prometheus: SigV4 region
    auth_ref: str | None = None  # TriggerAuthentication name


@dataclass(frozen=True)
class RbacPlan:
    """A Role + RoleBinding in the serving namespace letting Prometheus discover targets."""

    name: str
    subject_name: str  # the Prometheus ServiceAccount
    subject_namespace: str


@dataclass(frozen=True)
class QueryAccessPlan:
    """A NetworkPolicy in Prometheus's namespace admitting the KEDA operator to its port."""

    name: str
    namespace: str
    prometheus_labels: tuple[KV, ...]
    keda_namespace: str
    keda_labels: tuple[KV, ...]
    port: int


@dataclass(frozen=True)
class TriggerAuthPlan:
    """KEDA TriggerAuthentication with AWS pod identity (SigV4 for Amazon Managed Prometheus)."""

    name: str
    role_arn: str | None


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str


@dataclass(frozen=True)
class AlertsPlan:
    group: str
    labels: tuple[KV, ...]  # on the PrometheusRule (what its Prometheus selects rules by)
    rules: tuple[AlertRule, ...]


@dataclass(frozen=True)
class MonitorPlan:
    kind: str  # ServiceMonitor | PodMonitor
    labels: tuple[KV, ...]
    port: str
    path: str
    interval: str


@dataclass(frozen=True)
class NetpolPlan:
    client_namespaces: tuple[str, ...]
    client_ports: tuple[int, ...]
    scraper_namespace: str
    scraper_labels: tuple[KV, ...]  # empty: any pod of scraper_namespace
    metrics_ports: tuple[int, ...]
    # pods of one replica group talk to each other on any port (NCCL, the distributed store)
    peer_selector: tuple[KV, ...] = ()
    client_cidrs: tuple[str, ...] = ()  # load balancers that send to pod IPs (ipBlock)


@dataclass(frozen=True)
class GroupPlan:
    """A replica spread over several pods: a LeaderWorkerSet group of one leader (the plan's
    ``workload``, which serves the API) and ``size - 1`` workers (``worker``)."""

    name: str  # the LeaderWorkerSet
    size: int  # pods per group, the leader included
    startup_policy: str
    restart_policy: str
    subdomain_policy: str
    max_unavailable: int
    max_surge: int
    worker: WorkloadPlan


@dataclass(frozen=True)
class Resource:
    """One rendered object: which template, which file, and in what order."""

    kind: str
    filename: str
    template: str
    annotations: tuple[KV, ...] = ()  # on the object's metadata (Argo CD's sync wave)


@dataclass(frozen=True)
class TemplateText:
    """Text the render stage makes from a template: the plan names the template and its
    context, so no text is rendered before the render stage."""

    template: str
    context: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class ExtraFile:
    """A non-Kubernetes file in the output (e.g. the TensorRT-LLM engine build script)."""

    filename: str
    content: TemplateText
    executable: bool = False


@dataclass(frozen=True)
class ConfigEntry:
    """One key of the engine's ConfigMap, its value rendered from a template."""

    key: str
    content: TemplateText


@dataclass(frozen=True)
class Plan:
    name: str
    engine: str
    meta: Meta
    nodepool: NodePoolPlan
    nodeclass: NodeClassPlan
    workload: WorkloadPlan
    service_ports: tuple[Port, ...]
    service_account_annotations: tuple[KV, ...]
    scaler: ScalerPlan
    monitor: MonitorPlan | None
    netpol: NetpolPlan | None
    pdb_max_unavailable: int
    config_map_data: tuple[ConfigEntry, ...]
    resources: tuple[Resource, ...]
    serving_selector: tuple[KV, ...]  # the pods that serve the API (Service, PodMonitor)
    group: GroupPlan | None = None  # a LeaderWorkerSet instead of a Deployment
    extra_files: tuple[ExtraFile, ...] = field(default=())
    header_command: str = ""
    prometheus_rbac: RbacPlan | None = None
    query_access: QueryAccessPlan | None = None
    trigger_auth: TriggerAuthPlan | None = None
    alerts: AlertsPlan | None = None
    notices: tuple[Notice, ...] = ()  # warnings and assumptions the CLI prints, located
    job: JobPlan | None = None
    # Deployment progressDeadlineSeconds: one new pod's cold start (plan.pod)
    progress_deadline: int = 600
    # Deployment rollingUpdate, from the GPU headroom (plan.rollout)
    max_surge: int = 1
    max_unavailable: str = "0"  # an int or a percentage
    # the Namespace's labels: a namespace a fleet shares is no one instance's
    namespace_labels: tuple[KV, ...] = ()


@dataclass(frozen=True)
class EngineParts:
    """What an engine planner decides (:meth:`llmdeploy.engines.base.Engine.plan`);
    :func:`llmdeploy.plan.assemble.assemble` adds everything engine-independent."""

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
