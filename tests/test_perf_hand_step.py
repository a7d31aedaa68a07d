"""The step-time model's terms against values computed by hand (issue 22 item 7): the
collectives of the layouts (data-parallel MoE, pipelines), how a replica of several ranks
steps, host/GPU overlap, attention (full, sliding, latent), a hybrid's layers and the GEMM
peak. The toy model and GPU are tests/test_perf_hand.py's; each expected value is derived in
the comment above it."""

from __future__ import annotations

import dataclasses

import pytest

from llmdeploy.perf import step as step_mod
from llmdeploy.perf.step import build_step_model
from llmdeploy.perf.types import Deployment, Hardware, ModelGeometry
from test_perf_hand import FLAT, TOY, TOY_C, TOY_HW

# --- layouts: experts under data parallelism, pipeline sends ----------------------------------

LINKED = Hardware(
    name="toy", mem_bw_gbs=1000.0, fp16_tflops=100.0, interconnect="nvlink",
    interconnect_bw_gbs=100.0, network_bw_gbs=10.0,
)  # fmt: skip
# collectives: 3 us a NVLink collective, 20 us one over PCIe or the network, links at half
# their bandwidth
LINK_C = dataclasses.replace(
    TOY_C, ar_latency_nvlink_us=3.0, ar_latency_pcie_us=20.0, link_efficiency=0.5
)


def test_a_data_parallel_moe_gpu_reads_its_share_of_the_experts() -> None:
    # 2 MoE layers, hidden 1024, top-2 of 8 experts of width 512, DP 2 of TP 1 (the
    # all-gather and reduce-scatter: tests/test_perf_layouts.py)
    moe = ModelGeometry(
        name="moe", layers=2, hidden=1024, heads=8, kv_heads=8, head_dim=128,
        intermediate=4096, vocab=1000, num_experts=8, experts_per_token=2, moe_intermediate=512,
    )  # fmt: skip
    sm = build_step_model(LINKED, moe, Deployment(tp=1, data_parallel=2), LINK_C)
    assert (sm.ranks, sm.experts_all_ranks) == (2, True)
    # each GPU holds half of every layer's experts (DP 2 shards them): one expert of both
    # layers is 2 x 3 x 1024 x 512 / 2 = 1,572,864 params, 2 B each at 0.5 TB/s = 6.29 us;
    # a token runs 2 of them: 2 FLOPs x 2 x 1,572,864 at 0.5 x 100 TFLOP/s
    assert sm.s_expert_w == pytest.approx(1_572_864 * 2 / 0.5e12)
    assert sm.s_expert_f == pytest.approx(2 * 2 * 1_572_864 / 50e12)


def test_the_stage_to_stage_sends_of_a_pipeline_over_and_inside_nodes() -> None:
    # PP 4 over 2 nodes, TP 2 (one path each: tests/test_perf_layouts.py): 3 sends a batch, 1
    # between the nodes (network, 10 GB/s x 0.5) and 2 inside them (NVLink, 100 GB/s x 0.5).
    # Each TP rank sends its half of the hidden state and the residual: 2 x 1024 x 2 B / 2 =
    # 2,048 B a token (the IntermediateTensors {"hidden_states", "residual"} of
    # vllm/model_executor/models/llama.py). Per token:
    # 2,048 / 5e9 + 2 x 2,048 / 50e9 = 409.6 ns + 81.92 ns; per step the latency of one
    # network send (20 us) and two NVLink sends (2 x 3 us) = 26 us. 4 stages: 4 batches in
    # flight, so one step of the replica is one batch's step at a quarter of the sequences.
    dense = ModelGeometry(
        name="d", layers=2, hidden=1024, heads=8, kv_heads=8, head_dim=128, intermediate=4096,
        vocab=1000,
    )  # fmt: skip
    dep = Deployment(tp=2, pipeline_parallel=4, pipeline_nodes=2)
    sm = build_step_model(LINKED, dense, dep, LINK_C)
    assert sm.pp_alpha == pytest.approx(26e-6)
    assert sm.s_pp_tok == pytest.approx(2048 / 5e9 + 2 * 2048 / 50e9)
    assert sm.ranks == 4


# --- the step's own terms ------------------------------------------------------------------------


