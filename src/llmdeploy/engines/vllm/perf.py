"""vLLM in the performance model: how it runs a replica, and its constants by version.

vLLM V1 admits a request when its whole prompt fits in the free KV cache and preempts the
newest running request (to be recomputed) when decode growth overflows it (vLLM docs,
"Preemption"), so the model's admission is ``optimistic``. Chunked prefill is always on in V1,
decode first ("once chunked prefill is enabled, the policy is changed to prioritize decode
requests", vLLM PR #7874). Async scheduling (host work overlapped with the GPU) is the default
from 0.12 on, which is where the two constant rows split (docs/performance-model.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmdeploy.engines.vllm.flags import DEFAULT_VLLM_VERSION
from llmdeploy.engines.vllm.perf_constants import CONSTANTS
from llmdeploy.perf import inputs
from llmdeploy.perf.constants import EngineRun, constants_for

if TYPE_CHECKING:
    from llmdeploy.sizing.types import Sizing


def engine_run(sizing: Sizing) -> EngineRun:
    version = sizing.engine_version or DEFAULT_VLLM_VERSION
    return EngineRun(
        deployment=inputs.deployment(sizing, kv_admission="optimistic"),
        constants=constants_for(CONSTANTS, "vllm", version),
    )
