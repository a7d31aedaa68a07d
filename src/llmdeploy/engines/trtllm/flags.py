"""The one table of TensorRT-LLM command-line flags and configuration keys, by version.

Data only, no decisions: the planners (:mod:`llmdeploy.engines.trtllm.build`,
:mod:`llmdeploy.engines.trtllm.serve`) ask this module whether a flag or key (and its value) is
accepted by the pinned TensorRT-LLM, and raise :class:`~llmdeploy.errors.UnsupportedFlagError`
when it is not. The tests parse the rendered build script, the trtllm-serve command line and the
``--extra_llm_api_options`` YAML back and check every flag and key against the same table.

Tools: the engine build (``trtllm-build``, ``convert_checkpoint.py``, ``quantize.py``; tracked from
0.12.0, Triton 24.08, the write-up's image, until the removal of the engine workflow),
``trtllm-serve`` (tracked from 0.17.0, the first option list read) and ``llm-api``: keys of the
YAML file given to ``trtllm-serve --extra_llm_api_options``, dotted for nested keys
(``kv_cache_config.dtype``). Both serve tools are tracked up to the end of the 1.2.x line
(``releases.PYTORCH_UNTIL``): rows whose ``since`` is that boundary exist only in newer sources.

Version ranges are TensorRT-LLM versions, ``since`` inclusive and ``until`` exclusive; ``None``
means "every tracked version".

Sources (short names used in the rows):

- RN: NVIDIA/TensorRT-LLM ``docs/source/release-notes.md`` @ 001eaece.
- BUILD: NVIDIA/TensorRT-LLM ``tensorrt_llm/commands/build.py`` @ 008b2b8d and @ 65f1d153 (1.x),
  plugin flags from ``tensorrt_llm/plugin/plugin.py`` @ c20322ff (``cli_plugin_args``).
- LLAMA: ``examples/llama/convert_checkpoint.py`` @ 04a2cacb (0.12-era layout) and
  ``examples/models/core/llama/convert_checkpoint.py`` @ 368f8f2a (1.2-era, engine deprecation).
- QWEN: ``examples/models/core/qwen/convert_checkpoint.py`` @ 0df9aaf3 (no ``--fp8_kv_cache``).
- QUANT: ``examples/quantization/quantize.py`` @ 059c97c1.
- REMOVAL: ``docs/source/legacy/tensorrt-backend-removal.md`` @ 335107a7 (main after 1.2.x has no
  ``trtllm-build`` nor per-model ``convert_checkpoint.py``; "omit, or pass ``--backend pytorch``").
- SERVE-A: the 0.18.2 option list, https://nvidia.github.io/TensorRT-LLM/0.18.2/commands/trtllm-serve.html
  (0.17.0-0.18.2: one click command, no YAML file). SERVE-B: ``tensorrt_llm/commands/serve.py``,
  the 0.19-0.21-era variant of the code index (``DefaultGroup``: a first argument that is not a
  subcommand runs ``serve``). SERVE-C: serve.py @ 4c05a748 (1.1-era). SERVE-D: serve.py @ 00209af1
  (newest read; long/short aliases, ``--config``). Flags in A-D are in every release between.
- LLMARGS: ``tensorrt_llm/llmapi/llm_args.py`` (``StrictBaseModel``: unknown keys are refused),
  the KvCacheConfig / TorchLlmArgs reference pages of 1.3.0rc27 and 1.4.0rc4, the 1.2.0rc6
  quantization page (``KvCacheConfig(dtype='fp8')``).
- METRICS: ``tensorrt_llm/serve/openai_server.py`` ``mount_metrics`` (``/prometheus/metrics``
  only when ``return_perf_metrics``), NVIDIA/TensorRT-LLM PR #5785 (merged August 2025).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from llmdeploy import versions
from llmdeploy.engines.trtllm.releases import (
    ENGINE_BUILD_REMOVED_IN,
    PYTORCH_UNTIL,
    in_range,
    ships_trtllm_build,
    version_key,
)
from llmdeploy.errors import UnsupportedFlagError

Tool = Literal[
    "trtllm-build",
    "convert_checkpoint.py:llama",
    "convert_checkpoint.py:qwen",
    "quantize.py",
    "trtllm-serve",
    "llm-api",
]
ENGINE_TOOLS = frozenset(
    {"trtllm-build", "convert_checkpoint.py:llama", "convert_checkpoint.py:qwen", "quantize.py"}
)
# Oldest TensorRT-LLM each group of tools is tracked from.
TRACKED_FROM = "0.12.0"  # the engine build (Triton 24.08)
SERVE_TRACKED_FROM = "0.17.0"  # trtllm-serve and the LLM API YAML (SERVE-A)


@dataclass(frozen=True)
class Choice:
    value: str
    since: str | None = None
    until: str | None = None


@dataclass(frozen=True)
class Flag:
    tool: Tool
    name: str
    takes_value: bool = True
    since: str | None = None
    until: str | None = None
    never: bool = False  # not a command-line flag in any version
    choices: tuple[Choice, ...] = ()  # empty: any value
    source: str = ""
    note: str = ""


def _c(*values: str, since: str | None = None, until: str | None = None) -> tuple[Choice, ...]:
    return tuple(Choice(v, since, until) for v in values)


_ENABLE = _c("enable", "disable")
_DTYPES = _c("float32", "bfloat16", "float16") + _c("auto", since="0.15.0")
_B: Tool = "trtllm-build"
_L: Tool = "convert_checkpoint.py:llama"
_Q: Tool = "convert_checkpoint.py:qwen"
_P: Tool = "quantize.py"
_S: Tool = "trtllm-serve"
_A: Tool = "llm-api"
_NEWER = PYTORCH_UNTIL  # `since` for rows seen only in sources newer than the 1.2.x line

FLAGS: tuple[Flag, ...] = (
    # --- trtllm-build -------------------------------------------------------------------
    Flag(_B, "--checkpoint_dir", source="BUILD"),
    Flag(_B, "--output_dir", source="BUILD"),
    Flag(_B, "--max_batch_size", source="BUILD", note="default 2048 from 0.14 (RN)"),
    Flag(_B, "--max_input_len", source="BUILD"),
    Flag(_B, "--max_seq_len", source="BUILD; RN 0.11 added it, replacing --max_output_len"),
    Flag(_B, "--max_num_tokens", source="BUILD"),
    Flag(_B, "--workers", source="BUILD", note="one GPU per worker during the build"),
    Flag(
        _B,
        "--gemm_plugin",
        choices=_c("float16", "float32", "bfloat16", "disable", "fp8")
        + _c("auto", since="0.13.0")
        + _c("nvfp4", since="0.17.0"),
        source="BUILD plugin.py; 'auto' from 0.13 per shared/reference/trtllm.md §2.3 (unverified "
        "in the 0.13 parser, so 0.12 renders the checkpoint dtype instead)",
    ),
    Flag(
        _B,
        "--use_paged_context_fmha",
        choices=_ENABLE,
        source="BUILD plugin.py",
        note="needed for KV-cache reuse and chunked context; default on in 1.x",
    ),
    Flag(
        _B,
        "--kv_cache_type",
        since="0.14.0",
        choices=_c("continuous", "paged", "disabled"),
        source="BUILD @008b2b8d; first release-note mention 0.14 (RN), maybe 0.13 (unverified)",
    ),
    Flag(
        _B,
        "--paged_kv_cache",
        choices=_ENABLE,
        source="BUILD",
        note="deprecated alias of --kv_cache_type paged once --kv_cache_type exists",
    ),
    Flag(_B, "--gpt_attention_plugin", source="BUILD plugin.py"),
    Flag(_B, "--remove_input_padding", choices=_ENABLE, source="BUILD plugin.py"),
    Flag(_B, "--context_fmha", choices=_ENABLE, source="BUILD plugin.py"),
    Flag(_B, "--tokens_per_block", source="BUILD plugin.py"),
    Flag(
        _B,
        "--max_output_len",
        until="0.12.0",
        source="RN 0.12: removed, use --max_seq_len (input + output)",
    ),
    Flag(
        _B,
        "--use_custom_all_reduce",
        until="0.12.0",
        source="RN 0.12: removed; the all-reduce strategy is chosen at run time",
    ),
    Flag(_B, "--tp_size", until="0.12.0", source="RN 0.12: TP/PP are set at checkpoint time"),
    Flag(_B, "--pp_size", until="0.12.0", source="RN 0.12"),
    Flag(
        _B,
        "--plugin_weight_only_quant_type",
        never=True,
        source="an internal variable, never a CLI flag; AWQ goes through quantize.py",
    ),
    # --- examples/<llama>/convert_checkpoint.py ------------------------------------------
    Flag(_L, "--model_dir", source="LLAMA"),
    Flag(_L, "--output_dir", source="LLAMA"),
    Flag(_L, "--dtype", choices=_DTYPES, source="LLAMA; 'auto' from 0.15 (RN 0.15)"),
    Flag(_L, "--tp_size", source="LLAMA"),
    Flag(_L, "--pp_size", source="LLAMA"),
    Flag(_L, "--workers", source="LLAMA"),
    Flag(_L, "--use_weight_only", takes_value=False, source="LLAMA"),
    Flag(
        _L,
        "--weight_only_precision",
        choices=_c("int8", "int4", "int4_gptq", "int4_awq") + _c("int8_gptq", since="0.15.0"),
        source="LLAMA; int8 GPTQ from 0.15 (RN 0.15)",
    ),
    Flag(
        _L,
        "--int8_kv_cache",
        takes_value=False,
        source="LLAMA",
        note="calibrates on a dataset (LLaMAForCausalLM.quantize)",
    ),
    Flag(
        _L,
        "--fp8_kv_cache",
        takes_value=False,
        source="LLAMA",
        note="no calibration here; llmdeploy uses quantize.py --kv_cache_dtype fp8 instead",
    ),
    Flag(_L, "--plugin_weight_only_quant_type", never=True, source="LLAMA has no such flag"),
    # --- examples/<qwen>/convert_checkpoint.py -------------------------------------------
    Flag(_Q, "--model_dir", source="QWEN"),
    Flag(_Q, "--output_dir", source="QWEN"),
    Flag(_Q, "--dtype", choices=_DTYPES, source="QWEN"),
    Flag(_Q, "--tp_size", source="QWEN"),
    Flag(_Q, "--pp_size", source="QWEN"),
    Flag(_Q, "--workers", source="QWEN"),
    Flag(_Q, "--use_weight_only", takes_value=False, source="QWEN"),
    Flag(
        _Q,
        "--weight_only_precision",
        choices=_c("int8", "int4", "int4_gptq") + _c("int8_gptq", since="0.15.0"),
        source="QWEN (no int4_awq choice)",
    ),
    Flag(_Q, "--int8_kv_cache", takes_value=False, source="QWEN"),
    Flag(_Q, "--plugin_weight_only_quant_type", never=True, source="QWEN has no such flag"),
    # --- examples/quantization/quantize.py (ModelOpt PTQ) ---------------------------------
    Flag(_P, "--model_dir", source="QUANT"),
    Flag(_P, "--output_dir", source="QUANT"),
    Flag(_P, "--dtype", choices=_DTYPES, source="QUANT"),
    Flag(
        _P,
        "--qformat",
        choices=_c("fp8", "int8_sq", "int4_awq", "w4a8_awq", "int8_wo", "int4_wo", "full_prec")
        + _c("nvfp4", since="0.17.0"),
        source="QUANT; trtllm.md §2.2 (@04a2cacb) for 0.12; nvfp4 from 0.17 (RN 0.17)",
    ),
    Flag(_P, "--awq_block_size", source="QUANT"),
    Flag(_P, "--kv_cache_dtype", choices=_c("int8", "fp8"), source="QUANT"),
    Flag(_P, "--calib_size", source="QUANT", note="AWQ clamps it to 32 (quantize_by_modelopt)"),
    Flag(_P, "--calib_dataset", source="QUANT"),
    Flag(_P, "--batch_size", source="QUANT"),
    Flag(_P, "--tp_size", source="QUANT"),
    Flag(_P, "--pp_size", source="QUANT"),
    # --- trtllm-serve MODEL [OPTIONS] (no `serve` word: 0.17/0.18 have no subcommands) ------
    Flag(_S, "--host", source="SERVE-A..D", note="default localhost: always rendered 0.0.0.0"),
    Flag(_S, "--port", source="SERVE-A..D", note="default 8000"),
    Flag(
        _S,
        "--backend",
        choices=_c("pytorch") + _c("tensorrt", since="1.0.0", until=ENGINE_BUILD_REMOVED_IN),
        source="SERVE-A/B Choice([pytorch]) with the TensorRT engine as default; SERVE-C/D "
        "pytorch|tensorrt|_autodeploy, default pytorch from 1.0 (RN 1.0); REMOVAL keeps pytorch",
    ),
    Flag(_S, "--tp_size", source="SERVE-A..D", note="alias of --tensor_parallel_size in D"),
    Flag(_S, "--pp_size", source="SERVE-A..D"),
    Flag(_S, "--ep_size", since="0.19.0", source="SERVE-B..D; 0.19.0rc0 synopsis"),
    Flag(_S, "--max_batch_size", source="SERVE-A..D"),
    Flag(_S, "--max_num_tokens", source="SERVE-A..D", note="sizes the profiling batch"),
    Flag(_S, "--max_seq_len", source="SERVE-A..D"),
    Flag(_S, "--max_beam_width", source="SERVE-A..D"),
    Flag(
        _S,
        "--kv_cache_free_gpu_memory_fraction",
        source="SERVE-A..D",
        note="llmdeploy sets kv_cache_config in the YAML instead: the YAML's kv_cache_config "
        "replaces the one built from this flag (serve.py applies the YAML after the flags)",
    ),
    Flag(_S, "--trust_remote_code", takes_value=False, source="SERVE-A..D"),
    Flag(_S, "--log_level", since="0.19.0", source="SERVE-B..D"),
    Flag(
        _S,
        "--extra_llm_api_options",
        since="0.19.0",
        source="SERVE-B..D; the 0.20.0 docs example; RN 0.20: the YAML overrides the flags",
    ),
    Flag(
        _S,
        "--config",
        since=_NEWER,
        source="an alias of --extra_llm_api_options in SERVE-D, absent in SERVE-C; its first "
        "release was not established",
    ),
    Flag(_S, "--revision", since=_NEWER, source="SERVE-D only; first release not established"),
    # passed through from `engine.extraArgs` (llmdeploy renders none of these itself)
    Flag(
        _S,
        "--reasoning_parser",
        since="1.1.0",
        source="SERVE-C and SERVE-D (click.Choice of ReasoningParserFactory.parsers)",
    ),
    Flag(
        _S,
        "--tool_parser",
        since=_NEWER,
        source="SERVE-D only (click.Choice of ToolParserFactory.parsers); absent in SERVE-C",
    ),
    Flag(
        _S,
        "--chat_template",
        since=_NEWER,
        source="SERVE-D only; absent in SERVE-C",
    ),
    Flag(
        _S,
        "--served_model_name",
        since=_NEWER,
        source="not in SERVE-A..D; third-party pages list it for newer builds (unverified)",
        note="without it, /v1/models reports the MODEL argument",
    ),
    # --- the --extra_llm_api_options YAML (LLM() arguments) ----------------------------------
    Flag(_A, "kv_cache_config.free_gpu_memory_fraction", source="LLMARGS (default 0.9)"),
    Flag(_A, "kv_cache_config.enable_block_reuse", source="LLMARGS (default true)"),
    Flag(
        _A,
        "kv_cache_config.dtype",
        since="1.0.0",
        choices=_c("auto", "fp8"),
        source="LLMARGS; 1.2.0rc6 quantization page; RN 1.0 unified KvCacheConfig for the "
        "PyTorch backend (the earlier top-level kv_cache_dtype was not verified)",
    ),
    Flag(_A, "enable_chunked_prefill", source="LLMARGS; LlmArgs since 0.16 (RN 0.16)"),
    Flag(
        _A,
        "cuda_graph_config.enable_padding",
        since="1.0.0",
        source="LLMARGS; RN 1.0 renamed padding_enabled to enable_padding",
    ),
    Flag(
        _A,
        "cuda_graph_config.max_batch_size",
        since="1.0.0",
        source="LLMARGS; cuda_graph_config from PR #5014 (2025-06-13); 0.21 not verified",
    ),
    Flag(
        _A,
        "cuda_graph_config.padding_enabled",
        until="1.0.0",
        source="RN 1.0 rename; whether 0.21.0 used this spelling was not established",
    ),
    Flag(
        _A,
        "use_cuda_graph",
        until="1.0.0",
        source="flattened PyTorchConfig knob (PR #4603), replaced by cuda_graph_config",
    ),
    Flag(
        _A,
        "pytorch_backend_config",
        until="0.21.0",
        source="BE r25.05 model.yaml (0.19.0); refused in extra options by PR #4890 (2025-06)",
    ),
    Flag(
        _A,
        "return_perf_metrics",
        since="1.1.0",
        source="METRICS: mounts /prometheus/metrics; PR #5785; NVIDIA Dynamo docs: 1.1.0rc5 "
        "exposes its 5 basic metrics",
    ),
)

_BY_KEY: Mapping[tuple[str, str], Flag] = MappingProxyType({(f.tool, f.name): f for f in FLAGS})

# Script paths relative to the examples directory (of the image or of the matching git tag).
# 0.19 moved the per-model examples under examples/models/core/ (trtllm.md §2.1; a 0.19.0 source
# tree has examples/models/core/llama/convert_checkpoint.py); 0.18.x is 0.17 plus dependency
# updates only (RN 0.18.1), so it still has examples/llama/.
SCRIPT_PATHS: Mapping[Tool, tuple[tuple[str | None, str | None, str], ...]] = MappingProxyType(
    {
        _L: (
            (None, "0.19.0", "llama/convert_checkpoint.py"),
            ("0.19.0", None, "models/core/llama/convert_checkpoint.py"),
        ),
        _Q: (
            (None, "0.19.0", "qwen/convert_checkpoint.py"),
            ("0.19.0", None, "models/core/qwen/convert_checkpoint.py"),
        ),
        _P: ((None, None, "quantization/quantize.py"),),
    }
)


def script_path(tool: Tool, trtllm_version: str) -> str:
    for since, until, path in SCRIPT_PATHS.get(tool, ()):
        if in_range(trtllm_version, since, until):
            return path
    raise UnsupportedFlagError(tool, trtllm_version, "no example script for this tool")


def problem(tool: str, flag: str, value: str | None, trtllm_version: str) -> str | None:
    """Why ``tool`` at ``trtllm_version`` rejects ``flag`` (with ``value``); None if it accepts."""
    if tool in ENGINE_TOOLS:
        if version_key(trtllm_version) < version_key(TRACKED_FROM):
            return f"the flag table starts at TensorRT-LLM {TRACKED_FROM}"
        if not ships_trtllm_build(trtllm_version):
            return "this TensorRT-LLM no longer has the TensorRT engine workflow"
    elif not in_range(trtllm_version, SERVE_TRACKED_FROM, PYTORCH_UNTIL):
        return (
            f"the {tool} table covers TensorRT-LLM "
            f"{versions.span(SERVE_TRACKED_FROM, PYTORCH_UNTIL)} only"
        )
    spec = _BY_KEY.get((tool, flag))
    if spec is None:
        return f"{flag} is not in llmdeploy's flag table for {tool}"
    if spec.never:
        return f"not a command-line flag of {tool} ({spec.source})"
    if not in_range(trtllm_version, spec.since, spec.until):
        first = TRACKED_FROM if tool in ENGINE_TOOLS else SERVE_TRACKED_FROM
        span = f"[{spec.since or first}, {spec.until or 'now'})"
        return f"accepted only in {span} ({spec.source})"
    if spec.takes_value != (value is not None):
        return "takes a value" if spec.takes_value else "is a switch and takes no value"
    if spec.choices and value is not None:
        allowed = [c.value for c in spec.choices if in_range(trtllm_version, c.since, c.until)]
        if value not in allowed:
            return f"value {value!r} not among {allowed} ({spec.source})"
    return None


def serve_flags(trtllm_version: str) -> tuple[str, ...]:
    """The trtllm-serve flags the table accepts at ``trtllm_version`` (for did-you-mean)."""
    return tuple(
        f.name
        for f in FLAGS
        if f.tool == _S and not f.never and in_range(trtllm_version, f.since, f.until)
    )


def require(tool: str, flag: str, value: str | None, trtllm_version: str) -> None:
    """Raise UnsupportedFlagError unless the table says the flag and value are accepted."""
    reason = problem(tool, flag, value, trtllm_version)
    if reason is not None:
        shown = flag if value is None else f"{flag} {value}"
        raise UnsupportedFlagError(f"{tool} {shown}", trtllm_version, reason)


def accepts(tool: str, flag: str, trtllm_version: str, value: str | None = None) -> bool:
    return problem(tool, flag, value, trtllm_version) is None
