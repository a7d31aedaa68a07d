"""The ``cluster.placement`` section: where the GPU nodes launch. A replica spread over several
nodes (``hardware.nodesPerReplica``) needs its nodes close together: one Availability Zone
(a NodePool requirement), optionally one subnet and one cluster placement group (EC2NodeClass
``subnetSelectorTerms`` and ``placementGroupSelector``). docs/multinode.md explains each."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from llmdeploy.spec.fields import SpecModel, located_error

ZONE = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9][a-z]$")
SUBNET_ID = re.compile(r"^subnet-[0-9a-z]+$")


class Placement(SpecModel):
    """Where Karpenter launches the nodes."""

    zone: str | None = Field(
        None,
        description=(
            "Availability Zone every node launches in (NodePool requirement "
            "topology.kubernetes.io/zone), e.g. us-east-1a. Required with nodesPerReplica > 1: "
            "the pods of one replica exchange activations every step, and EFA stays inside one "
            "zone."
        ),
        pattern=ZONE.pattern,
    )
    subnet_ids: tuple[str, ...] = Field(
        (),
        strict=False,  # a YAML list
        max_length=30,
        description=(
            "Subnets the nodes launch in, by id (EC2NodeClass subnetSelectorTerms), in `zone`; "
            "default: the subnets tagged karpenter.sh/discovery. One subnet keeps EFA traffic "
            "inside it."
        ),
    )
    placement_group: str | None = Field(
        None,
        min_length=1,
        max_length=255,
        description=(
            "Name of an existing cluster placement group in `zone` (EC2NodeClass "
            "placementGroupSelector; Karpenter >= 1.11): the lowest latency between the nodes, "
            "but launches fail when the group has no room."
        ),
    )

    @field_validator("subnet_ids")
    @classmethod
    def _subnets(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for subnet in v:
            if not SUBNET_ID.fullmatch(subnet):
                raise ValueError(f"not a subnet id: {subnet!r} (expected e.g. subnet-0123abcd)")
        if len(set(v)) != len(v):
            raise ValueError("each subnet may appear once")
        return v

    @model_validator(mode="after")
    def _group_in_zone(self) -> Placement:
        if self.placement_group is not None and self.zone is None:
            raise located_error(
                "Placement",
                ("placementGroup",),
                "`placementGroup` needs `zone`: a cluster placement group lives in one "
                "Availability Zone, and nodes launched in another fail",
                self.placement_group,
            )
        return self
