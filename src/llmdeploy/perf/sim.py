"""Deterministic discrete-step simulation of one replica under continuous batching.

Front end: one API-server process. A request reaches the engine a fixed latency after it
arrives; the process's serial work (a per-token cost for every streamed token, a per-request
cost when a response completes) sits on the output path: a first token is delivered once the
work queued before it is done, and a closed-loop client sends its next request when its last
response has been completed (the fourth H200 lease's per-request traces: a wave's responses
end about 1.2 to 1.5 ms apart, the next wave's prompts reach the engine as they are sent,
and a first token produced during that backlog is delivered at its end;
tests/test_perf_traces.py).

Engine step: every running decode takes one token of the ``max_num_batched_tokens`` budget;
the rest goes to prompt chunks, first of requests already being prefilled, then of waiting
requests in arrival order (vLLM V1 / TensorRT-LLM in-flight batching with chunked prefill).
A request is admitted only while fewer than ``max_num_seqs`` run and its KV fits: "reserve"
keeps prompt+output per request (TensorRT-LLM guaranteed_no_evict); "optimistic" keeps what is
computed, admits a request when its whole prompt fits and preempts the newest request when
decode growth overflows the cache, to be recomputed later (vLLM V1).

Runs of identical pure-decode steps between events are advanced in one go with the step time
interpolated linearly in the growing context.
"""

from __future__ import annotations

import heapq
import math

from llmdeploy.perf.lengths import arrival_times, lengths
from llmdeploy.perf.sim_state import SimInput, SimResult, _Acc, _Req, _result, _State
from llmdeploy.perf.step import StepModel

__all__ = ["SimInput", "SimResult", "simulate"]

_PHI = (math.sqrt(5.0) - 1.0) / 2.0
_BLOCK = 16  # vLLM's KV block size on CUDA (the prefix cache hits whole blocks)


