"""The llmdeploy spec: one YAML file describes one model deployment.

Frozen pydantic v2 models, ``extra="forbid"`` everywhere, camelCase keys in YAML. Field
descriptions become the JSON Schema (``llmdeploy schema``, committed as
``docs/spec.schema.json``). This module only describes shape and local constraints; decisions
that need catalogs or arithmetic live in ``size`` and ``plan``.
"""

from __future__ import annotations

import functools
import ipaddress
import operator
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, field_validator, model_validator

from llmdeploy.engines import registry
from llmdeploy.spec.cluster import Cluster
from llmdeploy.spec.fields import (
    DNS1123_LABEL,
    INSTANCE_FAMILY,
    INSTANCE_TYPE,
    S3_ACCESS_HINT,
    EngineSection,
    SpecModel,
    UserLabels,
    check_cli_word,
    check_dns_label,
    check_no_credentials,
    fresh,
    located_error,
)
from llmdeploy.spec.prometheus import PROMETHEUS_AUTH_HINT, KubePrometheusStack, Prometheus

API_VERSION = "llmdeploy.dev/v1alpha1"
KIND = "ModelDeployment"


Quantization = Literal["none", "fp8", "int8", "int4-awq", "int4-gptq"]
KvCacheDtype = Literal["auto", "fp8"]


class SecretKeyRef(SpecModel):
    name: str = Field("hf-token", description="Secret name.", min_length=1, max_length=253)
    key: str = Field("token", description="Key inside the Secret.", min_length=1, max_length=253)


class ModelLoading(SpecModel):
    """How replicas get the weights. Avoid every replica re-downloading 140 GB."""

    mode: Literal["huggingface", "s3", "pvc"] = Field(
        "huggingface",
        description=(
            "huggingface: the server downloads from the Hub at start (token from "
            "`hfTokenSecret`). s3: an init container syncs `s3Uri` to local NVMe "
            "(instance-store RAID0) before the server starts. pvc: weights are read from a "
            "shared, pre-populated PersistentVolumeClaim (`pvcName`)."
        ),
    )
    hf_token_secret: SecretKeyRef | None = Field(
        default_factory=fresh(SecretKeyRef),
        description="Secret holding a Hugging Face token (never the token itself). null: none.",
    )
    s3_uri: str | None = Field(
        None,
        description="s3://bucket/prefix holding the model files (mode s3).",
        pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$",
    )
    pvc_name: str | None = Field(
        None,
        description="PersistentVolumeClaim name (mode pvc).",
        pattern=r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
    )

    @field_validator("s3_uri")
    @classmethod
    def _s3(cls, v: str | None) -> str | None:
        return v and check_no_credentials(v, "the S3 URI", S3_ACCESS_HINT)

    @model_validator(mode="after")
    def _mode_fields(self) -> ModelLoading:
        if self.mode == "s3" and not self.s3_uri:
            raise ValueError("modelLoading.mode s3 needs `s3Uri`")
        if self.mode == "pvc" and not self.pvc_name:
            raise ValueError("modelLoading.mode pvc needs `pvcName`")
        return self


class ModelSpec(SpecModel):
    id: str = Field(
        ...,
        min_length=1,
        max_length=512,
        description="Model id passed to the engine: a Hugging Face repo id or a path/URI.",
    )
    architecture: str = Field(
        ...,
        min_length=1,
        description=(
            "Architecture for sizing: a catalog name (see `llmdeploy size --help`, e.g. "
            "`llama-3-70b`) or a path to a Hugging Face config.json, relative to the spec."
        ),
    )
    revision: str | None = Field(None, description="Hub revision (branch, tag or commit).")
    served_name: str | None = Field(
        None, description="Name clients use in the OpenAI API; defaults to `id`."
    )
    loading: ModelLoading = Field(default_factory=fresh(ModelLoading))

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        hint = "name a Secret in `model.loading.hfTokenSecret`; it is mounted as a file"
        return check_no_credentials(check_cli_word(v, "model id") or v, "the model id", hint)

    @field_validator("revision")
    @classmethod
    def _revision(cls, v: str | None) -> str | None:
        return check_cli_word(v, "model revision")

    @field_validator("served_name")
    @classmethod
    def _served(cls, v: str | None) -> str | None:
        return check_cli_word(v, "servedName")


