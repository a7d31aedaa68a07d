"""The per-step token budget as a decision (docs/performance-model.md, "Token budget"): vLLM
``--max-num-batched-tokens``, TensorRT-LLM ``max_num_tokens``, the spec's
``serving.maxNumBatchedTokens``, chosen from the SLO when the spec leaves it out.

What the budget trades, as the model has it. Every step carries the running decodes and, in the
rest of the budget, prompt chunks (``perf/sim.py``). A bigger budget finishes a prompt in fewer
steps, so under load TTFT is lower (fewer steps, each paying the running batch's weights and KV
reads); but a step that carries a big chunk takes longer, and every running decode waits for it,
so ITL grows. And the profiling run at start-up runs a dummy batch of the budget's tokens: the
activation peak grows with it and the KV cache shrinks by as much (``sizing/memory.py``
``activation_bytes``; vLLM's ``profile_run``, TensorRT-LLM's ``KvCacheCreator``), so each
candidate is sized again.

The rule. Without a latency target there is nothing to trade: the engine's default stays. With
one, the candidates (the engine's default and ``CANDIDATES``, within what the engine accepts)
are each sized and put through the performance model at the SLO load, and the budget changes
only when it buys something there: fewer replicas to meet the SLO (the money ``plan`` ranks
by), or a target the default cannot meet at all. Ties keep the default; among alternatives that
need as few replicas, the smallest budget (the most KV cache, the shortest decode stalls).
Cheap: no candidate is simulated when the default already needs as few replicas as the memory
allows; where the default misses only its ITL target at the load that would save a replica,
only smaller budgets are tried (only bigger ones where it misses only TTFT); and an alternative
is fully assessed only after that one load point says it can need fewer replicas (``_screen``).

Order. The batch limit (``sizing/batching.py``) is decided first, on the default budget's KV
cache, and the candidates are sized with it; the few per cent of KV cache a budget moves are
not fed back into the limit (vLLM: a limit above the cache costs nothing; TensorRT-LLM: a
smaller budget's extra cache, about 1 % for 8192 -> 2048 on an 8B model, stays unscheduled).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from llmdeploy.perf import api, inputs, workloads
from llmdeploy.perf.assess import Performance, assess, planning_margin
from llmdeploy.perf.uncertainty import uncertainty_for

if TYPE_CHECKING:
    from llmdeploy.perf.constants import EngineRun
    from llmdeploy.sizing.types import Sizing
    from llmdeploy.spec.sections import Spec

__all__ = [
    "CANDIDATES",
    "TokenBudget",
    "candidates",
    "decide",
    "decide_for_request",
    "decide_for_spec",
    "most_kv",
    "with_tokens",
]

# Powers of two around both engines' defaults (vLLM 0.24.0 serve: 2048 below 70 GiB or on A100,
# 8192 above; TensorRT-LLM 1.x: 8192), up to twice the largest one
CANDIDATES = (2048, 4096, 8192, 16384)


@dataclass(frozen=True)
class TokenBudget:
    """A budget other than the engine's default, and why."""

    tokens: int
    default: int
    why: str


def candidates(sizing: Sizing, *, chunked_prefill: bool = True) -> tuple[int, ...]:
    """The budgets the engine accepts for this sizing, ascending, the default among them.

    vLLM 0.24.0 ``vllm/config/scheduler.py`` ``SchedulerConfig.verify_max_model_len``:
    ``max_num_batched_tokens`` must be at least ``max_num_seqs`` (ValueError), at least
    ``max_model_len`` without chunked prefill (ValueError), and above ``max_num_seqs x
    max_model_len`` it warns ("may lead to unexpected behavior"); TensorRT-LLM refuses a prompt
    longer than ``max_num_tokens`` without chunked context (``engines/trtllm/checks.py``)."""
    default = sizing.max_num_batched_tokens
    low = max(sizing.max_num_seqs, 0 if chunked_prefill else sizing.max_model_len)
    high = sizing.max_num_seqs * sizing.max_model_len
    return tuple(sorted({default, *(b for b in CANDIDATES if low <= b <= high)}))


def _applies(sizing: Sizing, ttft_ms: float | None, itl_ms: float | None) -> bool:
    """Whether the budget of ``sizing`` is llmdeploy's to decide: its request leaves it out,
    there is a latency target to trade against, and the model runs this configuration."""
    return not (
        sizing.request.max_num_batched_tokens is not None  # the user's: kept
        or not (ttft_ms or itl_ms)
        or not sizing.fits
        or sizing.instance is None
        or sizing.request.architecture.encoders  # the encoder profile follows the budget too
        or inputs.unsupported(sizing) is not None
    )


