"""EKS-optimized AMI releases, and how Karpenter resolves an EC2NodeClass AMI alias.

Karpenter turns ``amiSelectorTerms: [{alias: <family>@<version>}]`` into SSM parameter names
that contain the **cluster's** Kubernetes minor (aws/karpenter-provider-aws@v1.14.1
``pkg/providers/amifamily/al2023.go`` ``resolvePath()`` :73-80, ``bottlerocket.go`` :44-53,
``ami.go`` :86-104). A pinned alias therefore resolves only if that AMI release was built for
the cluster's minor; when no parameter exists, AMI discovery fails ("failed to discover any AMIs
for alias", al2023.go:57-60), the EC2NodeClass never becomes Ready and no node launches. A GPU
node needs the NVIDIA variant: its AMI is the one compatible with ``instance-gpu-count Exists``
(``pkg/providers/amifamily/types.go`` :86-99).

Data, with a source per row:

- ``data/eks_amis.csv``: per AMI family, CPU architecture and Kubernetes minor, the first and the
  newest release known to ship the NVIDIA variant (``first``, ``last``); ``ended`` when no later
  release has it; ``absent_through`` when the releases just before ``first`` are not documented
  (the minor's AMIs may have started in one of them).
- ``data/al2023_releases.txt``: every AL2023 release tag since the first NVIDIA AL2023 AMI, so
  an alias that names no release is caught. Bottlerocket has no such list (only its first
  releases per minor are known), so a Bottlerocket version is checked against its minor's range.

A pinned alias is ``exists``, ``absent`` (the AMI provably does not exist for the minor) or
``unverified`` (the table cannot tell); nothing here guesses.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Literal

Status = Literal["exists", "absent", "unverified"]
# catalog CPU architecture (Kubernetes' kubernetes.io/arch) -> the architecture in SSM paths
_SSM_ARCH = {"amd64": "x86_64", "arm64": "arm64"}
DEFAULT_FAMILY = "al2023"
LATEST = "latest"


@dataclass(frozen=True)
class AmiRange:
    family: str
    arch: str  # x86_64 | arm64
    kubernetes: str
    absent_through: str | None
    first: str | None
    last: str
    ended: bool
    source: str


@dataclass(frozen=True)
class Resolution:
    """What Karpenter would find for one alias on one cluster."""

    alias: str
    kubernetes: str
    ssm_parameter: str  # the GPU (NVIDIA) variant's parameter Karpenter reads
    status: Status
    reason: str
    first: str | None  # the minor's oldest and newest release llmdeploy knows (suggestions)
    newest: str | None


def _data(name: str) -> str:
    return resources.files("llmdeploy.catalog").joinpath("data", name).read_text("utf-8")


@functools.cache
def ranges() -> dict[tuple[str, str, str], AmiRange]:
    out: dict[tuple[str, str, str], AmiRange] = {}
    for row in csv.DictReader(_data("eks_amis.csv").splitlines()):
        r = AmiRange(
            family=row["family"],
            arch=row["arch"],
            kubernetes=row["kubernetes"],
            absent_through=row["absent_through"] or None,
            first=row["first"] or None,
            last=row["last"],
            ended=row["ended"] == "yes",
            source=row["source"],
        )
        out[(r.family, r.arch, r.kubernetes)] = r
    return out


@functools.cache
def al2023_releases() -> tuple[str, ...]:
    """AL2023 release tags, oldest first (a trailing ``*`` in the file marks undocumented ones)."""
    lines = [ln.strip() for ln in _data("al2023_releases.txt").splitlines()]
    return tuple(ln.rstrip("*") for ln in lines if ln and not ln.startswith("#"))


def kubernetes_versions() -> tuple[str, ...]:
    """The Kubernetes minors the table covers, oldest first."""
    found = {k for (_, _, k) in ranges()}
    return tuple(sorted(found, key=minor_key))


def minor_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _version_key(family: str, version: str) -> tuple[int, ...]:
    digits = version.lstrip("v")
    return (int(digits),) if family == "al2023" else tuple(int(p) for p in digits.split("."))


def split_alias(alias: str) -> tuple[str, str]:
    family, _, version = alias.partition("@")
    return family, version


def ssm_parameter(family: str, version: str, kubernetes: str, arch: str) -> str:
    """The SSM parameter Karpenter reads for the NVIDIA variant of ``family@version``.

    AL2023: ``resolvePath()``, al2023.go:73-80 (``recommended`` for ``latest``). Bottlerocket:
    bottlerocket.go:46-53, which strips the leading ``v`` ("Bottlerocket AMIs versions are
    prefixed with a v on GitHub, but not in the SSM path").
    """
    ssm_arch = _SSM_ARCH[arch]
    if family == "al2023":
        name = (
            "recommended"
            if version == LATEST
            else f"amazon-eks-node-al2023-{ssm_arch}-nvidia-{kubernetes}-{version}"
        )
        return (
            f"/aws/service/eks/optimized-ami/{kubernetes}/amazon-linux-2023/{ssm_arch}/nvidia/"
            f"{name}/image_id"
        )
    number = version.lstrip("v")
    return f"/aws/service/bottlerocket/aws-k8s-{kubernetes}-nvidia/{ssm_arch}/{number}/image_id"


def resolve(alias: str, kubernetes: str, arch: str = "amd64") -> Resolution:
    """Would Karpenter find the NVIDIA AMI of ``alias`` on a ``kubernetes`` cluster?"""
    family, version = split_alias(alias)
    path = ssm_parameter(family, version, kubernetes, arch)
    row = ranges().get((family, _SSM_ARCH[arch], kubernetes))
    if row is None:
        why = f"llmdeploy has no {family} {_SSM_ARCH[arch]} AMI data for Kubernetes {kubernetes}"
        return Resolution(alias, kubernetes, path, "unverified", why, None, None)
    status, why = _status(row, version)
    return Resolution(alias, kubernetes, path, status, why, row.first, row.last)


def _status(row: AmiRange, version: str) -> tuple[Status, str]:
    family, k = row.family, row.kubernetes
    if version == LATEST:
        return "exists", f"{family}@latest follows the newest AMI for Kubernetes {k}"
    key = _version_key(family, version)
    if family == "al2023":
        tags = al2023_releases()
        if key > _version_key(family, tags[-1]):
            return (
                "unverified",
                f"{version} is newer than every release llmdeploy knows ({tags[-1]})",
            )
        if key < _version_key(family, tags[0]):
            return "absent", f"{version} is older than the first NVIDIA AL2023 release ({tags[0]})"
        if version not in tags:
            nearest = " and ".join(_nearest(tags, key))
            return "absent", f"{version} is not an amazon-eks-ami release (nearest: {nearest})"
    # Variants persist from the first release that has them: the earliest release known to
    # have the minor is `first`, or `last` when the first one is not established.
    present_from = row.first or row.last
    if key >= _version_key(family, present_from):
        if key <= _version_key(family, row.last):
            return "exists", f"{family} {present_from} to {row.last} ship Kubernetes {k}"
        if row.ended:
            return "absent", f"{family} AMIs for Kubernetes {k} ended with {row.last}"
        return (
            "unverified",
            f"{version} is newer than the newest {family} release llmdeploy knows for "
            f"Kubernetes {k} ({row.last})",
        )
    if row.absent_through is None and row.first is not None:
        return (
            "absent",
            f"{version} is older than the first {family} release for Kubernetes {k} ({row.first})",
        )
    if row.absent_through is not None and key <= _version_key(family, row.absent_through):
        return "absent", f"no {family} release up to {row.absent_through} ships Kubernetes {k}"
    known = f"the first known is {row.first}" if row.first else f"it is known from {row.last}"
    return (
        "unverified",
        f"whether {family} {version} ships Kubernetes {k} is not established ({known})",
    )


def _nearest(tags: tuple[str, ...], key: tuple[int, ...]) -> list[str]:
    older = [t for t in tags if _version_key("al2023", t) < key]
    newer = [t for t in tags if _version_key("al2023", t) > key]
    return [*older[-1:], *newer[:1]]


def minors_for(alias: str, arch: str = "amd64") -> tuple[str, ...]:
    """The Kubernetes minors on which ``alias`` provably resolves."""
    return tuple(k for k in kubernetes_versions() if resolve(alias, k, arch).status == "exists")


# The NVIDIA driver branch of the AL2023 NVIDIA AMIs llmdeploy defaults to, and the CUDA release
# that branch was made for (awslabs/amazon-eks-ami release notes of 2026 list
# cuda-drivers-580.126.20 and cuda-compat-13-0; R580 is CUDA 13.0's driver).
AL2023_NVIDIA_DRIVER_BRANCH, AL2023_NVIDIA_DRIVER_CUDA = "580", (13, 0)


def default_alias(kubernetes: str | None, arch: str = "amd64") -> str:
    """The alias rendered when the spec pins none: the newest AL2023 release llmdeploy knows for
    the cluster's minor; with the minor unknown, the newest release of all, which every minor
    still receiving AMIs has."""
    rows = [
        r for r in ranges().values() if r.family == DEFAULT_FAMILY and r.arch == _SSM_ARCH[arch]
    ]
    if kubernetes is not None:
        rows = [r for r in rows if r.kubernetes == kubernetes] or rows
    newest = max((r.last for r in rows), key=lambda v: _version_key(DEFAULT_FAMILY, v))
    return f"{DEFAULT_FAMILY}@{newest}"