# The engine section: one model per registered engine, selected by `type`.
if TYPE_CHECKING:
    Engine = EngineSection
else:
    # VllmEngine | TrtllmEngine | ..., the members taken from the registry
    Engine = Annotated[
        functools.reduce(operator.or_, registry.section_models()), Field(discriminator="type")
    ]


class Hardware(SpecModel):
    instance_type: str | None = Field(
        None, description="EC2 instance type, e.g. p4d.24xlarge. Exclusive with instanceFamily."
    )
    instance_family: str | None = Field(
        None,
        description=(
            "EC2 instance family, e.g. g6e; llmdeploy picks the cheapest size that fits the "
            "tensor-parallel degree and the model."
        ),
    )
    tensor_parallel: int = Field(
        1, ge=1, le=64, description="Tensor-parallel degree (GPUs per data-parallel rank)."
    )
    data_parallel: int = Field(
        1,
        ge=1,
        le=64,
        description=(
            "Data-parallel ranks inside one pod (vLLM --data-parallel-size): each holds its own "
            "KV cache and attention weights; MoE experts are spread over all TP x DP GPUs. "
            "GPUs per pod = tensorParallel x dataParallel."
        ),
    )
    nodes_per_replica: Annotated[int, Field(ge=1, le=16)] | Literal["auto"] = Field(
        1,
        description=(
            "Nodes one replica spans (a LeaderWorkerSet group of one pod per node, one "
            "pipeline stage per node, tensorParallel = the node's GPUs). auto: the fewest "
            "nodes, 1 to 8, that fit."
        ),
    )
    pipeline_parallel: int | None = Field(
        None,
        ge=1,
        le=64,
        description=(
            "Pipeline-parallel stages per replica. Default: nodesPerReplica (one stage per "
            "node). On one node: tensorParallel x pipelineParallel GPUs in the pod."
        ),
    )
    efa: bool | None = Field(
        None,
        description=(
            "Request the instance's EFA devices (vpc.amazonaws.com/efa) for the pods. Default: "
            "on when nodesPerReplica > 1 and the instance type has EFA."
        ),
    )

    @field_validator("instance_type")
    @classmethod
    def _itype(cls, v: str | None) -> str | None:
        if v is not None and not INSTANCE_TYPE.fullmatch(v):
            raise ValueError(f"not an EC2 instance type: {v!r} (expected e.g. g5.12xlarge)")
        return v

    @field_validator("instance_family")
    @classmethod
    def _ifam(cls, v: str | None) -> str | None:
        if v is not None and not INSTANCE_FAMILY.fullmatch(v):
            raise ValueError(f"not an EC2 instance family: {v!r} (expected e.g. g6e)")
        return v

    @model_validator(mode="after")
    def _one_of(self) -> Hardware:
        if (self.instance_type is None) == (self.instance_family is None):
            raise ValueError("set exactly one of `instanceType` and `instanceFamily`")
        nodes, pp = self.nodes_per_replica, self.pipeline_parallel
        if nodes == "auto" and pp is not None:
            raise located_error(
                "Hardware",
                ("pipelineParallel",),
                "`nodesPerReplica: auto` chooses the pipeline-parallel degree (one stage per "
                "node): leave `pipelineParallel` out, or set `nodesPerReplica`",
                pp,
            )
        if self.data_parallel > 1 and (nodes != 1 or (pp or 1) > 1):
            raise located_error(
                "Hardware",
                ("dataParallel",),
                "`dataParallel` with pipeline stages or `nodesPerReplica`: llmdeploy renders "
                "data parallelism inside one pod without pipeline parallelism only (vLLM's "
                "multi-node data parallel is not rendered)",
                self.data_parallel,
            )
        if isinstance(nodes, int) and nodes > 1 and pp is not None and pp != nodes:
            raise located_error(
                "Hardware",
                ("pipelineParallel",),
                f"`pipelineParallel` {pp} on {nodes} nodes: each node runs one pipeline stage, "
                f"so leave `pipelineParallel` out (it is {nodes})",
                pp,
            )
        return self

    @property
    def gpus_per_pod(self) -> int:
        """GPUs one pod requests: tensorParallel x dataParallel x pipelineParallel on one node;
        across nodes one stage (tensorParallel GPUs) per pod, also with ``auto``."""
        one_node = self.nodes_per_replica == 1
        pp = (self.pipeline_parallel or 1) if one_node else 1
        return self.tensor_parallel * self.data_parallel * pp


