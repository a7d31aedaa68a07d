"""How vLLM V1 lays out the KV cache: per-group pages, the constant state of state-space
layers, and the pages one request holds.

``vllm/v1/core/kv_cache_utils.py`` (grouping, page unification, ``get_num_blocks``),
``vllm/v1/kv_cache_interface.py`` (``max_memory_usage_bytes`` per spec),
``vllm/platforms/interface.py`` (``_align_hybrid_block_size``) and
``vllm/model_executor/layers/mamba/mamba_utils.py`` (state shapes), as released in the versions
``docs/sizing.md`` §4 names. Pure arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmdeploy.catalog.architecture import Architecture, StateSpace, layer_shapes

ATTENTION_KINDS = ("full", "sliding", "chunked", "cross")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KvPolicy:
    """What the engine version decides about the layout.

    ``group_ratio``: layer kinds are split into groups of the smallest kind's layer count, or of
    the largest when it is below ``ratio`` x the smallest (1.0: always the smallest); None: the
    engine has no hybrid allocator and sizes every layer as full attention. ``mamba_mode``: none
    (one state page per request), align (two), all (one per block: prefix caching)."""

    block_size: int = 16
    group_ratio: float | None = 1.5
    mamba_mode: str = "none"
    kernel_alignment: int = 16


@dataclass(frozen=True)
class KvLayout:
    bytes_per_token_per_gpu: int  # attention layers that own KV, summed
    page_bytes_per_layer: int  # one (unified) page of one layer
    group_size: int  # layers sharing one block index (tensors in the pool)
    groups: tuple[str, ...]  # kind of each KV-cache group
    block_size: int  # tokens per page of the full-attention layers
    group_blocks: tuple[int, ...] = ()  # tokens per page of each group
    state_bytes_per_layer: int = 0  # state-space layers: one sequence's state, unpadded
    mamba_mode: str = "none"

    @property
    def block_bytes(self) -> int:
        return self.page_bytes_per_layer * self.group_size


def state_bytes(s: StateSpace, tp: int, dt: int) -> int:
    """Constant per-sequence state of one state-space layer on one TP rank (conv + ssm)."""
    ssm_dt = 4 if s.ssm_state_fp32 else dt
    if s.kind == "mamba1":
        inner = s.d_inner // tp
        return inner * (s.d_conv - 1) * dt + inner * s.d_state * ssm_dt
    if s.kind == "gdn":
        conv_dim = 2 * s.n_groups * s.d_state + s.d_inner
        return (conv_dim // tp) * (s.d_conv - 1) * dt + (
            s.n_heads // tp
        ) * s.head_dim * s.d_state * ssm_dt
    groups = s.n_groups + (0 if s.n_groups % tp == 0 else tp - s.n_groups)
    conv_dim = s.d_inner + 2 * groups * s.d_state
    return (conv_dim // tp) * (s.d_conv - 1) * dt + (
        s.n_heads // tp
    ) * s.head_dim * s.d_state * ssm_dt


def _token_bytes(a: Architecture, kv_heads: int, head_dim: int, tp: int, kv_bytes: int) -> int:
    if a.is_mla:  # latent + rope key, one "head", not sharded by TP
        return (a.kv_lora_rank + a.qk_rope_head_dim) * kv_bytes
    return 2 * max(1, kv_heads // tp) * head_dim * kv_bytes


def kv_layout(a: Architecture, tp: int, kv_bytes: int, policy: KvPolicy, dt: int = 2) -> KvLayout:
    """The layout one TP rank's KV pool has (vLLM V1 hybrid allocator)."""
    specs: dict[tuple[str, int], int] = {}  # (kind, bytes per token per layer) -> layers
    total = 0
    # without the hybrid allocator every attention layer is sized as full attention, and the
    # V0 engine's encoder-decoder cross-attention blocks come from the same pool
    unified = "full+cross" if a.cross_attention_tokens else "full"
    for shape in layer_shapes(a):
        if shape.attention and shape.owns_kv:
            kind = shape.mixer if policy.group_ratio is not None else unified
            per = _token_bytes(a, shape.kv_heads, shape.head_dim, tp, kv_bytes)
            specs[(kind, per)] = specs.get((kind, per), 0) + 1
            total += per
        elif shape.mixer == "mamba":
            specs[("mamba", 0)] = specs.get(("mamba", 0), 0) + 1
    attn = [per for (kind, per) in specs if kind != "mamba"]
    one_token = max(attn) if attn else 1
    block = policy.block_size
    state = state_bytes(a.ssm, tp, dt) if a.ssm is not None and ("mamba", 0) in specs else 0
    if state:  # attention page >= mamba page (platforms/interface.py _align_hybrid_block_size)
        align = max(policy.kernel_alignment, block)
        if policy.mamba_mode == "all":
            chunk = math.lcm(a.ssm.chunk_size if a.ssm else 1, align)
            needed = chunk * cdiv(cdiv(state, one_token), chunk)
        else:
            needed = align * cdiv(state, align * one_token)
        block = max(block, needed)
    page = max(per * block for per in attn) if attn else state
    kinds: list[str] = []
    blocks: list[int] = []
    counts = {key: n for key, n in specs.items()}
    smallest, largest = min(counts.values()), max(counts.values())
    ratio = policy.group_ratio or 1.0
    group = largest if largest < smallest * ratio else smallest
    if len(counts) == 1:
        group = largest
    for (kind, per), n in counts.items():
        # smaller pages hold more tokens per block so every page has the same size
        tokens = block * (page // (per * block)) if per else block
        for _ in range(cdiv(n, group)):
            kinds.append(kind)
            blocks.append(tokens)
    return KvLayout(
        bytes_per_token_per_gpu=total,
        page_bytes_per_layer=page,
        group_size=group,
        groups=tuple(kinds),
        block_size=block,
        group_blocks=tuple(blocks),
        state_bytes_per_layer=state,
        mamba_mode=policy.mamba_mode,
    )


def pages_per_request(a: Architecture, layout: KvLayout, length: int, batched: int) -> int:
    """Pages one request of ``length`` tokens holds across all KV groups (vllm.md §2)."""
    total = 0
    blocks = layout.group_blocks or (layout.block_size,) * len(layout.groups)
    for kind, b in zip(layout.groups, blocks, strict=True):
        if kind == "sliding" and a.sliding_window:
            total += cdiv(min(a.sliding_window - 1 + batched, length), b) + 1
        elif kind == "chunked" and a.attention_chunk_size:
            total += cdiv(min(a.attention_chunk_size + batched, length), b)
        elif kind == "mamba":
            total += {"none": 1, "align": 2}.get(layout.mamba_mode) or cdiv(length, b)
        elif kind == "cross":
            total += cdiv(a.cross_attention_tokens, b)
        elif kind == "full+cross":
            total += cdiv(length, b) + cdiv(a.cross_attention_tokens, b)
        else:
            total += cdiv(length, b)
    return total