def _estimate_e2e(sm: StepModel, si: SimInput, c: int) -> float:
    i, o = si.input_tokens, si.output_tokens
    b = min(c, si.max_num_seqs, max(1, int(si.kv_capacity_tokens // max(1.0, i + o))))
    chunks = max(1, math.ceil(i * b / si.max_num_batched_tokens))
    pf = chunks * sm.step(0, 0, min(i * b, si.max_num_batched_tokens), i * i / 2, 0, 1, 1)
    dec = sm.step(b, b * (i + o / 2))
    return si.pre_engine_s + si.frontend_request_s + pf + max(0.0, o - 1) * dec


def simulate(sm: StepModel, si: SimInput) -> SimResult:
    closed = si.concurrency is not None
    steady = si.num_requests is None
    cap = float(si.kv_capacity_tokens)
    budget_max = max(1, si.max_num_batched_tokens)
    max_seqs = max(1, si.max_num_seqs)

    # ---- requests and their arrival times
    if closed:
        c = max(1, int(si.concurrency or 1))
        if steady:
            n_meas = max(2 * c, 96)  # enough requests for a stable p99
            n_total = c + n_meas + c
            e2e = _estimate_e2e(sm, si, c)
            starts = [j * e2e / c for j in range(c)]  # staggered: no start-up wave
        else:
            n_total = max(1, int(si.num_requests or c))
            n_meas = n_total
            if si.stagger:  # clients spread over one request's time, as a steady mix starts
                e2e = si.stagger_s if si.stagger_s is not None else _estimate_e2e(sm, si, c)
                starts = [j * e2e / c for j in range(min(c, n_total))]
            else:
                starts = [0.0] * min(c, n_total)  # a benchmark: every client starts at t=0
    else:
        rate = float(si.request_rate or 0.0)
        if rate <= 0.0:
            raise ValueError("request_rate must be positive")
        if steady:
            n_meas, n_warm = 300, 40
            n_total = n_warm + n_meas
        else:
            n_total = max(1, int(si.num_requests or 1))
            n_meas = n_total
        starts = arrival_times(n_total, rate)
        # a recorded schedule (perf.workloads.loadgen): the benchmark's own arrivals
        if len(si.arrival_s) >= n_total and not steady:
            starts = list(si.arrival_s[:n_total])
    lens = lengths(n_total, si.input_tokens, si.output_tokens, si.length_cv, si.output_spread)
    if len(si.output_lengths) >= n_total and not steady:  # ... and its own output lengths
        p_len = max(1, round(si.input_tokens))
        lens = [(p_len, max(1, int(o))) for o in si.output_lengths[:n_total]]
    jitter = 0.0
    if closed and steady:
        fit_kv = int(si.kv_capacity_tokens // max(1.0, si.input_tokens + si.output_tokens))
        b0 = max(1, min(c, si.max_num_seqs, fit_kv))
        jitter = sm.step(b0, b0 * (si.input_tokens + si.output_tokens / 2.0))
    reqs: list[_Req] = []
    arrivals: list[tuple[float, int]] = []  # (arrival, idx) not yet through the frontend
    ready_q: list[tuple[float, int]] = []  # (ready, idx) through the frontend, not yet queued

    def issue(at: float) -> None:
        j = len(reqs)
        if j >= n_total:
            return
        if closed and steady and j >= c:
            at += jitter * ((0.5 + j * _PHI) % 1.0)  # clients are not phase-locked to steps
        p, o = lens[j]
        r = _Req(idx=j, arrival=at, prompt=p, output=o)
        r.todo = p
        if j in si.cached_requests:
            # a prefix-cache hit on whole blocks; the block holding the last prompt token is
            # computed again (vLLM needs that token's logits: vllm/v1/core/kv_cache_manager.py,
            # get_computed_blocks, "max_cache_hit_length = request.num_tokens - 1")
            r.done = ((p - 1) // _BLOCK) * _BLOCK
        reqs.append(r)
        heapq.heappush(arrivals, (at, j))

    for s in starts:
        issue(s)
    # measured requests: in steady state the ones that arrive after the start-up transient
    if steady and closed:
        warm_t = max(starts) if starts else 0.0
        meas_from = c  # request index; also require arrival after warm_t
    elif steady:
        warm_t = starts[n_warm] if n_total > n_warm else 0.0
        meas_from = n_warm
    else:
        warm_t, meas_from = 0.0, 0

    st = _State()
    acc = _Acc()
    measured: list[_Req] = []
    n_measured_done = 0
    win_on = not steady
    feasible = True

    def is_measured(r: _Req) -> bool:
        return r.idx >= meas_from and r.arrival >= warm_t - 1e-12

    def finish_req(r: _Req) -> None:
        nonlocal n_measured_done
        r.finish = st.t
        st.ctx -= r.prompt + r.generated
        st.used -= r.prompt + r.generated
        st.reserved -= r.prompt + r.output
        del st.decoding[r.idx]
        if win_on:
            acc.done += 1
        if is_measured(r) and len(measured) < n_meas:
            measured.append(r)
            n_measured_done += 1
        # the response's completion is serial work of the frontend, queued behind what is
        # already there; the client sees the end, and in a closed loop sends its next request,
        # when it is done
        start = max(st.t, st.fe_free)
        st.fe_free = start + si.frontend_request_s
        if win_on:
            acc.fe_busy += si.frontend_request_s
        if closed:
            issue(st.fe_free)

    def sync_generated(r: _Req) -> None:
        r.generated = r.join_gen + (st.k - r.join_step)

    def preempt_newest() -> bool:
        """Free the KV of the most recently admitted running request (vLLM V1 recompute)."""
        cands: list[_Req] = list(st.decoding.values()) + st.prefilling
        if len(cands) <= 1:
            return False
        r = max(cands, key=lambda x: x.admit_no)
        if r.idx in st.decoding:
            sync_generated(r)
            st.ctx -= r.prompt + r.generated
            st.used -= r.prompt + r.generated
            del st.decoding[r.idx]
            r.epoch += 1
        else:
            st.prefilling.remove(r)
            st.used -= r.done
        st.reserved -= r.prompt + r.output
        r.todo = r.prompt + r.generated
        r.done = 0
        st.waiting.appendleft(r)
        st.kv_bound = True
        return True

    def through_frontend() -> None:
        """Requests that have arrived reach the engine's queue the fixed latency later."""
        while arrivals and arrivals[0][0] <= st.t + 1e-12:
            at, j = heapq.heappop(arrivals)
            r = reqs[j]
            r.ready = at + si.pre_engine_s
            heapq.heappush(ready_q, (r.ready, j))

    def next_event_time() -> float:
        t = math.inf
        if arrivals:
            t = arrivals[0][0]
        if ready_q:
            t = min(t, ready_q[0][0])
        return t

    guard = 0
    while True:
        guard += 1
        if guard > 3_000_000:  # pragma: no cover - safety net
            feasible = False
            break
        through_frontend()
        while ready_q and ready_q[0][0] <= st.t + 1e-12:
            rt, j = heapq.heappop(ready_q)
            if si.lookahead and rt > st.step_start + 1e-12 and st.k > 0 and st.busy:
                # async scheduling: the next step was scheduled while the last one ran, so a
                # request that arrived during it joins the step after next (vLLM >= 0.12,
                # vllm/v1/engine/core.py step_with_batch_queue)
                reqs[j].sched_after = st.k + 1
            st.waiting.append(reqs[j])
        if not win_on and st.t >= warm_t and len(reqs) > meas_from:
            win_on = True
        if n_measured_done >= n_meas:
            break
        n_dec = len(st.decoding)
        if n_dec == 0 and not st.prefilling and not st.waiting:
            nxt = next_event_time()
            if math.isinf(nxt):
                break
            st.t = max(st.t, nxt)
            st.busy = False
            continue

        # ---- build the batch
        if not si.reserve_kv:
            while n_dec and st.used + n_dec > cap and preempt_newest():
                n_dec = len(st.decoding)
        budget = budget_max - n_dec
        chunks: list[tuple[_Req, int]] = []
        taken = 0  # KV tokens claimed by this step's chunks
        for r in st.prefilling:
            if budget <= 0:
                break
            n = min(r.todo - r.done, budget)
            if not si.reserve_kv:
                n = int(min(n, cap - st.used - n_dec - taken))
                if n <= 0:
                    st.kv_bound = True
                    break
            chunks.append((r, n))
            taken += n
            budget -= n
        while st.waiting and budget > 0 and n_dec + len(st.prefilling) < max_seqs:
            r = st.waiting[0]
            if r.sched_after > st.k:
                break
            running = n_dec + len(st.prefilling) > 0
            if si.reserve_kv:
                if st.reserved + r.prompt + r.output > cap:
                    st.kv_bound = st.kv_bound or running
                    break
            elif cap - st.used - n_dec - taken < r.todo - r.done:
                # admit only when the whole remaining prompt fits: a request whose prefill
                # cannot finish would be preempted again at once (vLLM V1 + prefix cache)
                st.kv_bound = st.kv_bound or running
                break
            st.waiting.popleft()
            st.admit_counter += 1
            r.admit_no = st.admit_counter
            st.reserved += r.prompt + r.output
            st.prefilling.append(r)
            if r.first_sched < 0.0:
                r.first_sched = st.t
            n = min(r.todo - r.done, budget)
            chunks.append((r, n))
            taken += n
            budget -= n
        if n_dec == 0 and not chunks and st.waiting and st.waiting[0].sched_after > st.k:
            st.waiting[0].sched_after = st.k  # nothing in flight: nothing to wait behind
            continue
        if n_dec == 0 and not chunks:
            if st.waiting and not st.prefilling:
                feasible = False  # a request larger than the whole KV cache
                break
            nxt = next_event_time()
            if math.isinf(nxt):
                feasible = False
                break
            st.t = max(st.t, nxt)
            st.busy = False
            continue

        pf_tokens = float(taken)
        pf_pairs = float(sum(n * (r.done + (n + 1) / 2.0) for r, n in chunks))
        pf_prefix = float(sum(r.done for r, _ in chunks))
        pf_done = float(sum(1 for r, n in chunks if r.done + n >= r.todo))

        # ---- how many identical pure-decode steps can run before the next event
        m = 1
        if not chunks and not (st.waiting and st.waiting[0].sched_after > st.k):
            nxt_finish = st.heap[0][0] if st.heap else st.k + 1
            m = max(1, nxt_finish - st.k)
            if not si.reserve_kv:
                m = max(1, min(m, int((cap - st.used) // n_dec)))
        dt0 = sm.step(n_dec, st.ctx, pf_tokens, pf_pairs, pf_prefix, len(chunks), pf_done)
        slope = 0.0
        if m > 1:
            dt1 = sm.step(n_dec, st.ctx + n_dec * (m - 1))
            slope = (dt1 - dt0) / (m - 1)
            can_admit = n_dec + len(st.prefilling) < max_seqs
            nxt = next_event_time()
            if can_admit and not math.isinf(nxt):
                gap = nxt - st.t
                # stop at the step during which the next request shows up
                if slope > 1e-15:
                    a, b = slope / 2.0, dt0 - slope / 2.0
                    j = math.ceil((-b + math.sqrt(b * b + 4.0 * a * gap)) / (2.0 * a))
                else:
                    j = math.ceil(gap / dt0) if dt0 > 0 else 1
                m = max(1, min(m, j))
            total = m * dt0 + slope * m * (m - 1) / 2.0
        else:
            total = dt0

        # ---- advance
        emitted = n_dec * m + pf_done
        if win_on:
            mean_dt = total / m
            acc.time += total
            acc.tokens += emitted
            acc.b_time += n_dec * total
            acc.ctx_time += (st.ctx + n_dec * (m - 1) / 2.0) * total
            acc.pf_time += pf_tokens * total
            acc.steps += m
            acc.dt2 += m * mean_dt * mean_dt
            if chunks:
                acc.pf_steps += m
                acc.pf_step_time += total
            if n_dec:
                acc.gap_weighted += n_dec * total
                acc.gap_tokens += n_dec * m
                if chunks:
                    acc.mix_steps += m
                    acc.mix_time += total
                else:
                    acc.dec_steps += m
                    acc.dec_time += total
        backlog = st.fe_free  # the frontend's work queued before this step's outputs
        if si.frontend_token_s > 0.0:
            busy = si.frontend_token_s * emitted
            st.fe_free = max(st.fe_free, st.t) + busy
            if win_on:
                acc.fe_busy += busy
        st.step_start = st.t + total - total / m  # start of the last of the m steps
        st.busy = True
        st.t += total
        st.k += m
        st.ctx += n_dec * m
        st.used += n_dec * m
        for r, n in chunks:
            r.done += n
            st.used += n
            if r.done >= r.todo:
                st.prefilling.remove(r)
                r.generated += 1
                if r.first_token < 0.0:
                    r.first_engine = st.t
                    r.first_token = max(st.t, backlog)  # delivered behind the backlog
                    r.fe_wait = r.first_token - st.t
                st.ctx += r.prompt + r.generated
                r.join_step, r.join_gen = st.k, r.generated
                st.decoding[r.idx] = r
                if r.generated >= r.output:
                    finish_req(r)
                else:
                    heapq.heappush(st.heap, (st.k + r.output - r.generated, r.idx, r.epoch))
        while st.heap and st.heap[0][0] <= st.k:
            _, j, ep = heapq.heappop(st.heap)
            r = reqs[j]
            if ep != r.epoch or j not in st.decoding:
                continue
            sync_generated(r)
            finish_req(r)

    return _result(si, closed, steady, reqs, measured, acc, st, feasible)
