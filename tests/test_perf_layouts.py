"""The performance model's layouts beyond one tensor-parallel group, with hand-computed values:
data and expert parallelism inside a pod (MoE), pipeline parallelism over nodes, hybrid
state-space models (docs/performance-model.md, "Layouts").

Upstream sources of the mechanisms (vllm-project/vllm; all2all.py read at commit 00143004 of
the stored snapshot, the rest in code search of stored vLLM sources, not pinned to a tag):
- vllm/envs.py ``VLLM_ALL2ALL_BACKEND`` (default ``allgather_reducescatter``) and
  vllm/distributed/device_communicators/all2all.py ``AgRsAll2AllManager``: expert dispatch is an
  all-gather of every DP rank's hidden states, top-k weights and ids; combine a reduce-scatter.
- vllm/model_executor/models/llama.py ``IntermediateTensors({"hidden_states", "residual"})``
  and vllm/distributed/parallel_state.py ``send_tensor_dict(all_gather_group=...)``: a stage
  sends two hidden-size tensors per token, each TP rank its 1/tp slice.
- vllm/v1/engine/core.py ``step_with_batch_queue``: with pipeline parallelism the engine keeps
  as many batches in flight as there are stages.
- vllm/model_executor/layers/fused_moe/config.py ``FusedMoEParallelConfig.make``
  (``flatten_tp_across_dp``): under DP the experts are sharded over dp x tp GPUs.
- vllm/model_executor/layers/mamba/mamba_utils.py: the state a sequence keeps per layer.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from llmdeploy import presets
from llmdeploy.catalog import ec2
from llmdeploy.catalog.models import load_architecture
from llmdeploy.cli import preset_report
from llmdeploy.engines.vllm.perf_constants import CONSTANTS as VLLM_ROWS
from llmdeploy.perf import inputs
from llmdeploy.perf.api import estimate, step_model
from llmdeploy.perf.constants import constants_for
from llmdeploy.perf.step import _pnorm, param_counts
from llmdeploy.perf.types import Constants, Deployment, Hardware, ModelGeometry, Workload
from llmdeploy.sizing import requests
from llmdeploy.sizing.calculator import compute
from test_families import _jamba_v01

# round constants so that the expected values can be worked out by hand
C: Constants = dataclasses.replace(
    constants_for(VLLM_ROWS, "vllm", "0.24.0"),
    ar_latency_nvlink_us=10.0,
    ar_latency_pcie_us=20.0,
    link_efficiency=0.5,
    eta_kv=0.8,
    step_overhead_us=0.0,
    seq_overhead_us=0.0,
    stream_token_us=0.0,
    host_overlap=False,
)
HW = Hardware(
    "H200",
    mem_bw_gbs=4800.0,
    fp16_tflops=989.0,
    fp8_tflops=1979.0,
    interconnect="nvlink",
    interconnect_bw_gbs=450.0,
    gpu_count=8,
    network_bw_gbs=50.0,
)
# 32 MoE layers, hidden 4096, 8 experts, top-2 (a Mixtral-like shape)
MOE = ModelGeometry(
    "moe", 32, 4096, 32, 8, 128, 14336, 32000, num_experts=8, experts_per_token=2,
    moe_intermediate=14336,
)  # fmt: skip
DENSE = ModelGeometry("dense", 32, 4096, 32, 8, 128, 14336, 128256)


def test_dp_expert_all_to_all_of_one_step_is_an_all_gather_plus_a_reduce_scatter() -> None:
    # TP1 x DP2: no all-reduce inside a rank, so the communication term is the all-to-all alone
    sm = step_model(HW, MOE, Deployment(tp=1, data_parallel=2, expert_parallel=True), C)
    # per MoE layer: dispatch gathers 4096 x 2 B + 2 x 8 B (top-k weights, ids), combine
    # scatters 4096 x 2 B; ring factor (2 - 1) / 2; link 450 GB/s x 0.5
    per_token = 32 * 0.5 * (4096 * 2 + 2 * 8 + 4096 * 2) / 225e9
    assert sm.s_a2a_tok == pytest.approx(per_token, rel=1e-12)
    assert per_token == pytest.approx(1.16622e-6, rel=1e-5)
    assert sm.a2a_alpha == pytest.approx(2 * 32 * 10e-6)  # two collectives per MoE layer
    # 100 tokens over both ranks: 640 us + 100 x 1.16622 us
    comm = sm.times(100, 100 * 500, 0, 0, 0, 0, 0)[3]
    assert comm == pytest.approx(640e-6 + 100 * 1.16622e-6, rel=1e-5)


def test_dp_ep_shards_experts_over_all_gpus_and_they_serve_every_ranks_tokens() -> None:
    tp1 = step_model(HW, MOE, Deployment(tp=1), C)
    dp2 = step_model(HW, MOE, Deployment(tp=1, data_parallel=2, expert_parallel=True), C)
    assert dp2.s_expert_w == pytest.approx(tp1.s_expert_w / 2)  # each GPU holds half the experts
    assert dp2.s_expert_f == pytest.approx(tp1.s_expert_f / 2)
    assert dp2.s_dense_w == tp1.s_dense_w  # each rank reads its whole dense body
    assert dp2.ranks == 2 and dp2.experts_all_ranks
    # 2 decoding sequences on the replica: one per rank; the experts see both tokens
    g = dp2.times(2, 0, 0, 0, 0, 0, 0)[0]
    hit = 8 * (1 - (1 - 2 / 8) ** 2)  # experts hit by 2 tokens
    expected = (
        _pnorm(tp1.s_dense_w, tp1.s_dense_f * 1, tp1.knee)
        + _pnorm(tp1.s_expert_w / 2 * hit, tp1.s_expert_f / 2 * 2, tp1.knee)
        + _pnorm(tp1.s_lm_w, tp1.s_lm_f * 1, tp1.knee)
    )
    assert g == pytest.approx(expected, rel=1e-12)


def test_dense_dp_replica_step_is_one_ranks_step_at_its_share() -> None:
    one = step_model(HW, DENSE, Deployment(tp=2), C)
    dp4 = step_model(HW, DENSE, Deployment(tp=2, data_parallel=4), C)
    assert dp4.a2a_alpha == 0.0  # dense ranks never talk to each other
    # 4 x 16 decoding sequences: each rank steps 16
    assert dp4.step(64, 64 * 1000) == pytest.approx(one.step(16, 16 * 1000), rel=1e-12)
    # one prompt's chunk runs on one rank; two prompts on two ranks, each its own chunk
    assert dp4.step(0, 0, 2048, 2048**2 / 2, 0, 1, 1) == pytest.approx(
        one.step(0, 0, 2048, 2048**2 / 2, 0, 1, 1), rel=1e-12
    )
    assert dp4.step(0, 0, 4096, 2 * 2048**2 / 2, 0, 2, 2) == pytest.approx(
        one.step(0, 0, 2048, 2048**2 / 2, 0, 1, 1), rel=1e-12
    )


def test_pp_itl_of_two_stages_is_the_sum_of_the_stage_times_plus_one_transfer() -> None:
    # TP1 x PP2 over two nodes: a batch of 8 sequences crosses stage 1 (layers 0-15), the
    # network, stage 2 (layers 16-31 and the LM head)
    pp = step_model(HW, DENSE, Deployment(tp=1, pipeline_parallel=2, pipeline_nodes=2), C)
    half = step_model(HW, dataclasses.replace(DENSE, layers=16), Deployment(tp=1), C)
    b, ctx = 8, 8 * 1000
    lm = _pnorm(half.s_lm_w, half.s_lm_f * b, half.knee)  # on the last stage only
    stage_1 = half.step(b, ctx) - lm
    stage_2 = half.step(b, ctx)
    # hidden states + residual, 4096 x 2 B each, over the GPU's 50 GB/s share of EFA x 0.5
    transfer = 20e-6 + b * 2 * 4096 * 2 / 25e9
    assert transfer == pytest.approx(25.24288e-6, rel=1e-9)
    # the replica's step with two batches of 8 in flight is one batch's trip through both
    assert pp.step(2 * b, 2 * ctx) == pytest.approx(stage_1 + stage_2 + transfer, rel=1e-9)


def test_pp_sends_of_a_tp_group_are_sliced_and_stay_on_nvlink_inside_a_node() -> None:
    one_node = step_model(HW, DENSE, Deployment(tp=4, pipeline_parallel=2, pipeline_nodes=1), C)
    two_nodes = step_model(HW, DENSE, Deployment(tp=4, pipeline_parallel=2, pipeline_nodes=2), C)
    per_token = 2 * 4096 * 2 / 4  # each of the 4 TP ranks sends its quarter
    assert one_node.s_pp_tok == pytest.approx(per_token / 225e9)
    assert one_node.pp_alpha == pytest.approx(10e-6)
    assert two_nodes.s_pp_tok == pytest.approx(per_token / 25e9)
    assert two_nodes.pp_alpha == pytest.approx(20e-6)


def test_ssm_state_read_and_written_once_per_sequence_per_step() -> None:
    dep = Deployment(tp=1, state_bytes_per_seq=1_000_000)
    sm = step_model(HW, DENSE, dep, C)
    # read + write 1 MB per sequence at 0.8 x 4800 GB/s
    assert sm.s_state == pytest.approx(2e6 / (0.8 * 4800e9))
    # no context: the decode-attention term is the state traffic of 64 sequences alone
    assert sm.times(64, 0, 0, 0, 0, 0, 0)[1] == pytest.approx(64 * 5.2083333e-7, rel=1e-6)
    # a prefilling sequence reads and writes its state once per chunk too
    with_pf = sm.times(64, 0, 512, 512**2 / 2, 0, 1, 0)[1]
    assert with_pf == pytest.approx(65 * 5.2083333e-7, rel=1e-6)


def _jamba(tmp_path: Path) -> ModelGeometry:
    """transformers JambaConfig defaults (ai21labs/Jamba-v0.1): 32 layers, attention on 4,
    Mamba on 28, MoE MLP on 16."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_jamba_v01()), encoding="utf-8")
    return inputs.geometry(load_architecture(str(path)))


