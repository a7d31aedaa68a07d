"""The NodePool's capacity, checked the way Karpenter and the kubelet act on it.

- Instance types: a requirement evaluator (Karpenter's operators over the well-known labels of
  every catalog type) finds the types the rendered NodePool admits; each must host the pod's
  requests plus the DaemonSet reserve within its Karpenter allocatable, with the same pods per
  node and the same sizing verdict as the type llmdeploy sized.
- Capacity types: Karpenter launches reserved, then spot, then on-demand, whatever the order
  (aws/karpenter-provider-aws@v1.14.1 pkg/providers/instance/instance.go getCapacityType).
- Reserved capacity needs selector terms; expiry and spot warnings when one node holds every
  minimum replica.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import unvalidated_kinds
from llmdeploy import pipeline
from llmdeploy.catalog import ec2 as catalog
from llmdeploy.errors import Diagnostic, SpecError
from llmdeploy.plan.capacity import KARPENTER_CAPACITY_ORDER, launch_capacity_type
from llmdeploy.sizing.calculator import compute
from llmdeploy.sizing.types import on_instance
from llmdeploy.spec import load
from llmdeploy.spec.cluster import DaemonSetReserve
from node_specs import docs, refused, render, spec_text, warnings

REPO = Path(__file__).resolve().parents[1]
CATALOG_CSV = REPO / "src" / "llmdeploy" / "catalog" / "data" / "instances.csv"


def requirements(result: pipeline.Rendered) -> list[dict[str, Any]]:
    (pool,) = docs(result, "NodePool")
    reqs: list[dict[str, Any]] = pool["spec"]["template"]["spec"]["requirements"]
    return reqs


# --- an independent model of the catalog's node labels and Karpenter's requirement operators ---

# karpenter.k8s.aws/instance-gpu-name per GPU model (Karpenter's instance-type reference:
# lower-case EC2 GpuInfo names, e.g. "a100" for both A100 sizes).
GPU_NAME = {
    "NVIDIA T4": "t4",
    "NVIDIA A10G": "a10g",
    "NVIDIA L4": "l4",
    "NVIDIA L40S": "l40s",
    "NVIDIA V100": "v100",
    "NVIDIA A100": "a100",
    "NVIDIA H100": "h100",
    "NVIDIA H200": "h200",
    "NVIDIA B200": "b200",
    "NVIDIA B300": "b300",
    "NVIDIA GB200": "gb200",
}
ALLOC = re.compile(r"cpu (\d+)m, memory (\d+)Mi, pods (\d+)")


def _gpu_name(model: str) -> str:
    prefixes = sorted(GPU_NAME, key=len, reverse=True)  # "NVIDIA L40S" before "NVIDIA L4"
    return next(GPU_NAME[p] for p in prefixes if model.startswith(p))


@dataclasses.dataclass(frozen=True)
class Node:
    labels: dict[str, str]
    gpus: int
    cpu_milli: int | None
    memory_mib: int | None


@functools.cache
def nodes() -> dict[str, Node]:
    """Each catalog type as Karpenter labels it, from the CSV (not from the plan code)."""
    out = {}
    for row in csv.DictReader(CATALOG_CSV.read_text(encoding="utf-8").splitlines()):
        labels = {
            "node.kubernetes.io/instance-type": row["instance_type"],
            "karpenter.k8s.aws/instance-family": row["family"],
            "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
            "karpenter.k8s.aws/instance-gpu-name": _gpu_name(row["gpu_model"]),
            "karpenter.k8s.aws/instance-gpu-count": row["gpu_count"],
            "kubernetes.io/arch": row["cpu_arch"],
            "kubernetes.io/os": "linux",
        }
        if row["gpu_mem_per_gpu_mib_ec2_api"].isdigit():
            labels["karpenter.k8s.aws/instance-gpu-memory"] = row["gpu_mem_per_gpu_mib_ec2_api"]
        alloc = ALLOC.search(row["karpenter_allocatable"])
        cpu, mem = (int(alloc.group(1)), int(alloc.group(2))) if alloc else (None, None)
        out[row["instance_type"]] = Node(labels, int(row["gpu_count"]), cpu, mem)
    return out


def admits(reqs: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    """Karpenter's requirement operators on node labels (capacity type is an offering's, not a
    type's, so it is left out here)."""
    for r in reqs:
        key, op, values = r["key"], r["operator"], r.get("values", [])
        if key == "karpenter.sh/capacity-type":
            continue
        value = labels.get(key)
        if op == "In":
            ok = value is not None and value in values
        elif op == "NotIn":
            ok = value is None or value not in values
        elif op in ("Exists", "DoesNotExist"):
            ok = (value is not None) == (op == "Exists")
        else:  # Gt, Lt: one integer
            bound = int(values[0])
            ok = value is not None and (int(value) > bound if op == "Gt" else int(value) < bound)
        if not ok:
            return False
    return True


