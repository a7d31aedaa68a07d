"""What the controllers will do with the node side of a spec, checked before rendering.

Each check models one rule of Karpenter or the EKS AMIs (cited at the check) and returns
:class:`~llmdeploy.errors.Diagnostic` values naming the spec field they are about (``field``):
errors for configurations whose nodes never launch or whose pod never fits, warnings for ones
that work but lose the only replica on a schedule or on a spot interruption. The pipeline runs
them on the one validation path of ``size`` and ``render`` and locates them in the spec file.
docs/production.md explains each rule.
"""

from __future__ import annotations

from llmdeploy.catalog import amis
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.errors import Diagnostic
from llmdeploy.plan.capacity import SPOT_FLEXIBILITY_TYPES, allowed_instances, pod_share
from llmdeploy.plan.group_checks import group_findings
from llmdeploy.plan.nodes import ami_alias
from llmdeploy.plan.pod import POD_FLOOR_CPU_MILLI, POD_FLOOR_MEMORY_MIB, pods_per_node, shm_gib
from llmdeploy.plan.rollout import gpu_limit_findings
from llmdeploy.spec.checks import is_set
from llmdeploy.spec.cluster import reserve_of
from llmdeploy.spec.sections import Spec


def node_findings(spec: Spec, instance: Instance | None, nodes: int = 1) -> list[Diagnostic]:
    """Every node-side error and warning for ``spec`` sized on ``instance``, ``nodes`` per
    replica."""
    found = _kubernetes_version(spec) or _ami(spec, instance)
    if instance is not None:
        found += group_findings(spec, instance, nodes)
        if nodes == 1:  # a LeaderWorkerSet's groups: group_findings
            found += gpu_limit_findings(spec, instance)
        found += _pod_fits(spec, instance)
        found += _expiry(spec, instance, nodes)
        found += _spot(spec, instance, nodes)
        found += _spot_flexibility(spec, instance)
    return found


def _error(field: str, message: str, hint: str | None = None) -> Diagnostic:
    return Diagnostic(message, field=field, hint=hint)


def _warning(
    field: str, message: str, hint: str | None = None, notes: tuple[Diagnostic, ...] = ()
) -> Diagnostic:
    return Diagnostic(message, field=field, hint=hint, severity="warning", notes=notes)


def _kubernetes_version(spec: Spec) -> list[Diagnostic]:
    version = spec.cluster.kubernetes_version
    known = amis.kubernetes_versions()
    if version is None or version in known:
        return []
    return [
        _error(
            "cluster.kubernetesVersion",
            f"Kubernetes {version} is not in llmdeploy's EKS AMI table "
            f"(Kubernetes {known[0]} to {known[-1]})",
            "use the version your EKS cluster runs (`aws eks describe-cluster --query "
            "cluster.version`); a newer llmdeploy knows newer versions",
        )
    ]


