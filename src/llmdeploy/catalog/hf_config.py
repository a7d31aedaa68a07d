"""Parse a Hugging Face ``config.json`` into an
:class:`~llmdeploy.catalog.architecture.Architecture`.

Supported ``model_type`` values are listed in :data:`TEXT_TYPES` (and the multimodal wrappers in
:data:`WRAPPER_TYPES`). Defaults are the ones the ``transformers`` config classes document (e.g.
``num_key_value_heads`` = ``num_attention_heads``, ``head_dim`` = hidden / heads, Gemma ties its
embeddings); a field without a documented default is required. Everything missing is reported
in one :class:`UnknownArchitectureError`, never guessed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmdeploy.catalog.architecture import Architecture, CheckpointQuant, count_params
from llmdeploy.errors import Diagnostic, UnknownArchitectureError

# model_type -> (tie_word_embeddings default, qkv bias, norms per layer, qk norm)
TEXT_TYPES: dict[str, tuple[bool, bool, int, bool]] = {
    "llama": (False, False, 2, False),
    "mistral": (False, False, 2, False),
    "mixtral": (False, False, 2, False),
    "qwen2": (False, True, 2, False),
    "qwen2_moe": (False, True, 2, False),
    "qwen3": (False, False, 2, True),
    "qwen3_moe": (False, False, 2, True),
    "gemma": (True, False, 2, False),
    "gemma2": (True, False, 4, False),
    "phi3": (False, False, 2, False),
    "granite": (False, False, 2, False),
    "deepseek_v2": (False, False, 2, False),
    "deepseek_v3": (False, False, 2, False),
    "gpt_oss": (False, True, 2, False),
    "llama4_text": (False, False, 2, False),
}
WRAPPER_TYPES = {"mistral3", "llama4", "llava"}
VISION_TYPES = {"pixtral", "llama4_vision_model", "clip_vision_model", "siglip_vision_model"}


class _Fields:
    """Reads config fields and collects a diagnostic for every missing required one."""

    def __init__(self, cfg: Mapping[str, Any], file: str, prefix: str = "") -> None:
        self.cfg = cfg
        self.file = file
        self.prefix = prefix
        self.problems: list[Diagnostic] = []

    def get(self, *keys: str) -> Any:
        for key in keys:
            if self.cfg.get(key) is not None:
                return self.cfg[key]
        return None

    def need(self, *keys: str) -> int:
        value = self.get(*keys)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            shown = " / ".join(self.prefix + k for k in keys)
            self.problems.append(
                Diagnostic(
                    f"config field {shown} is missing or not a positive integer (got {value!r})",
                    file=self.file,
                )
            )
            return 1
        return value

    def opt(self, *keys: str, default: int = 0) -> int:
        value = self.get(*keys)
        return value if isinstance(value, int) and not isinstance(value, bool) else default


def _refuse(message: str, file: str, hint: str | None = None) -> UnknownArchitectureError:
    return UnknownArchitectureError([Diagnostic(message, file=file, hint=hint)])


def load_config_file(path: Path) -> Architecture:
    """Read ``path`` (a config.json) and parse it; unreadable or unsupported -> refused."""
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _refuse(f"model config not found: {path}", str(path)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _refuse(f"cannot read model config {path}: {exc}", str(path)) from None
    if not isinstance(cfg, dict):
        raise _refuse("config.json is not a JSON object", str(path))
    name = str(cfg.get("_name_or_path") or path.parent.name or path.stem)
    return architecture_from_config(cfg, name=name, hf_id=name, source=str(path), file=str(path))


def _vision_params(
    v: Mapping[str, Any], wrapper: str, text_hidden: int, file: str, top: Mapping[str, Any]
) -> tuple[int, list[Diagnostic]]:
    """Parameters of the vision tower + projector, for the towers in :data:`VISION_TYPES`."""
    vtype = str(v.get("model_type", ""))
    f = _Fields(v, file, "vision_config.")
    if vtype not in VISION_TYPES:
        return 0, [
            Diagnostic(
                f"vision tower model_type {vtype!r} is not supported for sizing "
                f"(supported: {', '.join(sorted(VISION_TYPES))})",
                file=file,
            )
        ]
    h, layers, inter = (
        f.need("hidden_size"),
        f.need("num_hidden_layers"),
        f.need("intermediate_size"),
    )
    patch, channels = f.need("patch_size"), f.opt("num_channels", default=3)
    image = f.need("image_size")
    if vtype == "pixtral":  # gated FFN, no biases, RMSNorm (vllm/model_executor/models/pixtral.py)
        per_layer = 4 * h * h + 3 * h * inter + 2 * h
        tower = layers * per_layer + channels * patch * patch * h + h
    else:  # CLIP/SigLIP/Llama-4 ViT: biased attention and fc1/fc2, LayerNorm with bias
        per_layer = 4 * h * h + 4 * h + 2 * h * inter + inter + h + 4 * h
        positions = (image // patch) ** 2 + (1 if vtype != "siglip_vision_model" else 0)
        tower = layers * per_layer + channels * patch * patch * h + positions * h + 4 * h
    if wrapper == "mistral3":
        merge = int(top.get("spatial_merge_size", 2))
        projector = h * merge * merge * h + h * text_hidden + text_hidden * text_hidden + h
    elif wrapper == "llama4":
        ratio = float(v.get("pixel_shuffle_ratio", 0.5))
        shuffled = int(h / (ratio * ratio))
        proj_in = f.need("projector_input_dim")
        proj_out = f.need("projector_output_dim")
        out = f.need("vision_output_dim")
        projector = shuffled * proj_in + proj_out * out + out * text_hidden + h  # + class emb
    else:  # llava: 2-layer MLP projector with biases
        projector = h * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden
    return tower + projector, f.problems


def quant_from_config(q: Mapping[str, Any], file: str) -> CheckpointQuant:
    """Interpret a ``quantization_config``; unknown schemes are refused. ``quant_method`` is
    the name vLLM reads from it (ModelConfig._verify_quantization, vllm/config/model.py@v0.19.0:
    lower-cased, ``compressed_tensors`` spelled ``compressed-tensors``, ModelOpt FP8/NVFP4 as
    ``modelopt``/``modelopt_fp4``)."""
    quant = _quant_scheme(q, file)
    vllm_name = _vllm_method_name(q)
    if vllm_name == "modelopt" and quant.method == "nvfp4":
        vllm_name = "modelopt_fp4"
    return dataclasses.replace(quant, quant_method=vllm_name)


def _vllm_method_name(q: Mapping[str, Any]) -> str:
    return (
        str(q.get("quant_method", "")).lower().replace("compressed_tensors", "compressed-tensors")
    )


def _quant_scheme(q: Mapping[str, Any], file: str) -> CheckpointQuant:
    method = _vllm_method_name(q)
    if method in {"awq", "gptq"}:
        bits = int(q.get("bits", q.get("w_bit", 4)))
        group = int(q.get("group_size", q.get("q_group_size", 128)))
        if group <= 0:
            raise _refuse(f"{method} with group_size {group} (per-channel) is not supported", file)
        # packed int weights + fp16 scale (2/g) + packed zero point (bits/8/g): vllm.md §3
        per = bits / 8 + (2 + bits / 8) / group
        return CheckpointQuant(
            method, bits, group, per, 0, False, label=f"{method} {bits}-bit g{group}"
        )
    if method == "fp8":
        block = q.get("weight_block_size")
        if block:
            edge = int(block[0]) * int(block[1])
            return CheckpointQuant(
                "fp8-block",
                8,
                int(block[0]),
                1 + 4 / edge,
                0,
                False,
                label=f"fp8 block {block[0]}x{block[1]}",
            )
        return CheckpointQuant("fp8", 8, None, 1.0, 0, False, label="fp8 per-tensor")
    if method == "mxfp4":  # e2m1 + one e8m0 scale per 32 (experts only; vllm.md §3)
        return CheckpointQuant("mxfp4", 4, 32, 0.5 + 1 / 32, 0, True, label="mxfp4 experts")
    if method == "modelopt":
        algo = str(q.get("quant_algo") or (q.get("quantization") or {}).get("quant_algo", ""))
        if algo.upper() == "FP8":
            return CheckpointQuant("fp8", 8, None, 1.0, 0, False, label="modelopt fp8")
        if algo.upper() == "NVFP4":
            return CheckpointQuant("nvfp4", 4, 16, 0.5 + 1 / 16, 0, False, label="modelopt nvfp4")
        raise _refuse(f"modelopt quant_algo {algo!r} is not supported", file)
    if method == "compressed-tensors":
        return _compressed_tensors(q, file)
    raise _refuse(
        f"quantization_config.quant_method {method!r} is not supported for sizing",
        file,
        hint="supported: awq, gptq, fp8, mxfp4, modelopt (fp8/nvfp4), compressed-tensors",
    )


def _compressed_tensors(q: Mapping[str, Any], file: str) -> CheckpointQuant:
    groups = q.get("config_groups") or {}
    if len(groups) != 1:
        raise _refuse("compressed-tensors with other than one config group is not supported", file)
    group = next(iter(groups.values()))
    w = group.get("weights") or {}
    bits, wtype = int(w.get("num_bits", 0)), str(w.get("type", "int"))
    strategy = str(w.get("strategy", "tensor"))
    ignore = " ".join(str(x) for x in q.get("ignore") or [])
    lm_head = "lm_head" not in ignore
    vision = "vision" not in ignore
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
            False,
            lm_head,
            vision,
            label=f"compressed-tensors W8{acts} {method} {strategy}",
        )
    if bits == 4 and strategy == "group":
        g = int(w.get("group_size", 128))
        if wtype == "float":  # NVFP4: fp8 scale per 16
            return CheckpointQuant(
                "nvfp4",
                4,
                g,
                0.5 + 1 / g,
                0,
                False,
                lm_head,
                vision,
                label="compressed-tensors nvfp4",
            )
        zeros = 0 if w.get("symmetric", True) else 0.5
        return CheckpointQuant(
            "w4a16",
            4,
            g,
            0.5 + (2 + zeros) / g,
            0,
            False,
            lm_head,
            vision,
            label=f"compressed-tensors W4A16 g{g}",
        )
    raise _refuse(
        f"compressed-tensors weights num_bits={bits} strategy={strategy!r} are not supported",
        file,
    )


def _layer_attention(
    mt: str, cfg: Mapping[str, Any], layers: int, notes: list[str]
) -> tuple[tuple[str, ...], int | None, int | None]:
    """Per-layer attention kind, sliding window and local-attention chunk."""
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == layers and window:
        kinds = tuple("sliding" if "sliding" in str(t) else "full" for t in types)
        return kinds, int(window), None
    if mt == "gemma2" and window:  # HF Gemma2: even layers sliding (layer_idx % 2 == 0)
        return tuple("sliding" if i % 2 == 0 else "full" for i in range(layers)), int(window), None
    if mt == "gpt_oss" and window:  # HF GptOssConfig default layer_types: sliding first
        return tuple("sliding" if (i + 1) % 2 else "full" for i in range(layers)), int(window), None
    if mt == "llama4_text" and cfg.get("attention_chunk_size"):
        no_rope = cfg.get("no_rope_layers") or []
        if len(no_rope) != layers:  # HF default: every 4th layer is a global NoPE layer
            no_rope = [int((i + 1) % 4 != 0) for i in range(layers)]
        kinds = tuple("chunked" if flag else "full" for flag in no_rope)
        return kinds, None, int(cfg["attention_chunk_size"])
    if window and cfg.get("use_sliding_window", True) and mt in {"mistral", "mixtral"}:
        return tuple("sliding" for _ in range(layers)), int(window), None
    if window and cfg.get("use_sliding_window", True):
        notes.append(
            f"sliding_window {window} ignored: attention sized as full on every layer (upper bound)"
        )
    return tuple("full" for _ in range(layers)), None, None


def architecture_from_config(
    config: Mapping[str, Any], *, name: str, hf_id: str, source: str, file: str
) -> Architecture:
    top = config
    wrapper = str(top.get("model_type", ""))
    archs = tuple(str(a) for a in top.get("architectures") or ())
    cfg: Mapping[str, Any] = top
    vision_cfg: Mapping[str, Any] | None = None
    if "text_config" in top:
        if wrapper not in WRAPPER_TYPES:
            raise _refuse(
                f"multimodal model_type {wrapper!r} is not supported for sizing",
                file,
                hint=f"supported wrappers: {', '.join(sorted(WRAPPER_TYPES))}",
            )
        cfg = {**top["text_config"]}
        vision_cfg = top.get("vision_config")
        cfg.setdefault("tie_word_embeddings", top.get("tie_word_embeddings", False))
        for key in ("torch_dtype", "dtype", "quantization_config"):
            if key in top:
                cfg.setdefault(key, top[key])
    mt = str(cfg.get("model_type", ""))
    if wrapper == "llama4" and mt in {"", "llama4"}:
        mt = "llama4_text"
    if mt not in TEXT_TYPES:
        raise _refuse(
            f"model_type {mt or wrapper!r} (architectures {list(archs)}) is not supported: the "
            "calculator models only architectures whose weight and KV layout it knows",
            file,
            hint=f"supported model_type: {', '.join(sorted(TEXT_TYPES))}",
        )
    tie_default, qkv_bias, norms, qk_norm = TEXT_TYPES[mt]
    f = _Fields(cfg, file, "text_config." if cfg is not top else "")
    h, layers = f.need("hidden_size"), f.need("num_hidden_layers")
    heads, vocab = f.need("num_attention_heads"), f.need("vocab_size")
    max_pos = f.need("max_position_embeddings")
    kv_heads = f.opt("num_key_value_heads", default=heads)
    head_dim = f.opt("head_dim", default=h // heads if heads else 0)
    fields: dict[str, Any] = {}
    notes: list[str] = []
    if mt.startswith("deepseek"):
        fields.update(
            q_lora_rank=f.opt("q_lora_rank"),
            kv_lora_rank=f.need("kv_lora_rank"),
            qk_nope_head_dim=f.need("qk_nope_head_dim"),
            qk_rope_head_dim=f.need("qk_rope_head_dim"),
            v_head_dim=f.need("v_head_dim"),
        )
        kv_heads, head_dim = heads, fields["qk_nope_head_dim"] + fields["qk_rope_head_dim"]
    experts = f.opt("num_local_experts", "num_experts", "n_routed_experts")
    inter = 0
    if experts:
        moe_inter = (
            f.need("moe_intermediate_size")
            if mt in {"qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3"}
            else f.need("intermediate_size")
        )
        shared = 0
        dense = 0
        if mt.startswith("deepseek"):
            shared = f.opt("n_shared_experts") * moe_inter
            dense = min(layers, f.opt("first_k_dense_replace"))
            inter = f.need("intermediate_size") if dense else 0
        elif mt == "qwen2_moe":
            shared = f.opt("shared_expert_intermediate_size")
        elif mt == "llama4_text":
            shared = moe_inter  # one shared expert of the expert width (HF Llama4TextMoe)
            step = f.opt("interleave_moe_layer_step", default=1)
            dense = layers - len(range(step - 1, layers, step))
            inter = f.need("intermediate_size_mlp") if dense else 0
        step = f.opt("decoder_sparse_step", default=1) if mt in {"qwen2_moe", "qwen3_moe"} else 1
        if step > 1 or cfg.get("mlp_only_layers"):
            only = set(cfg.get("mlp_only_layers") or [])
            dense = sum(1 for i in range(layers) if i in only or (i + 1) % step != 0)
            inter = f.need("intermediate_size")
        fields.update(
            num_experts=experts,
            experts_per_token=f.need("num_experts_per_tok"),
            moe_intermediate_size=moe_inter,
            shared_expert_intermediate_size=shared,
            dense_layers=dense,
            expert_bias=mt == "gpt_oss",
        )
    else:
        inter = f.need("intermediate_size")
    kinds, window, chunk = _layer_attention(mt, cfg, layers, notes)
    vision = 0
    if vision_cfg is not None:
        vision, problems = _vision_params(vision_cfg, wrapper, h, file, top)
        f.problems.extend(problems)
    if f.problems:
        raise UnknownArchitectureError(f.problems)
    quant_cfg = cfg.get("quantization_config")
    quant = quant_from_config(quant_cfg, file) if isinstance(quant_cfg, Mapping) else None
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    partial = float(cfg.get("partial_rotary_factor", 1.0) or 1.0)
    rotary = fields.get("qk_rope_head_dim") or int(head_dim * partial)
    arch = Architecture(
        name=name,
        hf_id=hf_id,
        model_type=mt,
        architectures=archs,
        hidden_size=h,
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", tie_default)),
        max_position_embeddings=max_pos,
        rotary_dim=rotary,
        torch_dtype=dtype,
        qkv_bias=bool(cfg.get("attention_bias", qkv_bias)),
        o_bias=mt == "gpt_oss",
        norms_per_layer=norms,
        qk_norm=qk_norm and not fields.get("kv_lora_rank"),
        layer_attention=kinds,
        sliding_window=window,
        attention_chunk_size=chunk,
        vision_params=vision,
        quantization=quant,
        source=source,
        notes=tuple(notes),
        **fields,
    )
    if mt == "llama4_text":  # L2 qk-norm without weights; no params
        arch = dataclasses.replace(arch, qk_norm=False)
    total, active = count_params(arch)
    return dataclasses.replace(arch, total_params=total, active_params=active)