def _memory_replicas(sizing: Sizing) -> int:
    """The replicas whose KV caches hold the SLO's peak (``assess`` counts none for an open
    loop: there the cache shows up as preemption in the simulation)."""
    req = sizing.request
    if req.slo_arrival == "poisson" and req.slo_requests_per_s is not None:
        return 1
    return max(1, sizing.replicas_for_slo or 1)


def _replicas(p: Performance) -> float:
    needed = p.replicas_needed
    return math.inf if needed is None or p.estimate is None else needed


def _screen(
    sizing: Sizing,
    run: EngineRun,
    targets: tuple[float | None, float | None],
    replicas: float,
    concurrency: int | None = None,
) -> tuple[bool, bool]:
    """(TTFT met, ITL met) at the load each replica of ``sizing`` gets with one replica fewer
    than ``replicas`` (inf: one request per replica, the searches' first load; ``concurrency``:
    that many closed-loop clients per replica instead), against the targets as ``assess``
    tightens them; (False, False) where its memory alone needs more replicas or the replica
    cannot keep up. Meeting both is necessary to need fewer replicas (as the searches over the
    load assume, latency grows with it); ``assess`` decides."""
    req, (ttft_ms, itl_ms) = sizing.request, targets
    poisson = req.slo_arrival == "poisson" and req.slo_requests_per_s is not None
    if not math.isfinite(replicas):
        if poisson:
            return True, True  # the rate search starts from its own floor: let assess say
        fewer = req.slo_concurrent_requests
    else:
        fewer = int(replicas) - 1
        if fewer < _memory_replicas(sizing):
            return False, False
    assert sizing.instance is not None
    c = run.constants
    unc = uncertainty_for(c.engine, sizing.instance.gpu.arch, req.slo_arrival)
    ttft = math.inf if not ttft_ms else ttft_ms / (1 + planning_margin("ttft", unc))
    itl = math.inf if not itl_ms else itl_ms / (1 + planning_margin("itl", unc))
    arrival: workloads.Arrival = req.slo_arrival  # type: ignore[assignment]
    n_in, n_out = req.slo_input_tokens, req.slo_output_tokens
    if poisson:
        assert req.slo_requests_per_s is not None
        rate = req.slo_requests_per_s / fewer
        load = workloads.workload(arrival, n_in, n_out, requests_per_s=rate)
    else:
        per_replica = concurrency or math.ceil(req.slo_concurrent_requests / fewer)
        load = workloads.workload(arrival, n_in, n_out, concurrency=per_replica)
    hw, geo = inputs.hardware(sizing.instance), inputs.geometry(req.architecture)
    e = api.estimate(hw, geo, run.deployment, load, c)
    if e.saturated:
        return False, False
    return e.ttft_p99_ms <= ttft, e.itl_p99_ms <= itl


def decide(
    sizing: Sizing,
    resize: Callable[[int], Sizing],
    run_of: Callable[[Sizing], EngineRun | None],
    *,
    spec: Spec | None = None,
    ttft_ms: float | None = None,
    itl_ms: float | None = None,
) -> tuple[Sizing, TokenBudget | None]:
    """``sizing`` with the budget the SLO decides when its request leaves it out
    (``resize(n)``: sized again with budget ``n``; ``run_of``: how its engine runs a replica),
    and what was decided; ``(sizing, None)`` when the default stays. The targets are
    ``spec.slo``'s, or ``ttft_ms``/``itl_ms`` in quick mode (no spec)."""
    if spec is not None:
        ttft_ms, itl_ms = spec.slo.ttft_ms, spec.slo.itl_ms
    targets = (ttft_ms, itl_ms)
    if not _applies(sizing, ttft_ms, itl_ms):
        return sizing, None
    run = run_of(sizing)
    if run is None:
        return sizing, None
    default = sizing.max_num_batched_tokens
    base = assess(sizing, run, spec, ttft_ms, itl_ms, threshold=False)
    best_replicas = _replicas(base)
    if best_replicas <= _memory_replicas(sizing):
        return sizing, None  # as few replicas as its memory allows: nothing to buy
    chunked = spec.serving.chunked_prefill if spec is not None else True
    options = [t for t in candidates(sizing, chunked_prefill=chunked) if t != default]
    sized = {t: resize(t) for t in options[:1]}
    # the smallest budget leaves the most KV cache: if even its memory needs the replicas the
    # default needs, no budget needs fewer
    if not options or best_replicas <= _memory_replicas(sized[options[0]]):
        return sizing, None
    # where the default misses at the load that would save a replica says which way to look:
    # only ITL: a smaller budget (shorter stalls); only TTFT: a bigger one (fewer prefill steps)
    # (closed loops: at the first load the search found missing, an estimate it has made)
    first_miss = (base.max_concurrency_meeting_slo or 0) + 1
    ttft_met, itl_met = _screen(sizing, run, targets, best_replicas, first_miss)
    if ttft_met and not itl_met:
        options = [t for t in options if t < default]
    elif itl_met and not ttft_met:
        options = [t for t in options if t > default]
    best: tuple[int, Sizing, Performance] | None = None
    for tokens in options:
        other = sized.get(tokens) or resize(tokens)
        other_run = run_of(other) if other.fits and other.instance is not None else None
        if other_run is None or _screen(other, other_run, targets, best_replicas) != (True, True):
            continue
        p = assess(other, other_run, spec, ttft_ms, itl_ms, threshold=False)
        if _replicas(p) < best_replicas:  # later budgets must need fewer still
            best, best_replicas = (tokens, other, p), _replicas(p)
    if best is None:
        return sizing, None
    tokens, chosen, perf = best
    assert perf.estimate is not None and perf.replicas_needed is not None
    before = (
        f"{base.replicas_needed} with the default {default}"
        if base.replicas_needed is not None
        else f"the default {default} cannot meet it"
    )
    why = (
        f"{'serving.maxNumBatchedTokens' if spec else 'max_num_batched_tokens'} {tokens}: "
        f"{perf.replicas_needed} replicas meet the SLO "
        f"({before}); p99 TTFT {perf.estimate.ttft_p99_ms:.0f} ms, ITL "
        f"{perf.estimate.itl_p99_ms:.1f} ms at {perf.concurrency_per_replica} per replica; "
        f"KV cache {chosen.kv_cache_tokens} tokens ({sizing.kv_cache_tokens} with {default})"
    )
    return chosen, TokenBudget(tokens, default, why)