def _ami(spec: Spec, instance: Instance | None) -> list[Diagnostic]:
    """Karpenter resolves the alias through SSM parameters of the cluster's minor
    (catalog.amis): a missing AMI means an EC2NodeClass that never becomes Ready."""
    arch = instance.arch if instance is not None else "amd64"
    alias = ami_alias(spec, instance) if instance is not None else spec.cluster.ami_alias
    pinned = spec.cluster.ami_alias
    if alias is None or pinned is None:
        return []  # the default resolves (catalog.amis.default_alias)
    family, version = amis.split_alias(alias)
    out: list[Diagnostic] = []
    if version == amis.LATEST:
        out.append(
            _warning(
                "cluster.amiAlias",
                f"{alias} follows every AMI release: Karpenter marks running GPU nodes Drifted "
                "and replaces each once no karpenter.sh/do-not-disrupt pod holds it, and new "
                "nodes can run another NVIDIA driver than old ones",
                f"pin a release, e.g. {amis.default_alias(spec.cluster.kubernetes_version, arch)}",
            )
        )
    k8s = spec.cluster.kubernetes_version
    if k8s is None:
        minors = amis.minors_for(alias, arch)
        if version != amis.LATEST and not minors:
            out.append(
                _error(
                    "cluster.amiAlias",
                    f"{alias} has no NVIDIA AMI for any Kubernetes version llmdeploy knows",
                    f"pin a release that exists, e.g. {amis.default_alias(None, arch)}",
                )
            )
        elif version != amis.LATEST:
            out.append(
                _warning(
                    "cluster.amiAlias",
                    f"`cluster.kubernetesVersion` is not set, so llmdeploy cannot check that "
                    f"{alias} exists for your cluster (it does for Kubernetes {minors[0]} to "
                    f"{minors[-1]})",
                    'set `cluster.kubernetesVersion` (e.g. "1.35")',
                )
            )
        return out
    found = amis.resolve(alias, k8s, arch)
    if found.status == "absent":
        first, newest = found.first, found.newest
        hint = (
            f"{family} releases for Kubernetes {k8s}: {family}@{first} (the first) to "
            f"{family}@{newest} (the newest llmdeploy knows)"
            if first and newest
            else f"pin a release built for Kubernetes {k8s}"
        )
        out.append(
            _error(
                "cluster.amiAlias",
                f"{alias} has no NVIDIA AMI for Kubernetes {k8s}: {found.reason}. Karpenter "
                f"reads {found.ssm_parameter}; without it the EC2NodeClass never becomes Ready "
                "and no GPU node launches",
                hint,
            )
        )
    elif found.status == "unverified":
        out.append(
            _warning(
                "cluster.amiAlias",
                f"cannot tell whether {alias} has an NVIDIA AMI for Kubernetes {k8s}: "
                f"{found.reason}",
                f"check that the SSM parameter {found.ssm_parameter} exists",
            )
        )
    return out


def _pod_fits(spec: Spec, instance: Instance) -> list[Diagnostic]:
    """The pod's requests plus the DaemonSet reserve must fit the node's allocatable, or
    Karpenter finds no instance type for it and the pod stays Pending."""
    tp = spec.hardware.gpus_per_pod
    allowed = allowed_instances(spec, instance)
    cpu, mem = pod_share(spec, allowed)
    need_mem = POD_FLOOR_MEMORY_MIB + shm_gib(tp) * 1024
    if cpu >= POD_FLOOR_CPU_MILLI and mem >= need_mem:
        return []
    smallest = min(allowed, key=lambda i: i.pod_share(tp, reserve_of(spec)))
    reserve = spec.cluster.daemon_set_reserve
    field = (
        "cluster.daemonSetReserve"
        if is_set(spec, "cluster.daemonSetReserve")
        else "hardware.instanceType"
        if spec.hardware.instance_type is not None
        else "hardware.instanceFamily"
    )
    per_node = pods_per_node(smallest, tp)
    return [
        _error(
            field,
            f"the model pod does not fit on {smallest.name}: after the DaemonSet reserve "
            f"({reserve.cpu} CPU, {reserve.memory}) each of its {per_node} pod(s) gets "
            f"{cpu}m CPU and {mem}Mi, below the {POD_FLOOR_CPU_MILLI}m CPU and {need_mem}Mi "
            f"(4Gi + {shm_gib(tp)}Gi /dev/shm) a serving pod needs",
            "choose a larger instance type or lower `cluster.daemonSetReserve` to what your "
            "DaemonSets request",
        )
    ]


def _one_node(spec: Spec, instance: Instance, nodes: int = 1) -> str | None:
    """Who one node's loss takes down: every minimum replica when they all fit on one node;
    the only replica when it spans ``nodes`` nodes (losing any of them stops its group)."""
    per_node = pods_per_node(instance, spec.hardware.gpus_per_pod)
    replicas = spec.autoscaling.min_replicas
    if nodes > 1:
        return f"the only replica (any of its {nodes} nodes)" if replicas == 1 else None
    if replicas > per_node:
        return None
    if replicas == 1:
        return "the only replica"
    return f"all {replicas} minimum replicas ({per_node} fit on one {instance.name})"