def test_hybrid_geometry_counts_mamba_weights_and_kv_only_on_attention_layers(
    tmp_path: Path,
) -> None:
    geo = _jamba(tmp_path)
    assert (geo.attention_layers, geo.mamba_layers, geo.dense_mlp_layers) == (4, 28, 16)
    assert param_counts(geo).total / 1e9 == pytest.approx(51.57, rel=1e-3)  # Jamba-v0.1: 52B
    sm = step_model(HW, geo, Deployment(tp=1), C)
    no_mamba = step_model(HW, dataclasses.replace(geo, mamba_layers=0), Deployment(tp=1), C)
    w_bw = C.eta_weights * 4800e9
    assert sm.s_dense_w - no_mamba.s_dense_w == pytest.approx(28 * geo.mamba_params * 2 / w_bw)
    # KV: 4 attention layers x 8 KV heads x 128 x (K, V) x 2 B
    assert sm.kv_tok_full == 4 * 8 * 128 * 2 * 2


def test_hybrid_deployment_carries_the_sizings_state_per_gpu() -> None:
    p = presets.summary("llama3-8b-vllm-g6e")  # a transformer: no state
    assert inputs.deployment(p.sizing, kv_admission="optimistic").state_bytes_per_seq == 0.0
    req = dataclasses.replace(
        requests.request_from_options("qwen3-next-80b-a3b", gpu="h100", tp=4),
        max_model_len=8192,
    )
    sz = compute(req)
    dep = inputs.deployment(sz, kv_admission="optimistic")
    assert sz.state_bytes_per_sequence > 0
    assert dep.state_bytes_per_seq == sz.state_bytes_per_sequence


