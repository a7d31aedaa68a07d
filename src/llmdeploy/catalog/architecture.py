"""What the sizing stage knows of a model: its geometry (:class:`Architecture`), how its
checkpoint stores quantized weights (:class:`CheckpointQuant`), and parameter counts from both.

Built from the packaged catalog or a local ``config.json`` (:mod:`llmdeploy.catalog.models`,
:mod:`llmdeploy.catalog.hf_config`); pure data and arithmetic here.
"""

from __future__ import annotations

from dataclasses import dataclass

# Weight classes a checkpoint may quantize. Norms, routers and the input embedding always stay
# 16-bit in vLLM; "mlp" is the dense MLP and the shared experts.
COMPONENTS = ("attention", "mlp", "experts", "lm_head", "vision")


@dataclass(frozen=True)
class CheckpointQuant:
    """How the checkpoint stores its quantized weights (from ``quantization_config``)."""

    method: str  # fp8 | fp8-block | int8 | awq | gptq | w4a16 | nvfp4 | mxfp4 | bnb-4bit | ...
    weight_bits: int
    group_size: int | None  # AWQ/GPTQ/W4A16 group, fp8 block edge, mx/nv block
    bytes_per_weight: float  # payload + group/block scales and zeros, per weight element
    per_channel_scale_bytes: int = 0  # bytes per output channel (per-channel scales), else 0
    # fraction of each component left in 16-bit (ignore / exclude / not-convert lists); a
    # component absent from the mapping is fully quantized, except lm_head and vision, which
    # are 16-bit unless ``quantized_extra`` names them
    kept_16bit: tuple[tuple[str, float], ...] = ()
    quantized_extra: frozenset[str] = frozenset()
    per_input_bytes: int = 0  # bytes per input channel (GPTQ act-order g_idx), else 0
    label: str = ""
    quant_method: str = ""  # config.json quant_method as vLLM names it (compressed-tensors, awq)

    def quantized_fraction(self, component: str) -> float:
        """Share of ``component``'s weights stored quantized (0 = all 16-bit)."""
        if component in ("lm_head", "vision") and component not in self.quantized_extra:
            return 0.0
        return 1.0 - dict(self.kept_16bit).get(component, 0.0)

    @property
    def experts_only(self) -> bool:
        return all(self.quantized_fraction(c) == 0 for c in ("attention", "mlp"))


@dataclass(frozen=True)
class StateSpace:
    """The state-space mixer of hybrid models (vLLM ``mamba_utils``: state shapes per kind).

    mamba1 (Jamba): ``d_inner`` channels, ``d_state``, ``dt_rank``; mamba2 (Granite-4.0-H,
    Nemotron-H): ``n_heads`` x ``head_dim`` = ``d_inner``, ``n_groups`` B/C groups; gdn (Qwen3-Next
    Gated DeltaNet): ``n_groups`` key heads of ``d_state``, ``n_heads`` value heads of
    ``head_dim``."""

    kind: str  # mamba1 | mamba2 | gdn
    d_inner: int
    d_state: int
    d_conv: int
    n_heads: int = 0
    head_dim: int = 0
    n_groups: int = 1
    dt_rank: int = 0
    chunk_size: int = 256
    conv_bias: bool = True
    ssm_state_fp32: bool = False  # NemotronH: vLLM keeps the SSM state in fp32 by default
    prefix_caching: bool = True  # the model supports vLLM's mamba prefix caching ("all" mode)


@dataclass(frozen=True)
class Encoder:
    """A multimodal encoder (vision or audio tower with its projector)."""

    modality: str  # image | audio
    model_type: str
    params: int  # tower + projector
    hidden: int
    intermediate: int
    layers: int
    patches_per_item: int  # encoder sequence length of the largest item (dummy profiling input)
    tokens_per_item: int  # language-model tokens of the largest item
    tp_data_mode: bool = False  # vLLM can replicate it per TP rank (--mm-encoder-tp-mode data)
    replicated: bool = False  # a Hugging Face module vLLM does not shard (Gemma 3n/4 towers)


