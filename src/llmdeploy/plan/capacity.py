"""Which EC2 capacity a deployment's NodePool allows: instance types, capacity types, and the
CPU and memory a model pod may request so that it fits every allowed type.

**Same plan.** Sizing and planning are done for one instance type (``sizing.instance``: the
pinned ``hardware.instanceType``, or the cheapest size of ``hardware.instanceFamily`` that fits).
With ``instanceFamily`` the NodePool allows every catalog type that serves that same plan, so an
insufficient-capacity error or a spot shortage on one type falls back to the others
(Karpenter sorts the allowed types by price and launches the cheapest available one:
kubernetes-sigs/karpenter@v1.14.1 ``pkg/cloudprovider/types.go`` ``OrderByPrice`` :336-356,
aws/karpenter-provider-aws@v1.14.1 ``pkg/providers/instance/instance.go`` :320-348). A type
serves the same plan when every number the sizing verdict and the plan were computed from is
the same on it:

- the GPU model (``catalog.Gpu.key``: memory per GPU, FP8 support, compute capability), so the
  KV cache, the concurrency and a TensorRT-LLM engine are the same. A100 40GB (p4d) and 80GB
  (p4de) are different models: on 80GB vLLM would allocate a different KV cache than ``size``
  reported, so p4de never stands in for p4d;
- GPUs per node, so pods per node (``gpu_count // tensorParallel``) and the root volume are
  the same;
- the GPU interconnect (NVLink changes the all-reduce buffers in the memory model), the CPU
  architecture (the image) and whether the node has local NVMe (where the model cache lives);
- enough host CPU and memory for the pod beside the DaemonSet reserve
  (``catalog.Instance.hosts_pod``).

CPU and memory may differ between the allowed types: the pod requests the smallest allowed
type's share, so it fits each of them. ``hardware.instanceType`` is a pin: only that type.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from llmdeploy.catalog import ec2 as catalog
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.spec.cluster import reserve_of
from llmdeploy.spec.sections import Spec

# Karpenter launches the first of these capacity types the NodeClaim allows and has an
# available offering for, else on-demand; the order in the NodePool does not matter
# (aws/karpenter-provider-aws@v1.14.1 pkg/providers/instance/instance.go getCapacityType
# :745-759; docs concepts/nodepools.md:276-278).
KARPENTER_CAPACITY_ORDER = ("reserved", "spot", "on-demand")
# Karpenter logs an error when a launch that could use spot falls back to on-demand with fewer
# instance types than this (instance.go instanceTypeFlexibilityThreshold :65, :437-455).
SPOT_FLEXIBILITY_TYPES = 5


def launch_capacity_type(allowed: Iterable[str], available: Iterable[str]) -> str:
    """The capacity type Karpenter launches: reserved, then spot, among those the NodePool
    allows and that have an available offering; otherwise on-demand (``getCapacityType``)."""
    allowed_set, available_set = set(allowed), set(available)
    for capacity_type in KARPENTER_CAPACITY_ORDER[:2]:
        if capacity_type in allowed_set and capacity_type in available_set:
            return capacity_type
    return "on-demand"


def capacity_type_values(spec: Spec) -> tuple[str, ...]:
    """The NodePool's capacity-type values, in Karpenter's own order of preference."""
    chosen = set(spec.cluster.capacity_types)
    return tuple(t for t in KARPENTER_CAPACITY_ORDER if t in chosen)


def same_plan(a: Instance, b: Instance) -> bool:
    return (
        a.gpu.key == b.gpu.key
        and a.gpu_count == b.gpu_count
        and a.nvlink == b.nvlink
        and a.arch == b.arch
        and (a.local_nvme_gb > 0) == (b.local_nvme_gb > 0)
    )


def _price(inst: Instance) -> tuple[bool, float, str]:
    return (inst.price_usd_hr is None, inst.price_usd_hr or math.inf, inst.name)


def allowed_instances(spec: Spec, chosen: Instance) -> tuple[Instance, ...]:
    """The instance types the NodePool allows, cheapest first (the order is only for people:
    Karpenter orders them by the prices of the offerings it sees)."""
    if spec.hardware.instance_type is not None:
        return (chosen,)
    tp, reserve = spec.hardware.gpus_per_pod, reserve_of(spec)
    found = [
        inst
        for inst in catalog.instances().values()
        if same_plan(inst, chosen) and inst.hosts_pod(tp, reserve)
    ]
    if chosen not in found:  # no size hosts the pod: the one llmdeploy sized, alone
        return (chosen,)
    return tuple(sorted(found, key=_price))


def pod_share(spec: Spec, allowed: Iterable[Instance]) -> tuple[int, int]:
    """(CPU millicores, memory MiB) a model pod may request: the smallest share among the
    allowed types, so the pod fits on each of them beside the DaemonSet reserve."""
    tp, reserve = spec.hardware.gpus_per_pod, reserve_of(spec)
    shares = [inst.pod_share(tp, reserve) for inst in allowed]
    return min(cpu for cpu, _ in shares), min(mem for _, mem in shares)