def test_dp_replica_holds_every_ranks_kv_pool_and_batch() -> None:
    p = presets.summary("deepseek-r1-vllm-fp8-dp8-p5en")
    sz = p.sizing
    dep = inputs.deployment(sz, kv_admission="optimistic")
    # the sizing's KV tokens and batching limits are one rank's (each its own scheduler)
    assert dep.kv_capacity_tokens == 8 * sz.kv_cache_tokens == p.kv_tokens_per_replica
    assert dep.max_num_seqs == 8 * sz.max_num_seqs
    assert dep.max_num_batched_tokens == 8 * sz.max_num_batched_tokens
    assert (dep.tp, dep.data_parallel, dep.expert_parallel) == (1, 8, True)


def test_pp_replica_over_two_nodes_reads_the_efa_share_of_its_gpus() -> None:
    p = presets.summary("llama31-405b-vllm-2xp5")
    dep = inputs.deployment(p.sizing, kv_admission="optimistic")
    assert (dep.tp, dep.pipeline_parallel, dep.pipeline_nodes) == (8, 2, 2)
    assert dep.kv_capacity_tokens == p.sizing.kv_cache_tokens  # the binding stage's pool
    inst = ec2.instance("p5.48xlarge")
    assert inst is not None and inst.network_gbps == 3200.0  # 3200 Gbps EFAv2
    assert inputs.hardware(inst).network_bw_gbs == 3200 / 8 / 8  # 50 GB/s per GPU


