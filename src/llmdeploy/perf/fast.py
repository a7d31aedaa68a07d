"""Fast verdicts for the load searches: a load point decided without the simulation where
the answer is not in doubt (docs/performance-model.md, "Fast verdicts").

``api.max_concurrency_meeting`` bisects over the concurrency, simulating each probe
(:mod:`llmdeploy.perf.sim`). Most probes of a steady closed loop are far from a target:
their verdict is known from two cheap figures built on the same step-cost function the
simulation uses (:meth:`llmdeploy.perf.step.StepModel.step`), so a change to the step cost
moves them together:

* **ITL estimate.** A mean-value model of the steady state where neither the KV cache nor
  the batch limit binds: C clients, each request ``pre`` (frontend and pre-engine latency),
  its prompt in chunks of the step budget, then ``o - 1`` decode steps. Every step decodes
  the B requests past their prefill and carries the prompt chunks of the others' arrivals
  (λ (C-1)/C of them per second, λ = C / E2E). The mean step time T solves
  ``T = d0 + λ' T Σ_k (d_k - d0)`` (d0: a decode-only step of B sequences at their mean
  context; d_k: the same with the k-th chunk of one prompt), and the ITL of every request is
  T. The simulation's p99 ITL (the mean of the top 2 % of requests' mean gaps) lies between
  ``T (1 - ITL_BELOW)`` and ``T (1 + ITL_ABOVE)`` on every preset, golden spec and generated
  configuration (``tests/test_perf_fast.py``).
* **TTFT floor (queueing).** When more clients are in the loop than the engine can hold
  (H = min(max_num_seqs, KV tokens / prompt)), the others wait: a request holds its slot
  for at least ``o - 1`` decode steps of at least ``step(1, prompt)`` each, so at most
  H / ((o - 1) step(1, prompt)) requests finish per second and, by Little's law, the mean
  time outside the engine, part of every TTFT, is at least (C - H) / that rate. The p99
  (the mean of the top 2 %) is at least the mean; ``QUEUE_SAFETY`` covers the measurement
  window.

A probe is decided here only when the answer cannot change within those bounds: a miss when
``T (1 - ITL_BELOW)`` is above the ITL target, or the TTFT floor is above the TTFT target; a
pass only when there is no TTFT target and ``T (1 + ITL_ABOVE)`` is below the ITL target
(p99 TTFT has no estimate good enough to decide: it is set by how prompts collide in a step).
Everything else, and every configuration outside the estimate's domain (open loops,
benchmark replays, data or pipeline parallelism, a prompt cache, KV or batch limits that may
bind, prefill filling the steps, outputs under 32 tokens), is simulated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmdeploy.perf.sim_state import SimInput
from llmdeploy.perf.step import StepModel

__all__ = ["ITL_ABOVE", "ITL_BELOW", "QUEUE_SAFETY", "FastPoint", "decide", "steady_point"]

# The simulation's steady p99 ITL lies in [estimate (1 - ITL_BELOW), estimate (1 + ITL_ABOVE)]:
# the estimate is the mean gap, the p99 the mean of the slowest 2 % of requests (short ones
# that shared more steps with prompt chunks, most with few clients and short outputs).
# tests/test_perf_fast.py asserts the range on presets, golden specs and generated
# configurations; measured 0.998-1.15 over 2,500 generated ones with outputs of 32 tokens or
# more (below that, up to 1.85: left to the simulation).
ITL_BELOW = 0.02
ITL_ABOVE = 0.50
# The queueing floor is taken at this share: the simulation's mean over its measured window
# may sit below the long-run mean Little's law gives.
QUEUE_SAFETY = 0.8
# The estimate's domain ends where prompt chunks fill more than this share of the steps, and
# below this many output tokens a request (with outputs spread +-50 %, 16 gaps or fewer).
_MAX_PREFILL_SHARE = 0.9
_MIN_OUTPUT = 32


@dataclass(frozen=True)
class FastPoint:
    """What the fast path knows about one steady closed-loop load point (milliseconds)."""

    itl_p99_ms: float | None  # estimate; None: outside the estimate's domain
    ttft_floor_ms: float  # the p99 TTFT is at least this (0.0: nothing known)


def _chunks(prompt: float, budget: float) -> list[tuple[float, float, bool]]:
    """(tokens, already computed, last) of each chunk of one prompt under a step budget."""
    out, done = [], 0.0
    while done < prompt:
        n = min(budget, prompt - done)
        out.append((n, done, done + n >= prompt))
        done += n
    return out


def _itl_estimate(sm: StepModel, si: SimInput, c: int) -> float | None:
    """Mean step time of the steady state (seconds), or None outside the domain."""
    i, o = float(round(si.input_tokens)), si.output_tokens
    pre = si.pre_engine_s + si.frontend_request_s
    o_max = math.ceil(o * (1.0 + si.output_spread))
    per_req = i + o_max + 1.0
    if c > si.max_num_seqs or c * per_req + si.max_num_batched_tokens > si.kv_capacity_tokens:
        return None  # the batch limit or the KV cache may bind
    if o < _MIN_OUTPUT:
        return None  # a few gaps per request: its p99 is one step's luck, not the mean
    b = float(c)
    t = sm.step(b, b * (i + o / 2.0))
    e2e = pre + o * t
    for _ in range(60):
        lam = c / e2e * (c - 1) / c  # others' arrivals per second
        budget = max(1.0, si.max_num_batched_tokens - b)
        ctx = b * (i + o / 2.0)
        d0 = sm.step(b, ctx)
        chunks = _chunks(i, budget)
        times = [sm.step(b, ctx, n, n * (done + (n + 1) / 2.0), done, 1.0, float(last))
                 for n, done, last in chunks]  # fmt: skip
        extra = sum(d - d0 for d in times)
        denom = 1.0 - lam * extra
        if denom <= 0.0:
            return None
        t_new = d0 / denom
        if lam * t_new * len(chunks) > _MAX_PREFILL_SHARE:
            return None  # prompt chunks in nearly every step: collisions decide, simulate
        ttft = pre + (1.0 if si.lookahead else 0.5) * t_new + sum(times)
        e2e_new = ttft + max(0.0, o - 1.0) * t_new
        b_new = min(float(c), c * max(0.0, o - 1.0) * t_new / e2e_new)
        done_iterating = abs(t_new - t) <= 1e-9 * t and abs(b_new - b) <= 1e-9 * c
        t, e2e, b = t_new, e2e_new, max(1.0, b_new)
        if done_iterating:
            break
    return t


def _ttft_floor(sm: StepModel, si: SimInput, c: int) -> float:
    """Seconds the mean TTFT is at least, from the queue beyond what the engine holds."""
    i = float(max(1, round(si.input_tokens)))
    hold = min(si.max_num_seqs, int(si.kv_capacity_tokens // i))
    if c <= hold:
        return 0.0
    o_min = max(1.0, round(si.output_tokens * (1.0 - si.output_spread)))
    slot = (si.output_tokens - 1.0) * sm.step(1.0, i)  # mean decode time of one request
    if slot <= 0.0 or o_min <= 1.0:
        return 0.0
    return QUEUE_SAFETY * (c - hold) * slot / max(1, hold)


def steady_point(sm: StepModel, si: SimInput) -> FastPoint | None:
    """The fast path's figures for a steady closed loop (None: not that kind of load point, or
    a layout the figures do not cover)."""
    if si.concurrency is None or si.num_requests is not None or si.cached_requests:
        return None
    if sm.ranks != 1 or si.length_cv > 0.0:
        return None
    c = max(1, int(si.concurrency))
    itl = _itl_estimate(sm, si, c)
    return FastPoint(
        itl_p99_ms=None if itl is None else itl * 1000.0,
        ttft_floor_ms=_ttft_floor(sm, si, c) * 1000.0,
    )


def decide(sm: StepModel, si: SimInput, ttft_limit_ms: float, itl_limit_ms: float) -> bool | None:
    """Whether the load point meets both limits (math.inf: no target), when that is certain
    without the simulation; None when only the simulation can tell."""
    point = steady_point(sm, si)
    if point is None:
        return None
    if point.ttft_floor_ms > ttft_limit_ms:
        return False
    est = point.itl_p99_ms
    if est is None:
        return None
    if est * (1.0 - ITL_BELOW) > itl_limit_ms:
        return False
    if math.isinf(ttft_limit_ms) and est * (1.0 + ITL_ABOVE) < itl_limit_ms:
        return True
    return None
