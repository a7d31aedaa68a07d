"""vLLM's multimodal memory profile: the encoder budget, the dummy items it encodes before the
KV cache is sized, and what the multimodal options change.

Sources (vLLM 0.24.0 as released; the behaviour dates are the PRs ``docs/sizing.md`` §5 cites):
``v1/core/encoder_cache_manager.py`` ``compute_mm_encoder_budget`` (budget = max(
``max_num_batched_tokens``, largest item)), ``multimodal/encoder_budget.py`` (items per prompt
and per batch), ``v1/worker/gpu_model_runner.py`` ``profile_run`` (outputs cached while the LM
dummy forward runs), ``config/multimodal.py`` (``limit_mm_per_prompt`` 0 for every modality:
language model only, from 0.10.1; ``skip_mm_profiling`` from 0.10.2; ``mm_encoder_tp_mode``
from 0.10.2).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmdeploy.catalog.architecture import Architecture, Encoder
from llmdeploy.engines.vllm.flags import parse_version
from llmdeploy.sizing.memory import EncoderProfile

LANGUAGE_ONLY_SINCE = (0, 10, 1)
SKIP_PROFILING_SINCE = (0, 10, 2)
ENCODER_TP_MODE_SINCE = (0, 10, 2)


@dataclass(frozen=True)
class MultimodalPlan:
    """The towers loaded, how they are split, and the profiled dummy pass."""

    encoders: tuple[Encoder, ...]
    encoder_tp: int  # ranks a tower is split over (1: replicated, --mm-encoder-tp-mode data)
    profile: EncoderProfile
    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def _encoder_pass(enc: Encoder, items: int, ranks: int, dt: int) -> float:
    """Transient peak of the tower on the dummy batch (the forward formula on its patches)."""
    patches = items * enc.patches_per_item
    return patches * dt * (2 * enc.hidden + 3 * enc.intermediate / max(1, ranks))


def multimodal_plan(
    arch: Architecture,
    version: str,
    tp: int,
    batched: int,
    seqs: int,
    max_model_len: int,
    limits: dict[str, int] | None,
    skip_profiling: bool,
    encoder_tp_mode: str,
    dt: int,
) -> MultimodalPlan:
    if not arch.encoders:
        return MultimodalPlan((), tp, EncoderProfile())
    v = parse_version(version)
    notes: list[str] = []
    problems: list[str] = []
    limits = dict(limits or {})
    loaded = tuple(e for e in arch.encoders if limits.get(e.modality, 1) != 0)
    if not loaded:
        if v < LANGUAGE_ONLY_SINCE:
            problems.append(
                f"limitPerPrompt 0 for every modality (language model only) needs vLLM >= "
                f"0.10.1; {version} still loads the encoder"
            )
            loaded = arch.encoders
        else:
            notes.append("limitPerPrompt 0 for every modality: the encoder is not loaded")
            return MultimodalPlan((), tp, EncoderProfile(), tuple(notes))
    ranks = tp
    if encoder_tp_mode == "data":
        if v < ENCODER_TP_MODE_SINCE:
            problems.append(f"encoderTensorParallel: data needs vLLM >= 0.10.2 (got {version})")
        elif not all(e.tp_data_mode for e in loaded):
            problems.append(
                "encoderTensorParallel: data is not supported by this model's encoder in vLLM"
            )
        else:
            ranks = 1
            notes.append("--mm-encoder-tp-mode data: the full encoder on every TP rank")
    if skip_profiling and v >= SKIP_PROFILING_SINCE:
        notes.append(
            "--skip-mm-profiling: no encoder pass in the memory profile; the encoder's run-time "
            "memory must fit in what the KV cache leaves"
        )
        return MultimodalPlan(loaded, ranks, EncoderProfile(), tuple(notes), tuple(problems))
    if skip_profiling:
        problems.append(f"skipProfiling needs vLLM >= 0.10.2 (got {version})")
    # the modality with the most tokens per item is profiled (encoder_budget.py)
    enc = max(loaded, key=lambda e: e.tokens_per_item)
    per_item = enc.tokens_per_item
    budget = max(batched, per_item)
    if not per_item:
        notes.append(
            f"{enc.model_type}: tokens of the largest item not known; encoder outputs sized "
            f"as the whole {budget}-token encoder budget"
        )
        profile = EncoderProfile(budget, 0, budget, 0.0)
        return MultimodalPlan(loaded, ranks, profile, tuple(notes), tuple(problems))
    limit = limits.get(enc.modality, 999)
    per_prompt = max(1, min(limit, max_model_len // per_item))
    items = max(1, min(budget // per_item, seqs * per_prompt))
    profile = EncoderProfile(
        budget_tokens=budget,
        items=items,
        cached_tokens=items * per_item,
        encoder_bytes=_encoder_pass(enc, items, ranks, dt),
    )
    notes.append(
        f"multimodal profile: encoder budget {budget} tokens, {items} dummy {enc.modality} "
        f"item(s) of {per_item} tokens"
    )
    return MultimodalPlan(loaded, ranks, profile, tuple(notes), tuple(problems))