def test_a_replica_of_ranks_steps_as_one_rank_at_its_share() -> None:
    # 1 ms of host work a sequence, 2 ranks: 4 decoding sequences are 2 a rank (2 ms); one
    # prefill chunk runs on one rank (1 ms), four on both ranks (2 a rank: 2 ms)
    sm = dataclasses.replace(FLAT, host_fixed=0.0, host_seq=0.001, ranks=2)
    assert sm.step(4, 400.0) == pytest.approx(0.002)
    assert sm.step(0, 0.0, 100.0, 0.0, 0.0, 1.0, 1.0) == pytest.approx(0.001)
    assert sm.step(0, 0.0, 400.0, 0.0, 0.0, 4.0, 4.0) == pytest.approx(0.002)


def test_overlapped_host_and_gpu_take_their_smooth_maximum() -> None:
    # 10 ms on the GPU and 10 ms on the host: one after the other 20 ms; overlapped their
    # p-norm with exponent 4, 10 x 2^(1/4) = 11.892 ms
    sm = dataclasses.replace(FLAT, gpu_fixed=0.010)
    assert sm.step(1, 100.0) == pytest.approx(0.020)
    assert dataclasses.replace(sm, overlap=True).step(1, 100.0) == pytest.approx(0.010 * 2**0.25)


def test_the_toy_steps_attention_and_lm_head_coefficients() -> None:
    # a decode or prefill (query, key) pair costs 2 FLOPs x 2 (QK and PV) x 8 heads x 128 =
    # 4,096 FLOPs a layer, at 0.5 x 100 TFLOP/s; a logit row 2 x 1000 x 1024 FLOPs
    sm = build_step_model(TOY_HW, TOY, Deployment(), TOY_C)
    assert sm.s_att_dec == pytest.approx(4096 / 50e12)
    assert sm.s_att_pf == pytest.approx(4096 / 50e12)
    assert sm.s_lm_f == pytest.approx(2 * 1000 * 1024 / 50e12)


def test_sliding_window_layers_read_their_kv_apart() -> None:
    # 2 layers, one with a 128-token window: 4,096 KV bytes a token in each kind
    geo = dataclasses.replace(TOY, layers=2, sliding_window=128, sliding_layers=1)
    sm = build_step_model(TOY_HW, geo, Deployment(), TOY_C)
    assert (sm.s_kv_full, sm.s_kv_slide) == pytest.approx((4096 / 0.5e12, 4096 / 0.5e12))
    assert sm.window == 128


def test_latent_attention_by_hand() -> None:
    # MLA (DeepSeek-style), hidden 1024, 8 heads, q_lora 128, kv_lora 64, rope 16, nope 32,
    # v 32. Params: q 1024 x 128 + 128 x 8 x 48 = 180,224; kv 1024 x (64 + 16) + 64 x 8 x
    # (32 + 32) = 114,688; o 8 x 32 x 1024 = 262,144; 557,056 in all
    mla = dataclasses.replace(
        TOY, kv_lora_rank=64, q_lora_rank=128, qk_rope_head_dim=16, qk_nope_head_dim=32,
        v_head_dim=32,
    )  # fmt: skip
    assert step_mod.param_counts(mla).attn_per_layer == 557_056
    sm = build_step_model(TOY_HW, mla, Deployment(), TOY_C)
    # the latent KV: (64 + 16) x 2 B = 160 B a token; a decode pair attends in the latent
    # space, 2 x 8 x (2 x 64 + 16) = 2,304 FLOPs, a prefill pair in the heads',
    # 2 x 8 x (32 + 16 + 32) = 1,280
    assert sm.s_kv_full == pytest.approx(160 / 0.5e12)
    assert sm.s_att_dec == pytest.approx(2304 / 50e12)
    assert sm.s_att_pf == pytest.approx(1280 / 50e12)


def test_a_hybrids_attention_is_only_in_its_attention_layers() -> None:
    # 4 layers, 1 with attention and 3 state-space mixers of 1M params, a dense MLP on each:
    # 4,194,304 + 3 x 1,000,000 + 4 x 12,582,912 + LM head and embedding 2 x 1,024,000
    geo = dataclasses.replace(TOY, layers=4, attention_layers=1, mamba_layers=3,
                              mamba_params=1_000_000)  # fmt: skip
    pc = step_mod.param_counts(geo)
    assert pc.attn_layers == 1
    assert pc.total == 4_194_304 + 3_000_000 + 4 * 12_582_912 + 2 * 1_024_000


def test_fp8_gemms_run_at_the_fp8_peak_where_the_gpu_has_one() -> None:
    fp8 = Deployment(gemm_dtype="fp8")
    assert step_mod.gemm_peak_tflops(dataclasses.replace(TOY_HW, fp8_tflops=200.0), fp8) == (
        200.0,
        True,
    )
    assert step_mod.gemm_peak_tflops(TOY_HW, fp8) == (100.0, False)  # no FP8 tensor cores
