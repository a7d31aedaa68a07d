"""Names and labels every rendered object shares: DNS-1123 names, the six recommended
``app.kubernetes.io`` labels, immutable selectors, the NodePool name."""

from __future__ import annotations

import hashlib

from llmdeploy.plan.types import KV, Meta
from llmdeploy.spec.sections import Spec

MANAGED_BY = "llmdeploy"
PART_OF = "llmdeploy"


def dns_name(*parts: str, limit: int = 63) -> str:
    """Join parts into a DNS-1123 label, truncated with a stable hash suffix when too long."""
    name = "-".join(p for p in parts if p)
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def labels_for(spec: Spec, component: str, version: str) -> tuple[KV, ...]:
    """All six recommended labels (kubernetes.io common-labels)."""
    return (
        KV("app.kubernetes.io/name", spec.engine.type),
        KV("app.kubernetes.io/instance", spec.name),
        KV("app.kubernetes.io/version", version),
        KV("app.kubernetes.io/component", component),
        KV("app.kubernetes.io/part-of", PART_OF),
        KV("app.kubernetes.io/managed-by", MANAGED_BY),
    )


def namespace_labels() -> tuple[KV, ...]:
    """The Namespace's labels: only the two that are true of every deployment in it (a fleet's
    specs share a namespace; instance, name, version and component belong to one of them)."""
    return (
        KV("app.kubernetes.io/part-of", PART_OF),
        KV("app.kubernetes.io/managed-by", MANAGED_BY),
    )


def selector_for(spec: Spec) -> tuple[KV, ...]:
    """Selectors are immutable: only name and instance, never version."""
    return (
        KV("app.kubernetes.io/name", spec.engine.type),
        KV("app.kubernetes.io/instance", spec.name),
    )


def meta_for(spec: Spec, component: str, version: str) -> Meta:
    return Meta(
        name=spec.name,
        namespace=spec.namespace,
        labels=labels_for(spec, component, version),
        selector=selector_for(spec),
    )


def pool_name(spec: Spec) -> str:
    """NodePool and EC2NodeClass name; pods select it through karpenter.sh/nodepool."""
    return dns_name("llmdeploy", spec.namespace, spec.name)
