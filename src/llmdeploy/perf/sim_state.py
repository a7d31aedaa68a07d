"""State of the replica simulation (:mod:`llmdeploy.perf.sim`): its input, its result, the
requests, the scheduler state and the accumulators, and the summary of one run."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

__all__ = ["SimInput", "SimResult"]


@dataclass(frozen=True)
class SimInput:
    input_tokens: float
    output_tokens: float
    length_cv: float
    concurrency: int | None
    request_rate: float | None
    num_requests: int | None  # None: steady state
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_capacity_tokens: int
    reserve_kv: bool
    pre_engine_s: float  # fixed latency before a request reaches the engine queue
    frontend_request_s: float = 0.0  # serial frontend work per request, when its response completes
    frontend_token_s: float = 0.0  # frontend work per streamed token (same process)
    output_spread: float = 0.0  # outputs uniform in mean x [1 - s, 1 + s] (perf.lengths)
    stagger: bool = False  # replay of a closed loop whose clients start staggered
    skip_warmup: bool = False  # replay: latencies over the steady window only (perf.workloads)
    cached_requests: frozenset[int] = frozenset()  # requests whose prompt is in the prefix cache
    lookahead: bool = False  # async scheduling: a step is scheduled while the one before runs
    stagger_s: float | None = None  # replay: clients start over this many seconds (None: E2E)
    output_lengths: tuple[int, ...] = ()  # replay: request i's output length (perf.workloads)
    arrival_s: tuple[float, ...] = ()  # replay, open loop: request i's arrival (s)


@dataclass(frozen=True)
class SimResult:
    ttft: tuple[float, ...]  # seconds, measured requests, sorted
    tpot: tuple[float, ...]  # per-request mean inter-token time, sorted
    admit_wait: tuple[float, ...]  # engine-queue wait (ready -> first chunk), sorted
    frontend_wait: tuple[float, ...]  # first-token delivery behind the frontend backlog, sorted
    itl_token_mean: float  # token-weighted mean gap
    output_tokens_per_s: float
    requests_per_s: float
    mean_batch: float  # time-averaged decoding sequences
    mean_ctx: float  # mean context per decoding sequence
    mean_prefill_tokens: float  # prompt tokens per step, time-weighted
    step_mean: float  # mean step duration (per step)
    step_residual: float  # mean remaining step time seen by a random arrival, E[dt^2]/2E[dt]
    dec_step_mean: float  # mean duration of decode-only steps
    mix_step_mean: float  # mean duration of steps with decodes and prompt chunks
    mix_fraction: float  # share of decode-carrying steps that also carry prompt chunks
    prefill_step_mean: float  # mean duration of steps that carry prompt chunks
    frontend_util: float  # busy fraction of the frontend process
    kv_bound: bool
    saturated: bool
    feasible: bool


@dataclass
class _Req:
    idx: int
    arrival: float
    prompt: int
    output: int
    ready: float = 0.0
    fe_wait: float = 0.0
    todo: int = 0  # tokens to (re)compute before the next sampled token
    done: int = 0  # of ``todo`` already computed
    generated: int = 0
    join_step: int = 0  # step index at which it (re)joined decoding
    join_gen: int = 0
    epoch: int = 0
    first_token: float = -1.0  # delivered to the client
    first_engine: float = -1.0  # produced by the engine
    first_sched: float = -1.0
    finish: float = -1.0
    admit_no: int = 0
    sched_after: int = 0  # not schedulable before this step index (async lookahead)


@dataclass
class _State:
    t: float = 0.0
    k: int = 0  # steps run
    ctx: float = 0.0  # sum of contexts of decoding sequences
    used: float = 0.0  # KV tokens held (optimistic accounting)
    reserved: float = 0.0  # KV tokens reserved (reserve accounting)
    decoding: dict[int, _Req] = field(default_factory=dict)
    prefilling: list[_Req] = field(default_factory=list)
    waiting: deque[_Req] = field(default_factory=deque)
    heap: list[tuple[int, int, int]] = field(default_factory=list)  # (finish step, idx, epoch)
    admit_counter: int = 0
    kv_bound: bool = False
    fe_free: float = 0.0  # time the frontend process is free
    step_start: float = 0.0  # start of the last step run
    busy: bool = False  # a step ran up to ``t`` (False after an idle gap)


@dataclass
class _Acc:
    """Accumulators over the measurement window."""

    time: float = 0.0
    tokens: float = 0.0
    b_time: float = 0.0
    ctx_time: float = 0.0
    pf_time: float = 0.0
    done: int = 0
    steps: float = 0.0
    dt2: float = 0.0
    dec_steps: float = 0.0
    dec_time: float = 0.0
    mix_steps: float = 0.0
    mix_time: float = 0.0
    pf_steps: float = 0.0
    pf_step_time: float = 0.0
    gap_weighted: float = 0.0
    gap_tokens: float = 0.0
    fe_busy: float = 0.0


def _steady_window(meas: list[_Req], closed: bool, concurrency: int) -> list[_Req]:
    """The requests a benchmark's steady-window summary counts (../shared/gpu/loadgen.py):
    closed loop, those that start after the first ``concurrency`` requests finished; open
    loop, all but the first tenth of arrivals."""
    by_start = sorted(meas, key=lambda r: r.arrival)
    if closed:
        ends = sorted(r.finish for r in by_start)
        first_end = ends[min(len(ends), concurrency) - 1]
        return [r for r in by_start if r.arrival >= first_end - 1e-12]
    return by_start[max(1, len(by_start) // 10) :]


def _result(
    si: SimInput,
    closed: bool,
    steady: bool,
    reqs: list[_Req],
    meas: list[_Req],
    acc: _Acc,
    st: _State,
    feasible: bool,
) -> SimResult:
    if not meas:
        z: tuple[float, ...] = ()
        return SimResult(
            z,
            z,
            z,
            z,
            math.inf,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            st.kv_bound,
            True,
            False,
        )
    every = meas
    if si.skip_warmup and not steady:
        meas = _steady_window(meas, closed, si.concurrency or 1) or meas
    ttft = tuple(sorted(r.first_token - r.arrival for r in meas))
    tpot = tuple(
        sorted((r.finish - r.first_engine) / (r.output - 1) for r in meas if r.output > 1)
    ) or (0.0,)
    admit = tuple(sorted(max(0.0, r.first_sched - r.ready) for r in meas))
    fe = tuple(sorted(r.fe_wait for r in meas))
    if steady:
        span = max(1e-9, acc.time)
        out_tps = acc.tokens / span
        rps = acc.done / span
    elif si.skip_warmup:  # throughput over the whole replay, latencies over its steady window
        t0 = 0.0  # the benchmark's clock starts before its first request arrives
        span = max(1e-9, max(r.finish for r in every) - t0)
        out_tps = sum(r.output for r in every) / span
        rps = len(every) / span
    else:
        t0 = min(r.arrival for r in reqs)
        span = max(1e-9, max(r.finish for r in meas) - t0)
        out_tps = sum(r.output for r in meas) / span
        rps = len(meas) / span
    t_acc = acc.time if acc.time > 0 else 1.0
    saturated = False
    if not closed and si.request_rate is not None and not math.isinf(si.request_rate):
        saturated = rps < 0.95 * si.request_rate
        by_arrival = [r.first_token - r.arrival for r in sorted(meas, key=lambda r: r.arrival)]
        q = len(by_arrival) // 4
        if q >= 4:
            early = sum(by_arrival[:q]) / q
            late = sum(by_arrival[-q:]) / q
            saturated = saturated or late > 3.0 * early + 0.5
    dec_n = acc.dec_steps + acc.mix_steps
    return SimResult(
        ttft=ttft,
        tpot=tpot,
        admit_wait=admit,
        frontend_wait=fe,
        itl_token_mean=acc.gap_weighted / acc.gap_tokens if acc.gap_tokens else 0.0,
        output_tokens_per_s=out_tps,
        requests_per_s=rps,
        mean_batch=acc.b_time / t_acc,
        mean_ctx=acc.ctx_time / acc.b_time if acc.b_time > 0 else 0.0,
        mean_prefill_tokens=acc.pf_time / t_acc,
        step_mean=acc.time / acc.steps if acc.steps else 0.0,
        step_residual=acc.dt2 / (2.0 * acc.time) if acc.time > 0 else 0.0,
        dec_step_mean=acc.dec_time / acc.dec_steps if acc.dec_steps else 0.0,
        mix_step_mean=acc.mix_time / acc.mix_steps if acc.mix_steps else 0.0,
        mix_fraction=acc.mix_steps / dec_n if dec_n else 0.0,
        prefill_step_mean=acc.pf_step_time / acc.pf_steps if acc.pf_steps else 0.0,
        frontend_util=min(1.0, acc.fe_busy / t_acc),
        kv_bound=st.kv_bound,
        saturated=saturated,
        feasible=feasible,
    )
