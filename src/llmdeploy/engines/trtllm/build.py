"""Engine build decisions for TensorRT-LLM: converter, recipe, and the two tool invocations.

Each argument is checked against :mod:`llmdeploy.engines.trtllm.flags` for the pinned TensorRT-LLM,
so a version change either renders flags that version accepts or raises UnsupportedFlagError.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmdeploy.engines.trtllm.flags import Tool, accepts, require, script_path
from llmdeploy.spec.sections import Spec

# Where the images keep the TensorRT-LLM examples. Triton image: tensorrtllm_backend
# dockerfile/Dockerfile.triton.trt_llm_backend (WORKDIR /app; COPY .../examples examples);
# TensorRT-LLM release image: NVIDIA/TensorRT-LLM docker/Dockerfile.multi (/app/tensorrt_llm).
EXAMPLES_CANDIDATES = ("/app/examples", "/app/tensorrt_llm/examples")
TRTLLM_GIT = "https://github.com/NVIDIA/TensorRT-LLM.git"

BUILD_ROOT = "/workspace/llmdeploy"
# Tokenizer files the pre/postprocessing models load with AutoTokenizer (config.json lets it
# resolve the tokenizer class when tokenizer_config.json does not name one).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "*.tiktoken",
    "chat_template.jinja",
    "config.json",
    "generation_config.json",
)

# Architecture catalog-name prefix -> converter directory (Mistral/Mixtral use the llama
# converter: trtllm.md §2.2; the R1 distills keep their base architecture).
CONVERTERS = (
    ("deepseek-r1-distill-llama", "llama"),
    ("deepseek-r1-distill-qwen", "qwen"),
    ("llama", "llama"),
    ("mistral", "llama"),
    ("mixtral", "llama"),
    ("qwen", "qwen"),
)


@dataclass(frozen=True)
class Arg:
    flag: str
    value: str | None = None  # None: a switch


@dataclass(frozen=True)
class BuildStep:
    tool: Tool
    script: str | None  # relative to the examples directory; None for trtllm-build
    args: tuple[Arg, ...]


def capability(text: str) -> tuple[int, int]:
    major, _, minor = text.rstrip("?").partition(".")
    return int(major), int(minor or 0)


def converter_for(architecture: str) -> str | None:
    name = architecture.lower()
    for prefix, converter in CONVERTERS:
        if name.startswith(prefix):
            return converter
    return None


def checkpoint_step(
    spec: Spec, converter: str, dtype: str, tp: int, trtllm: str, hf_dir: str, ckpt_dir: str
) -> tuple[BuildStep, str]:
    """convert_checkpoint.py or quantize.py, and a one-line description of the recipe."""
    quant, kv_fp8 = spec.quantization, spec.kv_cache_dtype == "fp8"
    qformat = {"int4-awq": "int4_awq", "fp8": "fp8"}.get(quant)
    if qformat is None and kv_fp8:
        qformat = {"none": "full_prec", "int8": "int8_wo"}.get(quant)
    if qformat is not None:
        tool: Tool = "quantize.py"
        args = [Arg("--model_dir", hf_dir), Arg("--dtype", dtype), Arg("--qformat", qformat)]
        if qformat == "int4_awq":
            args.append(Arg("--awq_block_size", "128"))
        if kv_fp8 or qformat == "fp8":
            args.append(Arg("--kv_cache_dtype", "fp8"))
        # AWQ calibration is clamped to 32 samples by quantize_by_modelopt; say so.
        calib = "32" if qformat == "int4_awq" else "512"
        args += [
            Arg("--calib_size", calib),
            Arg("--tp_size", str(tp)),
            Arg("--pp_size", "1"),
            Arg("--output_dir", ckpt_dir),
        ]
        recipe = f"quantize.py --qformat {qformat}" + (" --kv_cache_dtype fp8" if kv_fp8 else "")
    else:
        tool = (
            "convert_checkpoint.py:llama"
            if converter == "llama"
            else ("convert_checkpoint.py:qwen")
        )
        args = [
            Arg("--model_dir", hf_dir),
            Arg("--output_dir", ckpt_dir),
            Arg("--dtype", dtype),
            Arg("--tp_size", str(tp)),
            Arg("--pp_size", "1"),
        ]
        precision = {"int8": "int8", "int4-gptq": "int4_gptq"}.get(quant)
        if precision is not None:
            args += [Arg("--use_weight_only"), Arg("--weight_only_precision", precision)]
        recipe = f"{converter} convert_checkpoint.py --dtype {dtype}" + (
            f" weight-only {precision}" if precision else ""
        )
    for a in args:
        require(tool, a.flag, a.value, trtllm)
    return BuildStep(tool, script_path(tool, trtllm), tuple(args)), recipe


def build_step(
    tp: int,
    trtllm: str,
    dtype: str,
    quant: str,
    ckpt_dir: str,
    engine_dir: str,
    sizes: tuple[int, int, int, int],
    paged_context_fmha: bool,
) -> BuildStep:
    tool: Tool = "trtllm-build"
    batch, input_len, seq_len, num_tokens = sizes
    args = [
        Arg("--checkpoint_dir", ckpt_dir),
        Arg("--output_dir", engine_dir),
        Arg("--max_batch_size", str(batch)),
        Arg("--max_input_len", str(input_len)),
        Arg("--max_seq_len", str(seq_len)),
        Arg("--max_num_tokens", str(num_tokens)),
    ]
    # FP8: leave the GEMM plugin off (TRT-LLM performance-tuning guide, useful-build-time-flags:
    # "On FP8, it's recommended to be disabled"); otherwise cuBLASLt GEMMs in the checkpoint dtype.
    if quant != "fp8":
        plugin = "auto" if accepts(tool, "--gemm_plugin", trtllm, "auto") else dtype
        args.append(Arg("--gemm_plugin", plugin))
    if accepts(tool, "--kv_cache_type", trtllm, "paged"):
        args.append(Arg("--kv_cache_type", "paged"))
    else:
        args.append(Arg("--paged_kv_cache", "enable"))
    args.append(Arg("--use_paged_context_fmha", "enable" if paged_context_fmha else "disable"))
    args.append(Arg("--workers", str(tp)))
    for a in args:
        require(tool, a.flag, a.value, trtllm)
    return BuildStep(tool, None, tuple(args))
