"""EC2 GPU instance and GPU catalogs, packaged as data with their sources.

The CSV files under ``llmdeploy/catalog/data/`` are copies of
``shared/reference/{instances,gpus}.csv`` (each row carries a ``source`` column: the Karpenter
instance-type reference at aws/karpenter-provider-aws@1d927085, instances.vantage.sh prices,
NVIDIA datasheets). ``?`` means "not verified" and is loaded as ``None``; nothing here guesses a
missing number.

``gpus.csv`` has one column more than the shared copy: ``karpenter_gpu_name``, the value of
Karpenter's well-known label ``karpenter.k8s.aws/instance-gpu-name`` on instances with that GPU
(Karpenter lower-kebab-cases the name EC2 gives the GPU, so it is not always a word of the model
name: the RTX PRO 6000 Blackwell Server Edition of g7e is ``rtx-pro-server-6000``). Every value
is the one aws/karpenter-provider-aws@1d927085 website/content/en/docs/reference/instance-types.md
lists, except ``gb200``, which has no instance type there yet (unverified). A GPU is one row:
nothing else in the code lists GPUs.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from importlib import resources

# Measured on real hardware (shared/reference/README.md, "Units"): an H200 reports 143771 MiB
# in nvidia-smi; the CSV still has "?" in that cell.
_NVIDIA_SMI_MIB_OVERRIDES = {"NVIDIA H200 SXM 141GB": 143771}
# The A10G's BF16 peak is "?" in the CSV (an AWS variant of the A10, whose datasheet says 125):
# a GEMM benchmark on A10G peaks at ~69.5 TFLOPS BF16 (zzc0721/torch-performance-test-data#126,
# quoted in shared/reference/gpus.csv), and the reference pack says to plan with ~70.
_FP16_TFLOPS_OVERRIDES = {"NVIDIA A10G": 70.0}


@dataclass(frozen=True)
class Gpu:
    key: str
    model: str
    arch: str
    compute_capability: str
    mem_mib_nvidia_smi: int | None
    mem_bw_gbs: float | None
    fp8: bool
    karpenter_name: str
    # dense tensor-core peaks from the datasheets (None: not known; FP8/INT8 None: no such units)
    fp16_tflops: float | None = None
    fp8_tflops: float | None = None
    int8_tops: float | None = None


@dataclass(frozen=True)
class Allocatable:
    cpu_millicores: int
    memory_mib: int
    pods: int


@dataclass(frozen=True)
class Reserve:
    """CPU and memory per node left for DaemonSets, not requested by the model pods."""

    cpu_millicores: int
    memory_mib: int


# The spec's default (`cluster.daemonSetReserve`, docs/production.md "DaemonSet reserve"): the
# chart-default requests of a full EKS GPU add-on stack add up to about 0.61 vCPU and 0.69 GiB.
DEFAULT_RESERVE = Reserve(cpu_millicores=1000, memory_mib=2048)
# Host resources a serving pod needs besides its GPUs: the API server, the engine core and one
# worker per GPU, tokenizers and the safetensors loader. Smaller shares are not offered when
# llmdeploy picks the size of an instance family.
MIN_POD_CPU_MILLI = 4000
MIN_POD_MEMORY_MIB = 16 * 1024


@dataclass(frozen=True)
class Instance:
    name: str
    family: str
    arch: str  # amd64 | arm64
    gpu: Gpu
    gpu_count: int
    gpu_mem_mib_ec2: int | None  # value of karpenter.k8s.aws/instance-gpu-memory
    interconnect: str
    nvlink: bool
    vcpus: int
    memory_gib: float
    local_nvme_gb: int
    efa_interfaces: int | None
    price_usd_hr: float | None
    allocatable: Allocatable | None
    source: str
    price_as_of: str | None = None  # date of the price list the price comes from (YYYY-MM-DD)
    # Spot: a dated observation of the spot price in one region (spot-prices.csv); None where
    # the catalog has none. Spot prices move: the date says when this one was seen.
    spot_price_usd_hr: float | None = None
    spot_price_as_of: str | None = None
    # network bandwidth of the node, Gbit/s (EC2 DescribeInstanceTypes via Karpenter's
    # instance-network-bandwidth label; on p4d/p5 this is the EFA aggregate, 3200 on p5)
    network_gbps: float | None = None

    @property
    def link_gbs(self) -> float | None:
        """GPU-to-GPU bandwidth per GPU and direction, GB/s, from the interconnect column:
        NVLink figures there are per GPU, both directions (p4d "600 GB/s per GPU", p5 "900"),
        so half (None where the figure is not known); PCIe x16 is 16 GB/s per direction on Gen3
        and 32 on Gen4, which the g5, g6 and g6e rows name or imply (their GPUs are Gen4 cards).
        None on a one-GPU size."""
        text = self.interconnect
        if self.gpu_count < 2:
            return None
        found = _LINK_GBS.search(text)
        if self.nvlink:  # "NVLink 5 (? GB/s, unverified)": not known
            return float(found[1]) / 2 if found else None
        return 16.0 if "Gen3" in text else 32.0

    @property
    def size(self) -> str:
        return self.name.split(".", 1)[1]

    def pods_per_node(self, tp: int) -> int:
        return max(1, self.gpu_count // tp)

    def pod_share(self, tp: int, reserve: Reserve = DEFAULT_RESERVE) -> tuple[int, int]:
        """(CPU millicores, memory MiB) one model pod of TP GPUs may request on this node.

        Karpenter's allocatable figures already exclude kubelet and system reservations;
        DaemonSets get ``reserve``; the rest is divided between the model pods the node holds.
        """
        share = self.pods_per_node(tp)
        alloc = self.allocatable
        if alloc is None:
            cpu_milli = int(self.vcpus * 1000 * 0.9)
            mem_mib = int(self.memory_gib * 1024 * 0.85)
        else:
            cpu_milli, mem_mib = alloc.cpu_millicores, alloc.memory_mib
        cpu_milli -= reserve.cpu_millicores
        mem_mib -= reserve.memory_mib
        return cpu_milli // share, mem_mib // share

    def hosts_pod(self, tp: int, reserve: Reserve = DEFAULT_RESERVE) -> bool:
        """Enough GPUs, CPU and memory for one model pod of TP GPUs."""
        cpu, mem = self.pod_share(tp, reserve)
        return self.gpu_count >= tp and cpu >= MIN_POD_CPU_MILLI and mem >= MIN_POD_MEMORY_MIB


def _num(cell: str) -> float | None:
    cell = cell.strip()
    if cell in {"", "?", "n/a"} or cell.endswith("?"):
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def _int(cell: str) -> int | None:
    value = _num(cell)
    return None if value is None else int(value)


def _required(row: dict[str, str], column: str) -> str:
    value = (row.get(column) or "").strip()
    if not value or value == "?":
        raise ValueError(f"catalog row {row.get('gpu_key')!r}: {column} is missing")
    return value


def _rows(name: str) -> list[dict[str, str]]:
    text = resources.files("llmdeploy.catalog").joinpath("data", name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


_LINK_GBS = re.compile(r"(\d+) GB/s")
_ALLOC = re.compile(r"cpu (\d+)m, memory (\d+)Mi, pods (\d+)")
# The price column's source names the date of its price list: '... header "Last updated: DATE"'.
_PRICE_DATE = re.compile(r"Last updated: (\d{4}-\d{2}-\d{2})")


@functools.cache
def gpus() -> dict[str, Gpu]:
    """GPU models keyed by their full model name (as instances.csv names them)."""
    out: dict[str, Gpu] = {}
    for row in _rows("gpus.csv"):
        model = row["gpu_model"]
        mib = _NVIDIA_SMI_MIB_OVERRIDES.get(model) or _int(row["mem_mib_nvidia_smi"])
        if row["gpu_key"] == "v100_16":
            mib = 16152  # the lower of the two driver readings (conservative)
        out[model] = Gpu(
            key=row["gpu_key"],
            model=model,
            arch=row["gpu_arch"],
            compute_capability=row["compute_capability"],
            mem_mib_nvidia_smi=mib,
            mem_bw_gbs=_num(row["mem_bw_gbs"]),
            fp8=row["fp8_supported"].strip() == "yes",
            karpenter_name=_required(row, "karpenter_gpu_name"),
            fp16_tflops=_FP16_TFLOPS_OVERRIDES.get(model) or _num(row["fp16_bf16_dense_tflops"]),
            fp8_tflops=_num(row["fp8_dense_tflops"]),
            int8_tops=_num(row["int8_dense_tops"]),
        )
    return out


@functools.cache
def instances() -> dict[str, Instance]:
    """Every catalogued EC2 GPU instance type, in catalog order."""
    gpu_by_model = gpus()
    spot = {row["instance_type"]: row for row in _rows("spot-prices.csv")}
    out: dict[str, Instance] = {}
    for row in _rows("instances.csv"):
        alloc_match = _ALLOC.search(row["karpenter_allocatable"])
        alloc = Allocatable(*(int(g) for g in alloc_match.groups())) if alloc_match else None
        interconnect = row["gpu_interconnect"]
        price = _num(row["price_usd_hr_us_east_1_linux_ondemand"])
        dated = _PRICE_DATE.search(row["price_source"])
        out[row["instance_type"]] = Instance(
            name=row["instance_type"],
            family=row["family"],
            arch=row["cpu_arch"],
            gpu=gpu_by_model[row["gpu_model"]],
            gpu_count=int(row["gpu_count"]),
            gpu_mem_mib_ec2=_int(row["gpu_mem_per_gpu_mib_ec2_api"]),
            interconnect=interconnect,
            nvlink="NVLink" in interconnect and "no NVLink" not in interconnect,
            vcpus=int(row["vcpus"]),
            memory_gib=float(row["memory_gib"]),
            local_nvme_gb=_int(row["local_nvme_gb"]) or 0,
            efa_interfaces=_int(row["efa_interfaces_karpenter"]),
            price_usd_hr=price,
            allocatable=alloc,
            source=row["source"],
            price_as_of=dated[1] if dated and price is not None else None,
            spot_price_usd_hr=_num(spot[row["instance_type"]]["spot_price_usd_hr"])
            if row["instance_type"] in spot
            else None,
            network_gbps=_num(row["network_baseline_gbps_karpenter"]),
            spot_price_as_of=spot[row["instance_type"]]["as_of"]
            if row["instance_type"] in spot
            else None,
        )
    return out


def families() -> list[str]:
    seen: dict[str, None] = {}
    for inst in instances().values():
        seen.setdefault(inst.family, None)
    return list(seen)


def instance(name: str) -> Instance | None:
    return instances().get(name)


def family_members(family: str) -> list[Instance]:
    return [i for i in instances().values() if i.family == family]
