"""The per-GPU memory model: weight bytes, KV bytes and groups, activation peak, non-torch memory.

Pure arithmetic over an :class:`~llmdeploy.catalog.architecture.Architecture`. Formulas, their
sources and the calibration residuals are in ``docs/sizing.md``; the short tags below point at
``shared/reference/vllm.md`` sections.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmdeploy.catalog.architecture import Architecture, CheckpointQuant

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
    "fp8": CheckpointQuant("fp8", 8, None, 1.0, 0, False, label="fp8 (runtime)"),
    # int8 W8A8 checkpoint (compressed-tensors / SmoothQuant): 1 B + fp32 per-channel scale
    "int8": CheckpointQuant("int8", 8, None, 1.0, 4, False, label="int8 W8A8 checkpoint"),
    # AWQ / GPTQ int4, group 128: 0.5 + 2.5/g bytes (fp16 scale + packed zero, vllm.md §3)
    "int4-awq": CheckpointQuant("awq", 4, 128, 0.5 + 2.5 / 128, 0, False, label="awq 4-bit g128"),
    "int4-gptq": CheckpointQuant(
        "gptq", 4, 128, 0.5 + 2.5 / 128, 0, False, label="gptq 4-bit g128"
    ),
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


def _linear(
    inp: float, out: float, q: CheckpointQuant | None, quantized: bool = True, dt: int = 2
) -> float:
    if q is None or not quantized:
        return inp * out * dt
    return inp * out * q.bytes_per_weight + out * q.per_channel_scale_bytes


def weight_breakdown(
    a: Architecture,
    q: CheckpointQuant | None,
    tp: int,
    *,
    parallel_embedding: bool = True,
    dt: int = DTYPE_BYTES,
) -> dict[str, float]:
    """Bytes per GPU by component (vllm.md §3). ``parallel_embedding`` False for TRT-LLM."""
    h, heads = a.hidden_size, a.num_attention_heads
    lin_q = q is not None and not q.experts_only
    attn = 0.0
    if a.is_mla:
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:  # q_a (replicated) + q_b (column-parallel)
            attn += _linear(h, a.q_lora_rank, q, lin_q, dt=dt)
            attn += _linear(a.q_lora_rank, heads * qk / tp, q, lin_q, dt=dt)
        else:
            attn += _linear(h, heads * qk / tp, q, lin_q, dt=dt)
        attn += _linear(h, a.kv_lora_rank + a.qk_rope_head_dim, q, lin_q, dt=dt)  # replicated
        attn += _linear(
            a.kv_lora_rank, heads * (a.qk_nope_head_dim + a.v_head_dim) / tp, q, lin_q, dt=dt
        )
        attn += _linear(heads * a.v_head_dim / tp, h, q, lin_q, dt=dt)
        attn += (a.q_lora_rank + a.kv_lora_rank) * dt
    else:
        kv_per_gpu = max(1, a.num_kv_heads // tp)  # replicated when kv_heads < tp
        q_dim = heads * a.head_dim / tp
        kv_dim = kv_per_gpu * a.head_dim
        attn += _linear(h, q_dim + 2 * kv_dim, q, lin_q, dt=dt) + _linear(q_dim, h, q, lin_q, dt=dt)
        if a.qkv_bias:
            attn += (q_dim + 2 * kv_dim) * dt
        if a.o_bias:
            attn += h * dt
        if a.qk_norm:
            attn += 2 * a.head_dim * dt
    out: dict[str, float] = {"attention": attn * a.num_layers}
    dense = _linear(h, 3 * a.intermediate_size / tp, q, lin_q, dt=dt)
    if a.is_moe:
        im, hh = a.moe_intermediate_size / tp, float(h)
        if q is not None and q.method == "mxfp4":  # kernel padding (vLLM mxfp4.py, Hopper+)
            im, hh = round_up(math.ceil(im), 128), round_up(h, 256)
        experts = a.num_experts * _linear(hh, 3 * im, q, q is not None, dt=dt)
        if a.expert_bias:
            experts += a.num_experts * (2 * im + hh) * dt
        shared = _linear(h, 3 * a.shared_expert_intermediate_size / tp, q, lin_q, dt=dt)
        router = (h * a.num_experts + (a.num_experts if a.expert_bias else 0)) * dt
        if a.model_type == "qwen2_moe" and a.shared_expert_intermediate_size:
            router += h * dt
        out["experts"] = experts * a.moe_layers
        out["mlp"] = dense * a.dense_layers + shared * a.moe_layers
        out["router"] = router * a.moe_layers
    else:
        out["mlp"] = dense * a.num_layers
    vocab = round_up(a.vocab_size, 64)
    emb_shard = tp if parallel_embedding else 1
    out["embedding"] = vocab * h * dt / emb_shard
    if not a.tie_word_embeddings:
        head_q = q is not None and q.quantize_lm_head and not q.experts_only
        out["lm_head"] = _linear(vocab * h / tp, 1, q, head_q, dt=dt)
    out["norms"] = (a.norms_per_layer * a.num_layers + 1) * h * dt
    if a.vision_params:
        per = (
            q.bytes_per_weight if q is not None and q.quantize_vision and not q.experts_only else dt
        )
        out["vision"] = a.vision_params * per / tp
    # rotary cos/sin cache: max_position x rotary_dim in the model dtype, one per model
    out["rope_cache"] = a.max_position_embeddings * a.rotary_dim * dt
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
        return float(a.total_params * stored_dtype_bytes(a))
    parts = weight_breakdown(a, a.quantization, 1, dt=stored_dtype_bytes(a))
    parts.pop("rope_cache", None)
    return sum(parts.values())


# --- KV cache --------------------------------------------------------------------------------


@dataclass(frozen=True)
class KvLayout:
    """How vLLM V1 lays out the KV cache (vllm.md §2, kv_cache_utils.get_num_blocks)."""

    bytes_per_token_per_gpu: int  # summed over attention layers
    page_bytes_per_layer: int  # one block of one layer
    group_size: int  # layers sharing one block index (tensors in the pool)
    groups: tuple[str, ...]  # attention kind of each KV-cache group
    block_size: int


def kv_layout(a: Architecture, tp: int, kv_bytes: int, block_size: int) -> KvLayout:
    if a.is_mla:  # latent + rope key, one "head", not sharded by TP
        per_layer = (a.kv_lora_rank + a.qk_rope_head_dim) * kv_bytes
    else:
        per_layer = 2 * max(1, a.num_kv_heads // tp) * a.head_dim * kv_bytes
    kinds = a.layer_attention or tuple("full" for _ in range(a.num_layers))
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    smallest, largest = min(counts.values()), max(counts.values())
    group = largest if largest < smallest * 1.25 else smallest
    groups: list[str] = []
    for kind, n in counts.items():
        groups.extend([kind] * cdiv(n, group))
    return KvLayout(
        per_layer * a.num_layers, per_layer * block_size, group, tuple(groups), block_size
    )


def pages_per_request(a: Architecture, layout: KvLayout, length: int, batched: int) -> int:
    """Blocks one request of ``length`` tokens holds across all KV groups (vllm.md §2)."""
    b = layout.block_size
    total = 0
    for kind in layout.groups:
        if kind == "sliding" and a.sliding_window:
            total += cdiv(min(a.sliding_window - 1 + batched, length), b) + 1
        elif kind == "chunked" and a.attention_chunk_size:
            total += cdiv(min(a.attention_chunk_size + batched, length), b)
        else:
            total += cdiv(length, b)
    return total


# --- activation, non-torch, CUDA graphs ------------------------------------------------------


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
) -> float:
    """Peak of the profiling run: max(forward transients, sampler) + what stays allocated.

    ``sampler_bytes``: profiled sampler bytes per (request x vocab) element; ``moe_workspace``:
    the fused-MoE kernels keep their workspaces across the profile run (vLLM V1)."""
    h = a.hidden_size
    # the sampler constant holds one 16-bit copy of the logits; fp32 models hold 4 bytes
    sampler = reqs * a.vocab_size * (sampler_bytes + dt - DTYPE_BYTES)
    width = a.intermediate_size / tp
    if a.is_moe:
        width = max(
            width,
            (a.experts_per_token * a.moe_intermediate_size + a.shared_expert_intermediate_size)
            / tp,
        )
    forward = tokens * dt * (2 * h + 3 * width)
    retained = tokens * h * dt  # hidden states of the dummy run, alive during sampling
    workspace = 0.0
    if a.is_moe and moe_workspace and not (q is not None and q.method == "mxfp4"):
        im = a.moe_intermediate_size / tp  # fused-MoE workspaces, kept across the profile run
        workspace = tokens * a.experts_per_token * (max(2 * im, h) + im) * dt
    encoder = tokens * h * dt if a.vision_params else 0.0  # cached encoder outputs
    return max(sampler, forward) + retained + workspace + encoder


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