def _more_nodes(spec: Spec, instance: Instance, nodes: int = 1) -> str:
    if nodes > 1:
        return "`autoscaling.minReplicas: 2` keeps a second group serving"
    per_node = pods_per_node(instance, spec.hardware.gpus_per_pod)
    return f"`autoscaling.minReplicas: {per_node + 1}` puts replicas on two nodes"


def _expiry(spec: Spec, instance: Instance, nodes: int) -> list[Diagnostic]:
    # Expiration is forceful: disruption budgets do not stop it and no replacement is started
    # first (karpenter-provider-aws@v1.14.1 website/content/en/docs/concepts/disruption.md
    # :168-179, :295 "NodePool Disruption Budgets do not prevent Karpenter from terminating
    # expired nodes"); do-not-disrupt only delays it up to terminationGracePeriod (:422-425).
    who = _one_node(spec, instance, nodes)
    if who is None or spec.cluster.expire_after == "Never":
        return []
    # located where the user is likely to change it: expireAfter, or minReplicas when only that
    # is in the file; the other field is a note
    values = {
        "cluster.expireAfter": spec.cluster.expire_after,
        "autoscaling.minReplicas": str(spec.autoscaling.min_replicas),
    }
    field, other = values
    if is_set(spec, other) and not is_set(spec, field):
        field, other = other, field
    note = Diagnostic(f"`{other}` is {values[other]}", field=other, severity="note")
    return [
        _warning(
            field,
            f"every {spec.cluster.expire_after} Karpenter expires the node that runs {who}: "
            "expiry is forceful (disruption budgets and karpenter.sh/do-not-disrupt do not stop "
            "it, and no replacement is started first), so the service is down for a node launch "
            "plus the model load",
            f"{_more_nodes(spec, instance, nodes)}; or set `expireAfter: Never` and replace nodes "
            "in a maintenance window",
            notes=(note,),
        )
    ]


def _spot(spec: Spec, instance: Instance, nodes: int) -> list[Diagnostic]:
    # Karpenter prefers reserved, then spot, then on-demand (plan.capacity.launch_capacity_type);
    # an interruption notice is 2 minutes and do-not-disrupt does not exclude a node from it
    # (disruption.md:422).
    types = spec.cluster.capacity_types
    who = _one_node(spec, instance, nodes)
    if who is None or "spot" not in types:
        return []
    when = (
        "whenever its reservations are full and spot is available"
        if "reserved" in types
        else "whenever spot is available"
    )
    return [
        _warning(
            "cluster.capacityTypes",
            f"Karpenter puts {who} on spot {when} (it prefers reserved, then spot, then "
            "on-demand, whatever the list order); a spot interruption gives 2 minutes' notice, "
            "which karpenter.sh/do-not-disrupt does not stop, and the service is down for a node "
            "launch plus the model load",
            f"leave spot out of `capacityTypes`, or {_more_nodes(spec, instance, nodes)}",
        )
    ]


def _spot_flexibility(spec: Spec, instance: Instance) -> list[Diagnostic]:
    if "spot" not in spec.cluster.capacity_types:
        return []
    allowed = allowed_instances(spec, instance)
    if len(allowed) >= SPOT_FLEXIBILITY_TYPES:
        return []
    names = ", ".join(i.name for i in allowed)
    return [
        _warning(
            "cluster.capacityTypes",
            f"spot with {len(allowed)} instance type(s) ({names}): a few spot pools are often "
            f"short of GPUs, and Karpenter asks for at least {SPOT_FLEXIBILITY_TYPES} types when "
            "a launch falls back from spot to on-demand",
            "allow more types (`hardware.instanceFamily` allows every size that serves the plan) "
            "or use on-demand",
        )
    ]
