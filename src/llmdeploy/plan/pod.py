"""Pod-level decisions every engine shares: GPU resources and taints, CPU/memory as the pod's
share of the node, ``/dev/shm``, the probes and the startup budget, the pod template."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from llmdeploy.catalog.ec2 import Instance
from llmdeploy.plan.capacity import allowed_instances, pod_share
from llmdeploy.plan.names import pool_name
from llmdeploy.plan.types import (
    KV,
    Container,
    Meta,
    Probe,
    Resources,
    Toleration,
    Volume,
    WorkloadPlan,
)
from llmdeploy.spec.sections import Spec

if TYPE_CHECKING:
    from llmdeploy.sizing.types import Sizing

GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT = Toleration(key=GPU_RESOURCE, operator="Exists", effect="NoSchedule", value=None)

# /dev/shm: NCCL and the CUDA IPC buffers of the tensor-parallel workers live there. 2 GiB per
# GPU in the pod, at least 2 GiB, capped at 32 GiB (NVIDIA runs Triton with --shm-size=2g per
# process; vLLM's docs use --ipc=host or several GiB for TP > 1).
SHM_GIB_PER_GPU = 2
SHM_GIB_MAX = 32


# The least a serving pod can run with, whatever the node: one core, and 4 GiB for its processes
# beside the /dev/shm tmpfs, which counts against the memory limit. A node whose share after
# the DaemonSet reserve is smaller cannot run the pod (llmdeploy's floor, not a measurement).
POD_FLOOR_CPU_MILLI = 1000
POD_FLOOR_MEMORY_MIB = 4096


def gpus_per_pod(spec: Spec) -> int:
    """GPUs one pod requests: tensorParallel x dataParallel x pipelineParallel on one node, the
    node's GPUs across nodes (``Hardware.gpus_per_pod``). The helpers below take this count,
    never the TP degree alone."""
    return spec.hardware.gpus_per_pod


def pods_per_node(instance: Instance, gpus: int) -> int:
    return instance.pods_per_node(gpus)


def pod_resources(
    spec: Spec, instance: Instance, ephemeral_gib: int | None, efa: int = 0
) -> Resources:
    """CPU and memory as this pod's share of the smallest node the NodePool allows
    (``plan.capacity``): never more than fits beside the DaemonSet reserve on any allowed type;
    whole cores, requests equal limits (Guaranteed QoS)."""
    cpu_milli, mem_mib = pod_share(spec, allowed_instances(spec, instance))
    return Resources(
        cpu=str(max(1, cpu_milli // 1000)),
        memory=f"{max(4, mem_mib // 1024)}Gi",
        ephemeral_storage=f"{ephemeral_gib}Gi" if ephemeral_gib else None,
        gpus=gpus_per_pod(spec),
        efa=efa,
    )


def shm_gib(gpus: int) -> int:
    return min(SHM_GIB_MAX, max(2, SHM_GIB_PER_GPU * gpus))


def shm_size(gpus: int) -> str:
    return f"{shm_gib(gpus)}Gi"


def startup_budget_seconds(
    spec: Spec, model_gib: float, downloads_in_main: bool, read_gib: float | None = None
) -> int:
    """Seconds the startupProbe allows: download (if the server downloads), load, warm-up.

    model_gib is the whole checkpoint as stored (all shards); read_gib what the pod's GPUs
    read from the local cache together (data-parallel ranks each read the replicated
    weights, a pipeline stage its own layers; default model_gib). Bandwidths are Gbit/s.
    """
    st = spec.startup
    if st.override_seconds is not None:
        return st.override_seconds
    gbits = model_gib * 2**30 * 8 / 1e9
    read_gbits = (model_gib if read_gib is None else read_gib) * 2**30 * 8 / 1e9
    seconds = read_gbits / st.disk_read_gbps + st.warmup_seconds
    if downloads_in_main:
        seconds += gbits / st.download_gbps
    return int(math.ceil(seconds * st.safety_factor / 60.0) * 60)


# Fixed part of an S3 download's deadline: listing, credentials, the tool's start.
FETCH_SLACK_SECONDS = 600


def fetch_deadline_seconds(spec: Spec, model_gib: float) -> int:
    """Seconds an init container may spend downloading ``model_gib`` before it is killed and
    retried. Init containers have no deadline of their own (activeDeadlineSeconds is pod-wide
    and would also end the serving container), so the command runs under `timeout`."""
    st = spec.startup
    gbits = model_gib * 2**30 * 8 / 1e9
    return int(math.ceil(gbits / st.download_gbps * st.safety_factor / 60.0) * 60) + (
        FETCH_SLACK_SECONDS
    )


# From a pod the scheduler cannot place to its first init container running: Karpenter launches
# a GPU node, it registers, the NVIDIA device plugin advertises its GPUs, and the kubelet pulls
# and unpacks a 10-20 GB serving image. llmdeploy's allowance, not a measurement (inference:
# GPU nodes take 3-6 minutes to become Ready, an image of that size several more to pull).
NODE_START_SECONDS = 900
# The kubelet's longest back-off between restarts of a failing container (MaxContainerBackOff,
# kubernetes/kubernetes pkg/kubelet/kubelet.go): how late a pod notices what it waited for.
MAX_BACKOFF_SECONDS = 300


def startup_window_seconds(workload: WorkloadPlan) -> int:
    """The longest startupProbe window of the pod's containers: how long a server may take to
    answer once its init containers are done."""
    windows = [
        c.startup_probe.period * c.startup_probe.failure_threshold
        for c in workload.containers
        if c.startup_probe is not None
    ]
    return max(windows, default=0)


def progress_deadline_seconds(workload: WorkloadPlan, wait_seconds: int = 0) -> int:
    """``progressDeadlineSeconds`` of the Deployment: the longest one new pod may take from its
    creation to Ready. The deployment controller reports ``ProgressDeadlineExceeded`` when no
    pod was created, became ready or available and no old one was removed for that long
    (kubernetes/kubernetes@277391ee pkg/controller/deployment/util/deployment_util.go
    DeploymentProgressing, DeploymentTimedOut); a rollout adds one pod at a time, so each step
    waits for one cold start: a node (``NODE_START_SECONDS``), what the pod waits for before
    its init containers can succeed (``wait_seconds``: the engine build Job, then the kubelet's
    back-off), every init container's deadline, the startupProbe window and one readiness
    window. Whole minutes."""
    init = sum(c.deadline_seconds or 0 for c in workload.init_containers)
    readiness = max(
        (
            c.readiness_probe.period * c.readiness_probe.failure_threshold
            for c in workload.containers
            if c.readiness_probe is not None
        ),
        default=0,
    )
    seconds = NODE_START_SECONDS + wait_seconds + init + startup_window_seconds(workload)
    return int(math.ceil((seconds + readiness) / 60.0) * 60)


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
        # Omitted while KEDA's HPA owns the scale subresource: "When an HPA is enabled, it is
        # recommended that the value of spec.replicas of the Deployment ... be removed from
        # their manifest(s)", or every apply resets the count (https://kubernetes.io/docs/tasks/
        # run-application/horizontal-pod-autoscale/#migrating-deployments-and-statefulsets-to-
        # horizontal-autoscaling).
        replicas=None if spec.autoscaling.enabled else spec.autoscaling.min_replicas,
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


def checkpoint_gib(spec: Spec, sizing: Sizing) -> float:
    """GiB of weights across the pod's GPUs: what the model cache and the load time scale with."""
    return float(sizing.weights_gib_per_gpu) * spec.hardware.tensor_parallel


def read_gib(spec: Spec, sizing: Sizing) -> float:
    """GiB the pod's GPUs read from the local cache at start: the checkpoint as stored, and
    for every further data-parallel rank its replicated weights (all but the routed experts,
    which are spread over every GPU) once more; a pipeline stage's GPUs read their own layers
    (pipeline and data parallelism are not combined)."""
    tp, dp = spec.hardware.tensor_parallel, spec.hardware.data_parallel
    if sizing.pp > 1:
        return sizing.checkpoint_gib / sizing.pp
    if dp == 1:
        return sizing.checkpoint_gib
    experts = dict(sizing.weights_breakdown_gib).get("experts", 0.0)
    return sizing.checkpoint_gib + (dp - 1) * (sizing.weights_gib_per_gpu - experts) * tp
