"""Karpenter objects: the NodePool that launches the GPU nodes and their EC2NodeClass."""

from __future__ import annotations

from llmdeploy.catalog import amis
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.plan.capacity import allowed_instances, capacity_type_values
from llmdeploy.plan.pod import GPU_RESOURCE, pods_per_node
from llmdeploy.plan.types import (
    KV,
    BlockDevice,
    Budget,
    NodeClassPlan,
    NodePoolPlan,
    Requirement,
    ReservationTerm,
    Toleration,
)
from llmdeploy.spec.sections import Spec


def _distinct(values: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def nodepool_plan(
    spec: Spec, instance: Instance, name: str, labels: tuple[KV, ...]
) -> NodePoolPlan:
    allowed = allowed_instances(spec, instance)
    reqs = [
        # The binding list: every type that serves the sized plan (plan.capacity); the label
        # requirements below state the same plan in Karpenter's well-known labels.
        Requirement("node.kubernetes.io/instance-type", "In", tuple(i.name for i in allowed)),
        Requirement(
            "karpenter.k8s.aws/instance-family", "In", _distinct([i.family for i in allowed])
        ),
        Requirement("karpenter.k8s.aws/instance-gpu-manufacturer", "In", ("nvidia",)),
        Requirement("karpenter.k8s.aws/instance-gpu-name", "In", (instance.gpu.karpenter_name,)),
        Requirement("karpenter.k8s.aws/instance-gpu-count", "In", (str(instance.gpu_count),)),
    ]
    if instance.gpu_mem_mib_ec2 is not None:  # a100 names both A100 40GB and 80GB
        reqs.append(
            Requirement(
                "karpenter.k8s.aws/instance-gpu-memory", "In", (str(instance.gpu_mem_mib_ec2),)
            )
        )
    zone = spec.cluster.placement.zone
    if zone is not None:  # every node of a replica in one zone (docs/multinode.md)
        reqs.append(Requirement("topology.kubernetes.io/zone", "In", (zone,)))
    reqs += [
        Requirement("karpenter.sh/capacity-type", "In", capacity_type_values(spec)),
        Requirement("kubernetes.io/arch", "In", (instance.arch,)),
        Requirement("kubernetes.io/os", "In", ("linux",)),
    ]
    return NodePoolPlan(
        name=name,
        labels=labels,
        requirements=tuple(reqs),
        taints=(Toleration(GPU_RESOURCE, "Equal", "NoSchedule", "true"),),
        node_labels=node_labels(spec, instance),
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


def node_labels(spec: Spec, instance: Instance) -> tuple[KV, ...]:
    """Labels on every node of the pool. On AL2023, ``nvidia.com/gpu.present`` lets the stock
    NVIDIA device-plugin chart schedule onto the nodes without node-feature-discovery (its
    DaemonSet's node affinity ORs ``feature.node.kubernetes.io/pci-10de.present``,
    ``cpu-model.vendor_id: NVIDIA`` and ``nvidia.com/gpu.present``: NVIDIA/k8s-device-plugin
    deployments/helm/nvidia-device-plugin/values.yaml). Bottlerocket's NVIDIA variants run the
    device plugin themselves (``settings.kubelet-device-plugins.nvidia``,
    bottlerocket.dev api/settings/kubelet-device-plugins), so there the label would pull a
    second plugin onto the node, competing to register ``nvidia.com/gpu``."""
    labels: tuple[KV, ...] = (KV("llmdeploy.dev/gpu", instance.gpu.karpenter_name),)
    if ami_alias(spec, instance).startswith("al2023@"):
        labels += (KV("nvidia.com/gpu.present", "true"),)
    return labels


# Container images and system files on the root volume, GiB (vLLM and Triton images are 10-20 GB).
ROOT_VOLUME_SYSTEM_GIB = 80
# Bottlerocket's OS volume; images, logs and ephemeral storage go on its second, data volume
# (aws/karpenter-provider-aws@v1.14.1 pkg/providers/amifamily/bottlerocket.go
# DefaultBlockDeviceMappings :183-200: /dev/xvda 4Gi, EphemeralBlockDevice /dev/xvdb).
BOTTLEROCKET_OS_VOLUME = "4Gi"


def root_volume_gib(spec: Spec, instance: Instance, pod_ephemeral_gib: int) -> int:
    """Root EBS size. With local NVMe (RAID0) pods' ephemeral storage lives there; without it,
    the root volume must hold the images plus every pod's model cache on the node."""
    if instance.local_nvme_gb > 0:
        return spec.cluster.root_volume_gib
    pods = pods_per_node(instance, spec.hardware.gpus_per_pod)
    return max(spec.cluster.root_volume_gib, ROOT_VOLUME_SYSTEM_GIB + pods * pod_ephemeral_gib)


def ami_alias(spec: Spec, instance: Instance) -> str:
    """The pinned alias, or the newest AMI release llmdeploy knows for the cluster's minor."""
    return spec.cluster.ami_alias or amis.default_alias(
        spec.cluster.kubernetes_version, instance.arch
    )


def block_devices(alias: str, size_gib: int) -> tuple[BlockDevice, ...]:
    if amis.split_alias(alias)[0] == "bottlerocket":
        return (
            BlockDevice("/dev/xvda", BOTTLEROCKET_OS_VOLUME, root_volume=False),
            BlockDevice("/dev/xvdb", f"{size_gib}Gi", root_volume=True),
        )
    return (BlockDevice("/dev/xvda", f"{size_gib}Gi", root_volume=True),)


def reservation_terms(spec: Spec) -> tuple[ReservationTerm, ...]:
    out = []
    for term in spec.cluster.capacity_reservations:
        fields = (
            ("id", term.id),
            ("ownerID", term.owner_id),
            ("instanceMatchCriteria", term.instance_match_criteria),
        )
        out.append(
            ReservationTerm(
                tags=tuple(KV(k, v) for k, v in sorted((term.tags or {}).items())),
                entries=tuple(KV(key, value) for key, value in fields if value is not None),
            )
        )
    return tuple(out)


def nodeclass_plan(
    spec: Spec, instance: Instance, name: str, labels: tuple[KV, ...], pod_ephemeral_gib: int
) -> NodeClassPlan:
    alias = ami_alias(spec, instance)
    return NodeClassPlan(
        name=name,
        labels=labels,
        role=spec.cluster.node_role,
        ami_alias=alias,
        discovery_tag=spec.cluster.discovery_tag or spec.cluster.name,
        block_devices=block_devices(alias, root_volume_gib(spec, instance, pod_ephemeral_gib)),
        instance_store_raid0=instance.local_nvme_gb > 0,
        tags=(KV("llmdeploy.dev/deployment", f"{spec.namespace}.{spec.name}"),),
        reservation_terms=reservation_terms(spec),
        subnet_ids=spec.cluster.placement.subnet_ids,
        # Karpenter >= 1.11 (placementGroupSelector, concepts/nodeclasses.md); one group per
        # EC2NodeClass, and the NodePool's zone must be the group's
        placement_group=spec.cluster.placement.placement_group,
    )
