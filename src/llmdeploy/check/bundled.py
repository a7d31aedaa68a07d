"""The CRD schemas shipped in the package: what ``render`` and ``validate`` check custom kinds
against when no ``--crd-dir`` is given.

``crd_schemas/`` holds, for each kind llmdeploy renders or targets (Karpenter v1.14.1
EC2NodeClass, NodePool and NodeClaim; KEDA v2.20.2 ScaledObject, TriggerAuthentication and
ClusterTriggerAuthentication; prometheus-operator v0.93.0 ServiceMonitor and PodMonitor; LWS
v0.10.0 LeaderWorkerSet), the ``openAPIV3Schema`` of every served version of the official CRD
with its descriptions removed, nothing else changed. ``scripts/bundle_crds.py`` generates them
and ``manifest.json`` (the index read here, with each kind's upstream repository, tag, commit,
path, license and sha256); ``NOTICE`` and ``LICENSE`` carry the Apache-2.0 attribution.

Reading the index costs well under a millisecond; a kind's schema file is read and parsed only
when a document of that kind is validated (LeaderWorkerSet's is 131 kB, ~3 ms).
"""

from __future__ import annotations

import json
from functools import cache, partial
from importlib import resources
from typing import Any

from llmdeploy.check.crd import CrdRegistry, CrdVersion

FOLDER = "crd_schemas"


def _read(name: str) -> Any:
    text = resources.files("llmdeploy.check").joinpath(FOLDER, name).read_text(encoding="utf-8")
    return json.loads(text)


@cache
def manifest() -> dict[str, Any]:
    """``manifest.json``: ``{"kinds": [{"kind", "group", "versions", "scope", "file",
    "project", "source": {"repo", "tag", "commit", "path", ...}}, ...]}``."""
    found: dict[str, Any] = _read("manifest.json")
    return found


@cache
def _kind_file(name: str) -> dict[str, Any]:
    found: dict[str, Any] = _read(name)
    return found


def _schema(name: str, version: str) -> Any:
    return _kind_file(name)["versions"][version]


@cache
def bundled_registry() -> CrdRegistry:
    """The bundled schemas as a registry (one per process: its validators and CEL programs are
    cached on first use)."""
    versions = [
        CrdVersion(
            source=entry["source"]["file"],
            group=entry["group"],
            version=version,
            kind=entry["kind"],
            namespaced=entry["scope"] == "Namespaced",
            load=partial(_schema, entry["file"], version),
            origin=entry["project"],
            bundled=True,
        )
        for entry in manifest()["kinds"]
        for version in entry["versions"]
    ]
    return CrdRegistry(versions, bundled=True)