Modality = Literal["image", "video", "audio"]


class Multimodal(SpecModel):
    """Multimodal models: what one prompt may carry and how the encoder is profiled (vLLM)."""

    limit_per_prompt: dict[Modality, Annotated[int, Field(ge=0, le=1024)]] | None = Field(
        None,
        description=(
            "Items per prompt by modality (--limit-mm-per-prompt); 0 for every modality serves "
            "the language model only and does not load the encoder. Unset: vLLM's default."
        ),
    )
    skip_profiling: bool = Field(
        False,
        description=(
            "Skip the encoder's dummy pass in the memory profile (--skip-mm-profiling): more KV "
            "cache, but the encoder's run-time memory is then not reserved."
        ),
    )
    encoder_tensor_parallel: Literal["weights", "data"] = Field(
        "weights",
        description=(
            "weights: the encoder is split across the TP ranks; data: every rank holds the whole "
            "encoder and takes a share of the images (--mm-encoder-tp-mode data)."
        ),
    )


class Serving(SpecModel):
    """Engine limits: context length, batching, memory fraction, caching."""

    max_model_len: int = Field(8192, ge=16, le=10_485_760, description="Max tokens per sequence.")
    max_num_batched_tokens: int | None = Field(
        None,
        ge=16,
        le=10_485_760,
        description=(
            "Tokens per scheduler step (vLLM --max-num-batched-tokens, TensorRT-LLM "
            "max_num_tokens). Unset: the engine's default (vLLM serve 8192 on GPUs of 70 GiB "
            "and more except A100, else 2048; TensorRT-LLM 8192), or the budget the latency "
            "targets decide when another one needs fewer replicas."
        ),
    )
    max_num_seqs: int | None = Field(
        None, ge=1, le=65_536, description="Max concurrent sequences/replica."
    )
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="vLLM budget fraction of total GPU memory; default is the version's default.",
    )
    chunked_prefill: bool = Field(True, description="Chunked prefill (always on in vLLM V1).")
    prefix_caching: bool = Field(True, description="Automatic prefix caching.")
    expert_parallel: bool = Field(
        False,
        description=(
            "MoE models: whole experts per GPU across the TP x DP ranks instead of every expert "
            "split across them (--enable-expert-parallel)."
        ),
    )
    multimodal: Multimodal | None = Field(
        None, description="Multimodal models: encoder limits and profiling."
    )


class Slo(SpecModel):
    """Expected load and latency targets; the sizing check tests them."""

    concurrent_requests: int = Field(
        16,
        ge=1,
        le=10_000_000,
        description="Expected concurrent requests at peak, across all replicas.",
    )
    input_tokens: int = Field(512, ge=1, le=10_485_760, description="Typical prompt length.")
    output_tokens: int = Field(256, ge=1, le=10_485_760, description="Typical completion length.")
    ttft_ms: int | None = Field(
        None, ge=1, le=3_600_000, description="Time-to-first-token target (p99)."
    )
    itl_ms: int | None = Field(
        None, ge=1, le=3_600_000, description="Inter-token latency target (p99)."
    )
    requests_per_second: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description=(
            "Peak request rate across all replicas, for an open-loop (Poisson) load: the "
            "default arrival when set. `concurrentRequests` then only sizes the KV cache."
        ),
    )
    arrival: Literal["closed-loop", "steady", "poisson"] | None = Field(
        None,
        description=(
            "How requests arrive, which the latency estimates follow "
            "(docs/performance-model.md, 'Arrival patterns'): closed-loop: "
            "`concurrentRequests` clients start together and resend at once, with fixed "
            "lengths (what benchmark tools do: requests move in waves); steady: the same "
            "clients staggered, output lengths spread +-50 % (chat users); poisson: an open "
            "loop at `requestsPerSecond`. Default: poisson when `requestsPerSecond` is set, "
            "else steady."
        ),
    )

    @model_validator(mode="after")
    def _arrival(self) -> Slo:
        if self.arrival == "poisson" and self.requests_per_second is None:
            raise ValueError("`arrival: poisson` needs `requestsPerSecond` (the open-loop rate)")
        if self.arrival in ("closed-loop", "steady") and self.requests_per_second is not None:
            raise ValueError(
                f"`arrival: {self.arrival}` is a load of `concurrentRequests` clients; "
                "`requestsPerSecond` is for `arrival: poisson` (remove one of them)"
            )
        return self

    @property
    def arrival_pattern(self) -> Literal["closed-loop", "steady", "poisson"]:
        """The arrival pattern the estimates assume (the documented default filled in)."""
        if self.arrival is not None:
            return self.arrival
        return "poisson" if self.requests_per_second is not None else "steady"


