"""Checks every object gets, whatever its kind: names, namespaces, label and annotation keys
and values (kubernetes-validate checks none of these; the API server does)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from llmdeploy.check.crd import json_path

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_RFC1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

# Kinds whose name must be a DNS label (<= 63), and why. Every other name: DNS-1123 subdomain.
_LABEL_NAMES: dict[str, str] = {
    "Service": "Service names are DNS-1035 labels (API server rule)",
    "Namespace": "Namespace names are DNS-1123 labels (API server rule)",
    "Deployment": "pod names and hostnames derive from it",
    "StatefulSet": "pod hostnames and labels derive from it",
    "DaemonSet": "pod names derive from it",
    "Job": "the job-name pod label holds it",
    "LeaderWorkerSet": "pod hostnames and labels derive from it",
    "NodePool": "Karpenter sets it as the karpenter.sh/nodepool node label",
    "EC2NodeClass": "Karpenter sets it as the karpenter.k8s.aws/ec2nodeclass node label",
    "ScaledObject": "KEDA sets it as the scaledobject.keda.sh/name label",
}
_PATH_SEGMENT_NAMES = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"}
CLUSTER_SCOPED |= {"StorageClass", "PersistentVolume", "CustomResourceDefinition"}
CLUSTER_SCOPED |= {"RuntimeClass", "IngressClass"}
# Maps whose keys and values follow label syntax.
_LABEL_MAPS: tuple[tuple[str, ...], ...] = (
    ("metadata", "labels"),
    ("spec", "template", "metadata", "labels"),
    ("spec", "selector", "matchLabels"),
    ("spec", "podSelector", "matchLabels"),
)
_LABEL_RULE = "at most 63 characters of [A-Za-z0-9_.-], starting and ending with [A-Za-z0-9]"


def name_errors(name: str, kind: str) -> list[str]:
    where = f"metadata.name {name!r}"
    if kind in _PATH_SEGMENT_NAMES:
        ok = name not in (".", "..") and "/" not in name and "%" not in name
        return [] if ok else [f"{where} may not be '.' or '..' or contain '/' or '%'"]
    if kind in _LABEL_NAMES:
        rule, text, start = (
            (_RFC1035, "DNS-1035", "a letter") if kind == "Service" else (_LABEL, "DNS-1123", "")
        )
        if len(name) > 63 or not rule.fullmatch(name):
            return [
                f"{where} must be a {text} label (at most 63 characters of [a-z0-9-], starting "
                f"with {start or 'an alphanumeric'} and ending with an alphanumeric) for {kind}: "
                f"{_LABEL_NAMES[kind]}"
            ]
        return []
    if len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        return [
            f"{where} must be a DNS-1123 subdomain (at most 253 characters of [a-z0-9-.], "
            "alphanumeric at both ends)"
        ]
    return []


def _key_errors(where: str, key: str) -> list[str]:
    prefix, _, name = key.rpartition("/")
    errors = []
    if "/" in key and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix)):
        errors.append(f"{where}: key {key!r}: prefix must be a DNS-1123 subdomain")
    if len(name) > 63 or not _QUALIFIED.fullmatch(name):
        errors.append(f"{where}: key {key!r}: name part must be {_LABEL_RULE}")
    return errors


def generic_errors(data: Mapping[str, Any], kind: str, cluster_scoped: bool) -> list[str]:
    meta = data.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    errors: list[str] = []
    name = meta.get("name")
    if isinstance(name, str) and name:
        errors += name_errors(name, kind)
    else:
        errors.append("metadata.name: Required value")
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and namespace:
        if cluster_scoped:
            errors.append(f"metadata.namespace: {kind} is cluster-scoped; remove {namespace!r}")
        elif len(namespace) > 63 or not _LABEL.fullmatch(namespace):
            errors.append(f"metadata.namespace {namespace!r} must be a DNS-1123 label")
    maps = _LABEL_MAPS + ((("spec", "selector"),) if kind == "Service" else ())
    for path in maps:
        labels: Any = data
        for part in path:
            labels = labels.get(part) if isinstance(labels, Mapping) else None
        for key, value in labels.items() if isinstance(labels, Mapping) else ():
            where = json_path(path)
            errors += _key_errors(where, str(key))
            bad = isinstance(value, str) and (len(value) > 63 or not _QUALIFIED.fullmatch(value))
            if bad and value:
                errors.append(f"{where}[{key!r}]: value {value!r} must be empty or {_LABEL_RULE}")
    annotations = meta.get("annotations")
    for key in annotations if isinstance(annotations, Mapping) else ():
        errors += _key_errors("metadata.annotations", str(key))
    return errors
