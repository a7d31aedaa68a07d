"""Batch limits as decisions (docs/performance-model.md, "Batch limits"): how many sequences
one replica's engine may schedule, chosen from the KV cache the sizing gives, when the spec
leaves the limit out.

A scheduler limit below what the KV cache holds leaves the rest of the cache unusable: the
engine never batches more, so the replica delivers less than its memory allows (TensorRT-LLM's
old fixed ``max_batch_size 64`` held 64 sequences where a sized cache held hundreds). A limit
far above it buys nothing: vLLM admits on KV space and TensorRT-LLM's
``guaranteed_no_evict`` reserves prompt + output per request, so the cache bounds the batch
either way. The decision is the number of sequences of the SLO's lengths the cache holds,
rounded up to a multiple of 8 (the granularity of the engines' CUDA-graph batch sizes), at
least ``floor`` and at most ``cap`` (the engine's own figures, from its plug-in).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from llmdeploy.sizing.types import Sizing, SizingRequest

__all__ = ["kv_sequences", "raised_limit", "sequences_limit", "with_raised_limit"]


def kv_sequences(sizing: Sizing) -> int:
    """Sequences of the SLO's prompt + output length one replica's KV cache holds."""
    req = sizing.request
    per_seq = max(1, req.slo_input_tokens + req.slo_output_tokens)
    return max(0, sizing.kv_cache_tokens) // per_seq


def sequences_limit(sizing: Sizing, *, floor: int, cap: int) -> int:
    """The batch limit the engine gets: what the KV cache holds at the SLO's lengths, rounded
    up to a multiple of 8, within ``[floor, cap]``."""
    n = 8 * math.ceil(max(1, kv_sequences(sizing)) / 8)
    return max(floor, min(cap, n))


def raised_limit(sizing: Sizing, *, cap: int) -> int | None:
    """The limit an engine that admits on KV space (vLLM) gets where its own default
    (``sizing.max_num_seqs``) is below what the cache holds; None where the default covers
    the cache (a limit above it buys nothing)."""
    n = sequences_limit(sizing, floor=8, cap=cap)
    return n if n > sizing.max_num_seqs else None


def with_raised_limit(
    sizing: Sizing, resize: Callable[[SizingRequest], Sizing], *, cap: int
) -> tuple[Sizing, str | None]:
    """Quick mode (``size --model``, no spec): ``sizing`` sized again with the raised limit
    where the request leaves the limit out and the default would leave cache unusable, and a
    line saying so (None: nothing decided)."""
    req = sizing.request
    if not sizing.fits or req.max_num_seqs is not None:
        return sizing, None
    n = raised_limit(sizing, cap=cap)
    if n is None:
        return sizing, None
    default = sizing.max_num_seqs
    resized = resize(dataclasses.replace(req, max_num_seqs=n))
    why = (
        f"max {n} sequences per replica, not the default {default}: the KV cache holds "
        f"{kv_sequences(resized)} of {req.slo_input_tokens}+{req.slo_output_tokens} tokens "
        f"(at most {cap})"
    )
    return resized, why