class Fallback(SpecModel):
    """What KEDA does when it cannot read the metric (KEDA `fallback`)."""

    failure_threshold: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description=(
            "Consecutive failed reads before the fallback applies. Default: 3 when `replicas` "
            "is `minReplicas`; above it, as many reads as KEDA makes during one replica's cold "
            "start, so a fresh deploy, whose metric does not exist until its first replica "
            "serves, does not scale to `replicas` (docs/production.md §8)."
        ),
    )
    replicas: int | None = Field(
        None,
        ge=1,
        le=1000,
        description=(
            "Replicas kept while the metric cannot be read: the current count, or this many if "
            "that is higher (KEDA behavior currentReplicasIfHigher). Default: `minReplicas`."
        ),
    )


# Scale-out queue depth when the performance model gives none (no TTFT target, or a
# configuration it does not model): llmdeploy's fixed default before the model existed.
DEFAULT_WAITING_REQUESTS = 10


class Autoscaling(SpecModel):
    """KEDA scaling on queued requests read from Prometheus."""

    enabled: bool = Field(
        True,
        description=(
            "Render the KEDA ScaledObject. The Deployment then has no `replicas` field: the "
            "autoscaler owns it, and an apply would otherwise reset the fleet. false: no "
            "ScaledObject, and the Deployment runs `minReplicas` replicas."
        ),
    )
    min_replicas: int = Field(
        1,
        ge=1,
        le=1000,
        description=(
            "At least 1: the queue metric KEDA reads only exists while a replica runs, so a "
            "deployment scaled to zero would never scale back up on it."
        ),
    )
    max_replicas: int = Field(4, ge=1, le=1000)
    waiting_requests_per_replica: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description=(
            "Queue depth per replica that triggers a scale-out. Default: the depth at which "
            "the performance model says p99 TTFT would cross `slo.ttftMs` "
            "(docs/performance-model.md); 10 without a TTFT target or a model of the "
            "configuration."
        ),
    )
    polling_interval: int = Field(15, ge=1, le=3600, description="KEDA pollingInterval (seconds).")
    cooldown_period: int = Field(
        300, ge=0, le=86_400, description="KEDA cooldownPeriod (only applies to scaling to zero)."
    )
    scale_down_stabilization: int = Field(
        600, ge=0, le=3600, description="HPA scale-down stabilization window (seconds)."
    )
    scale_up_stabilization: int | None = Field(
        None,
        ge=0,
        le=3600,
        description=(
            "HPA scale-up stabilization window (seconds): the HPA adds replicas only when every "
            "recommendation of that window asks for them. Default: the signal's averaging "
            "window plus the HPA's 15 s sync, so no single scrape scales out. Delays a needed "
            "scale-out by as much, against minutes of node launch and model load "
            "(docs/production.md §8)."
        ),
    )
    prometheus_address: str | None = Field(
        None,
        description=(
            "Prometheus base URL KEDA queries; default: the address of "
            "`monitoring.prometheus` (its Service, or the AMP workspace)."
        ),
        pattern=r"^https?://[^\s]+$",
    )
    keda_namespace: str = Field(
        "keda",
        description=(
            "Namespace of the KEDA operator (the pod that queries Prometheus), for the "
            "NetworkPolicy that lets it reach kube-prometheus."
        ),
    )
    fallback: Fallback = Field(default_factory=fresh(Fallback))

    @field_validator("keda_namespace")
    @classmethod
    def _keda_ns(cls, v: str) -> str:
        return check_dns_label(v)

    @field_validator("prometheus_address")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        return v and check_no_credentials(v, "the Prometheus address", PROMETHEUS_AUTH_HINT)

    @property
    def queue_threshold(self) -> int:
        """``waitingRequestsPerReplica`` as the plan uses it (the pipeline fills in the
        model's value before planning when the spec leaves it out)."""
        return self.waiting_requests_per_replica or DEFAULT_WAITING_REQUESTS

    @model_validator(mode="after")
    def _range(self) -> Autoscaling:
        if self.min_replicas > self.max_replicas:
            raise ValueError("`minReplicas` must not exceed `maxReplicas`")
        return self


