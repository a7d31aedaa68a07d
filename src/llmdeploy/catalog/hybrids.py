"""Hybrid attention / state-space models of a ``config.json``: which layers are attention and
which a state-space mixer, the mixer's geometry, and each layer's MLP.

Field names and defaults are the transformers config classes' (``JambaConfig``,
``GraniteMoeHybridConfig``, ``NemotronHConfig``, ``Qwen3NextConfig``); the state vLLM keeps per
sequence follows ``vllm/model_executor/layers/mamba/mamba_utils.py`` (``docs/sizing.md`` §4).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

from llmdeploy.catalog.architecture import LayerShape, StateSpace

HYBRID_TYPES = {"jamba", "granitemoehybrid", "nemotron_h", "qwen3_next"}
# Nemotron-H's hybrid_override_pattern characters (transformers NemotronHConfig._pattern_to_list)
_PATTERN = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_BLOCK_NAMES = {
    "mamba": "mamba",
    "linear_attention": "mamba",
    "attention": "attention",
    "full_attention": "attention",
    "mlp": "mlp",
    "moe": "moe",
}


class Fields(Protocol):
    def need(self, *keys: str) -> int: ...

    def opt(self, *keys: str, default: int = 0) -> int: ...


def hybrid_fields(mt: str, cfg: Mapping[str, Any], f: Fields) -> dict[str, Any]:
    """Architecture fields of a hybrid model (layer kinds and shapes, the state-space mixer,
    MoE widths); ``f`` reads and validates config fields."""
    h, layers = f.need("hidden_size"), f.need("num_hidden_layers")
    heads = f.need("num_attention_heads")
    kv = f.opt("num_key_value_heads", default=heads)
    head_dim = f.opt("head_dim", default=h // heads)
    out: dict[str, Any] = {}
    if mt == "qwen3_next":
        interval = f.opt("full_attention_interval", default=4)
        kinds = ["full" if (i + 1) % interval == 0 else "mamba" for i in range(layers)]
        ssm = StateSpace(
            "gdn",
            d_inner=f.need("linear_num_value_heads") * f.need("linear_value_head_dim"),
            d_state=f.need("linear_key_head_dim"),
            d_conv=f.opt("linear_conv_kernel_dim", default=4),
            n_heads=f.need("linear_num_value_heads"),
            head_dim=f.need("linear_value_head_dim"),
            n_groups=f.need("linear_num_key_heads"),
            chunk_size=64,
            conv_bias=False,
            prefix_caching=False,  # not a SupportsMambaPrefixCaching model (vLLM 0.24.0)
        )
        moe = [True] * layers
        width = [0] * layers
        out.update(
            num_experts=f.need("num_experts"),
            experts_per_token=f.need("num_experts_per_tok"),
            moe_intermediate_size=f.need("moe_intermediate_size"),
            shared_expert_intermediate_size=f.opt("shared_expert_intermediate_size"),
        )
    elif mt == "jamba":
        a_period, a_off = (
            f.opt("attn_layer_period", default=8),
            f.opt("attn_layer_offset", default=4),
        )
        e_period = f.opt("expert_layer_period", default=2)
        e_off = f.opt("expert_layer_offset", default=1)
        kinds = ["full" if i % a_period == a_off else "mamba" for i in range(layers)]
        experts = f.opt("num_experts", default=16)
        moe = [experts > 1 and i % e_period == e_off for i in range(layers)]
        inter = f.need("intermediate_size")
        width = [0 if m else inter for m in moe]
        expand = f.opt("mamba_expand", default=2)
        rank = cfg.get("mamba_dt_rank", "auto")
        ssm = StateSpace(
            "mamba1",
            d_inner=expand * h,
            d_state=f.opt("mamba_d_state", default=16),
            d_conv=f.opt("mamba_d_conv", default=4),
            dt_rank=math.ceil(h / 16) if rank == "auto" else int(rank),
            chunk_size=2048,  # vLLM ModelConfig.get_mamba_chunk_size: mamba1 default
            conv_bias=bool(cfg.get("mamba_conv_bias", True)),
        )
        if any(moe):
            out.update(
                num_experts=experts,
                experts_per_token=f.opt("num_experts_per_tok", default=2),
                moe_intermediate_size=inter,
            )
    elif mt == "granitemoehybrid":
        types = cfg.get("layer_types") or ["mamba"] * layers
        kinds = ["full" if _BLOCK_NAMES.get(str(t)) == "attention" else "mamba" for t in types]
        experts = f.opt("num_local_experts", default=8)
        moe = [experts > 0] * layers
        shared = f.opt("shared_intermediate_size", default=1024)
        width = [shared if experts == 0 else 0] * layers
        expand = f.opt("mamba_expand", default=2)
        n_heads = f.opt("mamba_n_heads", default=128)
        ssm = StateSpace(
            "mamba2",
            d_inner=expand * h,
            d_state=f.opt("mamba_d_state", default=256),
            d_conv=f.opt("mamba_d_conv", default=4),
            n_heads=n_heads,
            head_dim=f.opt("mamba_d_head", default=expand * h // n_heads),
            n_groups=f.opt("mamba_n_groups", default=1),
            chunk_size=f.opt("mamba_chunk_size", default=256),
            conv_bias=bool(cfg.get("mamba_conv_bias", True)),
        )
        if experts:
            out.update(
                num_experts=experts,
                experts_per_token=f.opt("num_experts_per_tok", default=2),
                moe_intermediate_size=f.need("intermediate_size"),
                shared_expert_intermediate_size=shared,
            )
    else:  # nemotron_h: one block per layer, M / * / - / E
        pattern = cfg.get("hybrid_override_pattern")
        if isinstance(pattern, str) and pattern:
            blocks = [_PATTERN.get(c, "mlp") for c in pattern]
        else:
            raw = cfg.get("layers_block_type") or cfg.get("layer_types") or []
            blocks = [_BLOCK_NAMES.get(str(t), "mlp") for t in raw]
        layers = len(blocks) or layers
        kinds = [{"mamba": "mamba", "attention": "full"}.get(b, "none") for b in blocks]
        moe = [b == "moe" for b in blocks]
        inter = f.opt("intermediate_size", default=21504)
        width = [inter if b == "mlp" else 0 for b in blocks]
        n_heads = f.opt("mamba_num_heads", default=128)
        d_head = f.opt("mamba_head_dim", default=64)
        ssm = StateSpace(
            "mamba2",
            d_inner=n_heads * d_head,
            d_state=f.opt("ssm_state_size", default=128),
            d_conv=f.opt("conv_kernel", default=4),
            n_heads=n_heads,
            head_dim=d_head,
            n_groups=f.opt("n_groups", default=8),
            chunk_size=f.opt("chunk_size", default=128),
            conv_bias=bool(cfg.get("use_conv_bias", True)),
            # NemotronHForCausalLMConfig: fp32 SSM state unless the config says otherwise
            ssm_state_fp32=str(cfg.get("mamba_ssm_cache_dtype") or "float32") == "float32",
        )
        out.update(num_hidden_layers_override=layers, gated_mlp=False)
        if any(moe):
            out.update(
                num_experts=f.need("n_routed_experts", "num_local_experts"),
                experts_per_token=f.opt("num_experts_per_tok", default=2),
                moe_intermediate_size=f.need("moe_intermediate_size"),
                shared_expert_intermediate_size=f.opt("n_shared_experts", default=1)
                * f.opt("moe_shared_expert_intermediate_size", default=0),
            )
    shapes = tuple(
        LayerShape(kind, heads, kv, head_dim, w, m)
        for kind, w, m in zip(kinds, width, moe, strict=True)
    )
    out.update(layer_attention=tuple(kinds), layer_shape_list=shapes, ssm=ssm)
    return out
