"""Triton ↔ TensorRT-LLM versions and the one table of engine-build flags, by version.

Data only, no decisions: :mod:`llmdeploy.engines.trtllm.decisions` asks this module whether a flag
(and its value) is accepted by the TensorRT-LLM that ships in the pinned Triton image, and raises
:class:`~llmdeploy.errors.UnsupportedFlagError` when it is not. The tests parse the rendered build
script back and check every flag of every invocation against the same table.

Version ranges are TensorRT-LLM versions, ``since`` inclusive and ``until`` exclusive. The table
starts at 0.12.0 (Triton 24.08, the write-up's image); ``None`` means "every tracked version".

Sources (short names used in the rows):

- COMPAT: triton-inference-server/server ``docs/introduction/compatibility.md`` @ 0f963c9a.
- RN: NVIDIA/TensorRT-LLM ``docs/source/release-notes.md`` @ 001eaece.
- BUILD: NVIDIA/TensorRT-LLM ``tensorrt_llm/commands/build.py`` @ 008b2b8d and @ 65f1d153 (1.x),
  plugin flags from ``tensorrt_llm/plugin/plugin.py`` @ c20322ff (``cli_plugin_args``).
- LLAMA: ``examples/llama/convert_checkpoint.py`` @ 04a2cacb (0.12-era layout) and
  ``examples/models/core/llama/convert_checkpoint.py`` @ 368f8f2a (1.2-era, engine deprecation).
- QWEN: ``examples/models/core/qwen/convert_checkpoint.py`` @ 0df9aaf3 (no ``--fp8_kv_cache``).
- QUANT: ``examples/quantization/quantize.py`` @ 059c97c1.
- REMOVAL: ``docs/source/legacy/tensorrt-backend-removal.md`` @ 335107a7 (main after 1.2.x has no
  ``trtllm-build`` nor per-model ``convert_checkpoint.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from llmdeploy import versions
from llmdeploy.errors import UnsupportedFlagError

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

# Oldest TensorRT-LLM the flag table describes, and the first line without `trtllm-build`.
TRACKED_FROM = "0.12.0"
ENGINE_BUILD_REMOVED_IN = "1.3.0"  # REMOVAL: gone on main after the 1.2.x line


def version_key(version: str) -> tuple[int, int, int]:
    """Release order of a TensorRT-LLM version (``llmdeploy.versions.parse``: "0.17.0.post1"
    sorts as 0.17.0)."""
    return versions.parse(version, "TensorRT-LLM")


def in_range(version: str, since: str | None, until: str | None) -> bool:
    key = version_key(version)
    if since is not None and key < version_key(since):
        return False
    return until is None or key < version_key(until)


def ships_trtllm_build(trtllm_version: str) -> bool:
    """True when this TensorRT-LLM still has the TensorRT engine workflow (REMOVAL)."""
    return version_key(trtllm_version) < version_key(ENGINE_BUILD_REMOVED_IN)


Tool = Literal[
    "trtllm-build", "convert_checkpoint.py:llama", "convert_checkpoint.py:qwen", "quantize.py"
]


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
    if version_key(trtllm_version) < version_key(TRACKED_FROM):
        return f"the flag table starts at TensorRT-LLM {TRACKED_FROM}"
    if not ships_trtllm_build(trtllm_version):
        return "this TensorRT-LLM no longer has the TensorRT engine workflow"
    spec = _BY_KEY.get((tool, flag))
    if spec is None:
        return f"{flag} is not in llmdeploy's flag table for {tool}"
    if spec.never:
        return f"not a command-line flag of {tool} ({spec.source})"
    if not in_range(trtllm_version, spec.since, spec.until):
        span = f"[{spec.since or TRACKED_FROM}, {spec.until or 'now'})"
        return f"accepted only in {span} ({spec.source})"
    if spec.takes_value != (value is not None):
        return "takes a value" if spec.takes_value else "is a switch and takes no value"
    if spec.choices and value is not None:
        allowed = [c.value for c in spec.choices if in_range(trtllm_version, c.since, c.until)]
        if value not in allowed:
            return f"value {value!r} not among {allowed} ({spec.source})"
    return None


def require(tool: str, flag: str, value: str | None, trtllm_version: str) -> None:
    """Raise UnsupportedFlagError unless the table says the flag and value are accepted."""
    reason = problem(tool, flag, value, trtllm_version)
    if reason is not None:
        shown = flag if value is None else f"{flag} {value}"
        raise UnsupportedFlagError(f"{tool} {shown}", trtllm_version, reason)


def accepts(tool: str, flag: str, trtllm_version: str, value: str | None = None) -> bool:
    return problem(tool, flag, value, trtllm_version) is None
