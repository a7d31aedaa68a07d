"""What TensorRT-LLM cannot serve, known before sizing: the engine's ``check``, for the path the
spec takes (``engine.backend``).

``llmdeploy size`` and ``render`` run these through :mod:`llmdeploy.spec.checks`, and the
planners run them again on the instance they plan for. Each problem is reported at the field
that is wrong; the other fields of a conflict are notes. Sources: ``shared/reference/trtllm.md``,
docs/trtllm.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic.alias_generators import to_camel

from llmdeploy import versions
from llmdeploy.catalog import ec2 as catalog
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.engines.trtllm.build import capability, converter_for
from llmdeploy.engines.trtllm.releases import TRITON_TO_TRTLLM, in_range, ships_trtllm_build
from llmdeploy.engines.trtllm.spec import ENGINE_ONLY, PYTORCH_ONLY, TrtllmEngine
from llmdeploy.errors import Diagnostic, UnsupportedFlagError
from llmdeploy.spec.sections import Spec

# max_num_tokens when serving.maxNumBatchedTokens is not set (trtllm-build's default).
DEFAULT_MAX_NUM_TOKENS = 8192
# Serving (model-repository templates, launcher arguments) is verified against the 1.2-era
# triton_backend in NVIDIA/TensorRT-LLM (all_models @ 2a9abd95/0c8de69a, launcher @ 0a2e2c1f).
SERVING_SINCE, SERVING_UNTIL = "1.2.0", "1.3.0"


def _note(field: str, message: str) -> Diagnostic:
    return Diagnostic(message, field=field, severity="note")


def _fp8_families() -> str:
    return ", ".join(sorted({i.family for i in catalog.instances().values() if i.gpu.fp8}))


def trtllm_for_triton(triton_version: str) -> str:
    """TensorRT-LLM in the Triton image, or UnsupportedFlagError when llmdeploy cannot serve it."""
    flag = "engine.tritonVersion"
    trtllm = TRITON_TO_TRTLLM.get(triton_version)
    if trtllm is None:
        raise UnsupportedFlagError(
            flag,
            triton_version,
            "not a tritonserver -trtllm-python-py3 release in the compatibility matrix "
            f"(known: {', '.join(TRITON_TO_TRTLLM)})",
        )
    if not ships_trtllm_build(trtllm):
        raise UnsupportedFlagError(
            flag, triton_version, f"TensorRT-LLM {trtllm} has no trtllm-build (engine workflow)"
        )
    if not in_range(trtllm, SERVING_SINCE, SERVING_UNTIL):
        raise UnsupportedFlagError(
            flag,
            triton_version,
            f"TensorRT-LLM {trtllm}: the model-repository templates and launcher arguments are "
            f"verified for TensorRT-LLM {versions.span(SERVING_SINCE, SERVING_UNTIL)} only "
            "(Triton 26.03-26.07)",
        )
    return trtllm


def problems(spec: Spec, hardware: Sequence[Instance]) -> list[Diagnostic]:
    """Every problem of ``spec`` on the GPUs of ``hardware`` (one instance type, or the sizes
    of an instance family: a GPU feature is missing when no size has it)."""
    engine = spec.engine
    assert isinstance(engine, TrtllmEngine)
    out = _path_problems(engine)
    if engine.path == "pytorch":
        from llmdeploy.engines.trtllm.serve import problems as serve_problems

        return (
            out
            + _hardware_problems(spec, hardware)
            + _length_problems(spec, engine)
            + (serve_problems(spec, hardware))
        )
    try:
        trtllm_for_triton(engine.triton_version)
    except UnsupportedFlagError as exc:
        out.append(
            Diagnostic(
                f"`engine.tritonVersion` {exc.version!r}: {exc.reason}",
                field="engine.tritonVersion",
            )
        )
    if converter_for(spec.model.architecture) is None:
        out.append(
            Diagnostic(
                f"`model.architecture` {spec.model.architecture!r}: no TensorRT-LLM checkpoint "
                "converter is wired for it (supported: Llama, Mistral, Mixtral, Qwen families)",
                field="model.architecture",
                hint="use a catalog name such as llama-3-70b or qwen2.5-72b-instruct, or "
                "engine.type vllm",
            )
        )
    out += _hardware_problems(spec, hardware)
    out += _length_problems(spec, engine)
    if spec.model.loading.mode == "pvc":
        out.append(
            Diagnostic(
                "`model.loading.mode` pvc does not apply to TensorRT-LLM: the pods load the "
                "engine the build script uploads to `engine.artifactsS3Uri`, and the build reads "
                "the checkpoint from the Hub or `model.loading.s3Uri`",
                field="model.loading.mode",
                hint="use mode huggingface or s3",
            )
        )
    return out


def _path_problems(engine: TrtllmEngine) -> list[Diagnostic]:
    """Fields of one path set on the other: each an error at its own line, never ignored."""
    if engine.path == "engine":
        out = []
        if engine.version is not None:
            out.append(
                Diagnostic(
                    "`engine.version` pins the trtllm-serve image of backend pytorch; backend "
                    "engine is pinned by `engine.tritonVersion`",
                    field="engine.version",
                    hint="set engine.backend: pytorch, or remove engine.version",
                    notes=(_note("engine.backend", "engine.backend is engine"),),
                )
            )
        if engine.artifacts_s3_uri is None:
            out.append(
                Diagnostic(
                    "backend engine needs `engine.artifactsS3Uri`: where the build uploads the "
                    "engine and the pods fetch it",
                    field="engine.artifactsS3Uri",
                    hint="set engine.artifactsS3Uri: s3://bucket/prefix, or engine.backend: "
                    "pytorch (no engine build)",
                )
            )
        out += [
            Diagnostic(
                f"`engine.{to_camel(name)}` only applies to backend pytorch (trtllm-serve); "
                "backend engine's Triton launcher takes no arguments or variables of yours",
                field=f"engine.{to_camel(name)}",
                hint=f"remove engine.{to_camel(name)}, or set engine.backend: pytorch",
            )
            for name in PYTORCH_ONLY
            if getattr(engine, name)
        ]
        return out
    own: list[Diagnostic] = []
    if engine.extra_args or engine.env:  # imported only then: no start-up cost otherwise
        from llmdeploy.engines.trtllm import extra

        own = extra.problems(engine)
    return own + [
        Diagnostic(
            f"`engine.{to_camel(name)}` only applies to backend engine (Triton + trtllm-build); "
            "backend pytorch builds no engine and is pinned by `engine.version`",
            field=f"engine.{to_camel(name)}",
            hint=f"remove engine.{to_camel(name)}",
        )
        for name in ENGINE_ONLY
        if name in engine.model_fields_set
    ]


def _hardware_problems(spec: Spec, hardware: Sequence[Instance]) -> list[Diagnostic]:
    if not hardware:
        return []
    hw = spec.hardware
    where = "hardware.instanceType" if hw.instance_type else "hardware.instanceFamily"
    named = hw.instance_type or hw.instance_family
    gpu = hardware[0].gpu
    out: list[Diagnostic] = []
    tp = hw.tensor_parallel
    most = max(i.gpu_count for i in hardware)
    if tp > most:
        out.append(
            Diagnostic(
                f"`hardware.tensorParallel` {tp} exceeds the {most} GPUs of {named}",
                field="hardware.tensorParallel",
                notes=(_note(where, f"{named} has at most {most} GPUs"),),
            )
        )
    if all(capability(i.gpu.compute_capability) < (7, 5) for i in hardware):
        out.append(
            Diagnostic(
                f"`{where}` {named}: {gpu.model} (compute capability {gpu.compute_capability}); "
                "TensorRT-LLM removed Volta support in 0.15 (release notes)",
                field=where,
            )
        )
    if not any(i.gpu.fp8 for i in hardware):
        no_fp8 = _note(where, f"{named} has {gpu.model}, without FP8 support")
        families = _fp8_families()
        for key, value, instead in (
            ("quantization", spec.quantization, "int4-awq or int8"),
            ("kvCacheDtype", spec.kv_cache_dtype, "kvCacheDtype auto"),
        ):
            if value == "fp8":
                out.append(
                    Diagnostic(
                        f"`{key}` fp8 needs an FP8 GPU (Ada, Hopper or newer)",
                        field=key,
                        hint=f"use {instead}, or an instance family with FP8: {families}",
                        notes=(no_fp8,),
                    )
                )
    if spec.quantization == "int4-gptq" and spec.kv_cache_dtype == "fp8":
        out.append(
            Diagnostic(
                "`kvCacheDtype` fp8 with int4-gptq: the pre-quantized AutoGPTQ checkpoint is "
                "loaded by convert_checkpoint.py, which does not calibrate an FP8 KV cache",
                field="kvCacheDtype",
                hint="set kvCacheDtype auto, or use quantization int4-awq with kvCacheDtype fp8",
                notes=(_note("quantization", "quantization is int4-gptq"),),
            )
        )
    return out


def _length_problems(spec: Spec, engine: TrtllmEngine) -> list[Diagnostic]:
    seq_len = spec.serving.max_model_len
    input_len = engine.max_input_len or seq_len
    num_tokens = spec.serving.max_num_batched_tokens or DEFAULT_MAX_NUM_TOKENS
    out: list[Diagnostic] = []
    if input_len > seq_len:
        out.append(
            Diagnostic(
                f"`engine.maxInputLen` {input_len} exceeds `serving.maxModelLen` {seq_len} "
                "(trtllm-build --max_seq_len counts prompt + output)",
                field="engine.maxInputLen",
                hint="lower engine.maxInputLen, or raise serving.maxModelLen",
                notes=(_note("serving.maxModelLen", f"serving.maxModelLen is {seq_len}"),),
            )
        )
    if not spec.serving.chunked_prefill and num_tokens < input_len:
        length_field = "engine.maxInputLen" if engine.max_input_len else "serving.maxModelLen"
        out.append(
            Diagnostic(
                f"`serving.chunkedPrefill` false: a prompt of up to {input_len} tokens must then "
                f"fit one step of max_num_tokens {num_tokens}",
                field="serving.chunkedPrefill",
                hint="enable serving.chunkedPrefill or raise serving.maxNumBatchedTokens",
                notes=(
                    _note(length_field, f"{length_field} is {input_len}"),
                    _note(
                        "serving.maxNumBatchedTokens",
                        f"serving.maxNumBatchedTokens is {num_tokens}",
                    ),
                ),
            )
        )
    return out