def quantity_milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else round(float(q) * 1000)


def quantity_mib(q: str) -> int:
    factors = {"Gi": 1024, "Mi": 1, "Ki": 1 / 1024}
    for suffix, factor in factors.items():
        if q.endswith(suffix):
            return round(float(q[: -len(suffix)]) * factor)
    return round(int(q) / 2**20)


def pod_requests(result: pipeline.Rendered) -> tuple[int, int, int]:
    """(CPU millicores, memory MiB, GPUs) the pod needs: its containers' sum, or the largest
    init container (init containers run one at a time, before the others)."""
    (deploy,) = docs(result, "Deployment")
    pod = deploy["spec"]["template"]["spec"]

    def need(key: str, parse: Any) -> int:
        main = sum(parse(c["resources"]["requests"].get(key, "0")) for c in pod["containers"])
        init = [
            parse(c["resources"]["requests"].get(key, "0")) for c in pod.get("initContainers", [])
        ]
        return int(max([main, *init]))

    return need("cpu", quantity_milli), need("memory", quantity_mib), need("nvidia.com/gpu", int)


def check_capacity(text: str) -> tuple[pipeline.Rendered, list[str]]:
    """Every type the NodePool admits hosts the pod, with the plan's pods per node and verdict."""
    result = render(text)
    spec, sizing = result.loaded.spec, result.sizing
    assert sizing.instance is not None
    tp = spec.hardware.tensor_parallel
    if sizing.instance.gpu_count < tp:  # refused by the sizing verdict (rendered with force)
        return result, []
    reqs = requirements(result)
    listed = next(r["values"] for r in reqs if r["key"] == "node.kubernetes.io/instance-type")
    admitted = [name for name, node in nodes().items() if admits(reqs, node.labels)]
    assert sorted(admitted) == sorted(listed), "the label requirements contradict the type list"
    assert sizing.instance.name in admitted
    # the same plan, stated in labels alone: no other GPU model or count gets in
    without_types = [r for r in reqs if r["key"] != "node.kubernetes.io/instance-type"]
    for name, node in nodes().items():
        if admits(without_types, node.labels):
            inst = catalog.instance(name)
            assert inst is not None
            assert (inst.gpu.key, inst.gpu_count) == (
                sizing.instance.gpu.key,
                sizing.instance.gpu_count,
            )
    cpu, mem, gpus = pod_requests(result)
    reserve = spec.cluster.daemon_set_reserve
    per_node = sizing.instance.gpu_count // tp
    tight = False
    for name in admitted:
        node = nodes()[name]
        assert node.gpus // tp == per_node, f"{name}: pods per node differ from the plan"
        assert per_node * gpus <= node.gpus
        if node.cpu_milli is not None and node.memory_mib is not None:
            free_cpu = node.cpu_milli - quantity_milli(reserve.cpu)
            free_mem = node.memory_mib - quantity_mib(reserve.memory)
            assert per_node * cpu <= free_cpu, f"{name}: CPU does not fit beside the reserve"
            assert per_node * mem <= free_mem, f"{name}: memory does not fit beside the reserve"
            # sized for the smallest allowed type: less than one more core/GiB would fit there
            tight |= per_node * (cpu + 1000) > free_cpu or per_node * (mem + 1024) > free_mem
        inst = catalog.instance(name)
        assert inst is not None
        other = compute(on_instance(sizing.request, inst))
        assert (other.fits, other.kv_cache_gib_per_gpu, other.max_concurrency) == (
            sizing.fits,
            sizing.kv_cache_gib_per_gpu,
            sizing.max_concurrency,
        ), f"{name}: the sizing verdict differs from {sizing.instance.name}'s"
    assert tight or all(nodes()[n].cpu_milli is None for n in admitted)
    return result, listed


