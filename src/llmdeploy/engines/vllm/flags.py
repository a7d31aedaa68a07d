"""Command-line flags of the vLLM OpenAI-compatible server, by vLLM version.

One table (`FLAGS`) says which `vllm serve` / `python3 -m vllm.entrypoints.openai.api_server`
options llmdeploy may emit, in which form, for which vLLM releases. `build_args` renders a
container `args` list from it; `command_for` gives the matching container `command`.

How the table was established: the wheels of 59 vLLM releases (0.6.0 ... 0.33.0, see
`CHECKED_VERSIONS`) were taken from PyPI and each release's own parser was built and dumped
(`vllm.entrypoints.cli.main:main` / `vllm.scripts:main` for `vllm serve`, and the `__main__`
block of `vllm/entrypoints/openai/api_server.py`), with vLLM's compiled extensions stubbed out
and the CPU platform selected. For every checked release, `build_args` output with every
supported option (booleans True and False, both entrypoints) and the golden vectors in
tests/test_vllm_flags.py were then parsed by that release's parser to the intended values, and
each flag the table marks absent was refused. A `source` names the file that defines the flag
at v0.6.2 and at v0.19.0 (`file@vX.Y.Z`: the file as shipped in that release's wheel); "first
in X" means the form is absent from the previous checked release. Forms are keyed on (major,
minor, patch); post-releases and release candidates count as their base release.

Pure data and functions: no I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from llmdeploy import errors, versions
from llmdeploy.errors import UnsupportedVersionError

DEFAULT_VLLM_VERSION: Final = "0.24.0"
OLDEST_SUPPORTED_VERSION: Final = "0.6.0"
# Newest release whose parser was run. Forms with `until=None` are assumed to continue after it.
NEWEST_CHECKED_VERSION: Final = "0.33.0"
# Before this release llmdeploy uses the api_server module (the 0.6.x images' ENTRYPOINT).
SERVE_ENTRYPOINT_SINCE: Final = "0.7.0"

CHECKED_VERSIONS: Final[tuple[str, ...]] = (
    "0.6.0", "0.6.1", "0.6.2", "0.6.3", "0.6.3.post1", "0.6.4", "0.6.4.post1", "0.6.5",
    "0.6.6", "0.6.6.post1", "0.7.0", "0.7.1", "0.7.2", "0.7.3", "0.8.0", "0.8.1", "0.8.2",
    "0.8.3", "0.8.4", "0.8.5", "0.8.5.post1", "0.9.0", "0.9.0.1", "0.9.1", "0.9.2", "0.10.0",
    "0.10.1", "0.10.1.1", "0.10.2", "0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.13.0", "0.14.0",
    "0.14.1", "0.15.1", "0.16.0", "0.17.0", "0.17.1", "0.18.0", "0.18.1", "0.19.0", "0.19.1",
    "0.20.0", "0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.24.0", "0.25.1", "0.26.0", "0.27.1",
    "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0",
)  # fmt: skip

FlagKind = Literal["value", "bool_store_true", "bool_optional", "bool_value"]
# kv_map: {"image": 2} as `image=2` (comma-separated); json_map: as JSON
ValueType = Literal["int", "float", "str", "str_list", "kv_map", "json_map"]
Entrypoint = Literal["serve", "api_server"]
Metric = Literal["waiting", "running", "kv_usage"]
Version = versions.Version

SERVE_COMMAND: Final = ("vllm", "serve")
API_SERVER_COMMAND: Final = ("python3", "-m", "vllm.entrypoints.openai.api_server")

_ARG_UTILS_062 = "vllm/engine/arg_utils.py@v0.6.2"
_CLI_ARGS_062 = "vllm/entrypoints/openai/cli_args.py@v0.6.2"
_CLI_ARGS_0190 = "vllm/entrypoints/openai/cli_args.py@v0.19.0"
# the multi-node fields, ParallelConfig.<field> in both releases
_PARALLEL_0111 = (
    "vllm/config/parallel.py@v0.11.1 (ParallelConfig.{}); vllm/config/parallel.py@v0.33.0"
)


class UnsupportedFlagError(errors.UnsupportedFlagError, ValueError):
    """A requested flag (or flag value) does not exist in the requested vLLM version."""

    def __init__(self, flag: str, version: str, reason: str) -> None:
        super().__init__(flag, version, reason)
        self.message = f"{flag} is not supported by vLLM {version}: {reason}"
        self.args = (self.message,)


@dataclass(frozen=True)
class FlagSpec:
    """One form of one flag, valid for versions `since` <= v < `until`.

    kind:
      value            `--name VALUE` (`--name=VALUE` when VALUE starts with "-")
      bool_store_true  `--name` for True; False is the default and is left out
      bool_optional    `--name` for True, `negative` for False (argparse.BooleanOptionalAction,
                       and from 0.33 vLLM's EnableDisableAction, which pairs --enable-x with
                       --disable-x and still accepts the hidden --no-enable-x)
      bool_value       optional value (vLLM's StoreBoolean, nargs="?"): `--name` for True,
                       `--name=false` for False. `--name true` as two tokens is what breaks
                       on later versions, so it is never emitted.
    """

    name: str
    kind: FlagKind
    since: str
    until: str | None
    source: str
    note: str = ""
    negative: str | None = None
    value_type: ValueType | None = None

    def __post_init__(self) -> None:
        if (self.kind == "value") != (self.value_type is not None):
            raise ValueError(f"{self.name}: value_type is required exactly for kind 'value'")
        if (self.kind == "bool_optional") != (self.negative is not None):
            raise ValueError(f"{self.name}: negative is required exactly for 'bool_optional'")

    def covers(self, version: Version) -> bool:
        if version < parse_version(self.since):
            return False
        return self.until is None or version < parse_version(self.until)


def _value(
    name: str,
    value_type: ValueType,
    source: str,
    since: str = "0.6.0",
    until: str | None = None,
    note: str = "",
) -> FlagSpec:
    return FlagSpec(name, "value", since, until, source, note, value_type=value_type)


# The table. Key = llmdeploy option key; value = the flag's forms, oldest first, ranges disjoint.
# "0.6.0" as `since` means: present in the oldest release checked (older ones were not checked).
_FLAGS: dict[str, tuple[FlagSpec, ...]] = {
    # --- API server (frontend) -------------------------------------------------------------
    "host": (_value("--host", "str", f"{_CLI_ARGS_062}; {_CLI_ARGS_0190} (FrontendArgs.host)"),),
    "port": (
        _value(
            "--port",
            "int",
            f"{_CLI_ARGS_062}; {_CLI_ARGS_0190} (FrontendArgs.port)",
            note="default 8000 in every checked release",
        ),
    ),
    "uvicorn_log_level": (
        _value(
            "--uvicorn-log-level",
            "str",
            f"{_CLI_ARGS_062}; {_CLI_ARGS_0190} (FrontendArgs.uvicorn_log_level)",
            note="choices debug|info|warning|error|critical|trace in every checked release",
        ),
    ),
    "disable_log_requests": (
        FlagSpec(
            "--disable-log-requests",
            "bool_store_true",
            "0.6.0",
            "0.10.1",
            f"{_ARG_UTILS_062} (AsyncEngineArgs)",
        ),
        FlagSpec(
            "--disable-log-requests",
            "bool_optional",
            "0.10.1",
            "0.17.0",
            "vllm/engine/arg_utils.py@v0.10.1 (AsyncEngineArgs, deprecated)",
            note="deprecated in 0.10.1: requests are no longer logged by default "
            "(use enable_log_requests); removed in 0.17.0",
            negative="--no-disable-log-requests",
        ),
        FlagSpec(
            "--disable-log-requests",
            "bool_optional",
            "0.33.0",
            None,
            "vllm/engine/arg_utils.py@v0.33.0 (EnableDisableAction of --enable-log-requests)",
            note="back in 0.33.0 as the negative of --enable-log-requests",
            negative="--enable-log-requests",
        ),
    ),
    "enable_log_requests": (
        FlagSpec(
            "--enable-log-requests",
            "bool_optional",
            "0.10.1",
            "0.33.0",
            "vllm/engine/arg_utils.py@v0.10.1; vllm/engine/arg_utils.py@v0.19.0 "
            "(AsyncEngineArgs.add_cli_args)",
            note="first in 0.10.1; default False",
            negative="--no-enable-log-requests",
        ),
        FlagSpec(
            "--enable-log-requests",
            "bool_optional",
            "0.33.0",
            None,
            "vllm/engine/arg_utils.py@v0.33.0 (EnableDisableAction)",
            note="--no-enable-log-requests is still accepted but hidden",
            negative="--disable-log-requests",
        ),
    ),
    "disable_log_stats": (
        FlagSpec(
            "--disable-log-stats",
            "bool_store_true",
            "0.6.0",
            None,
            f"{_ARG_UTILS_062}; vllm/engine/arg_utils.py@v0.19.0",
            note="store_true in every checked release",
        ),
    ),
    # --- model -------------------------------------------------------------------------------
    "served_model_name": (
        _value(
            "--served-model-name",
            "str_list",
            f"{_ARG_UTILS_062}; vllm/config/model.py@v0.19.0 (ModelConfig.served_model_name)",
            note="nargs='+': one or more names; the first is reported in responses",
        ),
    ),
    "revision": (
        _value(
            "--revision",
            "str",
            f"{_ARG_UTILS_062}; vllm/config/model.py@v0.19.0 (ModelConfig.revision)",
        ),
    ),
    "dtype": (
        _value(
            "--dtype",
            "str",
            f"{_ARG_UTILS_062}; vllm/config/model.py@v0.19.0 (ModelDType)",
            note="choices auto|half|float16|bfloat16|float|float32 in every checked release",
        ),
    ),
    "quantization": (
        _value(
            "--quantization",
            "str",
            f"{_ARG_UTILS_062}; vllm/config/model.py@v0.19.0 (ModelConfig.quantization), "
            "vllm/model_executor/layers/quantization/__init__.py (QUANTIZATION_METHODS)",
            note="argparse choices until 0.9.1; from 0.9.2 checked by "
            "ModelConfig._verify_quantization. Pre-quantized checkpoints (AWQ, GPTQ, "
            "compressed-tensors, FP8, ModelOpt, ...) are detected from "
            "config.json:quantization_config and upgraded to the Marlin kernels "
            "(awq_marlin/gptq_marlin) automatically: leave this unset for them. An "
            "explicit 'awq'/'gptq' forces the slower non-Marlin kernel, and a value that "
            "differs from the checkpoint's method is refused at start-up. Use it for "
            "runtime quantization of a 16-bit checkpoint ('fp8').",
        ),
    ),
    "max_model_len": (
        _value(
            "--max-model-len",
            "int",
            f"{_ARG_UTILS_062}; vllm/config/model.py@v0.19.0 (ModelConfig.max_model_len)",
            note="int until 0.8.3; also accepts 32k-style strings from 0.8.4 and 'auto' "
            "from 0.14; llmdeploy emits plain integers",
        ),
    ),
    "trust_remote_code": (
        FlagSpec("--trust-remote-code", "bool_store_true", "0.6.0", "0.9.0", _ARG_UTILS_062),
        FlagSpec(
            "--trust-remote-code",
            "bool_optional",
            "0.9.0",
            None,
            "vllm/config/model.py@v0.19.0 (ModelConfig.trust_remote_code)",
            note="BooleanOptionalAction from 0.9.0 (first in 0.9.0)",
            negative="--no-trust-remote-code",
        ),
    ),
    "enforce_eager": (
        FlagSpec("--enforce-eager", "bool_store_true", "0.6.0", "0.9.0", _ARG_UTILS_062),
        FlagSpec(
            "--enforce-eager",
            "bool_optional",
            "0.9.0",
            None,
            "vllm/config/model.py@v0.19.0 (ModelConfig.enforce_eager)",
            note="BooleanOptionalAction from 0.9.0",
            negative="--no-enforce-eager",
        ),
    ),
    # --- load --------------------------------------------------------------------------------
    "download_dir": (
        _value(
            "--download-dir",
            "str",
            f"{_ARG_UTILS_062}; vllm/config/load.py@v0.19.0 (LoadConfig.download_dir)",
        ),
    ),
    # --- parallelism -------------------------------------------------------------------------
    "tensor_parallel_size": (
        _value(
            "--tensor-parallel-size",
            "int",
            f"{_ARG_UTILS_062}; vllm/config/parallel.py@v0.19.0",
            note="alias -tp in every checked release",
        ),
    ),
    "pipeline_parallel_size": (
        _value(
            "--pipeline-parallel-size",
            "int",
            f"{_ARG_UTILS_062}; vllm/config/parallel.py@v0.19.0",
            note="alias -pp in every checked release",
        ),
    ),
    "distributed_executor_backend": (
        _value(
            "--distributed-executor-backend",
            "str",
            f"{_ARG_UTILS_062}; vllm/config/parallel.py@v0.19.0 (DistributedExecutorBackend)",
            note="ray|mp in 0.6.x; + uni|external_launcher from 0.7.0; argparse choices "
            "dropped in 0.10.2 (checked by the config instead)",
        ),
    ),
    # Multi-node with the mp executor: one `vllm serve` per node, the leader at node rank 0.
    # /work/notes/vllm-parallel-flags.md (every checked release's parser, and ParallelConfig
    # built with nnodes=2): all four first in 0.11.1 (0.11.0 refuses them), the same form up to
    # 0.33.0; nnodes > 1 needs the mp executor.
    "nnodes": (
        _value(
            "--nnodes",
            "int",
            _PARALLEL_0111.format("nnodes"),
            since="0.11.1",
            note="first in 0.11.1; alias -n, default 1",
        ),
    ),
    "node_rank": (
        _value(
            "--node-rank",
            "int",
            _PARALLEL_0111.format("node_rank"),
            since="0.11.1",
            note="first in 0.11.1; alias -r, default 0 (the node that serves the API)",
        ),
    ),
    "master_addr": (
        _value(
            "--master-addr",
            "str",
            _PARALLEL_0111.format("master_addr"),
            since="0.11.1",
            note="first in 0.11.1; default 127.0.0.1",
        ),
    ),
    "master_port": (
        _value(
            "--master-port",
            "int",
            _PARALLEL_0111.format("master_port"),
            since="0.11.1",
            note="first in 0.11.1; default 29501",
        ),
    ),
    "headless": (
        FlagSpec(
            "--headless",
            "bool_store_true",
            "0.9.0",
            None,
            "vllm/entrypoints/cli/serve.py@v0.9.0; vllm/entrypoints/common/cli_args.py@v0.33.0",
            note="first in 0.9.0; data-parallel engine cores only up to 0.11.0, from 0.11.1 "
            "also the workers of a multi-node mp replica (run_headless, serve.py@v0.11.1)",
        ),
    ),
    "disable_custom_all_reduce": (
        FlagSpec(
            "--disable-custom-all-reduce", "bool_store_true", "0.6.0", "0.8.5", _ARG_UTILS_062
        ),
        FlagSpec(
            "--disable-custom-all-reduce",
            "bool_optional",
            "0.8.5",
            "0.33.0",
            "vllm/config/parallel.py@v0.19.0 (ParallelConfig.disable_custom_all_reduce)",
            note="BooleanOptionalAction from 0.8.5 (0.8.4 is store_true)",
            negative="--no-disable-custom-all-reduce",
        ),
        FlagSpec(
            "--disable-custom-all-reduce",
            "bool_optional",
            "0.33.0",
            None,
            "vllm/engine/arg_utils.py@v0.33.0 (EnableDisableAction)",
            note="negative becomes --enable-custom-all-reduce; --no-disable-... hidden",
            negative="--enable-custom-all-reduce",
        ),
    ),
    "data_parallel_size": (
        _value(
            "--data-parallel-size",
            "int",
            "vllm/config.py@v0.8.3 (ParallelConfig.data_parallel_size); "
            "vllm/config/parallel.py@v0.19.0",
            since="0.8.3",
            note="first in 0.8.3; alias -dp from 0.8.4; all ranks local to the pod "
            "(--data-parallel-size-local defaults to it on a single node)",
        ),
    ),
    "enable_expert_parallel": (
        FlagSpec(
            "--enable-expert-parallel",
            "bool_store_true",
            "0.8.0",
            "0.8.5",
            "vllm/engine/arg_utils.py@v0.8.0",
            note="first in 0.8.0",
        ),
        FlagSpec(
            "--enable-expert-parallel",
            "bool_optional",
            "0.8.5",
            "0.33.0",
            "vllm/config/parallel.py@v0.19.0 (ParallelConfig.enable_expert_parallel)",
            note="alias -ep from 0.14",
            negative="--no-enable-expert-parallel",
        ),
        FlagSpec(
            "--enable-expert-parallel",
            "bool_optional",
            "0.33.0",
            None,
            "vllm/engine/arg_utils.py@v0.33.0 (EnableDisableAction)",
            negative="--disable-expert-parallel",
        ),
    ),
    # --- multimodal --------------------------------------------------------------------------
    "limit_mm_per_prompt": (
        FlagSpec(
            "--limit-mm-per-prompt",
            "value",
            "0.6.0",
            "0.8.5",
            f"{_ARG_UTILS_062} (type=nullable_kvs)",
            note="comma-separated KEY=VALUE items, e.g. image=2,video=1",
            value_type="kv_map",
        ),
        FlagSpec(
            "--limit-mm-per-prompt",
            "value",
            "0.8.5",
            None,
            "vllm/engine/arg_utils.py@v0.8.5 (dict field: json.loads); "
            "vllm/config/multimodal.py@v0.19.0 (MultiModalConfig.limit_per_prompt)",
            note="JSON from 0.8.5 (0.8.5-0.9.2 also take image=2, 0.10.0 on refuse it); 0 for "
            "every modality = language model only from 0.10.1",
            value_type="json_map",
        ),
    ),
    "skip_mm_profiling": (
        FlagSpec(
            "--skip-mm-profiling",
            "bool_optional",
            "0.10.1",
            None,
            "vllm/config/__init__.py@v0.10.1 (MultiModalConfig.skip_mm_profiling); "
            "vllm/config/multimodal.py@v0.19.0",
            note="first in 0.10.1; the negative stays --no-skip-mm-profiling in 0.33.0",
            negative="--no-skip-mm-profiling",
        ),
    ),
    "mm_encoder_tp_mode": (
        _value(
            "--mm-encoder-tp-mode",
            "str",
            "vllm/config/__init__.py@v0.10.2 (MultiModalConfig.mm_encoder_tp_mode); "
            "vllm/config/multimodal.py@v0.19.0",
            since="0.10.2",
            note="choices weights|data; first in 0.10.2",
        ),
    ),
    # --- KV cache ----------------------------------------------------------------------------
    "gpu_memory_utilization": (
        _value(
            "--gpu-memory-utilization",
            "float",
            f"{_ARG_UTILS_062}; vllm/config/cache.py@v0.19.0",
            note="parser default 0.9 up to 0.19.1, 0.92 from 0.20.0; alias "
            "--device-memory-utilization from 0.31",
        ),
    ),
    "kv_cache_dtype": (
        _value(
            "--kv-cache-dtype",
            "str",
            f"{_ARG_UTILS_062}; vllm/config/cache.py@v0.19.0 (CacheDType)",
            note="accepted values by version: KV_CACHE_DTYPES",
        ),
    ),
    # `--kv-cache-memory` (as some docs write it) only works as argparse's abbreviation of
    # this flag; llmdeploy emits the full name.
    "kv_cache_memory_bytes": (
        _value(
            "--kv-cache-memory-bytes",
            "int",
            "vllm/config/cache.py@v0.10.2; vllm/config/cache.py@v0.19.0",
            since="0.10.2",
            note="first in 0.10.2; bypasses gpu_memory_utilization profiling",
        ),
    ),
    "swap_space": (
        _value(
            "--swap-space",
            "float",
            f"{_ARG_UTILS_062}; vllm/config/cache.py@v0.17.1",
            until="0.18.0",
            note="GiB of CPU swap per GPU; removed in 0.18.0",
        ),
    ),
    "enable_prefix_caching": (
        FlagSpec(
            "--enable-prefix-caching",
            "bool_store_true",
            "0.6.0",
            "0.6.5",
            _ARG_UTILS_062,
            note="default off in 0.6.x",
        ),
        FlagSpec(
            "--enable-prefix-caching",
            "bool_optional",
            "0.6.5",
            "0.33.0",
            "vllm/engine/arg_utils.py@v0.6.5; vllm/config/cache.py@v0.19.0",
            note="BooleanOptionalAction from 0.6.5; default None (on for V1)",
            negative="--no-enable-prefix-caching",
        ),
        FlagSpec(
            "--enable-prefix-caching",
            "bool_optional",
            "0.33.0",
            None,
            "vllm/engine/arg_utils.py@v0.33.0 (EnableDisableAction)",
            note="--no-enable-prefix-caching still accepted but hidden",
            negative="--disable-prefix-caching",
        ),
    ),
    # --- scheduler ---------------------------------------------------------------------------
    "max_num_batched_tokens": (
        _value(
            "--max-num-batched-tokens", "int", f"{_ARG_UTILS_062}; vllm/config/scheduler.py@v0.19.0"
        ),
    ),
    "max_num_seqs": (
        _value(
            "--max-num-seqs",
            "int",
            f"{_ARG_UTILS_062}; vllm/config/scheduler.py@v0.19.0",
            note="parser default 256 until 0.6.4, None (per-platform) from 0.6.5",
        ),
    ),
    "enable_chunked_prefill": (
        FlagSpec(
            "--enable-chunked-prefill",
            "bool_value",
            "0.6.0",
            "0.8.5",
            f"{_ARG_UTILS_062} (StoreBoolean, nargs='?', const='True')",
            note="`--enable-chunked-prefill true` parses here, but from 0.8.5 `true` is "
            "left over: `vllm serve` rejects it and api_server (0.10+) swallows it as "
            "its ignored model_tag",
        ),
        FlagSpec(
            "--enable-chunked-prefill",
            "bool_optional",
            "0.8.5",
            "0.33.0",
            "vllm/config/scheduler.py@v0.19.0 (SchedulerConfig.enable_chunked_prefill)",
            note="BooleanOptionalAction from 0.8.5 (0.8.4 is StoreBoolean)",
            negative="--no-enable-chunked-prefill",
        ),
        FlagSpec(
            "--enable-chunked-prefill",
            "bool_optional",
            "0.33.0",
            None,
            "vllm/engine/arg_utils.py@v0.33.0 (EnableDisableAction)",
            note="--no-enable-chunked-prefill still accepted but hidden",
            negative="--disable-chunked-prefill",
        ),
    ),
    # --- observability -----------------------------------------------------------------------
    "show_hidden_metrics_for_version": (
        _value(
            "--show-hidden-metrics-for-version",
            "str",
            "vllm/engine/arg_utils.py@v0.8.0; vllm/config/observability.py@v0.19.0",
            since="0.8.0",
            note="first in 0.8.0; e.g. '0.10' re-enables metrics hidden in 0.11",
        ),
    ),
}

FLAGS: Final[Mapping[str, tuple[FlagSpec, ...]]] = MappingProxyType(_FLAGS)

_Ranges = tuple[tuple[str, str | None], ...]
_ALL: Final[_Ranges] = (("0.6.0", None),)

# Accepted values of the choice-like flags: value -> version ranges [since, until).
# quantization: QUANTIZATION_METHODS in vllm/model_executor/layers/quantization/__init__.py of
# each checked release (argparse choices until 0.9.1). Out-of-tree plugins can add methods;
# those are not listed. "until" inside a minor series whose .0 was not checked is rounded
# down to .0.
QUANTIZATION_METHODS: Final[Mapping[str, _Ranges]] = MappingProxyType(
    {
        "aqlm": (("0.6.0", "0.10.1"),),
        "auto-round": (("0.9.0", "0.15.0"),),
        "auto_awq": (("0.24.0", None),),
        "auto_gptq": (("0.22.1", None),),
        "awq": _ALL,
        "awq_marlin": _ALL,
        "bitblas": (("0.8.5", "0.16.0"),),
        "bitsandbytes": (("0.6.0", "0.28.0"),),
        "compressed-tensors": _ALL,
        "cpu_awq": (("0.12.0", "0.23.0"),),
        "cpu_gptq": (("0.12.0", "0.14.0"),),
        "deepseek_v4_fp8": (("0.20.0", None),),
        "deepspeedfp": (("0.6.0", "0.15.0"),),
        "experts_int8": _ALL,
        "fbgemm_fp8": _ALL,
        "fp8": _ALL,
        "fp8_per_block": (("0.20.0", None),),
        "fp8_per_channel": (("0.24.0", None),),
        "fp8_per_tensor": (("0.20.0", None),),
        "fp_quant": (("0.11.1", None),),
        "gguf": (("0.6.0", "0.24.0"),),
        "gpt_oss_mxfp4": (("0.20.0", None),),
        "gptq": _ALL,
        "gptq_bitblas": (("0.8.5", "0.16.0"),),
        "gptq_marlin": _ALL,
        "gptq_marlin_24": (("0.6.0", "0.16.0"),),
        "hqq": (("0.6.5", "0.15.0"),),
        "humming": (("0.20.0", None),),
        "inc": (("0.10.0", None),),
        "int8_per_channel_weight_only": (("0.20.0", None),),
        "ipex": (("0.6.3", "0.16.0"),),
        "marlin": (("0.6.0", "0.10.2"),),
        "modelopt": (("0.6.1", None),),
        "modelopt_fp4": (("0.9.0", None),),
        "modelopt_mixed": (("0.17.0", None),),
        "modelopt_mxfp8": (("0.16.0", None),),
        "moe_wna16": (("0.7.1", None),),
        "mxfp4": (("0.10.1", None),),
        "mxfp8": (("0.19.0", None),),
        "neuron_quant": (("0.6.0", "0.10.2"),),
        "nvfp4": (("0.8.0", "0.9.0"),),
        "nvfp4_per_token": (("0.26.0", None),),
        "online": (("0.20.0", None),),
        "petit_nvfp4": (("0.10.2", "0.20.0"),),
        "ptpc_fp8": (("0.7.3", "0.19.0"),),
        "qqq": (("0.6.0", "0.10.2"),),
        "quark": (("0.7.0", None),),
        "rtn": (("0.9.2", "0.15.0"),),
        "squeezellm": (("0.6.0", "0.6.1"),),
        "torchao": (("0.8.4", None),),
        "tpu_int8": (("0.6.0", "0.14.0"),),
    }
)

# DEPRECATED_QUANTIZATION_METHODS (same file, from 0.14.0): vLLM refuses these at start-up
# unless --allow-deprecated-quantization is given (vllm/config/model.py@v0.19.0,
# ModelConfig._verify_quantization). llmdeploy does not emit that flag, so it refuses them.
DEPRECATED_QUANTIZATION_METHODS: Final[Mapping[str, _Ranges]] = MappingProxyType(
    {
        "auto-round": (("0.14.0", "0.15.0"),),
        "bitblas": (("0.14.0", "0.16.0"),),
        "deepspeedfp": (("0.14.0", "0.15.0"),),
        "experts_int8": (("0.14.0", "0.20.0"),),
        "fbgemm_fp8": (("0.14.0", None),),
        "fp_quant": (("0.14.0", None),),
        "gptq_bitblas": (("0.14.0", "0.16.0"),),
        "gptq_marlin_24": (("0.14.0", "0.16.0"),),
        "hqq": (("0.14.0", "0.15.0"),),
        "ipex": (("0.14.0", "0.16.0"),),
        "petit_nvfp4": (("0.14.0", "0.20.0"),),
        "ptpc_fp8": (("0.14.0", "0.19.0"),),
        "rtn": (("0.14.0", "0.15.0"),),
        "tpu_int8": (("0.14.0", "0.23.0"),),
    }
)

# --kv-cache-dtype choices (argparse choices up to 0.32; CacheDType in vllm/config/cache.py
# at 0.33.0).
KV_CACHE_DTYPES: Final[Mapping[str, _Ranges]] = MappingProxyType(
    {
        "auto": _ALL,
        "fp8": _ALL,
        "fp8_e4m3": _ALL,
        "fp8_e5m2": _ALL,
        "fp8_inc": (("0.10.0", None),),
        "bfloat16": (("0.11.0", None),),
        "fp8_ds_mla": (("0.11.1", None),),
        "float16": (("0.18.0", None),),
        "fp8_per_token_head": (("0.20.0", None),),
        "int8_per_token_head": (("0.20.0", None),),
        "nvfp4": (("0.20.0", None),),
        "turboquant_3bit_nc": (("0.20.0", None),),
        "turboquant_4bit_nc": (("0.20.0", None),),
        "turboquant_k3v4_nc": (("0.20.0", None),),
        "turboquant_k8v4": (("0.20.0", None),),
        "int4_per_token_head": (("0.25.1", None),),
        "nvfp4_4over6": (("0.28.0", None),),
        "nvfp4_ds_mla": (("0.30.0", None),),
        "ultraquant_4bit": (("0.32.0", None),),
        "octave_k3v3": (("0.33.0", None),),
        "octave_k3v3_compact": (("0.33.0", None),),
        "octave_k3v4": (("0.33.0", None),),
    }
)

DTYPES: Final[Mapping[str, _Ranges]] = MappingProxyType(
    {v: _ALL for v in ("auto", "half", "float16", "bfloat16", "float", "float32")}
)
UVICORN_LOG_LEVELS: Final[Mapping[str, _Ranges]] = MappingProxyType(
    {v: _ALL for v in ("debug", "info", "warning", "error", "critical", "trace")}
)
DISTRIBUTED_EXECUTOR_BACKENDS: Final[Mapping[str, _Ranges]] = MappingProxyType(
    {
        "ray": _ALL,
        "mp": _ALL,
        "uni": (("0.7.0", None),),
        "external_launcher": (("0.7.0", None),),
    }
)

MM_ENCODER_TP_MODES: Final[Mapping[str, _Ranges]] = MappingProxyType(
    {"weights": (("0.10.2", None),), "data": (("0.10.2", None),)}
)

_CHOICES: Final[Mapping[str, Mapping[str, _Ranges]]] = MappingProxyType(
    {
        "mm_encoder_tp_mode": MM_ENCODER_TP_MODES,
        "quantization": QUANTIZATION_METHODS,
        "kv_cache_dtype": KV_CACHE_DTYPES,
        "dtype": DTYPES,
        "uvicorn_log_level": UVICORN_LOG_LEVELS,
        "distributed_executor_backend": DISTRIBUTED_EXECUTOR_BACKENDS,
    }
)

# Prometheus names (served on /metrics of the API port).
# num_requests_waiting / num_requests_running: vllm/engine/metrics.py@v0.6.2 (V0) and
# vllm/v1/metrics/loggers.py@v0.19.0 (V1), present in every checked release.
# KV usage: vllm:gpu_cache_usage_perc in every release up to 0.9.1. vllm:kv_cache_usage_perc
# first in 0.9.2 (vllm/v1/metrics/loggers.py@v0.9.2, V1 engine only), with the old name still
# exported as deprecated; the old name is hidden from 0.11.0 (--show-hidden-metrics-for-version
# =0.10 brings it back) and gone from 0.12.0 (vllm/v1/metrics/loggers.py@v0.11.2, @v0.12.0).
# A 0.9.2-0.10.x server forced onto the V0 engine (VLLM_USE_V1=0) exports only the old name.
KV_USAGE_RENAMED_IN: Final = "0.9.2"
_METRICS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "waiting": "vllm:num_requests_waiting",
        "running": "vllm:num_requests_running",
    }
)


def parse_version(v: str) -> Version:
    """(major, minor, patch) of a vLLM release: ``llmdeploy.versions.parse`` (``v0.19.0`` is
    0.19.0; 0.8.5.post1 counts as 0.8.5, 0.10.1.1 as 0.10.1 and 0.20.0rc1 as 0.20.0)."""
    return versions.parse(v, "vLLM")


def _checked(version: str) -> Version:
    parsed = parse_version(version)
    if parsed < parse_version(OLDEST_SUPPORTED_VERSION):
        raise UnsupportedVersionError(
            f"vLLM {version} is older than {OLDEST_SUPPORTED_VERSION}, the oldest release "
            "whose flags llmdeploy knows"
        )
    if parsed > parse_version(NEWEST_CHECKED_VERSION):
        raise UnsupportedVersionError(
            f"vLLM {version} is newer than {NEWEST_CHECKED_VERSION}, the newest release whose "
            "parser llmdeploy checked: its flags are unknown, and a release that does not exist "
            "renders an image that cannot be pulled"
        )
    return parsed


def _in_ranges(version: Version, ranges: _Ranges) -> bool:
    return any(
        parse_version(lo) <= version and (hi is None or version < parse_version(hi))
        for lo, hi in ranges
    )


def flag_spec(key: str, version: str) -> FlagSpec | None:
    """The form of option `key` in `version`, or None if that version has no such flag."""
    if key not in FLAGS:
        raise KeyError(f"unknown option key {key!r}")
    parsed = _checked(version)
    return next((s for s in FLAGS[key] if s.covers(parsed)), None)


def supported_keys(version: str) -> tuple[str, ...]:
    """Option keys that `version` accepts, in table order."""
    return tuple(k for k in FLAGS if flag_spec(k, version) is not None)


def accepted_values(key: str, version: str) -> tuple[str, ...] | None:
    """Accepted values of a choice-like option in `version` (None: not a choice option)."""
    table = _CHOICES.get(key)
    if table is None:
        return None
    parsed = _checked(version)
    return tuple(v for v, ranges in table.items() if _in_ranges(parsed, ranges))


def default_entrypoint(version: str) -> Entrypoint:
    """`vllm serve` from 0.7.0; the api_server module for 0.6.x.

    Both work on every supported release (`vllm serve` exists from before 0.6.0: vllm/scripts.py
    up to 0.7.2, vllm/entrypoints/cli/main.py from 0.7.3). 0.6.x keeps the api_server form of
    that era's images and write-ups. The image's own ENTRYPOINT does not matter: llmdeploy
    always sets `command`. It was `python3 -m vllm.entrypoints.openai.api_server` in
    docker/Dockerfile (commit 0000977e, 0.8 era) and still in reports of Aug 2025 (issue
    #22072) and Jan 2026 (PR #32292); images of 0.26 use `vllm serve`. The release that
    switched was not pinned.
    """
    return "serve" if _checked(version) >= parse_version(SERVE_ENTRYPOINT_SINCE) else "api_server"


def command_for(version: str, entrypoint: Entrypoint | None = None) -> tuple[str, ...]:
    """Container `command` for `version`: ("vllm", "serve") or the api_server module."""
    chosen = entrypoint or default_entrypoint(version)
    _checked(version)
    return SERVE_COMMAND if chosen == "serve" else API_SERVER_COMMAND


def _format_number(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    if float(value).is_integer():
        return str(int(value))
    return format(value, ".12g")


@dataclass(frozen=True)
class EnvRef:
    """A value Kubernetes fills in from the container's environment when it starts the
    container (``$(NAME)`` in ``args``), e.g. the node rank LeaderWorkerSet gives each pod."""

    name: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", self.name):
            raise ValueError(f"not an environment variable name: {self.name!r}")


def _render_value(key: str, spec: FlagSpec, value: object) -> list[str]:
    vt = spec.value_type
    if isinstance(value, EnvRef):
        if vt not in ("int", "str"):
            raise TypeError(f"{key}: an environment reference needs an int or str flag")
        return [spec.name, f"$({value.name})"]
    if isinstance(value, bool):
        raise TypeError(f"{key}: expected {vt}, got bool")
    if vt == "int":
        if not isinstance(value, int):
            raise TypeError(f"{key}: expected int, got {type(value).__name__}")
        words = [str(value)]
    elif vt == "float":
        if not isinstance(value, int | float):
            raise TypeError(f"{key}: expected a number, got {type(value).__name__}")
        words = [_format_number(value)]
    elif vt == "str":
        if not isinstance(value, str):
            raise TypeError(f"{key}: expected str, got {type(value).__name__}")
        words = [value]
    elif vt in ("kv_map", "json_map"):
        words = [_render_map(key, vt, value)]
    else:  # str_list
        if isinstance(value, str):
            words = [value]
        elif isinstance(value, Sequence) and all(isinstance(w, str) for w in value):
            words = [str(w) for w in value]
        else:
            raise TypeError(f"{key}: expected str or a sequence of str")
        if not words:
            raise ValueError(f"{key}: needs at least one value")
    if any(w == "" for w in words):
        raise ValueError(f"{key}: empty string")
    if any(w.startswith("-") for w in words):
        if len(words) > 1:
            raise ValueError(f"{key}: a value starting with '-' cannot be one of several")
        return [f"{spec.name}={words[0]}"]
    return [spec.name, *words]


def _render_map(key: str, vt: ValueType, value: object) -> str:
    """A {name: count} mapping as one word: `image=2,video=1` or `{"image": 2, "video": 1}`."""
    if not isinstance(value, Mapping) or not value:
        raise TypeError(f"{key}: expected a non-empty mapping of str to int")
    items = sorted(value.items())
    for name, count in items:
        if not isinstance(name, str) or not re.fullmatch(r"[a-z_]+", name):
            raise ValueError(f"{key}: {name!r} is not a modality name")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"{key}: {name} needs a count >= 0, got {count!r}")
    if vt == "kv_map":
        return ",".join(f"{name}={count}" for name, count in items)
    return json.dumps(dict(items))


def _render_bool(key: str, spec: FlagSpec, value: object) -> list[str]:
    if not isinstance(value, bool):
        raise TypeError(f"{key}: expected bool, got {type(value).__name__}")
    if value:
        return [spec.name]
    if spec.kind == "bool_optional":
        assert spec.negative is not None
        return [spec.negative]
    if spec.kind == "bool_value":
        return [f"{spec.name}=false"]
    return []  # bool_store_true: False is the parser default


def _check_choice(key: str, spec: FlagSpec, value: object, version: str) -> None:
    table = _CHOICES.get(key)
    if table is None or not isinstance(value, str):
        return
    parsed = parse_version(version)
    ranges = table.get(value)
    if ranges is None or not _in_ranges(parsed, ranges):
        allowed = ", ".join(accepted_values(key, version) or ())
        raise UnsupportedFlagError(
            f"{spec.name} {value}", version, f"accepted values are: {allowed}"
        )
    if key == "quantization":
        dep = DEPRECATED_QUANTIZATION_METHODS.get(value)
        if dep is not None and _in_ranges(parsed, dep):
            raise UnsupportedFlagError(
                f"{spec.name} {value}",
                version,
                "deprecated method: vLLM refuses it without --allow-deprecated-quantization",
            )


def build_args(
    version: str,
    model: str,
    options: Mapping[str, object],
    entrypoint: Entrypoint | None = None,
) -> tuple[str, ...]:
    """Container `args` for `command_for(version, entrypoint)`.

    The model goes first, as the positional `model_tag`, under `vllm serve`: `vllm serve
    --model X` is refused by 0.6.0-0.11.0 (ValueError in the serve command; 0.6.x also requires
    the positional) and only tolerated with a deprecation warning from 0.11.1. Under the
    api_server module it is `--model MODEL`: from 0.10.0 that module also has an optional
    positional `model_tag` which it ignores, so a bare model name (or a stray `true`) there
    is silently dropped and the default model (Qwen/Qwen3-0.6B) is served.

    Options are rendered in table order, whatever the mapping's order; None means "leave
    out". Raises UnsupportedFlagError for a key or value that `version` does not accept,
    KeyError for a key not in FLAGS, TypeError/ValueError for a malformed value.
    """
    chosen = entrypoint or default_entrypoint(version)
    parsed = _checked(version)
    if not model or model.startswith("-"):
        raise ValueError(f"invalid model: {model!r}")
    unknown = sorted(k for k in options if k not in FLAGS)
    if unknown:
        raise KeyError(f"unknown option key(s): {', '.join(unknown)}")
    args: list[str] = [model] if chosen == "serve" else ["--model", model]
    for key, forms in FLAGS.items():
        value = options.get(key)
        if value is None:
            continue
        spec = next((s for s in forms if s.covers(parsed)), None)
        if spec is None:
            raise UnsupportedFlagError(forms[0].name, version, _absent_reason(forms))
        if spec.kind == "value":
            _check_choice(key, spec, value, version)
            args.extend(_render_value(key, spec, value))
        else:
            args.extend(_render_bool(key, spec, value))
    return tuple(args)


def _absent_reason(forms: tuple[FlagSpec, ...]) -> str:
    spans = "; ".join(
        f"{s.since} <= v" + ("" if s.until is None else f" < {s.until}") for s in forms
    )
    return f"the flag exists for {spans} (releases checked up to {NEWEST_CHECKED_VERSION})"


def metric_name(version: str, metric: Metric) -> str:
    """Prometheus series name for `metric` as exported by `version` (V1 engine from 0.9.2)."""
    parsed = _checked(version)
    if metric == "kv_usage":
        if parsed >= parse_version(KV_USAGE_RENAMED_IN):
            return "vllm:kv_cache_usage_perc"
        return "vllm:gpu_cache_usage_perc"
    return _METRICS[metric]
