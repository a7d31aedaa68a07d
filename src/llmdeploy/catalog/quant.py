"""Checkpoint quantization: a ``quantization_config`` (or ModelOpt's ``hf_quant_config.json``)
as a :class:`~llmdeploy.catalog.architecture.CheckpointQuant`.

Bytes per weight element include the stored scales and zero points; which weight classes stay
16-bit comes from the format's defaults and its ignore list (``ignore``, ``exclude_modules``,
``modules_to_not_convert``, ``llm_int8_skip_modules``). Sources per format: ``docs/sizing.md``
§3 and the research notes it cites. Unknown methods and shapes are refused, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from llmdeploy.catalog.architecture import CheckpointQuant
from llmdeploy.errors import Diagnostic, UnknownArchitectureError

SUPPORTED = (
    "awq, gptq, fp8, mxfp4, bitsandbytes (4-bit nf4/fp4, 8-bit), modelopt (FP8, "
    "FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4, MXFP8), compressed-tensors "
    "(W8A8/W8A16 int8 and fp8, W4A16, NVFP4)"
)

# ignore-list words -> the weight class they keep in 16-bit
_VISION_WORDS = ("vision", "visual", "multi_modal_projector", "mm_projector", "merger", "vit")
_LAYER_INDEX = re.compile(r"layers\.(\d+)\.")


def refuse(message: str, file: str, hint: str | None = None) -> UnknownArchitectureError:
    return UnknownArchitectureError([Diagnostic(message, file=file, hint=hint)])


def _components(entry: str) -> tuple[str, ...]:
    """Weight classes one ignore-list entry names (routers and embeddings are 16-bit anyway)."""
    s = entry.lower()
    if "lm_head" in s:
        return ("lm_head",)
    if any(w in s for w in _VISION_WORDS):
        return ("vision",)
    if "embed" in s or "router" in s or re.search(r"(mlp|moe)\.gate(\b|\$|$)", s):
        return ()
    if "shared_expert" in s:
        return ("mlp",)
    if "expert" in s:
        return ("experts",)
    if "attn" in s or "attention" in s:
        return ("attention",)
    if "mlp" in s or "ffn" in s or "feed_forward" in s:
        return ("mlp", "experts")
    return ()


def kept_16bit(entries: Sequence[object], layers: int) -> tuple[tuple[str, float], ...]:
    """Fraction of each weight class an ignore list leaves in 16-bit. An entry naming one
    layer (``model.layers.3.self_attn``) keeps that layer's share; a wildcard or regex entry
    keeps the whole class."""
    whole: set[str] = set()
    per_layer: dict[str, set[int]] = {}
    for item in entries:
        text = str(item)
        found = _LAYER_INDEX.search(text)
        for comp in _components(text):
            if found and not text.startswith("re:") and "*" not in text:
                per_layer.setdefault(comp, set()).add(int(found.group(1)))
            else:
                whole.add(comp)
    out = {c: 1.0 for c in whole}
    for comp, idx in per_layer.items():
        if comp not in out:
            out[comp] = min(1.0, len(idx) / max(1, layers))
    return tuple(sorted(out.items()))


def _extra(kept: tuple[tuple[str, float], ...], lm_head: bool = False) -> frozenset[str]:
    """The vision tower's Linear layers are quantized like the text model's unless the ignore
    list names them (vLLM quantizes every ``LinearBase`` a skip list does not exclude); the
    lm_head (a ``ParallelLMHead``, not a ``LinearBase``) only where the format says so (AWQ /
    GPTQ ``lm_head: true``)."""
    named = {c for c, _ in kept}
    out = {"vision"} - named
    if lm_head and "lm_head" not in named:
        out.add("lm_head")
    return frozenset(out)


def _awq_gptq(q: Mapping[str, Any], method: str, file: str, layers: int) -> CheckpointQuant:
    bits = int(q.get("bits", q.get("w_bit", 4)))
    group = int(q.get("group_size", q.get("q_group_size", 128)))
    if bits not in (2, 3, 4, 8):
        raise refuse(f"{method} with {bits}-bit weights is not supported", file)
    if group <= 0:
        raise refuse(f"{method} with group_size {group} (per-channel) is not supported", file)
    # packed int weights + fp16 scale (2/g) + packed zero point (bits/8/g): vllm.md §3;
    # act-order GPTQ also stores an int32 g_idx per input channel (gptq.py, GPTQLinearMethod)
    per = bits / 8 + (2 + bits / 8) / group
    act_order = method == "gptq" and bool(q.get("desc_act"))
    skip = kept_16bit(q.get("modules_to_not_convert") or [], layers)
    return CheckpointQuant(
        method,
        bits,
        group,
        per,
        kept_16bit=skip,
        quantized_extra=_extra(skip, lm_head=bool(q.get("lm_head"))),
        per_input_bytes=4 if act_order else 0,
        quant_method=method,
        label=f"{method} {bits}-bit g{group}" + (" act-order" if act_order else ""),
    )


def _fp8(q: Mapping[str, Any], layers: int) -> CheckpointQuant:
    block = q.get("weight_block_size")
    skip = kept_16bit(q.get("modules_to_not_convert") or q.get("ignored_layers") or [], layers)
    if block:
        edge = int(block[0]) * int(block[1])
        return CheckpointQuant(
            "fp8-block",
            8,
            int(block[0]),
            1 + 4 / edge,
            kept_16bit=skip,
            quantized_extra=_extra(skip),
            quant_method="fp8",
            label=f"fp8 block {block[0]}x{block[1]}",
        )
    return CheckpointQuant(
        "fp8",
        8,
        None,
        1.0,
        kept_16bit=skip,
        quantized_extra=_extra(skip),
        quant_method="fp8",
        label="fp8 per-tensor",
    )


def _bitsandbytes(q: Mapping[str, Any], layers: int) -> CheckpointQuant | None:
    """bitsandbytes (vLLM ``bitsandbytes.py``): 4-bit = packed uint8 + an fp32 absmax per 64
    weights (double quant: uint8 absmax + an fp32 scale per 256 blocks); 8-bit (LLM.int8) =
    int8 + an fp32 scale per output row. Embeddings and lm_head are never converted."""
    skip = kept_16bit(q.get("llm_int8_skip_modules") or [], layers)
    if q.get("load_in_4bit"):
        kind = str(q.get("bnb_4bit_quant_type", "fp4"))
        double = bool(q.get("bnb_4bit_use_double_quant"))
        per = 0.5 + (1 / 64 + 4 / (64 * 256) if double else 4 / 64)
        label = f"bitsandbytes {kind}" + (" double-quant" if double else "")
        return CheckpointQuant(
            "bnb-4bit",
            4,
            64,
            per,
            kept_16bit=skip,
            quantized_extra=_extra(skip),
            quant_method="bitsandbytes",
            label=label,
        )
    if q.get("load_in_8bit"):
        return CheckpointQuant(
            "bnb-8bit",
            8,
            None,
            1.0,
            4,
            kept_16bit=skip,
            quantized_extra=_extra(skip),
            quant_method="bitsandbytes",
            label="bitsandbytes int8",
        )
    return None


def _modelopt(q: Mapping[str, Any], file: str, layers: int) -> CheckpointQuant:
    """ModelOpt: ``quant_algo`` at the top (config.json form) or under ``quantization``
    (``hf_quant_config.json``); ``exclude_modules`` / ``ignore`` stay 16-bit."""
    inner = q.get("quantization") if isinstance(q.get("quantization"), Mapping) else {}
    assert isinstance(inner, Mapping)
    algo = str(q.get("quant_algo") or inner.get("quant_algo") or "").upper()
    skip = kept_16bit(
        q.get("exclude_modules") or q.get("ignore") or inner.get("exclude_modules") or [], layers
    )
    extra = _extra(skip)
    table: dict[str, tuple[str, int, int | None, float, int, str]] = {
        "FP8": ("fp8", 8, None, 1.0, 0, "modelopt"),
        "FP8_PER_CHANNEL_PER_TOKEN": ("fp8", 8, None, 1.0, 4, "modelopt"),
        "FP8_PB_WO": ("fp8-block", 8, 128, 1 + 4 / (128 * 128), 0, "modelopt"),
        "NVFP4": ("nvfp4", 4, 16, 0.5 + 1 / 16, 0, "modelopt_fp4"),
        "MXFP8": ("mxfp8", 8, 32, 1 + 1 / 32, 0, "modelopt_mxfp8"),
    }
    if algo not in table:
        raise refuse(
            f"modelopt quant_algo {algo!r} is not supported for sizing",
            file,
            hint="supported: " + ", ".join(table),
        )
    method, bits, group, per, channel, vllm = table[algo]
    return CheckpointQuant(
        method,
        bits,
        group,
        per,
        channel,
        kept_16bit=skip,
        quantized_extra=extra,
        quant_method=vllm,
        label=f"modelopt {algo.lower()}",
    )


def quant_from_config(q: Mapping[str, Any], file: str, layers: int = 1) -> CheckpointQuant:
    """Interpret a ``quantization_config``; unknown schemes are refused. ``quant_method`` is
    the name vLLM reads from it (ModelConfig._verify_quantization, vllm/config/model.py@v0.19.0:
    lower-cased, ``compressed_tensors`` spelled ``compressed-tensors``, ModelOpt FP8/NVFP4 as
    ``modelopt``/``modelopt_fp4``)."""
    method = (
        str(q.get("quant_method", "")).lower().replace("compressed_tensors", "compressed-tensors")
    )
    if method in {"awq", "gptq"}:
        return _awq_gptq(q, method, file, layers)
    if method == "fp8":
        return _fp8(q, layers)
    if method == "mxfp4":  # e2m1 + one e8m0 scale per 32 (openai/gpt-oss README)
        skip = q.get("modules_to_not_convert") or ["self_attn", "mlp.router", "lm_head"]
        kept = dict(kept_16bit(skip, layers))
        kept.setdefault("mlp", 1.0)  # only the routed experts are MXFP4
        return CheckpointQuant(
            "mxfp4",
            4,
            32,
            0.5 + 1 / 32,
            kept_16bit=tuple(sorted(kept.items())),
            quant_method="mxfp4",
            label="mxfp4 experts",
        )
    if method == "bitsandbytes":
        found = _bitsandbytes(q, layers)
        if found is not None:
            return found
        raise refuse("bitsandbytes config with neither load_in_4bit nor load_in_8bit", file)
    if method == "modelopt" or (not method and "quantization" in q):
        return _modelopt(q, file, layers)
    if method == "compressed-tensors":
        return _compressed_tensors(q, file, layers)
    raise refuse(
        f"quantization_config.quant_method {method!r} is not supported for sizing",
        file,
        hint=f"supported: {SUPPORTED}",
    )


def _compressed_tensors(q: Mapping[str, Any], file: str, layers: int) -> CheckpointQuant:
    """compressed-tensors presets (neuralmagic/compressed-tensors ``quant_scheme.py``): W8A8 /
    W8A16 (int8 or fp8; tensor, channel or block scales), W4A16 (int, group scales, zero points
    when asymmetric), NVFP4 (fp4, ``tensor_group`` strategy: fp8 scale per 16 + fp32 global)."""
    groups = q.get("config_groups") or {}
    if len(groups) != 1:
        raise refuse("compressed-tensors with other than one config group is not supported", file)
    group = next(iter(groups.values()))
    w = group.get("weights") or {}
    bits, wtype = int(w.get("num_bits", 0)), str(w.get("type", "int"))
    strategy = str(w.get("strategy", "tensor"))
    skip = kept_16bit(q.get("ignore") or [], layers)
    extra = _extra(skip)
    common: dict[str, Any] = {
        "kept_16bit": skip,
        "quantized_extra": extra,
        "quant_method": "compressed-tensors",
    }
    per_channel = 4 if strategy == "channel" else 0
    if bits == 8:
        method = "fp8" if wtype == "float" else "int8"
        per = 1.0
        if strategy == "block":
            edge = w.get("block_structure") or [128, 128]
            per += 4 / (int(edge[0]) * int(edge[1]))
        acts = "A8" if group.get("input_activations") else "A16"
        return CheckpointQuant(
            method,
            8,
            None,
            per,
            per_channel,
            label=f"compressed-tensors W8{acts} {method} {strategy}",
            **common,
        )
    if bits == 4 and strategy in ("group", "tensor_group"):
        g = int(w.get("group_size") or (16 if wtype == "float" else 128))
        if wtype == "float":  # NVFP4: e2m1 + fp8 e4m3 scale per group (+ fp32 global scale)
            return CheckpointQuant(
                "nvfp4", 4, g, 0.5 + 1 / g, label="compressed-tensors nvfp4", **common
            )
        zeros = 0 if w.get("symmetric", True) else 0.5
        return CheckpointQuant(
            "w4a16",
            4,
            g,
            0.5 + (2 + zeros) / g,
            label=f"compressed-tensors W4A16 g{g}" + ("" if not zeros else " asym"),
            **common,
        )
    raise refuse(
        f"compressed-tensors weights num_bits={bits} type={wtype!r} strategy={strategy!r} "
        "are not supported",
        file,
    )
