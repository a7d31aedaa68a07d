"""``engine.extraArgs`` and ``engine.env`` for vLLM: server options and environment variables
llmdeploy does not own, checked before anything is sized or written.

Each argument that is an option (``--name`` or ``--name=value``) must be one the pinned
release's parser registers (``cli_options.json``, written by ``scripts/vllm_cli_options.py``
from each checked release's wheel), else it is an error with the nearest option names. An
option llmdeploy renders itself (the flag table, ``flags.FLAGS``) is refused with the spec
field that sets it: two values for one option would leave the last one winning silently
(argparse). vLLM's parser reads ``--name_with_underscores`` as ``--name-with-underscores``
(``FlexibleArgumentParser``), so both spellings are checked alike.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType

from llmdeploy.engines.vllm.flags import FLAGS, NEWEST_CHECKED_VERSION, parse_version
from llmdeploy.engines.vllm.spec import VllmEngine
from llmdeploy.errors import Diagnostic
from llmdeploy.spec.passthrough import NUMBER, env_problems, owned_arg

# flag-table key -> the spec field that decides it (what to set instead of an extra argument):
# the options the plan renders and those the sizing assumes at their defaults. The table's
# other keys (logging, --trust-remote-code, hidden metrics) are the user's to pass.
OWNED_BY: Mapping[str, str] = MappingProxyType(
    {
        "host": "(the Service and probes: llmdeploy listens on 0.0.0.0)",
        "port": "(the Service and probes: llmdeploy listens on port 8000)",
        "served_model_name": "model.servedName",
        "revision": "model.revision",
        "dtype": "(the sizing reads the checkpoint's dtype; `quantization` changes it)",
        "quantization": "quantization",
        "max_model_len": "serving.maxModelLen",
        "enforce_eager": "engine.enforceEager",
        "download_dir": "model.loading",
        "tensor_parallel_size": "hardware.tensorParallel",
        "pipeline_parallel_size": "hardware.pipelineParallel",
        "distributed_executor_backend": "engine.distributedExecutorBackend",
        "nnodes": "hardware.nodesPerReplica",
        "node_rank": "hardware.nodesPerReplica",
        "master_addr": "hardware.nodesPerReplica",
        "master_port": "hardware.nodesPerReplica",
        "headless": "hardware.nodesPerReplica",
        "data_parallel_size": "hardware.dataParallel",
        "enable_expert_parallel": "serving.expertParallel",
        "limit_mm_per_prompt": "serving.multimodal.limitPerPrompt",
        "skip_mm_profiling": "serving.multimodal.skipProfiling",
        "mm_encoder_tp_mode": "serving.multimodal.encoderTensorParallel",
        "gpu_memory_utilization": "serving.gpuMemoryUtilization",
        "kv_cache_dtype": "kvCacheDtype",
        "kv_cache_memory_bytes": "serving.gpuMemoryUtilization",
        "swap_space": "(the pod's memory request, which does not count a swap space)",
        "enable_prefix_caching": "serving.prefixCaching",
        "max_num_batched_tokens": "serving.maxNumBatchedTokens",
        "max_num_seqs": "serving.maxNumSeqs",
        "enable_chunked_prefill": "serving.chunkedPrefill",
    }
)
# options that are not in the flag table but that llmdeploy's command line already decides
_ALSO_OWNED: Mapping[str, str] = MappingProxyType(
    {"--model": "model.id", "--api-key": "engine.apiKeySecret"}
)
# Environment variables the vLLM plan sets itself (engines/vllm/plan.py, plan/loading.py,
# plan/group.py), each with what decides it; tests/test_vllm_extra_args.py checks that every
# variable a rendered preset's server container has is listed.
RESERVED_ENV: Mapping[str, str] = MappingProxyType(
    {
        "HOME": "(llmdeploy's writable home on an emptyDir)",
        "USER": "(llmdeploy's unprivileged user)",
        "HF_HOME": "model.loading",
        "XDG_CACHE_HOME": "(llmdeploy's writable cache on an emptyDir)",
        "VLLM_NO_USAGE_STATS": "(llmdeploy turns usage reporting off)",
        "DO_NOT_TRACK": "(llmdeploy turns usage reporting off)",
        "VLLM_API_KEY": "engine.apiKeySecret",
        "HF_TOKEN": "model.loading.hfTokenSecret",
        "HF_TOKEN_PATH": "model.loading.hfTokenSecret",
        "HF_HUB_OFFLINE": "model.loading.mode",
        "FI_PROVIDER": "hardware.efa",
        "FI_EFA_FORK_SAFE": "hardware.efa",
        "FI_EFA_USE_DEVICE_RDMA": "hardware.efa",
        "NCCL_DEBUG": "hardware.efa",
    }
)


@functools.cache
def _table() -> dict[str, list[list[str | None]]]:
    text = resources.files("llmdeploy.engines.vllm").joinpath("cli_options.json").read_text("utf-8")
    options: dict[str, list[list[str | None]]] = json.loads(text)["options"]
    return options


@functools.cache
def options(version: str) -> frozenset[str]:
    """Every option string the server parser of ``version`` registers (ranges over the checked
    releases, as the flag table reads them: a release between two checked ones counts as the
    earlier), with the ``--no-`` forms of each long option."""
    v = parse_version(version)
    found: set[str] = set()
    for flag, spans in _table().items():
        for since, until in spans:
            assert since is not None
            if parse_version(since) <= v and (until is None or v < parse_version(until)):
                found.add(flag)
    return frozenset(found)


# vLLM's EnableDisableAction pairs every --enable-x with --disable-x (flags.py, bool_optional)
ENABLE_DISABLE_SINCE = (0, 33, 0)


def known(flag: str, version: str) -> bool:
    """Whether the server parser of ``version`` accepts ``flag``: the option table, plus the
    negatives its actions add that the source does not spell out: ``--no-x`` for every ``--x``
    (argparse.BooleanOptionalAction; a switch refuses it at start-up, so this errs towards
    accepting), and ``--disable-x`` for ``--enable-x`` from 0.33 (EnableDisableAction)."""
    have = options(version)
    if flag in have:
        return True
    if flag.startswith("--no-") and f"--{flag[5:]}" in have:
        return True
    if parse_version(version) >= ENABLE_DISABLE_SINCE:
        for one, other in (("--disable-", "--enable-"), ("--enable-", "--disable-")):
            if flag.startswith(one) and other + flag[len(one) :] in have:
                return True
    return False


@functools.cache
def owned() -> Mapping[str, str]:
    """Every spelling of every option llmdeploy renders (any release) -> the field to set."""
    out = dict(_ALSO_OWNED)
    for key, forms in FLAGS.items():
        if key not in OWNED_BY:
            continue
        for form in forms:
            for name in (form.name, form.negative):
                if name is not None:
                    out[name] = OWNED_BY[key]
    return MappingProxyType(out)


def _spelling(word: str) -> str | None:
    """The option a command-line word names (``--a_b=1`` -> ``--a-b``); None for a value."""
    if not word.startswith("-") or NUMBER.fullmatch(word):
        return None
    name = word.split("=", 1)[0]
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def problems(engine: VllmEngine) -> list[Diagnostic]:
    from difflib import get_close_matches  # only when there are options to check

    out: list[Diagnostic] = []
    version = engine.version
    if parse_version(version) > parse_version(NEWEST_CHECKED_VERSION):
        return out  # the version itself is refused (flags.build_args); nothing to check against
    for index, word in enumerate(engine.extra_args):
        flag = _spelling(word)
        if flag is None:
            continue
        where = f"engine.extraArgs.{index}"
        if flag in owned():
            out.append(owned_arg(flag, owned()[flag], index))
        elif not known(flag, version):
            close = get_close_matches(flag, sorted(options(version)), n=1, cutoff=0.7)
            out.append(
                Diagnostic(
                    f"`engine.extraArgs`: {flag} is not an option of vLLM {version}'s server",
                    field=where,
                    hint=f"did you mean {close[0]}?" if close else None,
                )
            )
    return out + env_problems(
        engine.env, RESERVED_ENV, "`engine.apiKeySecret`, `model.loading.hfTokenSecret`"
    )