@dataclass(frozen=True)
class LayerShape:
    """One decoder layer as the weight and KV model sees it."""

    mixer: str  # full | sliding | chunked (attention), mamba, cross (cross-attention), none
    q_heads: int
    kv_heads: int
    head_dim: int
    mlp_width: int  # dense MLP intermediate width (0: none)
    moe: bool  # routed experts (+ shared experts) in this layer
    owns_kv: bool = True  # False: reuses an earlier layer's KV (Gemma 3n/4 KV sharing)

    @property
    def attention(self) -> bool:
        return self.mixer in ("full", "sliding", "chunked", "cross")


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
    gated_mlp: bool = True  # gate/up/down; False: up/down only (Nemotron-H relu2 MLPs)
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
    # Layer kind, one entry per layer: "full" | "sliding" | "chunked" (attention), "mamba"
    # (state-space mixer), "cross" (cross-attention), "none" (MLP-only layer)
    layer_attention: tuple[str, ...] = ()
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    # Per-layer shapes where layers differ beyond their kind (Gemma 4 global layers, KV
    # sharing, hybrids); () = derived from the fields above (:func:`layer_shapes`)
    layer_shape_list: tuple[LayerShape, ...] = ()
    ssm: StateSpace | None = None
    encoders: tuple[Encoder, ...] = ()
    # Rotary caches vLLM builds: elements (positions x rotary dim) of each distinct rotary
    # embedding; () = one cache of max_position_embeddings x rotary_dim
    rope_caches: tuple[int, ...] = ()
    per_layer_embedding: int = 0  # Gemma 3n/4 per-layer embedding table (vocab-parallel)
    extra_params: int = 0  # small per-model parameters counted once (PLE projections, ...)
    # Multi-token-prediction layers stored after the decoder (DeepSeek-V3/R1
    # num_nextn_predict_layers): in the checkpoint's files, not loaded by the served model
    mtp_layers: int = 0
    cross_attention_tokens: int = 0  # encoder tokens a cross-attention layer caches (mllama)
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
        return sum(1 for s in layer_shapes(self) if s.moe)

    @property
    def total_params_b(self) -> float:
        return self.total_params / 1e9

    @property
    def hybrid(self) -> bool:
        return any(kind != "full" for kind in self.layer_attention)

    @property
    def has_state_space(self) -> bool:
        return self.ssm is not None and "mamba" in self.layer_attention

    @property
    def vision_params(self) -> int:
        return sum(e.params for e in self.encoders)

    @property
    def multimodal(self) -> bool:
        return bool(self.encoders)

    @property
    def rope_cache_elements(self) -> int:
        return sum(self.rope_caches) or self.max_position_embeddings * self.rotary_dim


def layer_shapes(a: Architecture) -> tuple[LayerShape, ...]:
    """Every layer's shape: the parser's explicit list, or derived from the uniform fields
    (MoE models: the first ``dense_layers`` layers carry the dense MLP; only counts matter)."""
    if a.layer_shape_list:
        return a.layer_shape_list
    kinds = a.layer_attention or ("full",) * a.num_layers
    out = []
    for i, kind in enumerate(kinds):
        moe = a.is_moe and i >= a.dense_layers
        width = a.intermediate_size if not moe else 0
        out.append(LayerShape(kind, a.num_attention_heads, a.num_kv_heads, a.head_dim, width, moe))
    return tuple(out)


# --- parameter counts ------------------------------------------------------------------------