def test_the_g5_family_allows_every_one_gpu_size_that_hosts_the_pod() -> None:
    _, listed = check_capacity(spec_text())
    # g5.xlarge (4 vCPU, 16 GiB) leaves less than 4 CPU / 16 GiB beside the reserve
    assert listed == ["g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.16xlarge"]  # cheapest first
    prices = [catalog.instances()[n].price_usd_hr for n in listed]
    assert prices == sorted(prices)  # type: ignore[type-var]


def test_a100_40gb_and_80gb_are_different_plans() -> None:
    _, listed = check_capacity(spec_text("instanceFamily: p4d", tp=4))
    assert listed == ["p4d.24xlarge"]
    result, listed = check_capacity(spec_text("instanceFamily: p4de", tp=4))
    assert listed == ["p4de.24xlarge"]
    gpu_memory = next(r for r in requirements(result) if r["key"].endswith("instance-gpu-memory"))
    assert gpu_memory["values"] == ["81920"]  # instance-gpu-name is "a100" for both


def test_the_same_gpu_in_another_family_serves_the_plan() -> None:
    _, listed = check_capacity(spec_text("instanceFamily: p5e", tp=8))
    assert set(listed) == {"p5e.48xlarge", "p5en.48xlarge"}  # 8 x H200 both
    result, listed = check_capacity(spec_text("instanceFamily: g6"))
    assert {"gr6.4xlarge", "gr6.8xlarge"} <= set(listed)
    family = next(r for r in requirements(result) if r["key"].endswith("instance-family"))
    assert family["values"] == ["g6", "gr6"]


def test_an_instance_type_is_a_pin() -> None:
    _, listed = check_capacity(spec_text("instanceType: g5.4xlarge"))
    assert listed == ["g5.4xlarge"]


FAMILIES = sorted({i.family for i in catalog.instances().values() if i.arch == "amd64"})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(FAMILIES),
    tp=st.sampled_from([1, 2, 4, 8]),
    cpu=st.sampled_from(["500m", "1", "2", "3500m"]),
    memory=st.sampled_from(["1Gi", "2Gi", "6Gi", "12Gi"]),
)
def test_every_admitted_type_hosts_the_pod_beside_the_reserve(
    family: str, tp: int, cpu: str, memory: str
) -> None:
    text = spec_text(
        f"instanceFamily: {family}",
        tp=tp,
        cluster=f"  daemonSetReserve:\n    cpu: {cpu!r}\n    memory: {memory}\n",
    )
    try:
        check_capacity(text)
    except SpecError as exc:  # a located refusal is fine; a pod that never fits is not
        assert all(d.line is not None for d in exc.diagnostics), exc.diagnostics


def test_a_larger_reserve_never_raises_the_pods_requests() -> None:
    small = pod_requests(
        render(spec_text(cluster="  daemonSetReserve: {cpu: 500m, memory: 1Gi}\n"))
    )
    large = pod_requests(render(spec_text(cluster="  daemonSetReserve: {cpu: '2', memory: 6Gi}\n")))
    assert large[0] < small[0] and large[1] < small[1]


# --- DaemonSet reserve --------------------------------------------------------------------------


def _addon_table() -> list[tuple[str, int, int]]:
    """The chart-default DaemonSet requests docs/production.md justifies the default with."""
    text = (REPO / "docs" / "production.md").read_text(encoding="utf-8")
    block = text.split("| DaemonSet (chart defaults) |", 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in block.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[0], quantity_milli(cells[1]), quantity_mib(cells[2])))
    return rows


def test_the_default_reserve_covers_a_full_gpu_add_on_stack() -> None:
    rows = _addon_table()
    assert len(rows) >= 10
    default = DaemonSetReserve()
    cpu = sum(r[1] for r in rows)
    mem = sum(r[2] for r in rows)
    assert cpu <= default.cpu_millicores and mem <= default.memory_mib, (cpu, mem)


