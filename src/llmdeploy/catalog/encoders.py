"""Multimodal encoders of a ``config.json``: parameters of each vision tower and its projector,
and the size of the largest item vLLM's profiling run feeds it.

Parameter shapes follow vLLM's (or, where vLLM wraps the Hugging Face module, transformers')
modules of the named tower; token counts the processor defaults vLLM's dummy inputs use
(``docs/sizing.md`` §5 cites each). A tower not listed here is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmdeploy.catalog.architecture import Encoder
from llmdeploy.errors import Diagnostic

# wrapper model_type -> vision tower model_types it is known with
VISION_TYPES = {
    "pixtral",
    "llama4_vision_model",
    "clip_vision_model",
    "siglip_vision_model",
    "qwen2_5_vl",
    "qwen3_vl",
    "qwen3_vl_moe",
    "gemma4_vision",
    "moonvit",
    "mllama",
}
# towers vLLM can replicate per TP rank with --mm-encoder-tp-mode data
# (supports_encoder_tp_data: vllm/model_executor/models/{qwen2_5_vl,qwen3_vl,kimi_vl,mllama4}.py)
TP_DATA_WRAPPERS = {"qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "kimi_vl", "llama4"}
# Qwen2.5-VL / Qwen3-VL processors' default max_pixels (12845056 = 3584 x 3584 px): the largest
# dummy image, 16384 tokens after the 2x2 merge (vLLM issue #34209: encoder budget 16384)
QWEN_VL_MAX_PIXELS = 12_845_056


class _Reader:
    def __init__(self, cfg: Mapping[str, Any], file: str, prefix: str) -> None:
        self.cfg, self.file, self.prefix = cfg, file, prefix
        self.problems: list[Diagnostic] = []

    def need(self, *keys: str) -> int:
        for key in keys:
            value = self.cfg.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        shown = " / ".join(self.prefix + k for k in keys)
        self.problems.append(
            Diagnostic(f"config field {shown} is missing or not a positive integer", file=self.file)
        )
        return 1

    def opt(self, key: str, default: int) -> int:
        value = self.cfg.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else default


def _vit_layer(h: int, inter: int, *, gated: bool, bias: bool, layernorm: bool) -> int:
    """One ViT block: q/k/v/o, the MLP (gated: gate/up/down), two norms."""
    attn = 4 * h * h + (4 * h if bias else 0)
    mlp = (3 if gated else 2) * h * inter + ((2 * inter + h) if gated else (inter + h)) * bias
    norms = (4 if layernorm else 2) * h
    return attn + mlp + norms


def _llava_next(
    v: Mapping[str, Any],
    top: Mapping[str, Any],
    f: _Reader,
    tower: int,
    h: int,
    th: int,
    image: int,
    side: int,
) -> tuple[int, int, int, int]:
    """LLaVA-NeXT (Granite Vision): the tower up to its deepest feature layer, a projector over
    the concatenated feature layers, and the image of the most features among the grid
    pinpoints (vllm/model_executor/models/llava_next.py@v0.24.0: ``get_num_image_tokens`` =
    base features + unpadded grid features + one newline per grid row;
    ``get_image_size_with_most_features`` tries every pinpoint; ``llava.py``
    ``_get_num_hidden_layers``: layers past the deepest feature layer are not loaded)."""
    layers = f.need("num_hidden_layers")
    feats = top.get("vision_feature_layer", -1)
    feats = feats if isinstance(feats, list) else [feats]
    idx = [int(x) + layers + 1 if int(x) < 0 else int(x) for x in feats]
    loaded = max(1, min(layers, max(idx)))
    per_layer = _vit_layer(h, f.need("intermediate_size"), gated=False, bias=True, layernorm=True)
    tower -= (layers - loaded) * per_layer
    # two-layer GELU MLP over the concatenated layers, plus the learned image_newline vector
    projector = len(idx) * h * th + th + th * th + th + th
    cls = 0 if str(v.get("model_type")) == "siglip_vision_model" else 1
    strategy = str(top.get("vision_feature_select_strategy", "default"))
    base = side * side + (cls if strategy == "full" else 0)
    best = (base, side * side)
    for pin in top.get("image_grid_pinpoints") or [[image, image]]:
        ph, pw = int(pin[0]), int(pin[1])
        rows, cols = (ph // image) * side, (pw // image) * side
        tiles = (ph // image) * (pw // image)
        cand = (base + rows * cols + rows, (1 + tiles) * side * side)
        best = max(best, cand)
    return tower, projector, best[0], best[1]


def vision_encoder(
    v: Mapping[str, Any], wrapper: str, text_hidden: int, file: str, top: Mapping[str, Any]
) -> tuple[Encoder | None, list[Diagnostic]]:
    """The vision tower of ``vision_config`` ``v`` under wrapper ``wrapper``."""
    vtype = str(v.get("model_type", "")) or wrapper
    if wrapper in ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "kimi_vl", "mllama"):
        vtype = {"kimi_vl": "moonvit"}.get(wrapper, wrapper)
    if vtype not in VISION_TYPES:
        return None, [
            Diagnostic(
                f"vision tower model_type {vtype!r} is not supported for sizing "
                f"(supported: {', '.join(sorted(VISION_TYPES))})",
                file=file,
            )
        ]
    f = _Reader(v, file, "vision_config.")
    h = f.need("hidden_size")
    inter = f.need("intermediate_size")
    layers = f.need("num_hidden_layers", "depth")
    patch = f.need("patch_size")
    channels = f.opt("num_channels", 3)
    th = text_hidden
    tokens = patches = 0
    if vtype == "pixtral":  # gated FFN, no biases, RMSNorm (vllm/model_executor/models/pixtral.py)
        tower = layers * _vit_layer(h, inter, gated=True, bias=False, layernorm=False)
        tower += channels * patch * patch * h + h
        merge = int(top.get("spatial_merge_size", 2))
        side = f.need("image_size") // patch
        patches, tokens = side * side, (side // merge) * (side // merge + 1)  # + [IMG_BREAK]s
        projector = h * merge * merge * h + h * th + th * th + h
    elif vtype in ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"):
        merge = f.opt("spatial_merge_size", 2)
        temporal = f.opt("temporal_patch_size", 2)
        out = f.opt("out_hidden_size", th)
        wide = h * merge * merge
        if vtype == "qwen2_5_vl":  # gated SiLU MLP with biases, RMSNorm (qwen2_5_vl.py)
            tower = layers * _vit_layer(h, inter, gated=True, bias=True, layernorm=False)
            tower += channels * temporal * patch * patch * h
            projector = h + wide * wide + wide + wide * out + out
        else:  # GELU MLP, LayerNorm, learned positions; deepstack mergers (qwen3_vl.py)
            tower = layers * _vit_layer(h, inter, gated=False, bias=True, layernorm=True)
            tower += channels * temporal * patch * patch * h + h
            tower += f.opt("num_position_embeddings", 2304) * h
            merger = wide * wide + wide + wide * out + out
            deep = len(v.get("deepstack_visual_indexes") or [])
            projector = (2 * h + merger) + deep * (2 * wide + merger)
        pixels_per_token = (patch * merge) ** 2
        tokens = QWEN_VL_MAX_PIXELS // pixels_per_token
        patches = tokens * merge * merge
    elif vtype == "gemma4_vision":  # HF module, replicated on every rank (gemma4_mm.py)
        tower = layers * (_vit_layer(h, inter, gated=True, bias=False, layernorm=False) + 2 * h)
        tower += 3 * patch * patch * h + 2 * f.opt("position_embedding_size", 10240) * h
        projector = h * th
        tokens = int(top.get("vision_soft_tokens_per_image") or v.get("default_output_length") or 0)
        pool = f.opt("pooling_kernel_size", 3)
        patches = tokens * pool * pool
    elif vtype == "moonvit":  # Kimi-VL MoonViT: GELU MLP, LayerNorm, learned 2-D positions
        tower = layers * _vit_layer(h, inter, gated=False, bias=True, layernorm=True)
        tower += channels * patch * patch * h + h + 2 * h
        tower += f.opt("init_pos_emb_height", 64) * f.opt("init_pos_emb_width", 64) * h
        wide = h * 4  # merge_kernel_size 2x2
        projector = 2 * h + wide * wide + wide + wide * th + th
    elif vtype == "mllama":  # 32 local + 8 global layers (gated), tiled positions (mllama.py)
        globals_ = f.opt("num_global_layers", 8)
        per = _vit_layer(h, inter, gated=False, bias=True, layernorm=True)
        tower = (layers + globals_) * per + globals_ * 2
        tiles = f.opt("max_num_tiles", 4)
        side = f.need("image_size") // patch
        patches = side * side + 1
        tower += channels * patch * patch * h + (patches + 1) * h + 8 * tiles * patches * h
        tower += 2 * 8 * tiles * h + 4 * h
        projector = f.opt("vision_output_dim", 7680) * th + th
        tokens, patches = tiles * patches, tiles * patches
    else:  # CLIP/SigLIP/Llama-4 ViT: biased attention and fc1/fc2, LayerNorm with bias
        image = f.need("image_size")
        tower = layers * _vit_layer(h, inter, gated=False, bias=True, layernorm=True)
        side = image // patch
        positions = side * side + (1 if vtype != "siglip_vision_model" else 0)
        tower += channels * patch * patch * h + positions * h + 4 * h
        patches = side * side
        if wrapper == "mistral3":
            merge = int(top.get("spatial_merge_size", 2))
            projector = h * merge * merge * h + h * th + th * th + h
        elif wrapper == "llama4":
            ratio = float(v.get("pixel_shuffle_ratio", 0.5))
            shuffled = int(h / (ratio * ratio))
            proj_in = f.need("projector_input_dim")
            proj_out = f.need("projector_output_dim")
            out = f.need("vision_output_dim")
            projector = shuffled * proj_in + proj_out * out + out * th + h  # + class emb
            patches = 0  # tiles per image are the processor's choice: budget-sized
        elif wrapper == "llava_next":
            tower, projector, tokens, patches = _llava_next(v, top, f, tower, h, th, image, side)
        elif wrapper == "gemma3":  # RMSNorm + one projection after 4x4 average pooling
            projector = h + h * th
            tokens = int(top.get("mm_tokens_per_image") or 256)
        else:  # llava: 2-layer MLP projector with biases
            projector = h * th + th + th * th + th
            tokens = patches
    if f.problems:
        return None, f.problems
    encoder = Encoder(
        modality="image",
        model_type=vtype,
        params=tower + projector,
        hidden=h,
        intermediate=inter,
        layers=layers,
        patches_per_item=patches,
        tokens_per_item=tokens,
        tp_data_mode=wrapper in TP_DATA_WRAPPERS,
        replicated=vtype == "gemma4_vision",
    )
    return encoder, []
