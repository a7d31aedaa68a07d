"""TensorRT-LLM versions: which one a spec runs, and which serving path that version has.

Two paths (``engine.backend``, docs/trtllm.md):

- ``engine``: ``trtllm-build`` engines served by Triton's C++ ``tensorrtllm`` backend. The
  TensorRT-LLM version follows from ``engine.tritonVersion`` (the image
  ``nvcr.io/nvidia/tritonserver:<v>-trtllm-python-py3``). Pinned and legacy: TensorRT-LLM
  removed the TensorRT engine workflow and the C++ Triton backend after the 1.2.x line.
- ``pytorch``: the checkpoint loaded by the PyTorch backend and served by ``trtllm-serve`` from
  ``nvcr.io/nvidia/tensorrt-llm/release:<engine.version>``.

Sources: COMPAT = triton-inference-server/server ``docs/introduction/compatibility.md`` @ 0f963c9a
(and r26.08: its table still stops at 26.07); REMOVAL = NVIDIA/TensorRT-LLM
``docs/source/legacy/tensorrt-backend-removal.md`` @ 335107a7 and PRs #15763, #15907, #15918,
#16369 (June-July 2026); RELEASE-IMAGE = third-party pull commands of
``nvcr.io/nvidia/tensorrt-llm/release:1.2.1`` (NGC publishes a multi-arch 1.2.1 image,
2026-04-20); the NGC tag list itself could not be read.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from llmdeploy import versions
from llmdeploy.engines.base import ReleaseDate

# Triton `nvcr.io/nvidia/tritonserver:<v>-trtllm-python-py3` → TensorRT-LLM inside it (COMPAT).
# 25.11 is printed as "1.0.3.2510" in COMPAT and kept as printed.
TRITON_TO_TRTLLM: Mapping[str, str] = MappingProxyType(
    {
        "24.04": "0.9.0",
        "24.05": "0.9.0",
        "24.06": "0.10.0",
        "24.07": "0.11.0",
        "24.08": "0.12.0",
        "24.09": "0.13.0",
        "24.10": "0.14.0",
        "24.11": "0.15.0",
        "24.12": "0.16.0",
        "25.01": "0.17.0",
        "25.02": "0.17.0.post1",
        "25.03": "0.18.0",
        "25.04": "0.18.2",
        "25.05": "0.19.0",
        "25.06": "0.20.0",
        "25.07": "0.20.0",
        "25.08": "0.21.0",
        "25.09": "1.0.0",
        "25.10": "1.0.0",
        "25.11": "1.0.3.2510",
        "25.12": "1.1.0",
        "26.01": "1.1.0",
        "26.02": "1.1.0",
        "26.03": "1.2.0",
        "26.04": "1.2.1",
        "26.05": "1.2.1",
        "26.06": "1.2.1",
        "26.07": "1.2.1",
    }
)

# The CUDA release each supported Triton image is built on (COMPAT: 26.03 - 26.07 are 13.1.0).
TRITON_CUDA: dict[str, tuple[int, int]] = {
    release: (13, 1) for release in ("26.03", "26.04", "26.05", "26.06", "26.07")
}

# The first line without `trtllm-build` (REMOVAL: gone on main after the 1.2.x line; which
# release first ships without it, 1.3.0 or 1.4.0, was not established, so 1.3.0 is the
# conservative boundary).
ENGINE_BUILD_REMOVED_IN = "1.3.0"

# The PyTorch path llmdeploy renders: TensorRT-LLM 1.2.x, the line whose trtllm-serve flags,
# LLM API keys and Prometheus metric names were checked (engines/trtllm/flags.py, serve.py).
# 1.3 renamed every Prometheus metric (trtllm_ prefix, NVIDIA/TensorRT-LLM PR #12545) and is
# not released as a final version in the sources read.
PYTORCH_SINCE, PYTORCH_UNTIL = "1.2.0", "1.3.0"
DEFAULT_TRTLLM_VERSION = "1.2.1"  # RELEASE-IMAGE; also the TensorRT-LLM of Triton 26.04-26.07

# When the releases llmdeploy pins were published (``presets`` shows it).
RELEASE_DATES: Mapping[str, ReleaseDate] = MappingProxyType(
    {
        "1.2.1": ReleaseDate(
            "2026-04-20",
            "NGC's multi-arch nvcr.io/nvidia/tensorrt-llm/release:1.2.1 image (RELEASE-IMAGE "
            "above); the NGC tag list itself could not be read",
        ),
    }
)


def version_key(version: str) -> tuple[int, int, int]:
    """Release order of a TensorRT-LLM version (``llmdeploy.versions.parse``: "0.17.0.post1"
    and "1.2.0rc6" sort as their release)."""
    return versions.parse(version, "TensorRT-LLM")


def in_range(version: str, since: str | None, until: str | None) -> bool:
    key = version_key(version)
    if since is not None and key < version_key(since):
        return False
    return until is None or key < version_key(until)


def ships_trtllm_build(trtllm_version: str) -> bool:
    """True when this TensorRT-LLM still has the TensorRT engine workflow (REMOVAL)."""
    return version_key(trtllm_version) < version_key(ENGINE_BUILD_REMOVED_IN)