def test_a_reserve_that_leaves_no_room_is_a_located_error() -> None:
    (d,) = refused(spec_text("instanceType: g5.xlarge", cluster="  daemonSetReserve: {cpu: '4'}\n"))
    assert d.line == 15 and "does not fit on g5.xlarge" in d.message
    assert d.hint is not None and "daemonSetReserve" in d.hint


def test_the_memory_floor_counts_dev_shm() -> None:
    # g5.xlarge: 14162Mi allocatable - 12Gi reserve = 1874Mi, below 4Gi + 2Gi of /dev/shm
    reserve = "  daemonSetReserve: {memory: 12Gi}\n"
    (d,) = refused(spec_text("instanceType: g5.xlarge", cluster=reserve))
    assert "1874Mi" in d.message and "6144Mi (4Gi + 2Gi /dev/shm)" in d.message


# --- capacity types -----------------------------------------------------------------------------


SUBSETS = [set(c) for n in range(1, 4) for c in itertools.combinations(KARPENTER_CAPACITY_ORDER, n)]


@pytest.mark.parametrize("allowed", SUBSETS, ids=lambda s: "+".join(sorted(s)))
def test_karpenter_prefers_reserved_then_spot_then_on_demand(allowed: set[str]) -> None:
    # nodepools.md:276-278: "Karpenter will prioritize reserved capacity, followed by spot, then
    # finally on-demand"; with nothing else available the launch is on-demand (instance.go:758).
    rank = {"reserved": 0, "spot": 1, "on-demand": 2}
    for n in range(4):
        for available in itertools.combinations(KARPENTER_CAPACITY_ORDER, n):
            usable = allowed & set(available) - {"on-demand"}
            expected = min(usable, key=rank.__getitem__) if usable else "on-demand"
            for order in itertools.permutations(allowed):
                assert launch_capacity_type(order, available) == expected


def test_the_nodepool_does_not_depend_on_the_capacity_type_order() -> None:
    reservation = "  capacityReservations: [{id: cr-0123456789abcdef0}]\n"
    outputs = {
        render(spec_text(cluster=reservation + f"  capacityTypes: [{', '.join(order)}]\n")).files
        for order in itertools.permutations(["on-demand", "spot", "reserved"])
    }
    assert len(outputs) == 1
    (files,) = outputs
    (pool,) = [d for n, d in pipeline.yaml_documents(files) if d["kind"] == "NodePool"]
    reqs = pool["spec"]["template"]["spec"]["requirements"]
    (ct,) = [r for r in reqs if r["key"] == "karpenter.sh/capacity-type"]
    assert ct["values"] == ["reserved", "spot", "on-demand"]  # in Karpenter's own order


def test_a_single_replica_on_spot_warns_at_the_capacity_types() -> None:
    result = render(
        spec_text(replicas=1, cluster="  capacityTypes: [on-demand, spot]\n  expireAfter: Never\n")
    )
    messages = [w for w in warnings(result) if "on spot whenever spot is available" in w.message]
    (w,) = messages
    assert w.line == 15 and w.hint is not None and "minReplicas: 2" in w.hint
    assert not [
        w
        for w in warnings(render(spec_text(replicas=2, cluster="  capacityTypes: [spot]\n")))
        if "on spot" in w.message
    ]


def test_spot_on_few_instance_types_warns() -> None:
    result = render(
        spec_text("instanceType: g5.2xlarge", cluster="  capacityTypes: [spot, on-demand]\n")
    )
    assert any("spot with 1 instance type(s) (g5.2xlarge)" in w.message for w in warnings(result))
    result = render(spec_text("instanceFamily: g6", cluster="  capacityTypes: [spot, on-demand]\n"))
    assert not any("instance type(s)" in w.message for w in warnings(result))  # 6 one-GPU L4 types


# --- reserved capacity --------------------------------------------------------------------------


