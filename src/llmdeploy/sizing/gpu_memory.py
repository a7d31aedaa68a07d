"""Hardware facts for sizing: usable GPU memory per GPU model.

Usable total = what torch reports (``cudaMemGetInfo`` total, the figure vLLM logs), not the
marketing size. Measured values come first; GPUs without a measurement derive it from their
nvidia-smi MiB with the reserved fraction of a measured sibling of the same memory technology,
and say so.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmdeploy.catalog import ec2 as catalog


@dataclass(frozen=True)
class GpuMemory:
    total_gib: float
    source: str


# Measured torch/vLLM totals per GPU (GiB).
MEASURED_TOTAL_GIB: dict[str, tuple[float, str]] = {
    "h100": (79.19, "vLLM-logged total of every H100 calibration case, tests/data/calibration"),
    "h200": (139.80, "torch.cuda.mem_get_info() on an H200, shared/reference/README.md"),
    "a100_80": (79.15, "vLLM-logged total, shared/reference/vllm.md §1"),
    "l40s": (44.42, "vLLM-logged total, shared/reference/vllm.md §1"),
    "l4": (22.49, "vLLM-logged total, shared/reference/vllm.md §1"),
    "t4": (14.56, "vLLM-logged T4-class total, shared/reference/vllm.md §1"),
}

# Unmeasured GPU -> measured sibling whose (torch total / nvidia-smi total) ratio it inherits.
DERIVE_FROM: dict[str, str] = {
    "a100_40": "a100_80",  # same HBM2e part family
    "a10g": "l40s",  # GDDR6 data-center part; the L4 keeps 100% so this is the cautious ratio
    "v100_16": "a100_80",
    "v100_32": "a100_80",
    "b200": "h100",
    "b300": "h100",
    "gb200": "h100",
}

CUDA_CONTEXT_GIB = 0.5  # measured 0.51 GiB on H200 (README); vllm.md §1: 0.4-0.6


def _nvidia_smi_gib(gpu: catalog.Gpu) -> float | None:
    return gpu.mem_mib_nvidia_smi / 1024 if gpu.mem_mib_nvidia_smi else None


def _by_key() -> dict[str, catalog.Gpu]:
    return {g.key: g for g in catalog.gpus().values()}


def _ratio(key: str) -> float | None:
    """torch total / nvidia-smi total of a measured GPU."""
    gpu = _by_key().get(key)
    smi = _nvidia_smi_gib(gpu) if gpu is not None else None
    return MEASURED_TOTAL_GIB[key][0] / smi if smi else None


def gpu_memory(gpu: catalog.Gpu) -> GpuMemory | None:
    """Usable total per GPU, or None when neither measured nor derivable.

    An unmeasured GPU takes the torch/nvidia-smi ratio of its sibling in ``DERIVE_FROM``; a GPU
    with no sibling named there (a new catalog row) the lowest ratio measured on any GPU, the
    cautious choice."""
    if gpu.key in MEASURED_TOTAL_GIB:
        total, source = MEASURED_TOTAL_GIB[gpu.key]
        return GpuMemory(total, source)
    smi = _nvidia_smi_gib(gpu)
    named = DERIVE_FROM.get(gpu.key)
    ratios = {k: r for k in ([named] if named else MEASURED_TOTAL_GIB) if (r := _ratio(k))}
    if smi is None or not ratios:
        return None
    sibling_key = min(ratios, key=ratios.__getitem__)
    ratio, sibling = ratios[sibling_key], _by_key()[sibling_key]
    why = "" if named else "; no sibling named, so the lowest ratio measured on any GPU"
    return GpuMemory(
        round(smi * ratio, 2),
        f"derived: nvidia-smi {gpu.mem_mib_nvidia_smi} MiB x {ratio:.4f} (torch/nvidia-smi "
        f"ratio measured on {sibling.model}{why}); not measured on this GPU",
    )


def gpu_by_key(key: str) -> catalog.Gpu | None:
    """GPU by catalog key, accepting ``a100-40`` for ``a100_40`` and the full model name."""
    norm = key.strip().lower().replace("-", "_")
    found = _by_key().get(norm)
    if found is not None:
        return found
    return catalog.gpus().get(key)


def gpu_keys() -> list[str]:
    return sorted(k.replace("_", "-") for k in _by_key())


def gpu_has_nvlink(gpu: catalog.Gpu) -> bool:
    """Whether the multi-GPU instances carrying this GPU connect it with NVLink."""
    multi = [i for i in catalog.instances().values() if i.gpu.key == gpu.key and i.gpu_count > 1]
    return bool(multi) and all(i.nvlink for i in multi)
