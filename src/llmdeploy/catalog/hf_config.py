"""Parse a Hugging Face ``config.json`` into an
:class:`~llmdeploy.catalog.architecture.Architecture`.

Supported ``model_type`` values are listed in :data:`TEXT_TYPES`, the hybrid attention /
state-space types in :mod:`llmdeploy.catalog.hybrids` and the multimodal wrappers in
:data:`WRAPPER_TYPES`. Defaults are the ones the ``transformers`` config classes document (e.g.
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

from llmdeploy.catalog import families
from llmdeploy.catalog.architecture import Architecture, Encoder, count_params
from llmdeploy.catalog.encoders import vision_encoder
from llmdeploy.catalog.hybrids import HYBRID_TYPES, hybrid_fields
from llmdeploy.catalog.quant import quant_from_config, refuse
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
    "gemma3_text": (True, False, 4, True),
    "gemma4_text": (True, False, 4, True),
    "phi3": (False, False, 2, False),
    "granite": (False, False, 2, False),
    "deepseek_v2": (False, False, 2, False),
    "deepseek_v3": (False, False, 2, False),
    "gpt_oss": (False, True, 2, False),
    "llama4_text": (False, False, 2, False),
    "mllama": (False, False, 2, False),
    "jamba": (False, False, 2, False),
    "granitemoehybrid": (False, False, 2, False),
    "nemotron_h": (False, False, 1, False),
    "qwen3_next": (False, False, 2, True),
}
# text model_type of multimodal checkpoints -> the text type it is sized as
TEXT_ALIASES = {
    "qwen2_5_vl": "qwen2",
    "qwen2_5_vl_text": "qwen2",
    "qwen3_vl": "qwen3",
    "qwen3_vl_text": "qwen3",
    "qwen3_vl_moe": "qwen3_moe",
    "qwen3_vl_moe_text": "qwen3_moe",
    "gemma3": "gemma3_text",
    "gemma4": "gemma4_text",
    "kimi_vl": "deepseek_v3",
}
WRAPPER_TYPES = {
    "mistral3",
    "llama4",
    "llava",
    "llava_next",
    "gemma3",
    "gemma4",
    "qwen2_5_vl",
    "qwen3_vl",
    "qwen3_vl_moe",
    "mllama",
    "kimi_vl",
}
# refused with the reason (no verified layout)
REFUSED_TYPES = {
    "gemma3n": "Gemma 3n's AltUp / LAuReL layers and its audio tower are not modelled",
}


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


def _model_name(cfg: Mapping[str, Any], path: Path) -> str:
    """``_name_or_path``, else the directory of a ``config.json`` (a Hub snapshot), else the
    file's own name (``openai--gpt-oss-20b.json`` -> ``openai--gpt-oss-20b``)."""
    named = cfg.get("_name_or_path")
    if isinstance(named, str) and named.strip():
        return named.strip()
    if path.name == "config.json" and path.parent.name:
        return path.parent.name
    return path.stem


def load_config_file(path: Path) -> Architecture:
    """Read ``path`` (a config.json) and parse it; unreadable or unsupported -> refused.

    A ModelOpt checkpoint's ``hf_quant_config.json`` beside it supplies the quantization when
    the config has none (vLLM reads it the same way)."""
    cfg = _read_json(path)
    if "quantization_config" not in cfg:
        sidecar = path.with_name("hf_quant_config.json")
        if sidecar.is_file():
            quant = _read_json(sidecar)
            cfg = {**cfg, "quantization_config": {"quant_method": "modelopt", **quant}}
    name = _model_name(cfg, path)
    return architecture_from_config(cfg, name=name, hf_id=name, source=str(path), file=str(path))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise refuse(f"model config not found: {path}", str(path)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise refuse(f"cannot read model config {path}: {exc}", str(path)) from None
    if not isinstance(cfg, dict):
        raise refuse(f"{path.name} is not a JSON object", str(path))
    return cfg


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
    if mt == "gemma3_text" and window:  # HF Gemma3TextConfig: global iff (i + 1) % pattern == 0
        pattern = int(cfg.get("sliding_window_pattern") or 6)
        kinds = tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(layers))
        return kinds, int(window), None
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


def _text_config(top: Mapping[str, Any], wrapper: str, file: str) -> Mapping[str, Any]:
    """The language model's config of a multimodal checkpoint (nested ``text_config``, or the
    top level for configs that keep the text fields there, e.g. Qwen2.5-VL)."""
    if wrapper not in WRAPPER_TYPES:
        raise refuse(
            f"multimodal model_type {wrapper!r} is not supported for sizing",
            file,
            hint=f"supported wrappers: {', '.join(sorted(WRAPPER_TYPES))}",
        )
    text = top.get("text_config")
    cfg: dict[str, Any] = dict(text) if isinstance(text, Mapping) else dict(top)
    cfg.pop("vision_config", None)
    cfg.setdefault("model_type", wrapper)
    if "tie_word_embeddings" in top:
        cfg.setdefault("tie_word_embeddings", top["tie_word_embeddings"])
    for key in ("torch_dtype", "dtype", "quantization_config"):
        if key in top:
            cfg.setdefault(key, top[key])
    return cfg


