"""The performance model's arithmetic against values computed by hand (issue 22 item 7):
a roofline step, closed-loop waves under chunked prefill, async scheduling's lookahead, a
prefix-cache hit, the scheduler step by step (chunks, reserve and optimistic admission,
preemption, what a run leaves in its summary), request lengths and arrival times, the arrival
patterns' workloads, the searches over concurrency and rate, the batch limit, replicas and
cost. The step model's own terms: tests/test_perf_hand_step.py.

Each expected value is worked out in the comment above it, from the mechanism, not pasted
from the model's output."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from llmdeploy.perf import api, workloads
from llmdeploy.perf import lengths as lengths_mod
from llmdeploy.perf import sim as sim_mod
from llmdeploy.perf.assess import _cost, fleet_nodes
from llmdeploy.perf.sim import SimInput, simulate
from llmdeploy.perf.step import StepModel, build_step_model
from llmdeploy.perf.types import Constants, Deployment, Hardware, ModelGeometry, Workload
from llmdeploy.sizing.batching import kv_sequences, sequences_limit
from llmdeploy.sizing.requests import request_from_options
from llmdeploy.sizing.suggest import size

# a step model whose every step takes 10 ms whatever it carries: only host_fixed is non-zero
FLAT = StepModel(
    s_dense_w=0.0, s_dense_f=0.0, s_expert_w=0.0, s_expert_f=0.0, num_experts=0,
    expert_hit=0.0, s_lm_w=0.0, s_lm_f=0.0, s_kv_full=0.0, s_kv_slide=0.0, window=1 << 30,
    s_att_dec=0.0, s_att_pf=0.0, ar_alpha=0.0, s_ar_tok=0.0, gpu_fixed=0.0, host_fixed=0.010,
    host_seq=0.0, overlap=False, stream_tok=0.0, knee=4.0, kv_tok_full=0.0,
)  # fmt: skip


# one layer, hidden 1024, 8 heads x 128, 8 KV heads, MLP 4096, vocab 1000, untied; a GPU of
# 1 TB/s and 100 TFLOP/s; half of each reached, a sharp max(bandwidth, compute), no overheads
TOY = ModelGeometry(
    name="toy", layers=1, hidden=1024, heads=8, kv_heads=8, head_dim=128, intermediate=4096,
    vocab=1000,
)  # fmt: skip
TOY_HW = Hardware(name="toy", mem_bw_gbs=1000.0, fp16_tflops=100.0, interconnect="none")
TOY_C = Constants(
    engine="t", versions="t", eta_weights=0.5, eta_kv=0.5, eta_experts=0.5, mu_gemm=0.5,
    mu_attn=0.5, fp8_gemm_factor=1.0, gemm_knee=1000.0, ar_latency_nvlink_us=0.0,
    ar_latency_pcie_us=0.0, link_efficiency=1.0, layer_overhead_us=0.0,
    step_overhead_us=0.0, seq_overhead_us=0.0, host_overlap=True, stream_token_us=0.0,
    ttft_overhead_ms=0.0, request_overhead_ms=0.0,
)  # fmt: skip


def _sim(**kw: object) -> SimInput:
    base = dict(
        input_tokens=100.0, output_tokens=3.0, length_cv=0.0, concurrency=4, request_rate=None,
        num_requests=4, max_num_batched_tokens=200, max_num_seqs=64,
        kv_capacity_tokens=1_000_000, reserve_kv=False, pre_engine_s=0.0,
    )  # fmt: skip
    base.update(kw)
    return SimInput(**base)  # type: ignore[arg-type]


def test_a_closed_loop_wave_waits_for_the_prefill_of_the_whole_wave() -> None:
    # 4 clients x 100 prompt tokens, 200 tokens a step, 10 ms a step: step 1 prefills requests
    # 0 and 1 (first tokens at 10 ms); step 2 decodes 0 and 1 first, leaving 198 tokens: all
    # 100 of request 2 (20 ms) and 98 of request 3, whose last 2 tokens run in step 3 (30 ms)
    r = simulate(FLAT, _sim())
    assert r.ttft == pytest.approx((0.010, 0.010, 0.020, 0.030))
    # 3 output tokens: the first at prefill, two more decode steps 10 ms apart
    assert r.tpot == pytest.approx((0.010,) * 4)


def test_async_lookahead_delays_a_request_that_arrives_during_a_step_by_one_step() -> None:
    # open loop, two requests 5 ms apart, 1-token prompts... request 0 arrives at t=0 and
    # runs steps [0,10) (prefill) and decodes on; request 1 arrives at 5 ms, during step 1:
    # without lookahead it is scheduled in step 2 [10,20) -> TTFT 15 ms; with lookahead the
    # scheduler already planned step 2 while step 1 ran, so it joins step 3 [20,30) -> 25 ms
    times = (0.0, 0.005)
    base = _sim(
        concurrency=None, request_rate=1.0, num_requests=2, input_tokens=1.0,
        output_tokens=10.0,
    )  # fmt: skip
    real = sim_mod.arrival_times
    sim_mod.arrival_times = lambda n, rate: list(times[:n])  # type: ignore[assignment]
    try:
        plain = simulate(FLAT, base)
        ahead = simulate(FLAT, dataclasses.replace(base, lookahead=True))
    finally:
        sim_mod.arrival_times = real
    assert sorted(plain.ttft) == pytest.approx([0.010, 0.015])
    assert sorted(ahead.ttft) == pytest.approx([0.010, 0.025])


def test_a_prefix_cache_hit_computes_only_the_block_of_the_last_prompt_token() -> None:
    # 100-token prompt, 16-token blocks: the hit covers floor(99 / 16) x 16 = 96 tokens and
    # the last 4 are computed; with 2 tokens a step that is 2 prefill steps instead of 50
    one = dict(concurrency=1, num_requests=1, max_num_batched_tokens=2, output_tokens=1.0)
    cold = simulate(FLAT, _sim(**one))
    hit = simulate(FLAT, _sim(**one, cached_requests=frozenset({0})))
    assert cold.ttft == pytest.approx((0.500,))
    assert hit.ttft == pytest.approx((0.020,))


def test_the_roofline_step_of_a_toy_model_by_hand() -> None:
    # TOY: attention 1024 x 128 x (2x8 + 2x8) = 4,194,304 params; MLP 3 x 1024 x 4096 = 12,582,912
    sm = build_step_model(TOY_HW, TOY, Deployment(), TOY_C)
    body = 4_194_304 + 12_582_912
    # weights: 2 bytes x 16,777,216 params / (0.5 x 1e12 B/s) = 67.108864 us
    assert sm.s_dense_w == pytest.approx(2 * body / 0.5e12)
    # KV per token: 2 (K, V) x 8 heads x 128 x 2 bytes = 4,096 B, read at 0.5 TB/s
    assert sm.s_kv_full == pytest.approx(4096 / 0.5e12)
    # one decode token: the body's FLOPs 2 x 16.8M / (0.5 x 100e12) = 0.67 us, far below the
    # 67 us of reading it: with a sharp knee the GEMM time is the weights time; the LM head
    # (1000 x 1024 x 2 B / 0.5e12 = 4.096 us) adds, and 1,000 tokens of context add 8.192 us
    lm = 1000 * 1024 * 2 / 0.5e12
    step = sm.step(1, 1000.0)
    assert step == pytest.approx(2 * body / 0.5e12 + lm + 1000 * 4096 / 0.5e12, rel=1e-3)


def test_routed_expert_gemms_slow_down_with_the_experts_size_on_one_gpu() -> None:
    # one MoE layer, hidden 1024, 8 experts (top 2) of intermediate 2048: one expert's GEMMs are
    # 3 x 1024 x 2048 = 6,291,456 params, two active per token -> 2 x 2 x 6,291,456 FLOPs per
    # token; dense GEMMs at 0.5 x 100 TFLOPS = 50 TFLOPS, experts at moe_gemm_factor 0.8 of
    # that times i / (i + moe_dim_half) with moe_dim_half 2048:
    #   TP 1, i = 2048: 0.8 x 2048 / 4096 = 0.4 -> 20 TFLOPS
    #   TP 2, i = 1024 per GPU (each expert sliced): 0.8 x 1024 / 3072 -> 13.33 TFLOPS, and
    #         half the FLOPs per GPU
    #   TP 2 with expert parallelism: experts whole, i = 2048 -> 20 TFLOPS
    geo = dataclasses.replace(
        TOY, name="toy-moe", num_experts=8, experts_per_token=2, moe_intermediate=2048
    )
    hw = dataclasses.replace(TOY_HW, interconnect="nvlink")
    c = dataclasses.replace(TOY_C, moe_gemm_factor=0.8, moe_dim_half=2048.0)
    flops = 2 * 2 * 6_291_456
    tp1 = build_step_model(hw, geo, Deployment(), c)
    assert tp1.s_expert_f == pytest.approx(flops / 20e12)
    tp2 = build_step_model(hw, geo, Deployment(tp=2), c)
    assert tp2.s_expert_f == pytest.approx(flops / 2 / (50e12 * 0.8 * 1024 / 3072))
    ep2 = build_step_model(hw, geo, Deployment(tp=2, expert_parallel=True), c)
    assert ep2.s_expert_f == pytest.approx(flops / 2 / 20e12)
    # without the size term (moe_dim_half 0) the experts run at moe_gemm_factor alone
    flat = build_step_model(hw, geo, Deployment(), dataclasses.replace(c, moe_dim_half=0.0))
    assert flat.s_expert_f == pytest.approx(flops / 40e12)


def test_arrival_patterns_map_to_their_workloads() -> None:
    closed = workloads.workload("closed-loop", 512, 256, concurrency=16)
    assert (closed.concurrency, closed.num_requests, closed.output_spread) == (16, 64, 0.0)
    assert closed.skip_warmup
    steady = workloads.workload("steady", 512, 256, concurrency=16)
    assert (steady.num_requests, steady.output_spread) == (None, 0.5)
    poisson = workloads.workload("poisson", 512, 256, requests_per_s=3.0)
    assert (poisson.request_rate, poisson.concurrency, poisson.output_spread) == (3.0, None, 0.5)
    loadgen = workloads.from_loadgen("512/128/stagger:32/128")
    assert (loadgen.concurrency, loadgen.num_requests, loadgen.skip_warmup) == (32, 128, True)
    # a Poisson sweep: 512-token prompts at 4 requests/s, 200 requests
    replay = workloads.from_loadgen("512/128/poisson:4/200")
    assert (replay.input_tokens, replay.output_tokens, replay.request_rate) == (512, 128, 4.0)
    assert (replay.num_requests, replay.concurrency, replay.skip_warmup) == (200, None, True)
    with pytest.raises(ValueError, match="request rate"):
        workloads.workload("poisson", 512, 256, concurrency=4)


def _sizing(tp: int = 2, instance: str = "p4d.24xlarge") -> object:
    req = request_from_options(
        "Llama-3.1-8B", instance=instance, gpu=None, gpu_memory_gib=None, tp=tp, dp=1,
        expert_parallel=False, quantization="none", kv_cache_dtype="auto", max_model_len=8192,
        gpu_memory_utilization=None, engine="vllm", engine_version=None, pp=1, nodes=1,
        base_dir=Path.cwd(),
    )  # fmt: skip
    return size(req)


def test_the_batch_limit_is_what_the_kv_cache_holds_rounded_up_to_8() -> None:
    s = _sizing()
    per = s.request.slo_input_tokens + s.request.slo_output_tokens  # 512 + 256
    assert kv_sequences(s) == s.kv_cache_tokens // per
    n = sequences_limit(s, floor=8, cap=1_000_000)
    assert n == 8 * math.ceil(s.kv_cache_tokens // per / 8)
    assert n % 8 == 0 and n - 8 < kv_sequences(s) <= n
    assert sequences_limit(s, floor=8, cap=64) == 64  # the engine's cap wins


def test_fleet_nodes_and_cost_by_hand() -> None:
    s = _sizing(tp=2)  # 2 of a p4d's 8 GPUs: 4 replicas a node
    assert fleet_nodes(s, 5) == 2  # ceil(5 / 4)
    cost = _cost(10.0, s, "2026-01-01", tok_s=1000.0, replicas=5)
    assert cost is not None
    assert cost.fleet_usd_per_hour == pytest.approx(20.0)  # 2 whole nodes x $10/h
    assert cost.usd_per_hour == pytest.approx(2.5)  # a quarter of a node
    # $20/h over 5 replicas x 1,000 tokens/s x 3,600 s = $1.111 per 1M tokens
    assert cost.usd_per_1m_output_tokens == pytest.approx(20.0 / (1000 * 5 * 3600) * 1e6)


# --- lengths and arrivals --------------------------------------------------------------------


def test_weibull_shape_of_a_coefficient_of_variation() -> None:
    # CV of a Weibull of shape k: sqrt(G(1 + 2/k) / G(1 + 1/k)^2 - 1). k = 1 is the
    # exponential (CV 1); k = 2 the Rayleigh, CV sqrt(4/pi - 1) = 0.5227
    assert lengths_mod._weibull_shape(1.0) == pytest.approx(1.0, abs=1e-9)
    assert lengths_mod._weibull_shape(math.sqrt(4 / math.pi - 1)) == pytest.approx(2.0, abs=1e-9)


def test_spread_lengths_keep_their_means() -> None:
    # Weibull draws of CV 1 rescaled to the mean: over 1,000 requests the means are 512 and
    # 256 to rounding (each length is rounded to a whole token), and the lengths do vary
    ls = lengths_mod.lengths(1000, 512, 256, 1.0)
    prompts, outputs = [p for p, _ in ls], [o for _, o in ls]
    assert sum(prompts) / 1000 == pytest.approx(512, abs=0.5)
    assert sum(outputs) / 1000 == pytest.approx(256, abs=0.5)
    assert min(prompts) < 100 and max(prompts) > 1500  # CV 1: an exponential's spread


def test_spread_outputs_are_uniform_around_the_mean_with_fixed_prompts() -> None:
    # the steady and Poisson patterns: prompts fixed, outputs 256 x (0.5 + u_j) with
    # u_j = (0.5 + j x 0.618034) mod 1 = 0.5, 0.118034, 0.736068: 256, 158.2, 316.4 tokens
    assert lengths_mod.lengths(3, 512, 256, 0.0, 0.5) == [(512, 256), (512, 158), (512, 316)]


def test_arrival_times_are_exponential_gaps_at_the_rate() -> None:
    # gap j: -ln(1 - u_j x 0.999999) / rate with u_j = (0.5 + j x 0.618034) mod 1;
    # u_0 = 0.5: ln(1 / 0.5000005) / 2 = 0.346573 s; u_1 = 0.118034:
    # -ln(0.881966) / 2 = 0.062801 s
    times = lengths_mod.arrival_times(3, 2.0)
    assert times == pytest.approx([0.0, 0.346573, 0.346573 + 0.062801], abs=1e-6)
    # the gaps' mean is 1 / rate: 999 gaps at 4/s span 250 s (to 1 %)
    assert lengths_mod.arrival_times(1000, 4.0)[-1] == pytest.approx(999 / 4, rel=0.01)
    assert lengths_mod.arrival_times(3, math.inf) == [0.0, 0.0, 0.0]  # a burst


def test_an_open_loop_replay_leaves_the_first_tenth_of_arrivals_out() -> None:
    # 20 requests at once (rate inf), 100-token prompts, 200 tokens a step of 10 ms, one
    # output token each: step k prefills requests 2k-2 and 2k-1, so request j's first token
    # comes at 10 ms x (j // 2 + 1). The steady window (../shared/gpu/loadgen.py) drops the
    # first tenth, requests 0 and 1: TTFTs 20, 20, 30, 30, ..., 100, 100 ms
    burst = dict(concurrency=None, request_rate=math.inf, num_requests=20, output_tokens=1.0)
    r = simulate(FLAT, _sim(**burst, skip_warmup=True))
    assert r.ttft == pytest.approx(tuple(0.010 * (j // 2 + 1) for j in range(2, 20)))
    # throughput counts the whole replay: 20 tokens in 100 ms
    assert r.output_tokens_per_s == pytest.approx(200.0)
    assert simulate(FLAT, _sim(**burst)).ttft == pytest.approx(
        tuple(0.010 * (j // 2 + 1) for j in range(20))
    )


# --- the searches over the load, on a replica whose every step takes 10 ms -------------------

# GPU terms made negligible (bandwidth and compute efficiencies of 1e12), a 10 ms host step not
# overlapped with them: every step takes 10 ms whatever it carries
HUGE = 1e12
FLAT_C = dataclasses.replace(
    TOY_C, eta_weights=HUGE, eta_kv=HUGE, eta_experts=HUGE, mu_gemm=HUGE, mu_attn=HUGE,
    step_overhead_us=10_000.0, host_overlap=False,
)  # fmt: skip


def test_the_throughput_ceiling_is_the_batch_the_kv_cache_holds_over_one_step() -> None:
    # a cache of 4 prompts of 512 tokens holds 4 sequences (max_num_seqs 256 does not bind):
    # 4 tokens every 10 ms = 400 tokens/s
    dep = Deployment(max_num_seqs=256, kv_capacity_tokens=4 * 512)
    assert api.throughput_ceiling(TOY_HW, TOY, dep, 512, FLAT_C) == pytest.approx(400.0)
    # max_num_seqs 2 binds: 200 tokens/s; and at most 1 request in flight: 100 tokens/s
    dep2 = dataclasses.replace(dep, max_num_seqs=2)
    assert api.throughput_ceiling(TOY_HW, TOY, dep2, 512, FLAT_C) == pytest.approx(200.0)
    assert api.throughput_ceiling(TOY_HW, TOY, dep, 512, FLAT_C, 1) == pytest.approx(100.0)


def test_without_targets_the_concurrency_search_stops_at_twice_the_kv_cache() -> None:
    # no latency target: every load passes, and the search tries no more than 2 x the
    # sequences of 512 + 256 tokens a 10,000-token cache holds, plus one: 2 x 13 + 1 = 27
    dep = Deployment(max_num_seqs=256, kv_capacity_tokens=10_000)
    got = api.max_concurrency_meeting(TOY_HW, TOY, dep, 512, 256, None, None, FLAT_C, margin=0.0)
    assert got == 27
    assert api.max_concurrency_meeting(
        TOY_HW, TOY, dep, 512, 256, None, None, FLAT_C, margin=0.0, cap=5
    ) == 5  # fmt: skip


def test_the_rate_search_on_flat_steps() -> None:
    # 4 sequences, 100-token prompts, outputs of 10 +-50 %: a request arriving at an idle
    # replica gets its first token after one 10 ms step, one arriving during a step waits for
    # it: TTFT between 10 and 20 ms; every later token 10 ms apart (ITL 10 ms)
    dep = Deployment(max_num_seqs=4, kv_capacity_tokens=1_000_000)

    def rate(ttft: float | None, itl: float | None, m_ttft: float) -> float:
        return api.max_rate_meeting(
            TOY_HW, TOY, dep, 100, 10, ttft, itl, FLAT_C, margins=(m_ttft, 0.0), cap=5.0
        )

    # TTFT 30 ms planned with a 25 % margin is 24 ms, above 20: the cap (5/s) meets it
    assert rate(30.0, 10.5, 0.25) == 5.0
    # an ITL target under one step: not even a trickle meets it
    assert rate(None, 9.5, 0.0) == 0.0
    # TTFT 15 ms with 25 % is 12 ms: an idle replica's 10 ms meets it, a busy one's wait of up
    # to a step does not, so the answer is a rate below the cap, where p99 TTFT is <= 12 ms
    low = rate(15.0, None, 0.25)
    assert 5.0 / 256 <= low < 5.0
    load = workloads.workload("poisson", 100, 10, requests_per_s=low)
    at = api.estimate(TOY_HW, TOY, dep, load, FLAT_C)
    assert at.ttft_p99_ms <= 12.0 and at.itl_p99_ms == pytest.approx(10.0)


# --- the scheduler, step by step (FLAT: every step 10 ms) ------------------------------------


def test_a_prompt_longer_than_the_budget_is_chunked_and_the_next_waits_for_what_is_left() -> None:
    # 2 clients x 300 tokens, 200 a step: step 1 takes 200 of request 0; step 2 its last 100
    # (first token at 20 ms) and 100 of request 1; step 3 decodes request 0 (1 token) and
    # takes 199 more of request 1; step 4 its last 1: first token at 40 ms
    r = simulate(FLAT, _sim(concurrency=2, num_requests=2, input_tokens=300.0))
    assert r.ttft == pytest.approx((0.020, 0.040))


def test_reserve_admission_queues_a_request_whose_prompt_and_output_do_not_fit() -> None:
    # TensorRT-LLM's guaranteed_no_evict keeps prompt + output (100 + 3) per request: a
    # 150-token cache holds one. Request 1 waits for request 0 to finish (prefill at 10 ms,
    # decodes at 20 and 30 ms) and gets its first token one step later, at 40 ms
    r = simulate(FLAT, _sim(concurrency=2, num_requests=2, reserve_kv=True, kv_capacity_tokens=150))
    assert r.ttft == pytest.approx((0.010, 0.040))
    assert r.kv_bound


def test_optimistic_admission_preempts_the_newest_request_and_recomputes_it() -> None:
    # vLLM V1: 2 x (100 prompt + 20 output) in a 230-token cache. After the prefill the cache
    # holds 200 tokens and grows by 2 a decode step; before the 16th decode step it would pass
    # 230, so request 1 (admitted last) gives its 116 tokens back and waits: request 0 ends at
    # 10 + 19 x 10 = 200 ms (ITL 10 ms). Request 1 recomputes its 116 tokens in one step
    # (210 ms, its 17th token) and decodes 3 more: (240 - 10) / 19 = 12.105 ms a token
    r = simulate(FLAT, _sim(concurrency=2, num_requests=2, output_tokens=20.0,
                            kv_capacity_tokens=230))  # fmt: skip
    assert r.ttft == pytest.approx((0.010, 0.010))
    assert r.tpot == pytest.approx((0.010, 0.230 / 19))
    assert r.kv_bound


def test_a_request_larger_than_the_whole_cache_is_infeasible() -> None:
    r = simulate(FLAT, _sim(concurrency=1, num_requests=1, kv_capacity_tokens=50))
    assert not r.feasible and r.ttft == ()


def test_an_arrival_during_a_run_of_decode_steps_waits_only_for_the_step_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # request 0 at t=0 (1-token prompt, 10 tokens: steps until 100 ms), request 1 at 35 ms:
    # the run of decode steps stops at the step during which it arrives, [30, 40) ms, and it
    # is prefilled in [40, 50): TTFT 15 ms
    monkeypatch.setattr(sim_mod, "arrival_times", lambda n, rate: [0.0, 0.035][:n])
    base = dict(concurrency=None, request_rate=1.0, num_requests=2, input_tokens=1.0)
    r = simulate(FLAT, _sim(**base, output_tokens=10.0))
    assert r.ttft == pytest.approx((0.010, 0.015))


def test_an_open_loop_needs_a_positive_rate() -> None:
    with pytest.raises(ValueError, match="request_rate must be positive"):
        simulate(FLAT, _sim(concurrency=None, request_rate=0.0))


def test_prefill_attention_counts_the_causal_pairs_however_the_prompt_is_chunked() -> None:
    # attention alone, 1 us a (query, key) pair: a 100-token prompt has 100 x 101 / 2 = 5,050
    # causal pairs = 5.05 ms, in one chunk or in two of 50 (50 x 25.5 + 50 x (50 + 25.5))
    att = dataclasses.replace(FLAT, host_fixed=0.0, s_att_pf=1e-6)
    for budget in (200, 50):
        one = dict(concurrency=1, num_requests=1, output_tokens=1.0)
        r = simulate(att, _sim(**one, max_num_batched_tokens=budget))
        assert r.ttft == pytest.approx((0.00505,))


def test_what_one_request_leaves_in_the_summary() -> None:
    # 100-token prompt, 11 tokens: 1 prefill step and 10 decode steps of 10 ms = 110 ms
    r = simulate(FLAT, _sim(concurrency=1, num_requests=1, output_tokens=11.0))
    assert r.output_tokens_per_s == pytest.approx(11 / 0.110)
    # decoding in 10 of the 11 steps; its context during them 101 ... 110, mean 105.5
    assert r.mean_batch == pytest.approx(10 / 11)
    assert r.mean_ctx == pytest.approx(105.5)
    # steps of 10 ms: a random arrival waits E[dt^2] / 2 E[dt] = 5 ms for the one in flight
    assert r.step_mean == pytest.approx(0.010)
    assert r.step_residual == pytest.approx(0.005)
    assert r.itl_token_mean == pytest.approx(0.010)


def test_the_waves_mixed_and_decode_only_steps() -> None:
    # the wave of test_a_closed_loop_wave_...: steps 2 and 3 decode and prefill (mixed),
    # steps 4 and 5 only decode: half the decoding steps are mixed, each 10 ms; the prompt
    # tokens per step, time-weighted: (200 + 198 + 2) / 5 steps = 80
    r = simulate(FLAT, _sim())
    assert (r.mix_fraction, r.mix_step_mean, r.dec_step_mean) == pytest.approx((0.5, 0.01, 0.01))
    assert r.mean_prefill_tokens == pytest.approx(80.0)


def test_staggered_clients_start_one_estimated_request_apart() -> None:
    # the estimate of one request's time that spreads a steady loop's clients: a step with a
    # logit row costs 10 ms + a 5 ms LM head. 4 clients x 100 tokens at 200 a step: 2 prefill
    # steps with logits (2 x 15 ms) and 2 decode steps (2 x 15 ms): 60 ms
    lm = dataclasses.replace(FLAT, s_lm_w=0.005)
    assert sim_mod._estimate_e2e(lm, _sim(), 4) == pytest.approx(0.060)


# --- replays of the GPU toolkit's load generator (perf.workloads.loadgen) ----------------------


def test_a_loadgen_replay_draws_the_toolkits_seeded_lengths_and_gaps() -> None:
    # loadgen.py draws output lengths from random.Random(7): the first two random() values of
    # Python's Mersenne Twister seeded 7 are 0.323833 and 0.150849, so with OSL 128 and spread
    # 0.5 the outputs are round(128 x 0.823833) = 105 and round(128 x 0.650849) = 83 tokens.
    # Its Poisson gaps come from random.Random(11), whose first random() is 0.452380: the first
    # request arrives -ln(1 - 0.452380) / 2 = 0.602173 / 2 = 0.301086 s after the clock starts
    wl = workloads.loadgen("poisson", 512, 128, 2, requests_per_s=2.0)
    assert wl.output_lengths == (105, 83)
    assert wl.arrival_s[0] == pytest.approx(0.301086, abs=1e-6)
    assert wl.arrival_s[1] > wl.arrival_s[0] and wl.output_spread == 0.5
    # a closed loop has fixed lengths and no arrival times; a steady mix staggers its clients
    # by 30 ms per output token (128 x 0.030 = 3.84 s over the C clients)
    closed = workloads.loadgen("closed-loop", 512, 128, 3, concurrency=3)
    assert closed.output_lengths == (128, 128, 128) and closed.arrival_s == ()
    assert workloads.loadgen("steady", 512, 128, 3, concurrency=3).stagger_s == pytest.approx(3.84)
    assert workloads.from_loadgen("512/128/poisson:2/2") == wl


def test_the_toolkits_seeds_are_the_ones_the_replay_uses() -> None:
    # cross-check with ../shared/gpu/loadgen.py when the checkout has it beside it
    src = Path(__file__).resolve().parents[1].parent / "shared" / "gpu" / "loadgen.py"
    if not src.exists():
        pytest.skip("../shared/gpu/loadgen.py is not beside this checkout")
    text = src.read_text()
    assert "rng_len = random.Random(7)" in text
    assert "rng = random.Random(11)" in text and "t += rng.expovariate(arg)" in text
    assert "est = 0.030 * osl" in text


def test_a_replayed_schedule_is_the_one_the_simulation_runs() -> None:
    # FLAT: every step 10 ms. Request 0 arrives at 0.5 s (100-token prompt, 3 outputs): its
    # prefill step ends at 0.51 s with the first token, two decode steps end it at 0.53 s.
    # Request 1 arrives at 1.0 s with 5 outputs: first token 1.01 s, done at 1.05 s. The
    # throughput of the replay is over the benchmark's clock from 0: 8 tokens / 1.05 s
    r = simulate(
        FLAT,
        _sim(
            concurrency=None, request_rate=2.0, num_requests=2, output_tokens=4.0,
            arrival_s=(0.5, 1.0), output_lengths=(3, 5), skip_warmup=True,
        ),
    )  # fmt: skip
    assert r.ttft == pytest.approx((0.010,))  # the steady window keeps request 1
    assert r.output_tokens_per_s == pytest.approx(8 / 1.05)


def test_packed_4bit_weights_stream_at_w4_bw_factor_of_the_bandwidth() -> None:
    # TOY's body, 16,777,216 params, at 0.5 byte each (W4A16) read at 0.5 x 1 TB/s: 16.777 us;
    # at w4_bw_factor 0.5 the packed weights stream at half of that: 33.554 us. The LM head
    # stays at 2 bytes a parameter and full bandwidth
    dep = Deployment(weight_bytes_dense=0.5, gemm_dtype="w4a16")
    c = dataclasses.replace(TOY_C, w4_bw_factor=0.5)
    sm = build_step_model(TOY_HW, TOY, dep, c)
    assert sm.s_dense_w == pytest.approx(16_777_216 * 0.5 / (0.5e12 * 0.5))
    assert sm.s_lm_w == pytest.approx(1000 * 1024 * 2 / 0.5e12)
    # a BF16 deployment is not affected by the factor
    bf16 = build_step_model(TOY_HW, TOY, Deployment(), c)
    assert bf16.s_dense_w == pytest.approx(16_777_216 * 2 / 0.5e12)


def test_a_prompt_step_pays_graph_gaps_and_a_step_above_the_largest_graph_its_launches() -> None:
    # FLAT's 10 ms steps (host work, run serially with the GPU); 2 ms of GPU gaps in any step
    # with prompt tokens; CUDA graphs up to 512 tokens, and 5 ms of launches in a step above
    sm = dataclasses.replace(FLAT, prefill_gpu=0.002, graph_tokens=512.0, eager_host=0.005)
    assert sm.step(4, 400.0) == pytest.approx(0.010)  # decode only, in a graph
    # a lone 512-token prompt fits the largest graph: only the gaps, 12 ms
    assert sm.step(0, 0.0, 512.0, 131_328.0, 0.0, 1.0, 1.0) == pytest.approx(0.012)
    # the same prompt beside 4 decodes is a 516-token step, run without graphs: 17 ms
    assert sm.step(4, 400.0, 512.0, 131_328.0, 0.0, 1.0, 1.0) == pytest.approx(0.017)
    # a later 100-token chunk beside 4 decodes fits a graph again: 12 ms
    assert sm.step(4, 400.0, 100.0, 5_000.0, 100.0, 1.0, 0.0) == pytest.approx(0.012)
    # 600 decoding sequences, no prompt: above the largest graph too, 15 ms
    assert sm.step(600, 60_000.0) == pytest.approx(0.015)
    # with graphs up to 1024 tokens the 516-token step is captured: 12 ms
    wide = dataclasses.replace(sm, graph_tokens=1024.0)
    assert wide.step(4, 400.0, 512.0, 131_328.0, 0.0, 1.0, 1.0) == pytest.approx(0.012)
    # the constants: the gaps and the launches per decoder layer (x 1 layer; x 32 layers), the
    # largest graph from the deployment (-1: no limit known, never eager; 0: --enforce-eager)
    c = dataclasses.replace(TOY_C, prefill_gpu_layer_us=30.0, eager_layer_us=400.0)
    built = build_step_model(TOY_HW, TOY, Deployment(cudagraph_max_tokens=512), c)
    assert built.prefill_gpu == pytest.approx(30e-6)
    assert built.eager_host == pytest.approx(400e-6)
    assert built.graph_tokens == 512.0
    assert build_step_model(TOY_HW, TOY, Deployment(), c).graph_tokens == math.inf
    assert build_step_model(TOY_HW, TOY, Deployment(cudagraph_max_tokens=0), c).graph_tokens == 0
    deep = dataclasses.replace(TOY, layers=32)
    deep_sm = build_step_model(TOY_HW, deep, Deployment(), c)
    assert deep_sm.prefill_gpu == pytest.approx(960e-6)
    assert deep_sm.eager_host == pytest.approx(12_800e-6)


def test_fp8_linears_add_their_activation_quantization_to_a_step_above_the_largest_graph() -> None:
    """An FP8 layer launches one more op per linear (the activation quantization, vLLM
    scaled_fp8_quant) than a 16-bit one, and a step without CUDA graphs pays for it on the
    host: (eager_layer_us + eager_fp8_layer_us) x layers. A 16-bit or 4-bit deployment of the
    same geometry pays only eager_layer_us x layers; a step within the largest graph pays
    neither (its launches are replayed)."""
    c = dataclasses.replace(TOY_C, eager_layer_us=400.0, eager_fp8_layer_us=500.0)
    deep = dataclasses.replace(TOY, layers=32)
    fp8 = build_step_model(TOY_HW, deep, Deployment(gemm_dtype="fp8", cudagraph_max_tokens=512), c)
    assert fp8.eager_host == pytest.approx(32 * 900e-6)  # 28.8 ms
    for other in ("bf16", "w4a16"):
        dep = Deployment(gemm_dtype=other, cudagraph_max_tokens=512)
        assert build_step_model(TOY_HW, deep, dep, c).eager_host == pytest.approx(32 * 400e-6)
    # on FLAT's serial 10 ms steps: a 516-token step of the FP8 model costs 10 + 28.8 ms, a
    # decode step in a graph 10 ms
    sm = dataclasses.replace(FLAT, graph_tokens=512.0, eager_host=fp8.eager_host)
    assert sm.step(4, 400.0) == pytest.approx(0.010)
    assert sm.step(4, 400.0, 512.0, 131_328.0, 0.0, 1.0, 1.0) == pytest.approx(0.0388)
    # the shipped vLLM >= 0.12 constants charge FP8 layers more than 16-bit ones
    from llmdeploy.engines.vllm.perf_constants import CONSTANTS

    shipped = CONSTANTS[-1][3]
    assert shipped.eager_fp8_layer_us > 0.0 and shipped.eager_layer_us > 0.0


def test_vllms_largest_cuda_graph_is_twice_max_num_seqs_up_to_512_tokens() -> None:
    """vllm/config/vllm.py (v0.24.0, _set_cudagraph_sizes): min(2 x max_num_seqs, 512), never
    above max_num_batched_tokens; --enforce-eager captures none; a server's command line can
    name another size (-cc.max_cudagraph_capture_size, as the seventh H200 lease served)."""
    from llmdeploy.engines.vllm import perf as vperf

    assert vperf.cudagraph_max_tokens(256, 8192) == 512
    assert vperf.cudagraph_max_tokens(64, 8192) == 128
    assert vperf.cudagraph_max_tokens(1024, 256) == 256
    assert vperf.cudagraph_max_tokens(256, 8192, enforce_eager=True) == 0
    # gpt-oss: vLLM's config hook raises the largest graph to 1024 (capped at the token budget
    # only): the ninth H200 lease's gpt-oss-20b log says "largest=1024"
    gpt_oss = ("GptOssForCausalLM",)
    assert vperf.cudagraph_max_tokens(256, 8192, architectures=gpt_oss) == 1024
    assert vperf.cudagraph_max_tokens(64, 8192, architectures=gpt_oss) == 1024
    assert vperf.cudagraph_max_tokens(1024, 768, architectures=gpt_oss) == 768
    assert vperf.cudagraph_max_tokens(256, 8192, enforce_eager=True, architectures=gpt_oss) == 0
    assert vperf.cudagraph_tokens_from_args("-cc.max_cudagraph_capture_size=1024", 512) == 1024
    cfg = """--compilation-config '{"max_cudagraph_capture_size": 2048}'"""
    assert vperf.cudagraph_tokens_from_args(cfg, 512) == 2048
    assert vperf.cudagraph_tokens_from_args("--enforce-eager --max-num-seqs 8", 512) == 0
    assert vperf.cudagraph_tokens_from_args("--max-num-seqs 8", 512) == 512


def test_the_simulation_charges_the_launches_to_admissions_beside_decodes_only() -> None:
    """One client's 512-token prompts reach an idle engine: each prefill fits the largest graph
    (512 tokens), so the TTFT is the same with and without the eager launch cost. Under a
    steady mix of 16 clients an admission lands beside running decodes, the step has more than
    512 tokens and runs without graphs, and the ITL rises; it does not when every step fits a
    graph (graphs as large as the token budget)."""
    dep = Deployment(max_num_seqs=64, kv_capacity_tokens=1 << 20, cudagraph_max_tokens=512)
    base = dataclasses.replace(TOY_C, ttft_overhead_ms=1.0)
    eager = dataclasses.replace(base, eager_layer_us=3_000.0)
    lone = Workload(input_tokens=512, output_tokens=64, concurrency=1)
    a = api.estimate(TOY_HW, TOY, dep, lone, base)
    b = api.estimate(TOY_HW, TOY, dep, lone, eager)
    assert b.ttft_p50_ms == pytest.approx(a.ttft_p50_ms)
    assert b.itl_p50_ms == pytest.approx(a.itl_p50_ms)
    busy = Workload(input_tokens=512, output_tokens=64, concurrency=16, output_spread=0.5)
    plain = api.estimate(TOY_HW, TOY, dep, busy, base).itl_p50_ms
    assert api.estimate(TOY_HW, TOY, dep, busy, eager).itl_p50_ms > 1.05 * plain
    wide = dataclasses.replace(dep, cudagraph_max_tokens=dep.max_num_batched_tokens)
    assert api.estimate(TOY_HW, TOY, wide, busy, eager).itl_p50_ms == pytest.approx(plain)


def test_a_specs_extra_args_name_the_largest_cuda_graph(tmp_path: Path) -> None:
    """``engine.extraArgs`` reach vLLM's parser as they are: a compilation config naming
    ``max_cudagraph_capture_size`` sets the largest graph the model reads (capped at the token
    budget, as vllm/config/vllm.py caps it); without one, vLLM's default."""
    from llmdeploy.engines import registry
    from llmdeploy.sizing.requests import size_spec
    from llmdeploy.spec.load import load_spec_file

    base = (Path(__file__).resolve().parents[1] / "presets" / "llama3-8b-vllm-g6e.yaml").read_text()
    got = {}
    for name, extra in (
        ("default", ""),
        ("cc", "  extraArgs: [-cc.max_cudagraph_capture_size=1024]\n"),
        (
            "json",
            "  extraArgs: [--compilation-config, '{\"max_cudagraph_capture_size\": 99999}']\n",
        ),
    ):
        path = tmp_path / f"{name}.yaml"
        path.write_text(base.replace("  version: 0.24.0\n", "  version: 0.24.0\n" + extra, 1))
        spec = load_spec_file(path).spec
        sz = size_spec(spec, None, suggest=False)
        run = registry.get("vllm").engine_run(sz, spec)
        assert run is not None
        got[name] = (
            run.deployment.cudagraph_max_tokens,
            sz.max_num_batched_tokens,
            sz.max_num_seqs,
        )
    tokens, budget, seqs = got["default"]
    assert tokens == min(2 * seqs, 512, budget)
    assert got["cc"][0] == min(1024, budget)
    assert got["json"][0] == budget
