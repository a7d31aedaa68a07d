"""The per-GPU memory model: weight bytes, KV bytes and groups, activation peak, non-torch memory.

Pure arithmetic over an :class:`~llmdeploy.catalog.architecture.Architecture`. Formulas, their
sources and the calibration residuals are in ``docs/sizing.md``; the short tags below point at
``shared/reference/vllm.md`` sections.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from llmdeploy.catalog.architecture import (
    Architecture,
    CheckpointQuant,
    LayerShape,
    layer_shapes,
    shared_gate_params,
    ssm_params,
)
from llmdeploy.sizing.allocator import load_block_bytes
from llmdeploy.sizing.mxfp4 import triton_hopper_tensors

GIB = 1 << 30
DTYPE_BYTES = 2  # vLLM dtype "auto" runs fp32 checkpoints in 16-bit too (vllm.md §3)


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of the compute dtype (``--dtype``); "auto" is 16-bit."""
    return 4 if dtype in ("float32", "float") else DTYPE_BYTES


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# --- quantization ----------------------------------------------------------------------------

REQUESTED_QUANT: dict[str, CheckpointQuant] = {
    # --quantization fp8 on a 16-bit checkpoint: Linear (and expert) weights to fp8 e4m3 with a
    # per-tensor scale; embeddings and lm_head stay 16-bit (vllm.md §3, calibration 8.49 GiB)
    "fp8": CheckpointQuant("fp8", 8, None, 1.0, label="fp8 (runtime)"),
    # int8 W8A8 checkpoint (compressed-tensors / SmoothQuant): 1 B + fp32 per-channel scale
    "int8": CheckpointQuant("int8", 8, None, 1.0, 4, label="int8 W8A8 checkpoint"),
    # AWQ / GPTQ int4, group 128: 0.5 + 2.5/g bytes (fp16 scale + packed zero, vllm.md §3)
    "int4-awq": CheckpointQuant("awq", 4, 128, 0.5 + 2.5 / 128, label="awq 4-bit g128"),
    "int4-gptq": CheckpointQuant("gptq", 4, 128, 0.5 + 2.5 / 128, label="gptq 4-bit g128"),
}
CHECKPOINT_MATCH = {
    "fp8": {"fp8", "fp8-block"},
    "int8": {"int8"},
    "int4-awq": {"awq", "w4a16"},
    "int4-gptq": {"gptq", "w4a16"},
}


def effective_quant(arch: Architecture, requested: str) -> tuple[CheckpointQuant | None, str]:
    """(scheme in effect, problem). A quantized checkpoint wins; a conflicting request fails."""
    ckpt = arch.quantization
    if ckpt is not None:
        if requested in ("none", "") or ckpt.method in CHECKPOINT_MATCH.get(requested, set()):
            return ckpt, ""
        return ckpt, (
            f"the checkpoint is already quantized ({ckpt.label}); vLLM refuses "
            f"quantization {requested!r} that differs from the checkpoint's"
        )
    if requested in ("none", ""):
        return None, ""
    return REQUESTED_QUANT[requested], ""