def attention_params(a: Architecture, shape: LayerShape | None = None) -> int:
    """Attention weights (and biases) of one layer (``shape``: its head counts)."""
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
    q_heads = shape.q_heads if shape else a.num_attention_heads
    kv_heads = shape.kv_heads if shape else a.num_kv_heads
    head_dim = shape.head_dim if shape else a.head_dim
    q_dim = q_heads * head_dim * (2 if a.model_type == "qwen3_next" else 1)  # + output gate
    o_dim = q_heads * head_dim
    kv_dim = kv_heads * head_dim
    total = h * q_dim + 2 * h * kv_dim + o_dim * h
    if a.qkv_bias:
        total += q_dim + 2 * kv_dim
    if a.o_bias:
        total += h
    if a.qk_norm:
        total += 2 * head_dim
    return total


def ssm_params(a: Architecture) -> int:
    """One state-space mixer layer: vLLM ``MambaMixer`` (mamba1, with Jamba's dt/B/C norms),
    ``MambaMixer2`` (mamba2) or Qwen3-Next's ``GatedDeltaNet`` (gdn)."""
    s, h = a.ssm, a.hidden_size
    if s is None:
        return 0
    di, ds = s.d_inner, s.d_state
    if s.kind == "mamba1":
        conv = di * s.d_conv + (di if s.conv_bias else 0)
        x_proj = di * (s.dt_rank + 2 * ds)
        dt_proj = s.dt_rank * di + di
        norms = s.dt_rank + 2 * ds
        return 2 * h * di + conv + x_proj + dt_proj + di * ds + di + di * h + norms
    if s.kind == "gdn":
        key = s.n_groups * ds
        in_proj = h * (2 * key + 2 * di) + h * 2 * s.n_heads
        conv = (2 * key + di) * s.d_conv
        return in_proj + conv + 2 * s.n_heads + s.head_dim + di * h
    conv_dim = di + 2 * s.n_groups * ds
    in_proj = h * (2 * di + 2 * s.n_groups * ds + s.n_heads)
    conv = conv_dim * s.d_conv + (conv_dim if s.conv_bias else 0)
    return in_proj + conv + 3 * s.n_heads + di + di * h


def mlp_params(a: Architecture, width: int) -> int:
    """An MLP of the given intermediate width: gate, up, down (or up, down)."""
    return (3 if a.gated_mlp else 2) * a.hidden_size * width


def expert_params(a: Architecture) -> int:
    """Routed experts of one MoE layer (all resident), with biases where the model has them."""
    per = mlp_params(a, a.moe_intermediate_size)
    if a.expert_bias:
        per += 2 * a.moe_intermediate_size + a.hidden_size
    return a.num_experts * per


def router_params(a: Architecture) -> int:
    return a.hidden_size * a.num_experts + (a.num_experts if a.expert_bias else 0)


def shared_gate_params(a: Architecture) -> int:
    """The sigmoid gate of the shared expert (Qwen2-MoE, Qwen3-Next): hidden -> 1."""
    if a.shared_expert_intermediate_size and a.model_type in ("qwen2_moe", "qwen3_next"):
        return a.hidden_size
    return 0


def count_params(a: Architecture) -> tuple[int, int]:
    """(total, active) parameters; active counts top-k experts and both embeddings."""
    h = a.hidden_size
    embed = a.vocab_size * h * (1 if a.tie_word_embeddings else 2) + h
    total = embed + a.vision_params + a.per_layer_embedding + a.extra_params
    active = total
    ssm = ssm_params(a)
    moe_common = router_params(a) + mlp_params(a, a.shared_expert_intermediate_size)
    moe_common += shared_gate_params(a)
    routed = expert_params(a)
    routed_active = routed * a.experts_per_token // max(1, a.num_experts)
    for shape in layer_shapes(a):
        layer = a.norms_per_layer * h + mlp_params(a, shape.mlp_width)
        if shape.attention:
            layer += attention_params(a, shape)
        elif shape.mixer == "mamba":
            layer += ssm
        total += layer
        active += layer
        if shape.moe:
            total += moe_common + routed
            active += moe_common + routed_active
    return total, active