class Startup(SpecModel):
    """Assumptions behind the computed startupProbe budget (docs/production.md)."""

    download_gbps: float = Field(
        2.0,
        gt=0,
        le=400,
        description="Sustained download bandwidth from the Hub or S3, Gbit/s.",
    )
    disk_read_gbps: float = Field(
        8.0, gt=0, le=400, description="Read bandwidth from the local model cache, Gbit/s."
    )
    warmup_seconds: int = Field(
        300,
        ge=0,
        le=7200,
        description="Engine start, torch.compile / engine deserialization and CUDA-graph capture.",
    )
    safety_factor: float = Field(1.5, ge=1, le=10, description="Multiplier on the estimate.")
    override_seconds: int | None = Field(
        None, ge=60, le=86400, description="Use this startup budget instead of the estimate."
    )


class ServiceAccount(SpecModel):
    """The pods' ServiceAccount: an IRSA role for S3 access, never keys."""

    iam_role_arn: str | None = Field(
        None,
        description=(
            "IAM role for service accounts (IRSA) annotation; needed to read S3 (model loading "
            "mode s3, TensorRT-LLM engines). No keys are ever rendered."
        ),
        pattern=r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]+$",
    )
    pod_identity: bool = Field(
        False,
        description=(
            "An EKS Pod Identity association gives this ServiceAccount its IAM role (created "
            "outside llmdeploy, e.g. `aws eks create-pod-identity-association`); exclusive with "
            "`iamRoleArn`. Reading S3 needs one of the two: the nodes' IMDS hop limit of 1 keeps "
            "the instance profile's credentials from pods."
        ),
    )

    @model_validator(mode="after")
    def _one_identity(self) -> ServiceAccount:
        if self.iam_role_arn and self.pod_identity:
            raise ValueError("set `iamRoleArn` (IRSA) or `podIdentity`, not both")
        return self


class GitOps(SpecModel):
    """What a first sync of the rendered directory needs (docs/gitops.md)."""

    namespace: bool = Field(
        True,
        description=(
            "Render the Namespace named by `namespace` (namespace.yaml), so `kubectl apply -k` "
            "and a first Argo CD or Flux sync work on a fresh cluster. false: the namespace is "
            "created elsewhere (and is not pruned with this deployment)."
        ),
    )
    sync_waves: bool = Field(
        True,
        description=(
            "Argo CD `argocd.argoproj.io/sync-wave` annotations: the Namespace first, the "
            "Karpenter, monitoring and KEDA TriggerAuthentication objects before the workload, "
            "the ScaledObject after it. Other tools ignore them."
        ),
    )


