"""How a Deployment's replicas fit under the NodePool's GPU limit, and the rolling-update
strategy that follows from the headroom (docs/production.md §4, "Rollouts and the GPU limit").

- The NodePool's ``limits`` cap the capacity of every node it launches: Karpenter launches no
  node whose GPUs would take the pool past the limit (kubernetes-sigs/karpenter@v1.14.1
  ``pkg/controllers/provisioning/provisioner.go`` :471 ``Limits.ExceededBy``, "resource usage
  exceeds limit"), so a pod that needs a new node past it stays Pending.
- A ``RollingUpdate`` with ``maxSurge: 1, maxUnavailable: 0`` starts one new pod before it
  removes an old one (kubernetes/kubernetes pkg/controller/deployment/rolling.go
  reconcileNewReplicaSet / reconcileOldReplicaSets: the old ReplicaSet scales down only as new
  pods become available). At ``maxReplicas`` that surge pod needs the GPUs of one more pod;
  when the limit has no room for them, or the nodes come only from capacity reservations whose
  spare instances llmdeploy cannot know, it never gets a node and the rollout stalls. Then the
  rollout replaces one pod at a time instead (``maxSurge: 0, maxUnavailable: 1``).

The node count assumes the replicas are packed, ``pods_per_node`` to a node (the NodePool
limit counts whole nodes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmdeploy.catalog.ec2 import Instance
from llmdeploy.errors import Diagnostic, Notice
from llmdeploy.plan.pod import gpus_per_pod, pods_per_node
from llmdeploy.spec.sections import Spec


def node_gpus(spec: Spec, instance: Instance, pods: int) -> int:
    """GPUs of the nodes that ``pods`` pods of one node each occupy, packed."""
    return math.ceil(pods / pods_per_node(instance, gpus_per_pod(spec))) * instance.gpu_count


def most_replicas(spec: Spec) -> int:
    a = spec.autoscaling
    return a.max_replicas if a.enabled else a.min_replicas


def gpu_limit_findings(spec: Spec, instance: Instance) -> list[Diagnostic]:
    """A Deployment's replicas against ``cluster.gpuLimit``: no node at all is an error, fewer
    replicas than the autoscaler may ask for a warning."""
    limit = spec.cluster.gpu_limit
    field = "cluster.gpuLimit"
    if limit < instance.gpu_count:
        return [
            Diagnostic(
                f"`cluster.gpuLimit` {limit} is below the {instance.gpu_count} GPUs of one "
                f"{instance.name}: Karpenter launches no node past the NodePool limit, and no "
                "replica ever starts",
                field=field,
                hint=f"set `cluster.gpuLimit` to at least {instance.gpu_count}",
            )
        ]
    most = most_replicas(spec)
    needed = node_gpus(spec, instance, most)
    if needed > limit:
        ppn = pods_per_node(instance, gpus_per_pod(spec))
        held = (limit // instance.gpu_count) * ppn
        return [
            Diagnostic(
                f"`cluster.gpuLimit` {limit} holds {held} of the {most} replicas "
                f"({ppn} per {instance.name}, {instance.gpu_count} GPUs a node): the "
                "replicas past it stay Pending",
                field=field,
                severity="warning",
                hint=f"set `cluster.gpuLimit: {needed}`, or lower `autoscaling.maxReplicas`",
            )
        ]
    return []


def pods_under_limit(spec: Spec, instance: Instance) -> int:
    """Pods the NodePool can run at once: whole nodes under the GPU limit, packed; with
    reservation-only capacity at most the replicas the fleet was sized for (llmdeploy cannot
    know that a reservation has a spare instance)."""
    ppn = pods_per_node(instance, gpus_per_pod(spec))
    cap = (spec.cluster.gpu_limit // instance.gpu_count) * ppn
    if set(spec.cluster.capacity_types) == {"reserved"}:
        cap = min(cap, most_replicas(spec))
    return cap


@dataclass(frozen=True)
class Rollout:
    max_surge: int
    max_unavailable: str  # an int or a percentage, as the Deployment takes it
    notice: Notice | None


def rollout_plan(spec: Spec, instance: Instance) -> Rollout:
    """``maxSurge: 1`` starts each new pod before its old one stops, while one more pod fits.
    Where the fleet can reach the capacity ceiling (``cap`` pods), ``maxUnavailable`` is the
    percentage that rounds down to 0 below ``cap`` replicas and to 1 at it (the deployment
    controller rounds maxUnavailable down and maxSurge up, kubernetes/kubernetes
    pkg/controller/deployment/util/deployment_util.go ResolveFenceposts): at the ceiling an old
    pod stops first and the surge pod takes its GPUs, below it nothing stops early (past about
    ten pods no whole percentage separates ``cap - 1`` from ``cap``, and one old pod stops
    early a little below it). A ceiling of one pod replaces that pod (``maxSurge: 0,
    maxUnavailable: 1``)."""
    most, cap = most_replicas(spec), pods_under_limit(spec, instance)
    if most < cap:
        return Rollout(max_surge=1, max_unavailable="0", notice=None)
    reserved = set(spec.cluster.capacity_types) == {"reserved"}
    at = "cluster.capacityTypes" if reserved else "cluster.gpuLimit"
    why = (
        "with reservation-only capacity llmdeploy assumes no spare reserved instance"
        if reserved
        else f"`cluster.gpuLimit` {spec.cluster.gpu_limit} holds {cap} pods on {instance.name}"
    )
    hint = (
        None
        if reserved
        else f"set `cluster.gpuLimit: {node_gpus(spec, instance, most + 1)}` so that every new "
        "pod starts before its old one stops"
    )
    if cap <= 1:
        return Rollout(
            max_surge=0,
            max_unavailable="1",
            notice=Notice(
                at,
                f"a rolling update stops the only pod before its replacement starts: {why}, "
                "so a surge pod would stay Pending; the service is down for a cold start",
                hint=hint,
            ),
        )
    percent = math.ceil(100 / cap)
    return Rollout(
        max_surge=1,
        max_unavailable=f"{percent}%",
        notice=Notice(
            at,
            f"rolling updates add a pod before removing one below {cap} replicas; at {cap} "
            f"({why}) a surge pod would never get a node, so maxUnavailable {percent}% stops "
            "one old pod first and the new one takes its GPUs",
            severity="note",
            hint=hint,
        ),
    )
