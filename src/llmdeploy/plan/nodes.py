"""Karpenter objects: the NodePool that launches the GPU nodes and their EC2NodeClass."""

from __future__ import annotations

from llmdeploy.catalog.ec2 import Instance
from llmdeploy.plan.pod import GPU_RESOURCE, pods_per_node
from llmdeploy.plan.types import KV, Budget, NodeClassPlan, NodePoolPlan, Requirement, Toleration
from llmdeploy.spec.sections import Spec


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