def test_reserved_without_reservations_is_a_located_error() -> None:
    with pytest.raises(SpecError) as info:
        load.load_spec_text(
            spec_text(cluster="  capacityTypes: [on-demand, reserved]\n"), "spec.yaml"
        )
    (d,) = info.value.diagnostics
    assert (d.line, d.column) == (15, 30)  # at `reserved`
    assert "capacityReservations" in d.message


def test_reservations_without_reserved_are_a_located_error() -> None:
    with pytest.raises(SpecError) as info:
        load.load_spec_text(
            spec_text(cluster="  capacityReservations: [{id: cr-01}]\n"), "spec.yaml"
        )
    (d,) = info.value.diagnostics
    assert d.line == 15 and "allows `reserved`" in d.message


def test_an_id_with_other_fields_is_refused_per_term() -> None:
    with pytest.raises(SpecError) as info:
        load.load_spec_text(
            spec_text(
                cluster="  capacityTypes: [reserved]\n  capacityReservations:\n"
                "    - id: cr-01\n    - id: cr-02\n      ownerID: '111122223333'\n"
            ),
            "spec.yaml",
        )
    (d,) = info.value.diagnostics
    assert d.line == 18 and "`id` cannot be combined" in d.message


def test_reservations_render_as_selector_terms_the_crd_accepts(crds: object) -> None:
    cluster = (
        "  capacityTypes: [reserved, on-demand]\n  capacityReservations:\n"
        "    - id: cr-0123456789abcdef0\n"
        "    - tags: {team: ml, 'kubernetes.io/purpose': '*'}\n      ownerID: '111122223333'\n"
        "    - instanceMatchCriteria: open\n"
    )
    result = render(spec_text(cluster=cluster), crds)
    assert result.report.ok and not unvalidated_kinds(result.report, crds)
    (nc,) = docs(result, "EC2NodeClass")
    assert nc["spec"]["capacityReservationSelectorTerms"] == [
        {"id": "cr-0123456789abcdef0"},
        {"tags": {"kubernetes.io/purpose": "*", "team": "ml"}, "ownerID": "111122223333"},
        {"instanceMatchCriteria": "open"},
    ]


# --- expiry -------------------------------------------------------------------------------------


def _expiry(result: pipeline.Rendered) -> list[Diagnostic]:
    return [w for w in warnings(result) if "expires the node" in w.message]


def test_expiry_with_one_replica_warns_with_the_fixes() -> None:
    (w,) = _expiry(render(spec_text(replicas=1)))
    assert w.line == 10 and w.severity == "warning"  # at autoscaling.minReplicas
    assert w.hint is not None and "minReplicas: 2" in w.hint and "expireAfter: Never" in w.hint
    assert "disruption budgets" in w.message  # they do not stop expiry (disruption.md:295)
    (w,) = _expiry(render(spec_text(replicas=1, cluster="  expireAfter: 336h\n")))
    assert w.line == 15 and "every 336h" in w.message


def test_no_expiry_warning_when_the_replicas_span_two_nodes_or_nodes_never_expire() -> None:
    assert not _expiry(render(spec_text(replicas=2)))  # one GPU per g5 node
    assert not _expiry(render(spec_text(replicas=1, cluster="  expireAfter: Never\n")))


def test_two_replicas_that_share_a_node_still_warn() -> None:
    text = spec_text("instanceType: p4d.24xlarge", tp=4, replicas=2)
    (w,) = _expiry(render(text))
    assert "all 2 minimum replicas (2 fit on one p4d.24xlarge)" in w.message
    assert w.hint is not None and "minReplicas: 3" in w.hint
    assert not _expiry(render(spec_text("instanceType: p4d.24xlarge", tp=4, replicas=3)))


def test_the_cli_prints_the_warning_located_and_renders(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from llmdeploy.cli import commands as cli

    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text(replicas=1, cluster="  expireAfter: 336h\n"), encoding="utf-8")
    for command in (["render", str(spec), "-o", str(tmp_path / "out")], ["size", str(spec)]):
        result = CliRunner().invoke(cli.app, command)
        assert result.exit_code == 0, result.stderr
        assert f"{spec}:15:16: warning: every 336h Karpenter expires the node" in result.stderr
        assert f"= note: {spec}:10:16: `autoscaling.minReplicas` is 1" in result.stderr
