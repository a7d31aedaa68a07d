"""TensorRT-LLM in the performance model: how it runs a replica, and its constants per path.

The engine path (TensorRT engines, Triton) and the PyTorch backend (trtllm-serve) are
different software with one constants row each. Both schedule in-flight batches with chunked
context; the capacity scheduler's default, ``guaranteed_no_evict``, admits a request only when
its prompt and whole output fit ("reserve"), ``max_utilization`` admits on what is computed and
pauses requests when the cache fills ("optimistic") (TensorRT-LLM docs, "Useful Runtime
Options"; the spec's ``engine.batchSchedulerPolicy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmdeploy.engines.trtllm.perf_constants import CONSTANTS
from llmdeploy.engines.trtllm.releases import DEFAULT_TRTLLM_VERSION
from llmdeploy.perf import inputs
from llmdeploy.perf.constants import EngineRun, constants_for

if TYPE_CHECKING:
    from llmdeploy.sizing.types import Sizing
    from llmdeploy.spec.sections import Spec


def engine_run(sizing: Sizing, spec: Spec | None) -> EngineRun:
    from llmdeploy.engines.trtllm.spec import TrtllmEngine

    policy = "guaranteed_no_evict"
    if spec is not None and isinstance(spec.engine, TrtllmEngine):
        policy = spec.engine.batch_scheduler_policy
    family = "trtllm-pytorch" if sizing.request.engine_variant == "pytorch" else "trtllm-trt"
    return EngineRun(
        deployment=inputs.deployment(
            sizing, kv_admission="reserve" if policy == "guaranteed_no_evict" else "optimistic"
        ),
        constants=constants_for(CONSTANTS, family, sizing.engine_version or DEFAULT_TRTLLM_VERSION),
    )
