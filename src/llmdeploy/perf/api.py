"""Public entry points: estimate() for one load point, max_concurrency_meeting() for planning."""

from __future__ import annotations

import dataclasses
import functools
import math

from llmdeploy.perf import workloads
from llmdeploy.perf.sim import SimInput, SimResult, simulate
from llmdeploy.perf.step import StepModel, build_step_model
from llmdeploy.perf.types import (
    Constants,
    Deployment,
    DominantTerm,
    Hardware,
    ModelGeometry,
    PerfEstimate,
    Workload,
)
from llmdeploy.perf.uncertainty import UNCERTAINTY
from llmdeploy.perf.workloads import Arrival

__all__ = [
    "estimate",
    "max_concurrency_meeting",
    "max_rate_meeting",
    "percentile",
    "step_model",
    "throughput_ceiling",
]


def percentile(sorted_values: tuple[float, ...], p: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return math.inf
    i = max(0, min(len(sorted_values) - 1, math.ceil(p / 100.0 * len(sorted_values)) - 1))
    return sorted_values[i]


def _constants(dep: Deployment, constants: Constants) -> Constants:
    c = constants
    if dep.async_scheduling is not None and dep.async_scheduling != c.host_overlap:
        c = dataclasses.replace(c, host_overlap=dep.async_scheduling)
    return c


def step_model(
    hw: Hardware, model: ModelGeometry, dep: Deployment, constants: Constants
) -> StepModel:
    """The step-time model of one configuration (for inspection and reports)."""
    return build_step_model(hw, model, dep, _constants(dep, constants))


def _breakdown(sm: StepModel, b: float, ctx: float, pf: float) -> tuple[tuple[str, float], ...]:
    g, a_dec, a_pf, ar, _fixed, _host, step = sm.times(b, ctx, pf, pf * pf / 2.0, 0.0, 0.0, 0.0)
    tokens = b + pf
    weights_side = sm.s_dense_w + sm.s_lm_w + sm.s_expert_w * min(sm.num_experts, tokens)
    compute_side = (sm.s_dense_f + sm.s_expert_f) * tokens
    parts: dict[str, float] = {
        "weights bandwidth": 0.0,
        "decode compute": 0.0,
        "prefill compute": a_pf,
        "KV reads": a_dec,
        "all-reduce": ar,
    }
    if weights_side >= compute_side:
        parts["weights bandwidth"] = g
    else:
        parts["decode compute"] = g * b / max(tokens, 1e-9)
        parts["prefill compute"] += g * pf / max(tokens, 1e-9)
    parts["overhead"] = max(0.0, step - sum(parts.values()))
    total = sum(parts.values()) or 1.0
    return tuple((k, v / total) for k, v in parts.items())


def sim_input(dep: Deployment, workload: Workload, c: Constants) -> SimInput:
    """The simulation's input for one load point (``c``: the constants as :func:`_constants`
    adjusts them)."""
    return SimInput(
        input_tokens=max(1.0, workload.input_tokens),
        output_tokens=max(1.0, workload.output_tokens),
        length_cv=max(0.0, workload.length_cv),
        concurrency=workload.concurrency,
        request_rate=workload.request_rate,
        num_requests=workload.num_requests,
        max_num_batched_tokens=dep.max_num_batched_tokens,
        max_num_seqs=dep.max_num_seqs,
        kv_capacity_tokens=dep.kv_capacity_tokens,
        reserve_kv=dep.kv_admission == "reserve",
        pre_engine_s=c.ttft_overhead_ms / 1000.0,
        frontend_request_s=c.request_overhead_ms / 1000.0,
        frontend_token_s=c.stream_token_us * 1e-6,
        output_spread=max(0.0, min(0.95, workload.output_spread)),
        stagger=workload.concurrency is not None and workload.output_spread > 0.0,
        skip_warmup=workload.skip_warmup,
        cached_requests=workload.cached_requests,
        lookahead=c.host_overlap,
        stagger_s=workload.stagger_s,
        output_lengths=workload.output_lengths,
        arrival_s=workload.arrival_s,
    )


# The load searches decide a probe without the simulation where perf.fast says the answer is
# certain (tests/test_perf_fast.py proves the same verdicts with this off).
FAST_VERDICTS = True

# The simulation is deterministic and its inputs are frozen (hashable) dataclasses: a load
# point computed once is reused, within one verdict (the searches over the load revisit
# points) and across the specs of a fleet that share a configuration.
ESTIMATE_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=ESTIMATE_CACHE_SIZE)
def estimate(
    hw: Hardware,
    model: ModelGeometry,
    dep: Deployment,
    workload: Workload,
    constants: Constants,
) -> PerfEstimate:
    """TTFT/ITL percentiles, throughput and the dominant cost of one replica at this load."""
    if (workload.concurrency is None) == (workload.request_rate is None):
        raise ValueError("give exactly one of concurrency and request_rate")
    c = _constants(dep, constants)
    sm = build_step_model(hw, model, dep, c)
    reserve = dep.kv_admission == "reserve"
    si = sim_input(dep, workload, c)
    extra_clients = 0
    if workload.concurrency is not None and workload.num_requests is None:
        # Beyond the batch the engine can hold, more clients only wait in its queue: simulate
        # just past that point and add the extra clients' wait by Little's law.
        per_req = si.input_tokens + (si.output_tokens if reserve else 0.0)
        hold = min(dep.max_num_seqs, int(dep.kv_capacity_tokens // max(1.0, per_req)))
        c_sat = max(1, hold + max(2, hold // 10))
        if workload.concurrency > c_sat:
            extra_clients = workload.concurrency - c_sat
            si = dataclasses.replace(si, concurrency=c_sat)
    r: SimResult = simulate(sm, si)
    if not r.feasible or not r.ttft:
        inf = math.inf
        return PerfEstimate(
            inf,
            inf,
            inf,
            inf,
            inf,
            inf,
            0.0,
            0.0,
            0.0,
            "overhead",
            "queueing",
            (),
            r.kv_bound,
            True,
            inf,
        )
    b = max(r.mean_batch, 1.0)
    bd = _breakdown(sm, b, b * r.mean_ctx, r.mean_prefill_tokens)
    dominant: DominantTerm = "overhead"
    best = -1.0
    for name, share in bd:
        if share > best:
            best, dominant = share, name  # type: ignore[assignment]
    lat = _latencies(r, steady=workload.num_requests is None)
    ttft50, ttft99, ttft_mean, itl50, itl99, wait50 = lat
    if extra_clients and r.requests_per_s > 0.0:
        queued = extra_clients / r.requests_per_s
        ttft50, ttft99, ttft_mean, wait50 = (
            ttft50 + queued,
            ttft99 + queued,
            ttft_mean + queued,
            wait50 + queued,
        )
    pre = si.pre_engine_s
    ttft_dom: DominantTerm
    if wait50 > 0.5 * ttft50:
        ttft_dom = "queueing"
    elif pre > 0.5 * ttft50:
        ttft_dom = "overhead"
    else:
        ttft_dom = "prefill compute"
    ms = 1000.0
    return PerfEstimate(
        ttft_p50_ms=ttft50 * ms,
        ttft_p99_ms=ttft99 * ms,
        ttft_mean_ms=ttft_mean * ms,
        itl_p50_ms=itl50 * ms,
        itl_p99_ms=itl99 * ms,
        itl_mean_ms=r.itl_token_mean * ms,
        output_tokens_per_s=r.output_tokens_per_s,
        requests_per_s=r.requests_per_s,
        mean_batch=r.mean_batch,
        dominant_term=dominant,
        ttft_dominant_term=ttft_dom,
        step_breakdown=bd,
        kv_bound=r.kv_bound,
        saturated=r.saturated,
        decode_step_ms=sm.step(b, b * r.mean_ctx) * ms,
    )


Latencies = tuple[float, float, float, float, float, float]


def tail_mean(sorted_values: tuple[float, ...], share: float) -> float:
    """Mean of the top ``share`` of sorted values (at least one): a p99 that does not jump
    from one order statistic to the next as the load changes."""
    if not sorted_values:
        return math.inf
    k = max(1, math.ceil(share * len(sorted_values)))
    top = sorted_values[-k:]
    return sum(top) / len(top)


def _latencies(r: SimResult, steady: bool = False) -> Latencies:
    """Percentiles over the simulated requests (seconds). A benchmark replay uses nearest-rank
    percentiles like the benchmark clients; steady state uses the mean of the top 2% for p99."""
    waits = tuple(sorted(a + f for a, f in zip(r.admit_wait, r.frontend_wait, strict=True)))

    def p99(v: tuple[float, ...]) -> float:
        return tail_mean(v, 0.02) if steady else percentile(v, 99)

    return (
        percentile(r.ttft, 50),
        p99(r.ttft),
        sum(r.ttft) / len(r.ttft),
        percentile(r.tpot, 50),
        p99(r.tpot),
        percentile(waits, 50),
    )


def max_concurrency_meeting(
    hw: Hardware,
    model: ModelGeometry,
    dep: Deployment,
    input_tokens: float,
    output_tokens: float,
    ttft_ms: float | None,
    itl_ms: float | None,
    constants: Constants,
    margin: float | None = None,
    margins: tuple[float, float] | None = None,
    cap: int | None = None,
    arrival: Arrival = "steady",
) -> int:
    """Highest closed-loop concurrency per replica whose p99 TTFT and p99 ITL meet the SLOs.

    Each SLO is tightened by the calibration margin: slo / (1 + margin); ``margin=None`` uses
    the fitted 90th-percentile error of that metric (UNCERTAINTY); ``margins`` gives the TTFT
    and ITL margins separately. Returns 0 when even one request at a time misses. A missing SLO
    (None) is not checked. ``cap``: no concurrency above it is tried (the load never gets
    there), so the answer is at most ``cap``.
    """
    m_ttft = UNCERTAINTY.margin("ttft") if margin is None else margin
    m_itl = UNCERTAINTY.margin("itl") if margin is None else margin
    if margins is not None:
        m_ttft, m_itl = margins
    ttft_lim = math.inf if ttft_ms is None else ttft_ms / (1.0 + m_ttft)
    itl_lim = math.inf if itl_ms is None else itl_ms / (1.0 + m_itl)

    from llmdeploy.perf import fast  # only the searches use it (quick `size` does not search)

    c = _constants(dep, constants)
    sm = build_step_model(hw, model, dep, c) if FAST_VERDICTS else None

    def ok(cc: int) -> bool:
        load = workloads.workload(arrival, input_tokens, output_tokens, concurrency=cc)
        if sm is not None:  # decided without the simulation where the answer is certain
            known = fast.decide(sm, sim_input(dep, load, c), ttft_lim, itl_lim)
            if known is not None:
                return known
        e = estimate(hw, model, dep, load, constants)
        return e.ttft_p99_ms <= ttft_lim and e.itl_p99_ms <= itl_lim

    per_req = max(1.0, input_tokens + output_tokens)
    hi = max(1, min(dep.max_num_seqs, int(dep.kv_capacity_tokens // per_req) * 2 + 1))
    if cap is not None:
        hi = max(1, min(hi, cap))
    if not ok(1):
        return 0
    if ok(hi):
        return hi
    lo = 1  # ok(lo) and not ok(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def throughput_ceiling(
    hw: Hardware,
    model: ModelGeometry,
    dep: Deployment,
    input_tokens: float,
    constants: Constants,
    concurrency: int | None = None,
) -> float:
    """Output tokens/s one replica cannot exceed with at most ``concurrency`` requests in
    flight: pure decode steps of the largest batch its limits and the load allow (every
    sequence holding only its prompt), with no prefill and no frontend. A bound the search
    ranks by before it simulates (``perf.search``)."""
    sm = build_step_model(hw, model, dep, _constants(dep, constants))
    cap = float(concurrency) if concurrency is not None else math.inf
    batch = max(1.0, min(dep.max_num_seqs, dep.kv_capacity_tokens // max(1.0, input_tokens), cap))
    return batch / sm.step(batch, batch * input_tokens)


def max_rate_meeting(
    hw: Hardware,
    model: ModelGeometry,
    dep: Deployment,
    input_tokens: float,
    output_tokens: float,
    ttft_ms: float | None,
    itl_ms: float | None,
    constants: Constants,
    margins: tuple[float, float],
    cap: float | None = None,
) -> float:
    """Highest Poisson request rate per replica (requests/s) whose p99 TTFT and p99 ITL meet
    the SLOs tightened by ``margins`` and which the replica keeps up with (not saturated).
    0.0 when even a trickle misses. Bisection over the rate, to 2 %, up to the throughput
    ceiling's rate (or ``cap``)."""
    ttft_lim = math.inf if ttft_ms is None else ttft_ms / (1.0 + margins[0])
    itl_lim = math.inf if itl_ms is None else itl_ms / (1.0 + margins[1])

    def ok(rate: float) -> bool:
        load = workloads.workload("poisson", input_tokens, output_tokens, requests_per_s=rate)
        e = estimate(hw, model, dep, load, constants)
        return not e.saturated and e.ttft_p99_ms <= ttft_lim and e.itl_p99_ms <= itl_lim

    ceiling = throughput_ceiling(hw, model, dep, input_tokens, constants) / max(1.0, output_tokens)
    hi = ceiling if cap is None else min(ceiling, cap)
    lo = hi / 256.0
    if not ok(lo):
        return 0.0
    if ok(hi):
        return hi
    while hi / lo > 1.02:
        mid = math.sqrt(lo * hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
