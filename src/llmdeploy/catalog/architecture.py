"""What the sizing stage knows of a model: its geometry (:class:`Architecture`), how its
checkpoint stores quantized weights (:class:`CheckpointQuant`), and parameter counts from both.

Built from the packaged catalog or a local ``config.json`` (:mod:`llmdeploy.catalog.models`,
:mod:`llmdeploy.catalog.hf_config`); pure data and arithmetic here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckpointQuant:
    """How the checkpoint stores its quantized weights (from ``quantization_config``)."""

    method: str  # fp8 | fp8-block | int8 | awq | gptq | w4a16 | nvfp4 | mxfp4
    weight_bits: int
    group_size: int | None  # AWQ/GPTQ/W4A16 group, fp8 block edge, mx/nv block
    bytes_per_weight: float  # payload + group/block scales and zeros, per weight element
    per_channel_scale_bytes: int  # bytes per output channel (per-channel scales), else 0
    experts_only: bool  # mxfp4: only MoE experts are quantized
    quantize_lm_head: bool = False
    quantize_vision: bool = False
    label: str = ""
    quant_method: str = ""  # config.json quant_method as vLLM names it (compressed-tensors, awq)


@dataclass(frozen=True)
class Architecture:
    """Shapes the calculator needs. Parameter counts are computed from them."""

    name: str
    hf_id: str
    model_type: str
    architectures: tuple[str, ...]
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width (0 when every layer is MoE)
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    rotary_dim: int
    torch_dtype: str
    qkv_bias: bool = False
    o_bias: bool = False
    norms_per_layer: int = 2
    qk_norm: bool = False
    # Mixture of experts
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0  # total width of the always-on shared experts
    dense_layers: int = 0  # layers with a dense MLP instead of experts (MoE models)
    expert_bias: bool = False
    # Multi-head latent attention (DeepSeek V2/V3)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0  # 0 = not MLA
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # Attention pattern, one entry per layer: "full" | "sliding" | "chunked"
    layer_attention: tuple[str, ...] = ()
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    vision_params: int = 0
    quantization: CheckpointQuant | None = None
    total_params: int = 0
    active_params: int = 0
    source: str = ""
    notes: tuple[str, ...] = ()

    @property
    def layers(self) -> int:
        return self.num_layers

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads

    @property
    def vocab(self) -> int:
        return self.vocab_size

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.dense_layers if self.is_moe else 0

    @property
    def total_params_b(self) -> float:
        return self.total_params / 1e9

    @property
    def hybrid(self) -> bool:
        return any(kind != "full" for kind in self.layer_attention)


# --- parameter counts ------------------------------------------------------------------------


def attention_params(a: Architecture) -> int:
    """Attention weights (and biases) of one layer."""
    h = a.hidden_size
    if a.is_mla:
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        heads = a.num_attention_heads
        q = (
            (h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * heads * qk)
            if a.q_lora_rank
            else (h * heads * qk)
        )
        kv_a = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
        kv_b = a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim)
        return q + kv_a + kv_b + heads * a.v_head_dim * h
    q_dim = a.num_attention_heads * a.head_dim
    kv_dim = a.num_kv_heads * a.head_dim
    total = h * q_dim + 2 * h * kv_dim + q_dim * h
    if a.qkv_bias:
        total += q_dim + 2 * kv_dim
    if a.o_bias:
        total += h
    if a.qk_norm:
        total += 2 * a.head_dim
    return total


def mlp_params(a: Architecture, width: int) -> int:
    """A gated MLP (gate, up, down) of the given intermediate width."""
    return 3 * a.hidden_size * width


def expert_params(a: Architecture) -> int:
    """Routed experts of one MoE layer (all resident), with biases where the model has them."""
    per = mlp_params(a, a.moe_intermediate_size)
    if a.expert_bias:
        per += 2 * a.moe_intermediate_size + a.hidden_size
    return a.num_experts * per


def router_params(a: Architecture) -> int:
    return a.hidden_size * a.num_experts + (a.num_experts if a.expert_bias else 0)


def count_params(a: Architecture) -> tuple[int, int]:
    """(total, active) parameters; active counts top-k experts and both embeddings."""
    h = a.hidden_size
    embed = a.vocab_size * h * (1 if a.tie_word_embeddings else 2) + h
    per_layer_common = attention_params(a) + a.norms_per_layer * h
    total = embed + a.vision_params + a.num_layers * per_layer_common
    active = total
    dense_mlp = mlp_params(a, a.intermediate_size)
    if a.is_moe:
        shared = mlp_params(a, a.shared_expert_intermediate_size)
        if a.shared_expert_intermediate_size and a.model_type == "qwen2_moe":
            shared += h  # shared_expert_gate
        moe = expert_params(a) + router_params(a) + shared
        moe_active = (
            moe - expert_params(a) + expert_params(a) * a.experts_per_token // max(1, a.num_experts)
        )
        total += a.dense_layers * dense_mlp + a.moe_layers * moe
        active += a.dense_layers * dense_mlp + a.moe_layers * moe_active
    else:
        total += a.num_layers * dense_mlp
        active += a.num_layers * dense_mlp
    return total, active