def architecture_from_config(
    config: Mapping[str, Any], *, name: str, hf_id: str, source: str, file: str
) -> Architecture:
    top = config
    wrapper = str(top.get("model_type", ""))
    archs = tuple(str(a) for a in top.get("architectures") or ())
    if wrapper in REFUSED_TYPES:
        raise refuse(f"model_type {wrapper!r} is not supported: {REFUSED_TYPES[wrapper]}", file)
    multimodal = "text_config" in top or "vision_config" in top
    cfg = _text_config(top, wrapper, file) if multimodal else top
    mt = str(cfg.get("model_type", ""))
    mt = TEXT_ALIASES.get(mt, mt)
    if wrapper == "llama4" and mt in {"", "llama4"}:
        mt = "llama4_text"
    if mt not in TEXT_TYPES:
        raise refuse(
            f"model_type {mt or wrapper!r} (architectures {list(archs)}) is not supported: the "
            "calculator models only architectures whose weight and KV layout it knows",
            file,
            hint=f"supported model_type: {', '.join(sorted(TEXT_TYPES))}",
        )
    tie_default, qkv_bias, norms, qk_norm = TEXT_TYPES[mt]
    f = _Fields(cfg, file, "text_config." if cfg is not top else "")
    h, layers = f.need("hidden_size"), f.need("num_hidden_layers")
    heads, vocab = f.need("num_attention_heads"), f.need("vocab_size")
    max_pos = f.opt("max_position_embeddings", default=families.MAX_POSITION_DEFAULTS.get(mt, 0))
    if max_pos <= 0:
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
            mtp_layers=f.opt("num_nextn_predict_layers"),
        )
        kv_heads, head_dim = heads, fields["qk_nope_head_dim"] + fields["qk_rope_head_dim"]
    inter = 0
    kinds: tuple[str, ...] = ()
    window = chunk = None
    if mt in HYBRID_TYPES:
        fields.update(hybrid_fields(mt, cfg, f))
        layers = fields.pop("num_hidden_layers_override", layers)
        kinds = fields.pop("layer_attention")
        inter = f.opt("intermediate_size")
    else:
        inter = _moe_fields(mt, cfg, f, layers, fields)
        kinds, window, chunk = _layer_attention(mt, cfg, layers, notes)
    if mt == "gemma4_text":
        fields.update(families.gemma4_fields(cfg, f, kinds, heads, kv_heads, head_dim, inter))
    if mt == "mllama":
        kinds = families.mllama_kinds(cfg, layers)
        vocab += 8  # MllamaForConditionalGeneration: embed_tokens holds vocab_size + 8 rows
    encoders: tuple[Encoder, ...] = ()
    vision_cfg = top.get("vision_config") if multimodal else None
    if isinstance(vision_cfg, Mapping):
        encoder, problems = vision_encoder(vision_cfg, wrapper, h, file, top)
        f.problems.extend(problems)
        encoders = (encoder,) if encoder is not None else ()
    if f.problems:
        raise UnknownArchitectureError(f.problems)
    quant_cfg = cfg.get("quantization_config")
    quant = quant_from_config(quant_cfg, file, layers) if isinstance(quant_cfg, Mapping) else None
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    rotary, ropes = families.rope_caches(mt, cfg, max_pos, head_dim, fields)
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
        encoders=encoders,
        rope_caches=ropes,
        cross_attention_tokens=encoders[0].tokens_per_item if mt == "mllama" and encoders else 0,
        quantization=quant,
        source=source,
        notes=tuple(notes),
        **fields,
    )
    if mt == "llama4_text":  # L2 qk-norm without weights; no params
        arch = dataclasses.replace(arch, qk_norm=False)
    total, active = count_params(arch)
    return dataclasses.replace(arch, total_params=total, active_params=active)


def _moe_fields(
    mt: str, cfg: Mapping[str, Any], f: _Fields, layers: int, fields: dict[str, Any]
) -> int:
    """MoE geometry into ``fields``; returns the dense MLP width."""
    experts = f.opt("num_local_experts", "num_experts", "n_routed_experts")
    if mt == "gemma4_text" and not cfg.get("enable_moe_block"):
        experts = 0
    if not experts:
        return f.need("intermediate_size")
    inter = 0
    moe_inter = (
        f.need("moe_intermediate_size")
        if mt in {"qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gemma4_text"}
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
    elif mt == "gemma4_text":  # a dense MLP beside the experts in every layer
        inter = f.need("intermediate_size")
    step = f.opt("decoder_sparse_step", default=1) if mt in {"qwen2_moe", "qwen3_moe"} else 1
    if step > 1 or cfg.get("mlp_only_layers"):
        only = set(cfg.get("mlp_only_layers") or [])
        dense = sum(1 for i in range(layers) if i in only or (i + 1) % step != 0)
        inter = f.need("intermediate_size")
    fields.update(
        num_experts=experts,
        experts_per_token=f.need("num_experts_per_tok", "top_k_experts"),
        moe_intermediate_size=moe_inter,
        shared_expert_intermediate_size=shared,
        dense_layers=dense,
        expert_bias=mt == "gpt_oss",
    )
    return inter
