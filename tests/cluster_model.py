"""How the API server and the CNI read the objects llmdeploy renders, modelled for tests.

- NetworkPolicy ingress (https://kubernetes.io/docs/concepts/services-networking/network-policies/):
  a pod selected by at least one policy with Ingress in its policyTypes is isolated and admits
  only what some such policy's rule allows; policies are additive. A peer with both
  namespaceSelector and podSelector matches pods that satisfy both; a podSelector alone
  means pods of the policy's own namespace; an empty `from` or `ports` matches everything.
  Namespaces carry `kubernetes.io/metadata.name: <name>` (set by the API server).
- RBAC (https://kubernetes.io/docs/reference/access-authn-authz/rbac/): a RoleBinding grants
  its Role's rules, in its own namespace, to its subjects.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: matchLabels AND matchExpressions; {} selects all."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _peer_matches(
    peer: Mapping[str, Any], policy_ns: str, src_ns: str, src_labels: Mapping[str, str]
) -> bool:
    ns_sel, pod_sel = peer.get("namespaceSelector"), peer.get("podSelector")
    if "ipBlock" in peer:
        return False  # pod traffic only
    ns_ok = (
        selects(ns_sel, {"kubernetes.io/metadata.name": src_ns})
        if ns_sel is not None
        else src_ns == policy_ns
    )
    pod_ok = selects(pod_sel, src_labels) if pod_sel is not None else True
    return ns_ok and pod_ok


def isolating_policies(
    policies: Iterable[Mapping[str, Any]], dst_ns: str, dst_labels: Mapping[str, str]
) -> list[Mapping[str, Any]]:
    """The policies with Ingress in their policyTypes that select the destination pod."""
    return [
        p
        for p in policies
        if p["metadata"].get("namespace") == dst_ns
        and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
        and selects(p["spec"].get("podSelector", {}), dst_labels)
    ]


def admitted(
    policies: Iterable[Mapping[str, Any]],
    dst: tuple[str, Mapping[str, str]],
    port: int,
    peer_matches: Callable[[Mapping[str, Any]], bool],
) -> bool:
    """Whether some ingress rule of the policies isolating ``dst`` admits a source on ``port``
    (an empty ``from`` or ``ports`` matches everything; ``peer_matches`` decides one peer)."""
    isolating = isolating_policies(policies, *dst)
    if not isolating:
        return True
    for policy in isolating:
        for rule in policy["spec"].get("ingress") or []:
            peers = rule.get("from")
            peers_ok = not peers or any(peer_matches(peer) for peer in peers)
            ports = rule.get("ports")
            port_ok = not ports or any(p.get("port") == port for p in ports)
            if peers_ok and port_ok:
                return True
    return False


def admits(
    policies: Iterable[Mapping[str, Any]],
    dst: tuple[str, Mapping[str, str]],
    src: tuple[str, Mapping[str, str]],
    port: int,
) -> bool:
    """Whether a pod (namespace, labels) may open a TCP connection to ``dst`` on ``port``."""
    src_ns, src_labels = src
    return admitted(
        policies, dst, port, lambda peer: _peer_matches(peer, dst[0], src_ns, src_labels)
    )


def rbac_allows(
    docs: Iterable[Mapping[str, Any]],
    subject: tuple[str, str],  # ServiceAccount (namespace, name)
    namespace: str,
    group: str,
    resource: str,
    verb: str,
) -> bool:
    """Whether a ServiceAccount may ``verb`` ``group/resource`` in ``namespace`` through the
    Roles and RoleBindings among ``docs``."""
    docs = list(docs)
    roles = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): d for d in docs if d["kind"] == "Role"
    }
    for binding in (d for d in docs if d["kind"] == "RoleBinding"):
        if binding["metadata"]["namespace"] != namespace:
            continue
        bound = any(
            s["kind"] == "ServiceAccount" and (s.get("namespace"), s["name"]) == subject
            for s in binding.get("subjects", [])
        )
        role = roles.get((namespace, binding["roleRef"]["name"]))
        if not bound or role is None or binding["roleRef"]["kind"] != "Role":
            continue
        for rule in role.get("rules", []):
            if (
                group in rule.get("apiGroups", [])
                and resource in rule.get("resources", [])
                and verb in rule.get("verbs", [])
            ):
                return True
    return False


def deployment_timed_out(deadline: int, progress: Iterable[int], done: int) -> bool:
    """Whether the deployment controller reports ``ProgressDeadlineExceeded`` before the rollout
    completes at ``done`` (seconds), given the times at which it makes progress (a pod created,
    ready or available, an old one removed): DeploymentTimedOut compares the Progressing
    condition's lastUpdateTime, reset at each progress (DeploymentProgressing), plus
    progressDeadlineSeconds with now (kubernetes/kubernetes@277391ee
    pkg/controller/deployment/util/deployment_util.go)."""
    last = 0
    for t in sorted((*progress, done)):
        if t - last > deadline:
            return True
        last = t
    return False


def scaled_value(value: int | str, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent: an int as is, a percentage of ``total``."""
    if isinstance(value, int):
        return value
    assert value.endswith("%"), value
    exact = int(value[:-1]) * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)


def resolve_fenceposts(surge: int | str, unavailable: int | str, desired: int) -> tuple[int, int]:
    """ResolveFenceposts (kubernetes/kubernetes@277391ee
    pkg/controller/deployment/util/deployment_util.go): maxSurge rounds up, maxUnavailable
    down, and both 0 means one unavailable."""
    s = scaled_value(surge, desired, round_up=True)
    u = scaled_value(unavailable, desired, round_up=False)
    return (s, 1) if s == 0 and u == 0 else (s, u)


def rollout_step(replicas: int, surge: int, unavailable: int, capacity: int) -> tuple[int, int]:
    """The first step of a RollingUpdate of ``replicas`` pods where at most ``capacity`` pods
    can run (pkg/controller/deployment/rolling.go: reconcileNewReplicaSet grows the new
    ReplicaSet to replicas + surge in all, reconcileOldReplicaSets stops as many old pods as
    keep replicas - unavailable available, and the new one grows into what they leave): how
    many new pods can run, and how many old ones keep serving meanwhile."""
    serving = replicas - unavailable
    return min(surge + unavailable, capacity - serving), serving


def admits_address(
    policies: Iterable[Mapping[str, Any]],
    dst: tuple[str, Mapping[str, str]],
    address: str,
    port: int,
) -> bool:
    """Whether a connection from an address that is no pod (a load balancer's node, which
    sends to pod IPs) reaches ``dst`` on ``port``: only an ``ipBlock`` peer can match it, its
    ``cidr`` holding the address and no ``except`` entry (NetworkPolicy ipBlock,
    https://kubernetes.io/docs/concepts/services-networking/network-policies/); an isolated pod
    admits nothing else from it."""
    ip = ipaddress.ip_address(address)

    def matches(peer: Mapping[str, Any]) -> bool:
        block = peer.get("ipBlock")
        return block is not None and (
            ip in ipaddress.ip_network(block["cidr"])
            and not any(ip in ipaddress.ip_network(e) for e in block.get("except", []))
        )

    return admitted(policies, dst, port, matches)
