"""vLLM in the performance model: how it runs a replica, and its constants by version.

vLLM V1 admits a request when its whole prompt fits in the free KV cache and preempts the
newest running request (to be recomputed) when decode growth overflows it (vLLM docs,
"Preemption"), so the model's admission is ``optimistic``. Chunked prefill is always on in V1,
decode first ("once chunked prefill is enabled, the policy is changed to prioritize decode
requests", vLLM PR #7874). Async scheduling (host work overlapped with the GPU) is the default
from 0.12 on, which is where the two constant rows split (docs/performance-model.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from llmdeploy.engines.vllm.flags import DEFAULT_VLLM_VERSION
from llmdeploy.engines.vllm.perf_constants import CONSTANTS
from llmdeploy.perf import inputs
from llmdeploy.perf.constants import EngineRun, constants_for

if TYPE_CHECKING:
    from llmdeploy.sizing.types import Sizing


# vLLM's largest CUDA graph unless the compilation config names one: min(2 x max_num_seqs,
# 512), and never above max_num_batched_tokens (vllm/config/vllm.py,
# VllmConfig._set_cudagraph_sizes, v0.24.0; "max_cudagraph_capture_size" in
# vllm/config/compilation.py). A step with more tokens runs without a graph.
_GRAPH_TOKENS_MAX = 512
# ... except for architectures whose vLLM config hook raises it when the user names no capture
# size: gpt-oss to 1024 ("Increase the max capture size from 512 to 1024 for performance",
# vllm/model_executor/models/config.py GptOssForCausalLMConfig.verify_and_update_config,
# v0.24.0; _set_cudagraph_sizes then caps it at max_num_batched_tokens only). The ninth H200
# lease's gpt-oss-20b log: "largest=1024".
_GRAPH_TOKENS_BY_ARCH = {"GptOssForCausalLM": 1024}


def cudagraph_max_tokens(
    max_num_seqs: int,
    max_num_batched_tokens: int,
    *,
    enforce_eager: bool = False,
    architectures: Sequence[str] = (),
) -> int:
    """Tokens of the largest CUDA graph vLLM captures by default (one rank); 0: none.
    ``architectures``: the checkpoint's (config.json), for the models vLLM raises it for."""
    if enforce_eager:
        return 0
    for name in architectures:
        if name in _GRAPH_TOKENS_BY_ARCH:
            return max(1, min(_GRAPH_TOKENS_BY_ARCH[name], max_num_batched_tokens))
    return max(1, min(2 * max_num_seqs, _GRAPH_TOKENS_MAX, max_num_batched_tokens))


_CAPTURE_ARG = re.compile(r"max_cudagraph_capture_size[\"']?\s*[=:]\s*(\d+)")


def cudagraph_tokens_from_args(args: str, default: int) -> int:
    """The largest CUDA graph that extra ``vllm serve`` arguments ask for (``-cc.`` or
    ``--compilation-config`` ``max_cudagraph_capture_size``; ``--enforce-eager``: none), else
    ``default``. For scripts that replay a server's command line."""
    if re.search(r"(^|\s)--enforce-eager(\s|$)", args):
        return 0
    m = _CAPTURE_ARG.search(args)
    return int(m.group(1)) if m else default


def engine_run(sizing: Sizing, extra_args: Sequence[str] = ()) -> EngineRun:
    """How vLLM runs a replica of ``sizing``; ``extra_args``: the spec's ``engine.extraArgs``,
    which may name the largest CUDA graph (vLLM caps it at ``max_num_batched_tokens`` too)."""
    version = sizing.engine_version or DEFAULT_VLLM_VERSION
    graphs = cudagraph_max_tokens(
        sizing.max_num_seqs,
        sizing.max_num_batched_tokens,
        enforce_eager=sizing.request.enforce_eager,
        architectures=sizing.request.architecture.architectures,
    )
    named = cudagraph_tokens_from_args(" ".join(extra_args), graphs)
    graphs = min(named, sizing.max_num_batched_tokens)
    return EngineRun(
        deployment=inputs.deployment(
            sizing, kv_admission="optimistic", cudagraph_max_tokens=graphs
        ),
        constants=constants_for(CONSTANTS, "vllm", version),
    )
