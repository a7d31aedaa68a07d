"""``engine.extraArgs`` and ``engine.env`` for TensorRT-LLM's backend pytorch (trtllm-serve).

Each option must be in llmdeploy's trtllm-serve table (``flags.py``) for the pinned release,
else it is an error with the nearest flag; a flag llmdeploy renders itself is refused with the
spec field that sets it (click keeps the last value of a repeated option, silently). trtllm-serve
is a click command, which does not read ``_`` and ``-`` alike: the flag is checked as written.
Backend engine (Triton) has no server command line to add to; both fields are refused there
(``checks.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from llmdeploy.engines.trtllm.flags import problem, serve_flags
from llmdeploy.engines.trtllm.releases import DEFAULT_TRTLLM_VERSION
from llmdeploy.engines.trtllm.spec import TrtllmEngine
from llmdeploy.errors import Diagnostic
from llmdeploy.spec.passthrough import NUMBER, env_problems, owned_arg

# what serve.serve_plan renders (and the aliases SERVE-D gives them) -> the field deciding it
OWNED: Mapping[str, str] = MappingProxyType(
    {
        "--host": "(the Service and probes: llmdeploy listens on 0.0.0.0)",
        "--port": "(the Service and probes: llmdeploy listens on port 8000)",
        "--backend": "engine.backend",
        "--tp_size": "hardware.tensorParallel",
        "--tensor_parallel_size": "hardware.tensorParallel",
        "--pp_size": "hardware.pipelineParallel",
        "--pipeline_parallel_size": "hardware.pipelineParallel",
        "--max_batch_size": "engine.maxBatchSize",
        "--max_num_tokens": "serving.maxNumBatchedTokens",
        "--max_seq_len": "serving.maxModelLen",
        "--extra_llm_api_options": "(llmdeploy's LLM API options file in the ConfigMap)",
        "--config": "(llmdeploy's LLM API options file in the ConfigMap)",
        "--kv_cache_free_gpu_memory_fraction": "engine.kvCacheFreeGpuMemFraction",
        "--free_gpu_memory_fraction": "engine.kvCacheFreeGpuMemFraction",
        "--enable_chunked_prefill": "serving.chunkedPrefill",
    }
)
# engines/trtllm/pytorch.py and plan/loading.py; tests/test_trtllm_pytorch.py checks the list
RESERVED_ENV: Mapping[str, str] = MappingProxyType(
    {
        "HOME": "(llmdeploy's writable home on an emptyDir)",
        "USER": "(llmdeploy's unprivileged user)",
        "TMPDIR": "(llmdeploy's writable /tmp)",
        "HF_HOME": "model.loading",
        "XDG_CACHE_HOME": "(llmdeploy's writable cache on an emptyDir)",
        "OMPI_MCA_btl_vader_single_copy_mechanism": "(the worker ranks' OpenMPI transport)",
        "HF_TOKEN": "model.loading.hfTokenSecret",
        "HF_TOKEN_PATH": "model.loading.hfTokenSecret",
        "HF_HUB_OFFLINE": "model.loading.mode",
    }
)


def problems(engine: TrtllmEngine) -> list[Diagnostic]:
    from difflib import get_close_matches  # only when there are options to check

    out: list[Diagnostic] = []
    version = engine.version or DEFAULT_TRTLLM_VERSION
    for index, word in enumerate(engine.extra_args):
        if not word.startswith("-") or NUMBER.fullmatch(word):
            continue  # a value
        flag = word.split("=", 1)[0]
        where = f"engine.extraArgs.{index}"
        if flag in OWNED:
            out.append(owned_arg(flag, OWNED[flag], index))
            continue
        reason = problem("trtllm-serve", flag, None, version)
        if reason is None or reason == "takes a value":
            continue
        close = get_close_matches(flag, serve_flags(version), n=1, cutoff=0.7)
        out.append(
            Diagnostic(
                f"`engine.extraArgs`: trtllm-serve of TensorRT-LLM {version}: {reason}",
                field=where,
                hint=f"did you mean {close[0]}?" if close else None,
            )
        )
    return out + env_problems(engine.env, RESERVED_ENV, "`model.loading.hfTokenSecret`")
