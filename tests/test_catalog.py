"""The GPU and instance catalogs are data: a GPU is one row of gpus.csv, nothing in the code lists
GPUs. A copy of the package with one new GPU and one new instance type renders end to end."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from llmdeploy.catalog import ec2

REPO = Path(__file__).resolve().parents[1]

# The g7e.2xlarge as aws/karpenter-provider-aws@1d927085 website/content/en/docs/reference/
# instance-types.md lists it (labels and allocatable). The GPU's nvidia-smi MiB and bandwidth
# are illustrative: this test checks that a new row flows through, not its figures.
NEW_GPU = {
    "gpu_key": "rtx_pro_6000",
    "gpu_model": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "karpenter_gpu_name": "rtx-pro-server-6000",
    "gpu_arch": "Blackwell",
    "compute_capability": "12.0",
    "mem_per_gpu_gb_aws": "96",
    "mem_mib_nvidia_smi": "97887",
    "mem_bw_gbs": "1792",
    "fp8_supported": "yes",
    "notes": "test row",
}
NEW_INSTANCE = {
    "instance_type": "g7e.2xlarge",
    "family": "g7e",
    "cpu_arch": "amd64",
    "gpu_model": NEW_GPU["gpu_model"],
    "gpu_arch": "Blackwell",
    "compute_capability": "12.0",
    "gpu_count": "1",
    "gpu_mem_per_gpu_gb_aws": "96",
    "gpu_mem_per_gpu_mib_ec2_api": "98304",
    "gpu_interconnect": "n/a (1 GPU)",
    "vcpus": "8",
    "memory_gib": "64",
    "local_nvme_gb": "1900",
    "efa_supported": "no",
    "efa_interfaces_karpenter": "0",
    "karpenter_allocatable": "cpu 7910m, memory 57471Mi, pods 254",
    "source": "test row",
}
SPEC = """\
apiVersion: llmdeploy.dev/v1alpha1
name: llama31-8b-g7e
model:
  id: meta-llama/Llama-3.1-8B-Instruct
  architecture: llama-3.1-8b
hardware:
  instanceType: g7e.2xlarge
cluster:
  name: demo-eks
  nodeRole: KarpenterNodeRole-demo
"""


def _append(path: Path, row: dict[str, str]) -> None:
    text = path.read_text(encoding="utf-8")
    header = next(csv.reader(io.StringIO(text)))
    assert set(row) <= set(header), set(row) - set(header)
    out = io.StringIO()
    csv.DictWriter(out, header, lineterminator="\n").writerow(row)
    path.write_text(text + out.getvalue(), encoding="utf-8")


@pytest.fixture(scope="module")
def copy_with_new_gpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("new-gpu")
    shutil.copytree(REPO / "src" / "llmdeploy", root / "src" / "llmdeploy")
    for folder in ("templates", "presets"):
        shutil.copytree(REPO / folder, root / folder)
    data = root / "src" / "llmdeploy" / "catalog" / "data"
    _append(data / "gpus.csv", NEW_GPU)
    _append(data / "instances.csv", NEW_INSTANCE)
    (root / "spec.yaml").write_text(SPEC, encoding="utf-8")
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    env.pop("LLMDEPLOY_CRD_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "llmdeploy", *args],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        check=False,
    )


def test_a_new_gpu_row_leaves_every_other_command_working(copy_with_new_gpu: Path) -> None:
    result = _run(copy_with_new_gpu, "size", "--preset", "llama3-70b-vllm-p4d")
    assert result.returncode == 0, result.stderr
    assert "FITS" in result.stdout


def test_a_new_gpu_row_renders_with_its_own_karpenter_gpu_name(copy_with_new_gpu: Path) -> None:
    result = _run(copy_with_new_gpu, "render", "spec.yaml", "-o", "-")
    assert result.returncode == 0, result.stderr
    docs = {d["kind"]: d for d in yaml.safe_load_all(result.stdout) if d}
    requirements = docs["NodePool"]["spec"]["template"]["spec"]["requirements"]
    by_key = {r["key"]: r["values"] for r in requirements}
    assert by_key["karpenter.k8s.aws/instance-gpu-name"] == ["rtx-pro-server-6000"]
    assert by_key["node.kubernetes.io/instance-type"] == ["g7e.2xlarge"]
    sized = _run(copy_with_new_gpu, "size", "spec.yaml", "--json")
    assert sized.returncode == 0, sized.stderr
    # no measurement and no named sibling: the most cautious measured ratio, said so
    assumptions = json.loads(sized.stdout)["assumptions"]
    assert any(
        "no sibling named, so the lowest ratio measured on any GPU" in a for a in assumptions
    )


def test_a_gpu_row_without_its_karpenter_name_is_a_clear_catalog_error(
    copy_with_new_gpu: Path, tmp_path: Path
) -> None:
    root = tmp_path / "copy"
    shutil.copytree(copy_with_new_gpu, root)
    gpus = root / "src" / "llmdeploy" / "catalog" / "data" / "gpus.csv"
    gpus.write_text(gpus.read_text().replace(",rtx-pro-server-6000,", ",,"), encoding="utf-8")
    result = _run(root, "size", "spec.yaml")
    assert result.returncode == 1
    assert "catalog row 'rtx_pro_6000': karpenter_gpu_name is missing" in result.stderr


def test_every_catalogued_instance_gets_the_label_value_karpenter_sets() -> None:
    # aws/karpenter-provider-aws@1d927085 website/content/en/docs/reference/instance-types.md,
    # label karpenter.k8s.aws/instance-gpu-name of each family's instance types (gb200 has none
    # there yet; p6e-gb200 keeps the unverified "gb200")
    karpenter = {
        "g4dn": "t4", "g5": "a10g", "g6": "l4", "g6e": "l40s", "gr6": "l4", "p3": "v100",
        "p3dn": "v100", "p4d": "a100", "p4de": "a100", "p5": "h100", "p5e": "h200",
        "p5en": "h200", "p6-b200": "b200", "p6-b300": "b300", "p6e-gb200": "gb200",
    }  # fmt: skip
    seen = {i.family: i.gpu.karpenter_name for i in ec2.instances().values()}
    assert {f: seen[f] for f in seen} == {f: karpenter[f] for f in seen}
