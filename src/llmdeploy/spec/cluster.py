"""Parts of the spec's ``cluster`` section that describe the GPU nodes: capacity reservations
(rendered as EC2NodeClass ``capacityReservationSelectorTerms``), the CPU and memory left for
DaemonSets, and the Kubernetes version the AMI alias must exist for."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from llmdeploy.catalog import ec2
from llmdeploy.spec.fields import DURATION, SpecModel, fresh, located_error
from llmdeploy.spec.placement import Placement

if TYPE_CHECKING:
    from llmdeploy.spec.sections import Spec

CapacityType = Literal["on-demand", "spot", "reserved"]

KUBERNETES_MINOR = re.compile(r"^1\.[0-9]{2}$")
# Kubernetes resource quantities, the subset a reserve needs: whole or decimal cores, or
# millicores; memory in bytes with a binary or decimal suffix.
CPU_QUANTITY = re.compile(r"^([0-9]+m|[0-9]+(\.[0-9]{1,3})?)$")
MEMORY_QUANTITY = re.compile(r"^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_MEMORY_FACTOR = {
    "": 1,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}


def cpu_millicores(quantity: str) -> int:
    if quantity.endswith("m"):
        return int(quantity[:-1])
    whole, _, frac = quantity.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def memory_mib(quantity: str) -> int:
    """Whole MiB, rounded up (a reserve never shrinks by rounding)."""
    digits = quantity.rstrip("KMGTik")
    suffix = quantity[len(digits) :]
    return -(-int(digits) * _MEMORY_FACTOR[suffix] // 2**20)


def check_kubernetes_minor(value: object) -> object:
    if isinstance(value, float):  # YAML reads an unquoted 1.30 as the number 1.3
        minor = str(value).split(".")[1].ljust(2, "0")
        raise ValueError(
            f'quote the version ("1.{minor}"): unquoted, YAML reads it as a number, and 1.30 as 1.3'
        )
    if isinstance(value, str) and not KUBERNETES_MINOR.fullmatch(value):
        raise ValueError(f'{value!r} is not a Kubernetes minor version such as "1.35"')
    return value


class CapacityReservationTerm(SpecModel):
    """One EC2NodeClass `capacityReservationSelectorTerms` entry (On-Demand Capacity
    Reservations and Capacity Blocks for ML); terms are ORed."""

    id: str | None = Field(
        None,
        description="Capacity reservation id, e.g. cr-0123456789abcdef0.",
        pattern=r"^cr-[0-9a-z]+$",
    )
    tags: dict[str, str] | None = Field(
        None,
        description="Select reservations carrying all these tags ('*' matches any value).",
        max_length=20,
    )
    owner_id: str | None = Field(
        None,
        alias="ownerID",
        description="AWS account that owns the reservations (shared reservations).",
        pattern=r"^[0-9]{12}$",
    )
    instance_match_criteria: Literal["open", "targeted"] | None = Field(
        None,
        description="Select reservations by how they match instances (needs Karpenter >= 1.8).",
    )

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        if v is not None and any(not key or not value for key, value in v.items()):
            raise ValueError("tag keys and values must not be empty (use '*' for any value)")
        return v

    @model_validator(mode="after")
    def _one_selector(self) -> CapacityReservationTerm:
        # The CRD's rules (karpenter.k8s.aws_ec2nodeclasses.yaml, capacityReservationSelectorTerms
        # x-kubernetes-validations), checked per term.
        if self.id is None and self.tags is None and self.instance_match_criteria is None:
            raise ValueError("a term needs `id`, `tags` or `instanceMatchCriteria`")
        if self.id is not None and (
            self.tags is not None or self.owner_id is not None or self.instance_match_criteria
        ):
            raise ValueError("`id` cannot be combined with other fields in one term")
        return self


class DaemonSetReserve(SpecModel):
    """CPU and memory on each GPU node that the model pods leave for DaemonSets."""

    cpu: str = Field(
        "1",
        description='Kubernetes CPU quantity, a string (e.g. "1", 1500m).',
        pattern=CPU_QUANTITY.pattern,
    )
    memory: str = Field(
        "2Gi",
        description="Kubernetes memory quantity (e.g. 2Gi, 1536Mi).",
        pattern=MEMORY_QUANTITY.pattern,
    )

    @property
    def cpu_millicores(self) -> int:
        return cpu_millicores(self.cpu)

    @property
    def memory_mib(self) -> int:
        return memory_mib(self.memory)


class Cluster(SpecModel):
    name: str = Field(..., min_length=1, max_length=100, description="EKS cluster name.")
    kubernetes_version: str | None = Field(
        None,
        pattern=KUBERNETES_MINOR.pattern,
        description=(
            'The cluster\'s Kubernetes minor version, quoted (e.g. "1.35"). Karpenter resolves '
            "an AMI alias through SSM parameters of this version, so a pinned `amiAlias` is "
            "checked against it and the default alias is the newest AMI llmdeploy knows for it. "
            "Unset: the default alias is the newest AMI release, which every minor still "
            "receiving AMIs has, and a pinned alias cannot be checked (warning)."
        ),
    )
    node_role: str = Field(
        ..., min_length=1, description="IAM role for Karpenter nodes (EC2NodeClass `role`)."
    )
    discovery_tag: str | None = Field(
        None,
        description=(
            "Value of the `karpenter.sh/discovery` tag on subnets and security groups; "
            "defaults to the cluster name."
        ),
    )
    capacity_reservations: tuple[CapacityReservationTerm, ...] = Field(
        (),
        max_length=30,
        strict=False,  # a YAML list
        description=(
            "On-Demand Capacity Reservations and Capacity Blocks the nodes may launch into "
            "(EC2NodeClass `capacityReservationSelectorTerms`, ORed). Needed by `reserved`."
        ),
    )
    capacity_types: tuple[CapacityType, ...] = Field(
        ("on-demand",),
        min_length=1,
        strict=False,  # a YAML list
        description=(
            "Karpenter capacity types the NodePool allows. The order is not a preference: "
            "Karpenter launches reserved, else spot, else on-demand, whatever the order here "
            "(karpenter-provider-aws instance.go getCapacityType). `reserved` needs "
            "`capacityReservations`."
        ),
    )
    gpu_limit: int = Field(64, ge=1, le=100_000, description="NodePool limit on nvidia.com/gpu.")
    ami_alias: str | None = Field(
        None,
        description=(
            "EC2NodeClass AMI alias, pinned: al2023@vYYYYMMDD or bottlerocket@vX.Y.Z; it must "
            "exist for `kubernetesVersion`. `@latest` drifts and replaces GPU nodes (warning). "
            "Default: the newest AL2023 release llmdeploy knows for `kubernetesVersion`."
        ),
        pattern=r"^(al2023@(v[0-9]{8}|latest)|bottlerocket@(v[0-9]+\.[0-9]+\.[0-9]+|latest))$",
    )
    root_volume_gib: int = Field(
        200, ge=20, le=16384, description="Root EBS volume size (images + model cache)."
    )
    daemon_set_reserve: DaemonSetReserve = Field(
        default_factory=fresh(DaemonSetReserve),
        description=(
            "CPU and memory per GPU node left for DaemonSets (requests of the CNI, kube-proxy, "
            "CSI and device plugins, monitoring and log agents). The model pods request the "
            "rest of the node's allocatable."
        ),
    )
    placement: Placement = Field(
        default_factory=fresh(Placement),
        description="Where the nodes launch: zone, subnets, cluster placement group.",
    )
    expire_after: str = Field(
        "720h",
        description=(
            "NodePool expireAfter: nodes are drained when they reach this age, whatever runs on "
            "them. `Never` turns expiry off (replace nodes yourself)."
        ),
        pattern=DURATION.pattern,
    )

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _kubernetes_version(cls, v: object) -> object:
        return check_kubernetes_minor(v)

    @field_validator("capacity_types")
    @classmethod
    def _capacity_types(cls, v: tuple[CapacityType, ...]) -> tuple[CapacityType, ...]:
        if len(set(v)) != len(v):
            raise ValueError("each capacity type may appear once")
        return v

    @model_validator(mode="after")
    def _reservations(self) -> Cluster:
        # Karpenter launches into a reservation only when the NodePool allows `reserved` and the
        # EC2NodeClass selects it: it "does not support open matching for ODCRs"
        # (karpenter-provider-aws@v1.14.1 website/content/en/docs/tasks/odcrs.md:60-63).
        types = self.capacity_types
        if "reserved" in types and not self.capacity_reservations:
            raise located_error(
                "Cluster",
                ("capacityTypes", types.index("reserved")),
                "`reserved` needs `cluster.capacityReservations`: Karpenter only launches into "
                "reservations the EC2NodeClass selects",
                types,
            )
        if self.capacity_reservations and "reserved" not in types:
            raise located_error(
                "Cluster",
                ("capacityReservations",),
                "capacity reservations are only used when `capacityTypes` allows `reserved`; "
                "add it (e.g. [reserved, on-demand])",
                self.capacity_reservations,
            )
        return self


def reserve_of(spec: Spec) -> ec2.Reserve:
    """The spec's DaemonSet reserve (``cluster.daemonSetReserve``) in catalog units."""
    r = spec.cluster.daemon_set_reserve
    return ec2.Reserve(cpu_millicores=r.cpu_millicores, memory_mib=r.memory_mib)