def test_every_preset_has_a_verdict() -> None:
    catalog = presets.catalog()
    assert all(p.predicted_tokens_per_s for p in catalog), [
        p.name for p in catalog if not p.predicted_tokens_per_s
    ]
    assert "not modelled" not in "\n".join(preset_report.notes(catalog))
    layouts = {p.name for p in catalog if p.sizing.data_parallel > 1 or p.sizing.pp > 1}
    assert layouts == {
        "deepseek-r1-vllm-fp8-dp8-p5en",
        "qwen3-235b-a22b-vllm-fp8-ep-p5",
        "llama31-405b-vllm-2xp5",
    }


def test_dp_and_pp_together_are_refused() -> None:
    p = presets.summary("qwen3-235b-a22b-vllm-fp8-ep-p5")
    both = dataclasses.replace(p.sizing, pp=2)
    assert inputs.unsupported(both) == (
        "data parallelism combined with pipeline parallelism is not modelled"
    )
    assert inputs.unsupported(p.sizing) is None


def test_dense_dp_is_stepped_together_a_conservative_throughput() -> None:
    # vLLM's dense DP ranks are independent engines; the model steps them together (the
    # busiest rank sets the step): low-load TTFT stays one rank's, high-load throughput is
    # below dp x one rank's (docs/performance-model.md, "Layouts")
    c = dataclasses.replace(C, request_overhead_ms=0.0, ttft_overhead_ms=0.0)
    one = Deployment(tp=2, max_num_seqs=64, kv_capacity_tokens=200_000, max_num_batched_tokens=4096)
    dp = dataclasses.replace(
        one, data_parallel=4, max_num_seqs=256, kv_capacity_tokens=800_000,
        max_num_batched_tokens=4 * 4096,
    )  # fmt: skip
    rank = estimate(HW, DENSE, one, Workload(1000, 200, concurrency=4), c)
    replica = estimate(HW, DENSE, dp, Workload(1000, 200, concurrency=16), c)
    assert replica.ttft_p50_ms == pytest.approx(rank.ttft_p50_ms, rel=0.05)
    # (the admission stall, once per step that admits, stalls every rank stepped together:
    # about 20 % below four ranks at this load)
    assert 0.75 * 4 * rank.output_tokens_per_s < replica.output_tokens_per_s
    assert replica.output_tokens_per_s < 4 * rank.output_tokens_per_s
    busy = estimate(HW, DENSE, dp, Workload(1000, 200, concurrency=128), c)
    busy_rank = estimate(HW, DENSE, one, Workload(1000, 200, concurrency=32), c)
    assert busy.output_tokens_per_s < 0.7 * 4 * busy_rank.output_tokens_per_s


def test_pp_replica_throughput_is_its_batch_over_the_itl() -> None:
    # two batches in flight: every sequence gets a token per trip of its batch
    dep = Deployment(tp=1, pipeline_parallel=2, pipeline_nodes=2, kv_capacity_tokens=400_000)
    e = estimate(HW, DENSE, dep, Workload(1000, 200, concurrency=64), C)
    assert e.output_tokens_per_s == pytest.approx(e.mean_batch / (e.itl_mean_ms / 1000), rel=0.02)