class Network(SpecModel):
    """Who may call the server (NetworkPolicy) and where Prometheus runs."""

    client_namespaces: tuple[str, ...] | None = Field(
        None,
        strict=False,  # a YAML list
        description=(
            "Namespaces whose pods may call the inference port (NetworkPolicy). Default: the "
            "deployment's own namespace."
        ),
    )
    network_policy: bool = Field(
        True,
        description=(
            "Render a NetworkPolicy: clients reach the serving ports, the Prometheus pods of "
            "`monitoring.prometheus` the metrics port, nothing else."
        ),
    )
    load_balancer_cidrs: tuple[str, ...] = Field(
        (),
        strict=False,  # a YAML list
        max_length=20,
        description=(
            "Source CIDRs admitted to the serving ports besides the client namespaces' pods: "
            "the subnets of a load balancer that sends to pod IPs (AWS Load Balancer "
            "Controller target type `ip`: NLB or ALB nodes, and their health checks, connect "
            "from their own addresses, which no namespace selector matches), e.g. "
            "10.0.0.0/16."
        ),
    )

    @field_validator("load_balancer_cidrs")
    @classmethod
    def _cidrs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for cidr in v:
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError as exc:
                raise ValueError(f"{cidr!r} is not a CIDR block ({exc})") from None
        return v

    @field_validator("client_namespaces")
    @classmethod
    def _clients(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for ns in v or ():
            check_dns_label(ns)
        return v


class Monitoring(SpecModel):
    """The Prometheus-operator object that makes the autoscaling metric exist."""

    kind: Literal["ServiceMonitor", "PodMonitor", "none"] = Field(
        "ServiceMonitor", description="Prometheus-operator object that makes the metric exist."
    )
    labels: UserLabels = Field(
        default_factory=fresh(dict),
        description=(
            "Extra labels so your Prometheus selects the monitor (e.g. release: kps). Keys under "
            "app.kubernetes.io/ are reserved: llmdeploy sets them."
        ),
        json_schema_extra={"propertyNames": {"not": {"pattern": "^app\\.kubernetes\\.io/"}}},
    )
    interval: str = Field("15s", pattern=r"^[0-9]+(ms|s|m)$")
    prometheus: Prometheus = Field(
        default_factory=fresh(KubePrometheusStack),
        description=(
            "Which Prometheus scrapes the server and answers KEDA, selected by `flavor`: "
            "kube-prometheus, kube-prometheus-stack (default, release `kube-prometheus-stack` "
            "in `monitoring`), amazon-managed or custom. Decides the monitor labels, RBAC, "
            "NetworkPolicies, KEDA authentication and the query address."
        ),
    )
    alerts: bool = Field(
        False,
        description=(
            "Render alerts for the scaling pipeline (metric absent, queue above what "
            "maxReplicas absorb, KV cache full): a PrometheusRule for the operator flavours, "
            "a Prometheus rules file otherwise. Off by default because no official "
            "PrometheusRule CRD is bundled: a rendered PrometheusRule is reported as not "
            "validated unless --crd-dir holds its CRD (its PromQL is always parsed in tests)."
        ),
    )


class Spec(SpecModel):
    """One model deployment."""

    api_version: Literal["llmdeploy.dev/v1alpha1"] = Field(..., description="Spec format version.")
    kind: Literal["ModelDeployment"] = "ModelDeployment"
    name: str = Field(
        ...,
        min_length=1,
        max_length=40,
        description="DNS-1123 label naming every rendered object.",
    )
    namespace: str = Field("llm-serving", min_length=1, max_length=63)
    model: ModelSpec
    engine: Engine = Field(default_factory=registry.default_section)
    quantization: Quantization = Field(
        "none",
        description=(
            "Weight quantization: none (16-bit), fp8, int8, int4-awq, int4-gptq. For vLLM, "
            "int4/int8 expect a pre-quantized checkpoint; fp8 also works at run time."
        ),
    )
    kv_cache_dtype: KvCacheDtype = Field("auto", description="KV cache element type.")
    hardware: Hardware
    serving: Serving = Field(default_factory=fresh(Serving))
    slo: Slo = Field(default_factory=fresh(Slo))
    autoscaling: Autoscaling = Field(default_factory=fresh(Autoscaling))
    cluster: Cluster
    startup: Startup = Field(default_factory=fresh(Startup))
    service_account: ServiceAccount = Field(default_factory=fresh(ServiceAccount))
    network: Network = Field(default_factory=fresh(Network))
    monitoring: Monitoring = Field(default_factory=fresh(Monitoring))
    gitops: GitOps = Field(default_factory=fresh(GitOps))

    @field_validator("name", "namespace")
    @classmethod
    def _dns_label(cls, v: str) -> str:
        if not DNS1123_LABEL.fullmatch(v):
            raise ValueError(
                f"{v!r} is not a DNS-1123 label (lowercase letters, digits and '-', "
                "starting and ending with a letter or digit)"
            )
        return v


def json_schema() -> dict[str, object]:
    """The spec's JSON Schema, as committed in docs/spec.schema.json."""
    schema = Spec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://llmdeploy.dev/schemas/v1alpha1/spec.schema.json"
    return schema
