"""The performance model's arithmetic against values computed by hand (issue 22 item 7):
a roofline step, closed-loop waves under chunked prefill, async scheduling's lookahead, a
prefix-cache hit, the arrival patterns' workloads, the batch limit, replicas and cost.

Each expected value is worked out in the comment above it, from the mechanism, not pasted
from the model's output."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from llmdeploy.perf import workloads
from llmdeploy.perf.assess import _cost, fleet_nodes
from llmdeploy.perf.sim import SimInput, simulate
from llmdeploy.perf.step import StepModel, build_step_model
from llmdeploy.perf.types import Constants, Deployment, Hardware, ModelGeometry
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
    import llmdeploy.perf.sim as sim_mod

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
    # one layer, hidden 1024, 8 heads x 128, 8 KV heads, MLP 4096, vocab 1000, untied:
    # attention 1024 x 128 x (2x8 + 2x8) = 4,194,304 params; MLP 3 x 1024 x 4096 = 12,582,912
    geo = ModelGeometry(
        name="toy", layers=1, hidden=1024, heads=8, kv_heads=8, head_dim=128,
        intermediate=4096, vocab=1000,
    )  # fmt: skip
    hw = Hardware(name="toy", mem_bw_gbs=1000.0, fp16_tflops=100.0, interconnect="none")
    c = Constants(
        engine="t", versions="t", eta_weights=0.5, eta_kv=0.5, eta_experts=0.5, mu_gemm=0.5,
        mu_attn=0.5, fp8_gemm_factor=1.0, gemm_knee=1000.0, ar_latency_nvlink_us=0.0,
        ar_latency_pcie_us=0.0, link_efficiency=1.0, layer_overhead_us=0.0,
        step_overhead_us=0.0, seq_overhead_us=0.0, host_overlap=True, stream_token_us=0.0,
        ttft_overhead_ms=0.0, request_overhead_ms=0.0,
    )  # fmt: skip
    sm = build_step_model(hw, geo, Deployment(), c)
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
    geo = ModelGeometry(
        name="toy-moe", layers=1, hidden=1024, heads=8, kv_heads=8, head_dim=128,
        intermediate=4096, vocab=1000, num_experts=8, experts_per_token=2, moe_intermediate=2048,
    )  # fmt: skip
    hw = Hardware(name="toy", mem_bw_gbs=1000.0, fp16_tflops=100.0, interconnect="nvlink")
    c = Constants(
        engine="t", versions="t", eta_weights=0.5, eta_kv=0.5, eta_experts=0.5, mu_gemm=0.5,
        mu_attn=0.5, fp8_gemm_factor=1.0, gemm_knee=1000.0, ar_latency_nvlink_us=0.0,
        ar_latency_pcie_us=0.0, link_efficiency=1.0, layer_overhead_us=0.0,
        step_overhead_us=0.0, seq_overhead_us=0.0, host_overlap=True, stream_token_us=0.0,
        ttft_overhead_ms=0.0, request_overhead_ms=0.0, moe_gemm_factor=0.8, moe_dim_half=2048.0,
    )  # fmt: skip
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