def with_tokens(spec: Spec, tokens: int) -> Spec:
    """``spec`` with ``serving.maxNumBatchedTokens`` set to ``tokens``."""
    serving = spec.serving.model_copy(update={"max_num_batched_tokens": tokens})
    return spec.model_copy(update={"serving": serving})


def decide_for_spec(
    spec: Spec,
    sizing: Sizing,
    spec_dir: Path | None,
    *,
    suggest: bool = False,
    known: Sizing | None = None,
) -> tuple[Spec, Sizing, TokenBudget | None]:
    """:func:`decide` for a spec (``size``, ``render``, each candidate of ``plan``): the spec
    with the decided budget, its sizing (with suggestions when ``suggest``), the decision.
    ``known``: this spec already sized at another budget (``plan``'s :func:`most_kv`)."""
    from llmdeploy.engines import registry
    from llmdeploy.sizing.requests import size_spec

    engine = registry.get(spec.engine.type)
    done = {known.max_num_batched_tokens: known} if known is not None else {}

    def resize(tokens: int) -> Sizing:
        if tokens not in done:
            done[tokens] = size_spec(with_tokens(spec, tokens), spec_dir, suggest=False)
        return done[tokens]

    chosen, budget = decide(sizing, resize, lambda s: engine.engine_run(s, spec), spec=spec)
    if budget is None:
        return spec, sizing, None
    decided = with_tokens(spec, budget.tokens)
    return decided, size_spec(decided, spec_dir) if suggest else chosen, budget


def decide_for_request(
    sizing: Sizing, ttft_ms: float | None, itl_ms: float | None
) -> tuple[Sizing, TokenBudget | None]:
    """:func:`decide` in quick mode (``size --model``, no spec): the request sized again with
    the decided budget (with suggestions), and the decision."""
    import dataclasses

    from llmdeploy.engines import registry
    from llmdeploy.sizing.calculator import compute
    from llmdeploy.sizing.suggest import size

    engine = registry.get(sizing.engine)

    def resize(tokens: int) -> Sizing:
        return compute(dataclasses.replace(sizing.request, max_num_batched_tokens=tokens))

    run_of = lambda s: engine.engine_run(s, None)  # noqa: E731
    _, budget = decide(sizing, resize, run_of, ttft_ms=ttft_ms, itl_ms=itl_ms)
    if budget is None:
        return sizing, None
    return size(dataclasses.replace(sizing.request, max_num_batched_tokens=budget.tokens)), budget


def most_kv(spec: Spec, sizing: Sizing, spec_dir: Path | None) -> Sizing:
    """The sizing with the most KV cache any budget :func:`decide_for_spec` may choose gives
    (the smallest candidate's; ``sizing`` where the budget is not decided or the default is
    the smallest): ``plan``'s lower bounds, computed before any simulation, hold for the
    decided budget too."""
    from llmdeploy.sizing.requests import size_spec

    if not _applies(sizing, spec.slo.ttft_ms, spec.slo.itl_ms):
        return sizing
    smallest = candidates(sizing, chunked_prefill=spec.serving.chunked_prefill)[0]
    if smallest >= sizing.max_num_batched_tokens:
        return sizing
    other = size_spec(with_tokens(spec, smallest), spec_dir, suggest=False)
    return other if other.fits and other.instance is not None else sizing
