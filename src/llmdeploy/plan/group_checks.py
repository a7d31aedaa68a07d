"""What the controllers will do with a replica spread over several nodes, checked before
rendering (the multi-node part of :mod:`llmdeploy.plan.node_checks`, which calls it).

- Karpenter launches each pod of a group on its own node wherever the NodePool allows; only a
  zone requirement keeps a group's nodes together (docs/multinode.md, "placement").
- The NodePool's ``limits`` count every node it launches: a group needs all its nodes at once,
  and Karpenter launches no node past the limit (kubernetes-sigs/karpenter@v1.14.1
  ``pkg/controllers/provisioning/provisioner.go`` :471 ``Limits.ExceededBy``, "resource usage
  exceeds limit"), leaving the group half up.
- ``vpc.amazonaws.com/efa`` is a node's capacity only when its type has EFA interfaces
  (aws/karpenter-provider-aws@v1.14.1 ``pkg/providers/instancetype/types.go`` ``efas``): a
  pod requesting it elsewhere never schedules.
"""

from __future__ import annotations

from llmdeploy.catalog import ec2 as catalog
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.errors import Diagnostic
from llmdeploy.spec.checks import is_set
from llmdeploy.spec.sections import Spec


def group_findings(spec: Spec, instance: Instance, nodes: int) -> list[Diagnostic]:
    found = _efa_requested(spec, instance)
    if nodes < 2:
        return found
    return found + _zone(spec) + _gpu_limit(spec, instance, nodes) + _no_efa(spec, instance)


def _zone(spec: Spec) -> list[Diagnostic]:
    if spec.cluster.placement.zone is not None:
        return []
    return [
        Diagnostic(
            "a replica on several nodes needs `cluster.placement.zone`: without it Karpenter "
            "may launch the nodes of one group in different Availability Zones, where "
            "pipeline traffic crosses zones (latency, inter-zone charges) and EFA does not "
            "reach",
            field="hardware.nodesPerReplica",
            hint="set `cluster.placement.zone` (e.g. us-east-1a), the zone of your GPU "
            "capacity or placement group",
        )
    ]


def _gpu_limit(spec: Spec, instance: Instance, nodes: int) -> list[Diagnostic]:
    group = nodes * instance.gpu_count
    limit = spec.cluster.gpu_limit
    field = "cluster.gpuLimit" if is_set(spec, "cluster.gpuLimit") else "hardware.nodesPerReplica"
    if limit < group:
        return [
            Diagnostic(
                f"`cluster.gpuLimit` {limit} is below one replica's {group} GPUs ({nodes} x "
                f"{instance.name}): Karpenter stops at the NodePool limit and the group never "
                "starts",
                field=field,
                hint=f"set `cluster.gpuLimit` to at least {group}",
            )
        ]
    most = spec.autoscaling.max_replicas * group
    if spec.autoscaling.enabled and limit < most:
        return [
            Diagnostic(
                f"`cluster.gpuLimit` {limit} holds {limit // group} of the "
                f"{spec.autoscaling.max_replicas} replicas `autoscaling.maxReplicas` allows "
                f"({group} GPUs each): KEDA scales further, and the extra groups stay Pending",
                field=field,
                severity="warning",
                hint=f"set `cluster.gpuLimit: {most}`, or lower `autoscaling.maxReplicas`",
            )
        ]
    return []


def _no_efa(spec: Spec, instance: Instance) -> list[Diagnostic]:
    if instance.efa_interfaces or spec.hardware.efa is False:
        return []
    return [
        Diagnostic(
            f"{instance.name} has no EFA: the pipeline traffic between the nodes of a replica "
            "goes over TCP through the VPC network",
            field="hardware.nodesPerReplica",
            severity="warning",
            hint=f"choose an instance type with EFA ({_efa_families()}), or fit the model on "
            "one node",
        )
    ]


def _efa_requested(spec: Spec, instance: Instance) -> list[Diagnostic]:
    if spec.hardware.efa is not True or instance.efa_interfaces:
        return []
    return [
        Diagnostic(
            f"`hardware.efa`: {instance.name} has no EFA interfaces, so no node offers "
            "vpc.amazonaws.com/efa and the pods would never schedule",
            field="hardware.efa",
            hint="remove `efa`, or choose an instance type with EFA",
        )
    ]


def _efa_families() -> str:
    """GPU families with EFA on their largest sizes (the catalog's efa_interfaces)."""
    return ", ".join(sorted({i.family for i in catalog.instances().values() if i.efa_interfaces}))
