"""When vLLM releases were published, each with where the date was read.

Only releases llmdeploy pins (the default and the presets'); ``presets`` shows the date beside
each preset so a reader sees how old its engine is. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from llmdeploy.engines.base import ReleaseDate

RELEASE_DATES: Mapping[str, ReleaseDate] = MappingProxyType(
    {
        "0.24.0": ReleaseDate(
            "2026-07-01",
            "llm-d/llm-d-benchmark#1575 (nightly upstream scan of 2026-07-01 reporting "
            "vllm-project/vllm releases/tag/v0.24.0 as the latest, after v0.23.0) and "
            "aws/deep-learning-containers#6329 (vLLM v0.24.0, 2026/07/01); the release "
            "page's own timestamp was not read",
        ),
    }
)
