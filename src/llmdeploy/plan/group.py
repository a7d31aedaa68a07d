"""A replica spread over several nodes: the LeaderWorkerSet group, and the EFA devices and
environment its pods need. docs/multinode.md explains each decision and its failure modes.

Sources: kubernetes-sigs/lws@v0.10.0 ``api/leaderworkerset/v1/leaderworkerset_types.go``
(fields, defaults, labels, env vars), ``pkg/controllers/pod_controller.go`` (restart and
startup handling), ``pkg/utils/controller/controller_utils.go`` (headless Services);
aws/karpenter-provider-aws@v1.14.1 ``pkg/providers/instancetype/types.go`` (``efas``: the
``vpc.amazonaws.com/efa`` capacity of an instance type is its maximum EFA interfaces).
"""

from __future__ import annotations

from llmdeploy.catalog.ec2 import Instance
from llmdeploy.plan.types import KV, EnvVar, GroupPlan, Meta, WorkloadPlan
from llmdeploy.spec.sections import Spec

# Labels and env vars the LWS controller sets on every pod of a group.
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"  # "0" on the leader
LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"  # <lws>-<group>.<subdomain>.<namespace>
WORKER_INDEX_ENV = "LWS_WORKER_INDEX"
GROUP_SIZE_ENV = "LWS_GROUP_SIZE"

# Workers start as soon as the leader pod exists. LeaderReady would create them only once the
# leader is Ready, but a distributed vLLM leader only answers /health after every worker has
# joined its process group: the group would never start (pod_controller.go defers the worker
# StatefulSet "because leader pod is not ready").
STARTUP_POLICY = "LeaderCreated"
# A pod or container restart recreates the whole group, but only once no pod of the group is
# Pending (LWS >= v0.9 field; pod_controller.go handleRestartPolicy skips the recreation while
# pendingPodsInGroup finds a Pending pod or fewer pods than the group's size): the leader's
# process group cannot take a restarted worker back, so after the start a lone restart would
# leave the group hung rather than serving, while during the start RecreateGroupOnPodRestart
# (the default) deleted every pod when one node's init container restarted, and every node
# synced the checkpoint again. An init container's restart count stays above 0 after the pod
# starts (pod_utils.go ContainerRestarted), so the group is still recreated when that pod is
# the last to leave Pending: the S3 sync therefore retries inside its container
# (plan.loading.retrying) and exits only past its deadline.
RESTART_POLICY = "RecreateGroupAfterStart"
# One headless Service per group, named after its leader pod. With the Shared policy the
# headless Service is named like the LeaderWorkerSet, and the controller reuses an existing
# Service of that name (CreateHeadlessServiceIfNotExists): llmdeploy's ClusterIP Service, which
# publishes no per-pod DNS names, so LWS_LEADER_ADDRESS would not resolve.
SUBDOMAIN_POLICY = "UniquePerReplica"
# A rolling update replaces one whole group at a time and never adds one: a surge group needs
# `size` more GPU nodes at once.
ROLLOUT_MAX_UNAVAILABLE = 1
ROLLOUT_MAX_SURGE = 0

EFA_RESOURCE = "vpc.amazonaws.com/efa"
LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
LWS_KIND = "LeaderWorkerSet"


def group_plan(meta: Meta, nodes: int, worker: WorkloadPlan) -> GroupPlan:
    return GroupPlan(
        name=meta.name,
        size=nodes,
        startup_policy=STARTUP_POLICY,
        restart_policy=RESTART_POLICY,
        subdomain_policy=SUBDOMAIN_POLICY,
        max_unavailable=ROLLOUT_MAX_UNAVAILABLE,
        max_surge=ROLLOUT_MAX_SURGE,
        worker=worker,
    )


def leader_selector(meta: Meta) -> tuple[KV, ...]:
    """The group leaders, the pods that serve the API (the worker index LWS gives them)."""
    return (*meta.selector, KV(WORKER_INDEX_LABEL, "0"))


def efa_devices(spec: Spec, instance: Instance, nodes: int) -> int:
    """``vpc.amazonaws.com/efa`` devices each pod requests: all of the instance's interfaces,
    the capacity Karpenter gives the node (``efas``: MaximumEfaInterfaces), when the replica
    spans nodes (or ``hardware.efa`` asks for them); the aws-efa-k8s-device-plugin then
    mounts every device into the pod. 0 without EFA."""
    wanted = spec.hardware.efa if spec.hardware.efa is not None else nodes > 1
    return (instance.efa_interfaces or 0) if wanted else 0


def efa_env(instance: Instance) -> tuple[EnvVar, ...]:
    """libfabric settings for NCCL over EFA (aws-samples/awsome-distributed-training
    micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml@0162aacd: FI_PROVIDER,
    FI_EFA_FORK_SAFE; ai-on-eks adds FI_EFA_USE_DEVICE_RDMA). GPUDirect RDMA is asked for
    only on the NVLink p-families those samples run on; elsewhere libfabric decides."""
    env = [EnvVar("FI_PROVIDER", "efa"), EnvVar("FI_EFA_FORK_SAFE", "1")]
    if instance.nvlink:
        env.append(EnvVar("FI_EFA_USE_DEVICE_RDMA", "1"))
    return tuple(env)


def group_env(instance: Instance, nodes: int, efa: int) -> tuple[EnvVar, ...]:
    """Environment of every pod of a replica on several nodes (and of an EFA pod)."""
    out: tuple[EnvVar, ...] = ()
    if nodes > 1:
        # NCCL logs its transport at start ("NET/OFI" over EFA, "NET/Socket" when it fell back
        # to TCP): the one place an image without aws-ofi-nccl shows (docs/multinode.md).
        out += (EnvVar("NCCL_DEBUG", "INFO"),)
    return out + (efa_env(instance) if efa else ())