# --- weights ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sharding:
    """How one rank's share of the weights is cut.

    ``tp``: tensor-parallel degree (attention, dense MLP, embeddings); ``moe``: ranks the routed
    experts are spread over (TP x DP: vLLM flattens the MoE TP group over the data-parallel
    ranks, or places whole experts with --enable-expert-parallel); ``expert_parallel``: whole
    experts per rank instead of slices; ``mxfp4_align``: (intermediate, hidden) multiples the
    MXFP4 MoE kernel pads to; ``mxfp4_hopper_swizzle``: the experts are held in the Triton
    backend's Hopper layout (``sizing/mxfp4.py``) instead of as created, its values first
    padded to ``mxfp4_value_prepad``;
    ``parallel_embedding``: False for TensorRT-LLM's replicated input embedding;
    ``encoder_tp``: ranks the vision tower is split over (1: replicated);
    ``group_zero_bytes``: bytes per (group x output channel) zero point that the dense linear
    kernel keeps where it unpacks the checkpoint's packed zero points (None: as stored);
    ``load_max_split``: the caching allocator's ``max_split_size`` in bytes while the engine
    loads the weights, which makes the large weight tensors count as whole blocks
    (``allocator.load_block_bytes``; 0: counted as their size); ``rope_fp32``: the engine builds
    the rotary cache in float32 whatever the model dtype."""

    tp: int = 1
    moe: int = 0
    expert_parallel: bool = False
    mxfp4_align: tuple[int, int] = (128, 256)
    mxfp4_hopper_swizzle: bool = False
    mxfp4_value_prepad: int = 1
    parallel_embedding: bool = True
    encoder_tp: int = 0
    group_zero_bytes: float | None = None
    load_max_split: int = 0
    rope_fp32: bool = False

    @property
    def moe_ranks(self) -> int:
        return self.moe or self.tp

    def block(self, nbytes: float) -> float:
        """Bytes one weight tensor of ``nbytes`` counts for once loaded."""
        return load_block_bytes(nbytes, self.load_max_split) if self.load_max_split else nbytes

    def dense_quant(self, q: CheckpointQuant | None) -> CheckpointQuant | None:
        """The scheme as the dense (non-expert) linear layers hold it on the GPU."""
        if q is None or self.group_zero_bytes is None or not q.group_size:
            return q
        packed = q.weight_bits / 8  # the checkpoint's zero point, packed like the weights
        extra = (self.group_zero_bytes - packed) / q.group_size
        return dataclasses.replace(q, bytes_per_weight=q.bytes_per_weight + extra)


Block = Callable[[float], float]  # bytes of one tensor -> bytes it counts for once loaded


def _as_stored(nbytes: float) -> float:
    return nbytes


def _linear(
    inp: float,
    out: float,
    q: CheckpointQuant | None,
    share: float = 1.0,
    dt: int = 2,
    block: Block = _as_stored,
) -> float:
    """Bytes of an ``inp x out`` weight of which ``share`` is stored quantized. ``block``
    counts the weight tensor (16-bit, or the quantized payload without its scales and zeros)
    as the allocator holds it; a layer that is partly 16-bit is counted as stored."""
    full = inp * out * dt
    if q is None or share <= 0:
        return block(full)
    packed = inp * out * q.bytes_per_weight + out * q.per_channel_scale_bytes
    packed += inp * q.per_input_bytes
    if share >= 1:
        payload = inp * out * q.weight_bits / 8
        return packed + block(payload) - payload
    return share * packed + (1 - share) * full


def _mlp_bytes(
    inp: float,
    width: float,
    q: CheckpointQuant | None,
    share: float,
    dt: int,
    gated: bool,
    block: Block = _as_stored,
) -> float:
    """An MLP slice: the (merged gate and) up projection, then down."""
    return _linear(inp, (2 if gated else 1) * width, q, share, dt, block) + _linear(
        width, inp, q, share, dt, block
    )


def _per_element(q: CheckpointQuant | None, share: float, dt: int) -> float:
    """Bytes per weight element where the layout is not a plain matrix (towers, mixers)."""
    if q is None or share <= 0:
        return float(dt)
    return share * q.bytes_per_weight + (1 - share) * dt


def _attention_bytes(
    a: Architecture,
    shape: LayerShape,
    q: CheckpointQuant | None,
    share: float,
    tp: int,
    dt: int,
    block: Block = _as_stored,
) -> float:
    h, heads = a.hidden_size, shape.q_heads
    attn = 0.0

    def linear(inp: float, out: float) -> float:
        return _linear(inp, out, q, share, dt, block)

    if a.is_mla:
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:  # q_a (replicated) + q_b (column-parallel)
            attn += linear(h, a.q_lora_rank)
            attn += linear(a.q_lora_rank, heads * qk / tp)
        else:
            attn += linear(h, heads * qk / tp)
        attn += linear(h, a.kv_lora_rank + a.qk_rope_head_dim)  # replicated
        attn += linear(a.kv_lora_rank, heads * (a.qk_nope_head_dim + a.v_head_dim) / tp)
        attn += linear(heads * a.v_head_dim / tp, h)
        return attn + (a.q_lora_rank + a.kv_lora_rank) * dt
    kv_per_gpu = max(1, shape.kv_heads // tp)  # replicated when kv_heads < tp
    o_dim = heads * shape.head_dim / tp
    q_dim = o_dim * (2 if a.model_type == "qwen3_next" else 1)  # Qwen3-Next output gate
    kv_dim = kv_per_gpu * shape.head_dim
    attn += linear(h, q_dim + 2 * kv_dim) + linear(o_dim, h)
    if a.qkv_bias:
        attn += (q_dim + 2 * kv_dim) * dt
    if a.o_bias:
        attn += h * dt
    if a.qk_norm:
        attn += 2 * shape.head_dim * dt
    return attn


def _expert_bytes(a: Architecture, q: CheckpointQuant | None, s: Sharding, dt: int) -> float:
    """Routed experts of one MoE layer on one rank: every expert sliced over the MoE ranks, or
    whole experts (expert parallelism; ranks below the remainder hold one more, so the
    busiest rank holds ``ceil(E / ranks)``)."""
    h = a.hidden_size
    share = q.quantized_fraction("experts") if q is not None else 0.0
    ranks = s.moe_ranks
    if s.expert_parallel and ranks > 1:
        experts, im = math.ceil(a.num_experts / ranks), float(a.moe_intermediate_size)
    else:
        experts, im = a.num_experts, a.moe_intermediate_size / ranks
    hh = float(h)
    if q is not None and q.method == "mxfp4" and share:
        im, hh = round_up(math.ceil(im), s.mxfp4_align[0]), round_up(h, s.mxfp4_align[1])
        if s.mxfp4_hopper_swizzle and share == 1:
            held = triton_hopper_tensors(
                experts, int(hh), int(im), a.expert_bias, s.mxfp4_value_prepad
            )
            return sum(s.block(t) for t in held)
    total = experts * _mlp_bytes(hh, im, q, share, dt, a.gated_mlp)
    if share in (0.0, 1.0):  # w13 and w2 each one tensor over the local experts (fused MoE)
        per = q.weight_bits / 8 if q is not None and share else dt
        for rows in ((2 if a.gated_mlp else 1) * im, im):
            stacked = experts * rows * hh * per
            total += s.block(stacked) - stacked
    if a.expert_bias:
        total += experts * (2 * im + hh) * dt
    return total


def weight_breakdown(
    a: Architecture,
    q: CheckpointQuant | None,
    tp: int,
    *,
    parallel_embedding: bool = True,
    dt: int = DTYPE_BYTES,
    sharding: Sharding | None = None,
    first_stage: bool = True,
    last_stage: bool = True,
) -> dict[str, float]:
    """Bytes per GPU by component (vllm.md §3). ``parallel_embedding`` False for TRT-LLM.

    With pipeline parallelism ``a`` holds one stage's layers: the input embeddings live on the
    first stage, the final norm and ``lm_head`` on the last, ``PPMissingLayer`` elsewhere; a
    model with tied embeddings keeps the embedding on the last stage too, as its ``lm_head``
    (vllm/model_executor/models/llama.py@v0.19.0 ``LlamaModel.__init__``: ``embed_tokens`` when
    ``is_first_rank or (tie_word_embeddings and is_last_rank)``, ``norm`` and ``lm_head`` when
    ``is_last_rank``). Rotary caches and encoders are built on every stage."""
    s = sharding or Sharding(tp=tp, parallel_embedding=parallel_embedding)
    tp = s.tp
    routed_q, q = q, s.dense_quant(q)  # the routed experts keep the stored layout
    h = a.hidden_size
    frac = q.quantized_fraction if q is not None else (lambda _c: 0.0)
    attn_share, mlp_share = frac("attention"), frac("mlp")
    out: dict[str, float] = {}
    counts = Counter(layer_shapes(a))
    attention = mlp = ssm = 0.0
    for shape, n in counts.items():
        if shape.attention:
            attention += n * _attention_bytes(a, shape, q, attn_share, tp, dt, s.block)
        elif shape.mixer == "mamba":
            ssm += n * ssm_params(a) * _per_element(q, attn_share, dt) / tp
        if shape.mlp_width:
            mlp += n * _mlp_bytes(h, shape.mlp_width / tp, q, mlp_share, dt, a.gated_mlp, s.block)
    out["attention"] = attention
    if ssm:
        out["state_space"] = ssm
    moe_layers = sum(n for shape, n in counts.items() if shape.moe)
    if moe_layers:
        experts = _expert_bytes(a, routed_q, s, dt)
        width = a.shared_expert_intermediate_size / tp
        shared = _mlp_bytes(h, width, q, mlp_share, dt, a.gated_mlp, s.block) if width else 0.0
        router = (h * a.num_experts + (a.num_experts if a.expert_bias else 0)) * dt
        router += shared_gate_params(a) * dt
        out["experts"] = experts * moe_layers
        mlp += shared * moe_layers
        out["router"] = router * moe_layers
    out["mlp"] = mlp
    vocab = round_up(a.vocab_size, 64)
    emb_shard = tp if s.parallel_embedding else 1
    tied = a.tie_word_embeddings
    if first_stage or (tied and last_stage):
        out["embedding"] = s.block(vocab * h * dt / emb_shard)
    if a.per_layer_embedding and first_stage:  # VocabParallelEmbedding, vocab padded to 64
        rows = a.per_layer_embedding // a.vocab_size
        out["per_layer_embedding"] = s.block(round_up(a.vocab_size, 64) * rows * dt / emb_shard)
    if last_stage and not tied:
        out["lm_head"] = _linear(h, vocab / tp, q, frac("lm_head"), dt, s.block)
    final_norm = 1 if last_stage else 0
    out["norms"] = (a.norms_per_layer * a.num_layers + final_norm) * h * dt + a.extra_params * dt
    for enc in a.encoders:
        ranks = 1 if enc.replicated else (s.encoder_tp or tp)
        per = _per_element(q, frac("vision"), dt)
        out["vision"] = out.get("vision", 0.0) + enc.params * per / ranks
    # rotary cos/sin caches: positions x rotary_dim in the model dtype (or float32 where the
    # engine builds it so), one per distinct rope
    out["rope_cache"] = a.rope_cache_elements * (4 if s.rope_fp32 else dt)
    return out


def stored_dtype_bytes(a: Architecture) -> int:
    """Bytes per element of the checkpoint's unquantized tensors as stored (``torch_dtype``)."""
    return 4 if a.torch_dtype in ("float32", "float") else 2


def checkpoint_bytes(a: Architecture) -> float:
    """Bytes of the checkpoint's weight files as stored, which is what a download writes.

    A 16-bit checkpoint is every parameter in ``torch_dtype`` (Llama-3.1-70B-Instruct:
    70,553,706,496 x 2 = 141,107,412,992 B, its ``model.safetensors.index.json`` total_size).
    A pre-quantized one is its quantized layout at TP 1, without the rotary cache vLLM builds at
    load. Runtime quantization (``--quantization fp8``) does not change what is downloaded.
    """
    if a.quantization is None:
        return float(a.total_params * stored_dtype_bytes(a)) + mtp_bytes(a)
    stored = Sharding(tp=1, mxfp4_align=(1, 1))  # kernels pad at load, files are not padded
    parts = weight_breakdown(a, a.quantization, 1, dt=stored_dtype_bytes(a), sharding=stored)
    parts.pop("rope_cache", None)
    return sum(parts.values()) + mtp_bytes(a)


def mtp_bytes(a: Architecture) -> float:
    """Bytes of the multi-token-prediction layers a checkpoint stores after its decoder
    (DeepSeek-V3/R1: model.layers.61, "685B on HF incl. 14B MTP module"), which vLLM skips when
    it loads the model for serving (``get_spec_layer_idx_from_weight_name`` ... "skip spec
    decode layers for main model", vllm/model_executor/models/deepseek_v2.py@v0.19.0
    load_weights), so they are downloaded and cached but take no GPU memory. Each is one
    decoder layer like the last, in the checkpoint's format, with its own copies of the
    embedding and the head (embed_tokens, shared_head), two norms and eh_proj (2h -> h,
    16-bit)."""
    if not a.mtp_layers:
        return 0.0
    last = a.layer_attention[-1:] if a.layer_attention else ()
    one = dataclasses.replace(
        a, num_layers=1, dense_layers=0, layer_attention=last, mtp_layers=0, layer_shape_list=()
    )
    stored = Sharding(tp=1, mxfp4_align=(1, 1))
    parts = weight_breakdown(one, a.quantization, 1, dt=stored_dtype_bytes(a), sharding=stored)
    parts.pop("rope_cache", None)
    eh_proj = 2 * a.hidden_size * a.hidden_size + 2 * a.hidden_size  # weight, enorm + hnorm
    return a.mtp_layers * (sum(parts.values()) + eh_proj * stored_dtype_bytes(a))


# --- activation, non-torch, CUDA graphs ------------------------------------------------------


@dataclass(frozen=True)
class EncoderProfile:
    """vLLM's dummy multimodal pass inside the memory profile (``docs/sizing.md`` §5):
    ``cached_tokens`` encoder outputs stay on the GPU while the language model's dummy forward
    and the sampler run; ``encoder_bytes`` is the encoder's own transient peak."""

    budget_tokens: int = 0
    items: int = 0
    cached_tokens: int = 0
    encoder_bytes: float = 0.0


def activation_bytes(
    a: Architecture,
    q: CheckpointQuant | None,
    tp: int,
    tokens: int,
    reqs: int,
    dt: int = DTYPE_BYTES,
    *,
    sampler_bytes: float,
    moe_workspace: bool,
    encoder: EncoderProfile | None = None,
    moe_ranks: int = 0,
    first_stage: bool = True,
    last_stage: bool = True,
) -> float:
    """Peak of the profiling run: max(forward transients, sampler, encoder pass) + what stays
    allocated (hidden states, cached encoder outputs, fused-MoE workspaces).

    ``sampler_bytes``: profiled sampler bytes per (request x vocab) element; ``moe_workspace``:
    the fused-MoE kernels keep their workspaces across the profile run (vLLM V1); ``encoder``:
    the multimodal dummy pass (None: text only); ``moe_ranks``: ranks an expert is split over
    (TP x DP without expert parallelism; 1 with it).

    Pipeline stages: only the last stage runs the sampler, and every stage but the first
    pre-allocates the tensors it receives, ``hidden_states`` and ``residual`` for
    ``max_num_batched_tokens`` tokens (vllm/v1/worker/gpu_model_runner.py@v0.19.0
    ``profile_run``: ``_dummy_sampler_run`` only ``if get_pp_group().is_last_rank``;
    ``_dummy_run``: ``make_empty_intermediate_tensors(batch_size=self.max_num_tokens)`` on
    ranks that are not first). Every stage profiles the encoder."""
    h = a.hidden_size
    # the sampler constant holds one 16-bit copy of the logits; fp32 models hold 4 bytes
    sampler = reqs * a.vocab_size * (sampler_bytes + dt - DTYPE_BYTES) if last_stage else 0.0
    width = a.intermediate_size / tp
    moe_split = moe_ranks or tp
    in_workspace = a.is_moe and moe_workspace and not (q is not None and q.method == "mxfp4")
    if a.is_moe:
        # the fused-MoE kernel writes the routed experts' gate/up output, activation and down
        # output into its workspaces (vLLM 0.24.0 fused_moe/experts/triton_moe.py
        # TritonExperts.apply: intermediate_cache1-3 are views of workspace13/workspace2, held
        # by the workspace manager, modular_kernel.py _allocate_buffers), so with those counted
        # below the MoE layer's own transients are the shared expert's; the dense width is that
        # of the layers without experts
        dense = max((s.mlp_width for s in layer_shapes(a) if not s.moe), default=0) / tp
        shared = a.shared_expert_intermediate_size / tp
        routed = a.experts_per_token * a.moe_intermediate_size / moe_split
        width = max(dense, shared if in_workspace else routed + shared)
    forward = tokens * dt * (2 * h + 3 * width) + dequant_bytes(a, q, tp, moe_split, dt)
    retained = tokens * h * dt  # hidden states of the dummy run, alive during sampling
    workspace = 0.0
    if in_workspace:
        im = a.moe_intermediate_size / moe_split  # fused-MoE workspaces, kept across the run
        workspace = tokens * a.experts_per_token * (max(2 * im, h) + im) * dt
    enc = encoder or EncoderProfile()
    cached = enc.cached_tokens * h * dt  # encoder outputs of the dummy items
    received = 0.0 if first_stage else 2 * tokens * h * dt  # pipeline receive buffers
    return max(sampler, forward, enc.encoder_bytes) + retained + workspace + cached + received


def dequant_bytes(
    a: Architecture, q: CheckpointQuant | None, tp: int, moe_ranks: int, dt: int
) -> float:
    """The 16-bit copy of a weight that a bitsandbytes 4-bit matmul dequantizes for a batch of
    more than one token, the largest one of a layer on one rank (0 for other formats).

    Linear layers dequantize one shard at a time (vLLM 0.24.0 ``quantization/bitsandbytes.py``
    ``_apply_bnb_4bit``: ``matmul_4bit(x, weight[offsets[i]:offsets[i + 1]].t(), ...)`` per
    shard of a merged layer; bitsandbytes' ``MatMul4Bit`` runs ``dequantize_4bit`` then a 16-bit
    GEMM), so the largest is one MLP projection, ``hidden x intermediate / TP``, or one
    attention projection. MoE layers dequantize every local expert at once
    (``BitsAndBytesMoEMethod._apply_4bit_dequnt``: ``w13`` and ``w2`` whole); ``moe_ranks``
    splits them (1 under expert parallelism: counted whole, an upper bound)."""
    if q is None or q.method != "bnb-4bit":
        return 0.0
    h = a.hidden_size
    shards = [0.0]
    if q.quantized_fraction("attention") > 0:
        shards.append(h * a.num_attention_heads * a.head_dim / tp)
    dense = max((s.mlp_width for s in layer_shapes(a) if not s.moe), default=0)
    if q.quantized_fraction("mlp") > 0:
        shards.append(h * max(dense, a.shared_expert_intermediate_size) / tp)
    if a.is_moe and q.quantized_fraction("experts") > 0:
        shards.append(a.num_experts * 3 * h * a.moe_intermediate_size / max(1, moe_ranks))
    return max(shards) * dt


def non_torch_gib(base: float, tp: int, nvlink: bool, nvswitch_hopper: bool) -> float:
    """cuBLAS/NCCL/all-reduce memory outside the torch allocator (vllm.md §1.2).

    TP >= 2 adds communication buffers: 1.75 + 0.05 x TP GiB on NVSwitch Hopper-class systems
    (logged 2.07-2.21 GiB at TP 2-4 on H100 in total), an unverified 0.5 GiB on older NVLink
    (A100: no NVLink SHARP, no symmetric-memory all-reduce) and 0.15 GiB on PCIe (NCCL only, no
    custom all-reduce between more than two PCIe GPUs).
    """
    if tp < 2:
        return base
    if nvlink and nvswitch_hopper:
        return base + 1.75 + 0.05 * tp
    if nvlink:
        return base + 0.5
    return base + 0.15


def cudagraph_gib(a: Architecture) -> float:
    """Rough CUDA-graph pool size (logged 0.91-1.79 GiB for 24-80 layers on H100)."""
    return 0.6 + 0.015 * a.num_layers


def breakdown_gib(parts: dict[str, float]) -> tuple[tuple[str, float], ...]:
    """Non-zero components of a weight breakdown (bytes) as (name, GiB)."""
    return tuple((k, round(v / GIB, 4)) for k, v in parts.items() if v)
