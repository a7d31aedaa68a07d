"""The last sizing misses of issue 26, each against its engine source and a hand computation."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from llmdeploy.catalog.architecture import CheckpointQuant
from llmdeploy.catalog.models import load_architecture
from llmdeploy.catalog.quant import quant_from_config
from llmdeploy.engines.vllm import facts as vf
from llmdeploy.sizing import allocator, calculator, mxfp4, requests
from llmdeploy.sizing import kv as kvm
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.types import SizingRequest

CALIBRATION = Path(__file__).parent / "data" / "calibration" / "vllm-startup.yaml"
REPORT_CASES: list[dict[str, Any]] = YAML(typ="safe", pure=True).load(CALIBRATION.read_text())


def _req(model: str, **kw: Any) -> SizingRequest:
    return dataclasses.replace(requests.request_from_options(model, gpu="h100"), **kw)


# --- item 5: the MoE activation peak -----------------------------------------------------------


def test_routed_expert_intermediates_are_counted_once_in_the_fused_moe_workspace() -> None:
    """vLLM's fused-MoE kernel writes the experts' gate/up output, activation and down output
    into its two workspaces (vllm-project/vllm@v0.24.0,
    vllm/model_executor/layers/fused_moe/experts/triton_moe.py ``TritonExperts.workspace_shapes``
    and ``apply``: ``intermediate_cache1..3`` are views of ``workspace13``/``workspace2``), so
    the forward transient of an all-MoE model holds no MLP width of its own. Mixtral-8x7B at
    TP 2, vLLM 0.19.0 on H100 (8192 tokens, 1024 requests, logged 1.21 GiB in llm-d-planner's
    sweep, tests/data/calibration)."""
    arch = load_architecture("mixtral-8x7b")
    t, h, im, k = 8192, 4096, 14336 // 2, 2
    sampler = 1024 * 32000 * 14.9  # dominates the 8192 x 2 x 2h forward transient
    retained = t * h * 2
    workspace = t * k * (max(2 * im, h) + im) * 2
    got = mem.activation_bytes(
        arch, None, 2, t, 1024, sampler_bytes=14.9, moe_workspace=True, moe_ranks=2
    )
    assert got == pytest.approx(sampler + retained + workspace)
    assert got / mem.GIB == pytest.approx(1.1735, abs=1e-4)  # logged 1.21; was 1.50
    # without the V1 workspace (V0), the experts' intermediates are the forward transient
    v0 = mem.activation_bytes(
        arch, None, 2, t, 1024, sampler_bytes=14.9, moe_workspace=False, moe_ranks=2
    )
    assert v0 == pytest.approx(max(sampler, t * 2 * (2 * h + 3 * k * im)) + retained)


def test_dense_layers_of_a_moe_model_keep_their_mlp_transient() -> None:
    """DeepSeek-V2-Lite's first layer is a dense MLP (``first_k_dense_replace``): its width, not
    the experts', is the forward transient beside the workspace."""
    arch = load_architecture("deepseek-v2-lite")
    assert arch.dense_layers >= 1
    t = 8192
    got = mem.activation_bytes(arch, None, 1, t, 1, sampler_bytes=0.0, moe_workspace=True)
    im = arch.moe_intermediate_size
    workspace = t * arch.experts_per_token * (max(2 * im, arch.hidden_size) + im) * 2
    dense = max(arch.intermediate_size, arch.shared_expert_intermediate_size)
    forward = t * 2 * (2 * arch.hidden_size + 3 * dense)
    assert got == pytest.approx(forward + t * arch.hidden_size * 2 + workspace)


def test_mixtral_kv_on_h100_tp2_matches_the_log() -> None:
    """The calibration case llmd-v0190-mixtral-8x7b-h100-tp2: 28.44 GiB of KV cache logged."""
    s = calculator.compute(
        _req("mixtral-8x7b", tp=2, engine_version="0.19.0", max_model_len=8192,
             gpu_memory_utilization=0.95)
    )  # fmt: skip
    assert s.activation_gib == pytest.approx(1.17, abs=0.01)
    assert s.kv_cache_gib_per_gpu == pytest.approx(28.44, rel=0.005)


# --- item 2: bitsandbytes ----------------------------------------------------------------------


def _bnb(bits: int) -> CheckpointQuant:
    q: dict[str, Any] = {"quant_method": "bitsandbytes", f"load_in_{bits}bit": True}
    if bits == 4:
        q |= {"bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True}
    return quant_from_config(q, "config.json", 32)


def test_bitsandbytes_4bit_dequantizes_one_shard_or_every_local_expert() -> None:
    """vLLM 0.24.0 ``quantization/bitsandbytes.py``: ``_apply_bnb_4bit`` calls bitsandbytes'
    ``matmul_4bit`` per shard of a merged linear (a 16-bit copy of that shard for a batch),
    ``BitsAndBytesMoEMethod._apply_4bit_dequnt`` dequantizes ``w13`` and ``w2`` whole."""
    q = _bnb(4)
    llama = load_architecture("llama-3.1-8b")
    assert mem.dequant_bytes(llama, q, 1, 1, 2) == 4096 * 14336 * 2  # one MLP projection
    assert mem.dequant_bytes(llama, q, 2, 2, 2) == 4096 * 14336 * 2 / 2
    mixtral = load_architecture("mixtral-8x7b")
    assert mem.dequant_bytes(mixtral, q, 2, 2, 2) == 8 * 3 * 4096 * 14336 * 2 / 2
    assert mem.dequant_bytes(mixtral, None, 2, 2, 2) == 0.0
    assert mem.dequant_bytes(mixtral, _bnb(8), 2, 2, 2) == 0.0
    # in the profile's forward transient: Mixtral's 2.6 GiB of experts dominate the sampler
    t = 8192
    got = mem.activation_bytes(
        mixtral, q, 1, t, 1024, sampler_bytes=14.9, moe_workspace=True, moe_ranks=1
    )
    workspace = t * 2 * (max(2 * 14336, 4096) + 14336) * 2
    forward = t * 2 * 2 * 4096 + 8 * 3 * 4096 * 14336 * 2
    assert got == pytest.approx(forward + t * 4096 * 2 + workspace)


def test_bitsandbytes_refused_where_vllm_cannot_load_it_with_the_nearest_option() -> None:
    q = _bnb(4)
    assert vf.quantization_problem("0.27.1", q) == ""
    problem = vf.quantization_problem("0.28.0", q)
    assert problem.startswith("vLLM 0.28.0 has no 'bitsandbytes' quantization method")
    assert "pin engine.version 0.27.1" in problem
    assert "int4-awq" in problem and "int4-gptq" in problem
    assert "quantization: fp8" in vf.quantization_problem("0.28.0", _bnb(8))
    moe = dataclasses.replace(load_architecture("mixtral-8x7b"), quantization=_bnb(8))
    s = calculator.compute(_req("mixtral-8x7b", architecture=moe, tp=4, engine_version="0.19.0"))
    assert not s.fits
    assert any("no 8-bit bitsandbytes kernel for the experts" in r for r in s.reasons)
    dense = dataclasses.replace(load_architecture("llama-3.1-8b"), quantization=_bnb(8))
    assert calculator.compute(_req("llama-3.1-8b", architecture=dense)).fits


# --- item 4: AWQ weights on Hopper -------------------------------------------------------------


def test_awq_zero_points_are_16_bit_on_machete_from_vllm_0_24_on_hopper() -> None:
    """vLLM 0.24.0 quantization/auto_awq.py: AWQ linear layers pick their kernel with
    ``choose_mp_linear_kernel``; on Hopper that is Machete (kernels/linear/mixed_precision/
    machete.py ``transform_w_zp``: zero points unpacked to ``-scale x zero`` in 16 bits), so
    a group of 128 weights costs 0.5 x 128 + 2 (scale) + 2 (zero) bytes, not + 0.5 packed."""
    q = quant_from_config({"quant_method": "awq", "bits": 4, "group_size": 128}, "c", 28)
    assert q.bytes_per_weight == 0.5 + 2.5 / 128
    assert vf.group_zero_bytes("0.24.0", 9, q) == 2.0
    assert vf.group_zero_bytes("0.23.0", 9, q) is None  # AWQMarlinLinearMethod: packed
    assert vf.group_zero_bytes("0.24.0", 8, q) is None  # Marlin below Hopper
    assert vf.group_zero_bytes("0.24.0", 10, q) is None  # Machete is SM 9.0 only
    gptq = quant_from_config({"quant_method": "gptq", "bits": 4, "group_size": 128}, "c", 28)
    assert vf.group_zero_bytes("0.24.0", 9, gptq) is None
    dense = mem.Sharding(group_zero_bytes=2.0).dense_quant(q)
    assert dense is not None and dense.bytes_per_weight == 0.5 + 4 / 128
    # Qwen2.5-7B-Instruct-AWQ geometry (every Linear quantized, embeddings and lm_head 16-bit):
    # 28 layers x (3584 x 4608 qkv + 3584 x 3584 o + 3584 x 37888 gate/up + 18944 x 3584 down)
    arch = dataclasses.replace(load_architecture("qwen2.5-7b"), quantization=q)
    linear = 28 * (3584 * 4608 + 3584 * 3584 + 3584 * 37888 + 18944 * 3584)
    h200 = dataclasses.replace(requests.request_from_options("qwen2.5-7b", gpu="h200"),
                               architecture=arch, max_model_len=8192)  # fmt: skip
    old = calculator.compute(dataclasses.replace(h200, engine_version="0.23.0"))
    new = calculator.compute(dataclasses.replace(h200, engine_version="0.24.0"))
    extra = linear * 1.5 / 128 / mem.GIB
    assert new.weights_gib_per_gpu - old.weights_gib_per_gpu == pytest.approx(extra, abs=2e-4)
    # 5.27 GiB of tensors, 5.35 as the allocator counts them (the next test)
    assert new.weights_gib_per_gpu == pytest.approx(5.347, abs=0.001)


MIB = 1 << 20


def test_large_weight_tensors_count_whole_allocator_blocks_while_vllm_loads() -> None:
    """vLLM's "Model loading took" is ``torch.cuda.memory_allocated`` after minus before the
    load (vLLM 0.24.0 vllm/utils/mem_utils.py ``DeviceMemoryProfiler``, platforms/cuda.py
    ``get_current_memory_usage``), which sums the caching allocator's blocks. A tensor of
    10 MiB or more gets a segment of its own rounded up to 2 MiB (pytorch/pytorch@001074d2
    c10/cuda/CUDACachingAllocator.cpp ``get_allocation_size``), and ``should_split`` (``size
    < max_split_size() && remaining > kSmallSize``) keeps it whole when 1 MiB or less is left,
    and always from 20 MiB on once vLLM loads under ``max_split_size_mb:20``: from 0.21.0
    ``Worker.load_model`` (v1/worker/gpu_worker.py ``_scoped_allocator_max_split``,
    vllm-project/vllm#41268; not in 0.20.2)."""
    split = vf.load_max_split_bytes("0.24.0")
    assert split == 20 * MIB == vf.load_max_split_bytes("0.21.0")
    assert vf.load_max_split_bytes("0.20.2") == allocator.NO_MAX_SPLIT == 2**64 - 1
    block = allocator.load_block_bytes
    for limit in (split, allocator.NO_MAX_SPLIT):
        assert block(9.5 * MIB, limit) == 9.5 * MIB  # shares a 20 MiB segment: not modelled
        assert block(231 * MIB, limit) == 232 * MIB  # 1 MiB left: kept whole
        assert block(15.5 * MIB, limit) == 16 * MIB
        assert block(14.5 * MIB, limit) == 14.5 * MIB  # 1.5 MiB left: split off, reusable
        assert block(32 * MIB, limit) == 32 * MIB
    assert block(64.75 * MIB, split) == 66 * MIB  # >= max_split: never split
    assert block(64.75 * MIB, allocator.NO_MAX_SPLIT) == 64.75 * MIB

    def loaded(a: Any, quant: Any, tp: int = 1, **kw: Any) -> float:
        sharding = mem.Sharding(tp=tp, **kw)
        return sum(mem.weight_breakdown(a, quant, tp, sharding=sharding).values())

    # Qwen2.5-7B-Instruct-AWQ geometry on the H200, vLLM 0.24.0 (logged 5.38 GiB): the int4
    # qweight of gate/up is 3584 x 37888 / 2 B = 64.75 MiB (a 66 MiB block), of down
    # 18944 x 3584 / 2 B = 32.375 MiB (34 MiB); the 16-bit embedding and lm_head
    # 152064 x 3584 x 2 B = 1039.5 MiB each (1040 MiB); q/k/v (7.875 MiB), o, the scales and
    # zero points are below 10 MiB
    q = quant_from_config({"quant_method": "awq", "bits": 4, "group_size": 128}, "c", 28)
    arch = dataclasses.replace(load_architecture("qwen2.5-7b"), quantization=q)
    tensors = loaded(arch, q, group_zero_bytes=2.0)
    blocks = loaded(arch, q, group_zero_bytes=2.0, load_max_split=split)
    assert blocks - tensors == (28 * (1.25 + 1.625) + 2 * 0.5) * MIB  # 81.5 MiB
    h200 = dataclasses.replace(requests.request_from_options("qwen2.5-7b", gpu="h200"),
                               architecture=arch, max_model_len=8192)  # fmt: skip
    got = calculator.compute(dataclasses.replace(h200, engine_version="0.24.0"))
    assert got.weights_gib_per_gpu == pytest.approx(blocks / mem.GIB, abs=1e-4)
    assert got.weights_gib_per_gpu == pytest.approx(5.38, rel=0.01)  # -0.6 %: within 1 %
    # vLLM 0.19.0, torch's default: Qwen2.5-72B-Instruct at TP 2 logged 67.80 GiB
    # (llmd-v0190-qwen25-72b-h100-tp2): its down projection, 14784 x 8192 x 2 B = 231 MiB a
    # rank, holds 232 in each of 80 layers; everything else is a whole multiple of 2 MiB
    q72 = load_architecture("qwen2.5-72b")
    default = allocator.NO_MAX_SPLIT
    assert loaded(q72, None, 2, load_max_split=default) - loaded(q72, None, 2) == 80 * MIB
    h100 = requests.request_from_options("qwen2.5-72b", gpu="h100", tp=2)
    v019 = calculator.compute(dataclasses.replace(h100, engine_version="0.19.0"))
    assert v019.weights_gib_per_gpu == pytest.approx(67.80, abs=0.005)
    # the 16-bit H200 geometries of 0.24.0 move by their odd-sized tables only: Llama-3.1-8B's
    # tensors are whole multiples of 2 MiB; Qwen3-32B's two 151936 x 5120 x 2 B = 1483.75 MiB
    # vocab tables count 1484 MiB each
    for model, more in (("llama-3.1-8b", 0.0), ("qwen3-32b", 0.5 * MIB)):
        a16 = load_architecture(model)
        assert loaded(a16, None, load_max_split=split) - loaded(a16, None) == more, model


def test_gemma3_sliding_pages_follow_vllm_0_24_grouping() -> None:
    """vLLM 0.24.0 v1/core/kv_cache_utils.py for Gemma 3 27B (62 layers: every sixth full,
    HF Gemma3TextConfig ``layer_types``; window 1024). Its 16 KV heads x 128 make every page
    the same size, so ``unify_kv_cache_spec_page_size`` changes nothing.
    ``_get_kv_cache_groups_uniform_page_size``: the group size is the smallest count, 10 full
    layers (52 sliding is not below 1.5 x 10), the 52 sliding layers fill cdiv(52, 10) = 6
    groups (8 padding layers); ``get_kv_cache_config_from_groups`` / ``get_num_blocks``: blocks
    = available // page // 10. ``get_max_concurrency_for_kv_cache_config``: a request needs
    the pages of every group, full cdiv(L, 16), sliding cdiv(min(1023 + T, L), 16) + 1
    (kv_cache_interface.py ``SlidingWindowSpec.max_admission_blocks_per_request``), and from
    0.20.2 the "GPU KV cache size" is int(concurrency x L) (``get_kv_cache_capacity``)."""
    arch = load_architecture("gemma-3-27b")
    assert arch.layer_attention.count("full") == 10 and arch.sliding_window == 1024
    layout = kvm.kv_layout(arch, 1, 2, kvm.KvPolicy(16, vf.group_ratio("0.24.0")))
    assert layout.groups == ("sliding",) * 6 + ("full",)
    assert layout.page_bytes_per_layer == 16 * 2 * 16 * 128 * 2 and layout.group_size == 10
    assert layout.block_bytes == 10 * 131072
    # an A100 80GB batches 2048 tokens by default; max_model_len 32768
    pages = 32768 // 16 + 6 * (-(-(1023 + 2048) // 16) + 1)
    assert kvm.pages_per_request(arch, layout, 32768, 2048) == pages == 2048 + 6 * 193
    req = dataclasses.replace(
        requests.request_from_options("gemma-3-27b", gpu="a100-80"),
        engine_version="0.24.0",
        max_model_len=32768,
    )
    s = calculator.compute(req)
    assert s.max_num_batched_tokens == 2048 and s.kv_cache_groups == layout.groups
    assert s.max_concurrency == round(s.num_gpu_blocks / pages, 2)
    assert s.kv_cache_tokens == int(s.num_gpu_blocks / pages * 32768)
    # up to 0.20.0 the log printed num_blocks // groups x block instead (0.19.1 and 0.20.0
    # kv_cache_utils.py ``_report_kv_cache_config``), which the 0.19.0 Gemma logs show:
    # llmdeploy prints the capacity, as 0.20.2 and later log it
    logged = {c["id"]: c for c in REPORT_CASES if c["id"].startswith("llmd-v0190-gemma3")}
    for case_id, groups in (("4b", 7), ("12b", 6), ("27b", 7)):
        case = logged[f"llmd-v0190-gemma3-{case_id}-it-h100-tp1"]
        assert case["kv_cache_tokens"] == case["num_gpu_blocks"] // groups * 16, case_id


# --- item 3: Gemma 4 batches one multimodal item whole -----------------------------------------


def test_gemma4_default_batch_holds_its_largest_item_from_vllm_0_24() -> None:
    """vLLM 0.24.0 engine/arg_utils.py: for a multimodal prefix-LM model a default
    ``max_num_batched_tokens`` is raised to the largest item of a supported modality
    (``_get_min_mm_batched_tokens``); Gemma 4's is a 32-frame video, 32 x (70 + 2 + 6) = 2496
    tokens (models/gemma4_mm.py ``get_mm_max_tokens_per_item``). Only the 2048-token default
    (A100, GPUs under 70 GiB) is below it; an explicit value is kept; Gemma 3 has no override."""
    assert vf.GEMMA4_VIDEO_ITEM_TOKENS == 2496

    def batched(model: str, gpu: str, version: str, **kw: Any) -> int:
        req = requests.request_from_options(model, gpu=gpu)
        s = calculator.compute(
            dataclasses.replace(req, engine_version=version, max_model_len=8192, **kw)
        )
        return s.max_num_batched_tokens

    assert batched("gemma-4-31b", "l40s", "0.24.0") == 2496
    assert batched("gemma-4-31b", "a100-80", "0.24.0") == 2496
    assert batched("gemma-4-31b", "l40s", "0.23.0") == 2048  # not read before 0.24.0
    assert batched("gemma-4-31b", "h100", "0.24.0") == 8192
    assert batched("gemma-4-31b", "l40s", "0.24.0", max_num_batched_tokens=1024) == 1024
    assert batched("gemma-3-27b", "l40s", "0.24.0") == 2048


def test_model_runner_v1_subtracts_its_profiled_graph_estimate_not_the_pool() -> None:
    """vLLM 0.24.0 v1/worker/gpu_model_runner.py ``profile_cudagraph_memory`` (first capture +
    (n - 1) x the second, per mode) logged 0.61 GiB (Qwen2.5-7B-AWQ, 28 layers) and 0.64 GiB
    (Qwen3-30B-A3B, 48 layers) on one H200; Model Runner V2 still captures outside the budget."""
    assert vf.cudagraph_estimate_gib(28) == pytest.approx(0.61, abs=0.005)
    assert vf.cudagraph_estimate_gib(48) == pytest.approx(0.64, abs=0.005)
    h200 = dataclasses.replace(
        requests.request_from_options("mixtral-8x7b", gpu="h200"),
        engine_version="0.24.0", max_model_len=8192, gpu_memory_utilization=0.92,
    )  # fmt: skip
    s = calculator.compute(h200)
    assert s.cudagraph_gib == pytest.approx(0.568 + 0.0015 * 32, abs=1e-4)
    left = 139.8 * 0.92 - s.weights_gib_per_gpu - s.activation_gib - s.non_torch_gib
    assert s.kv_cache_gib_per_gpu == pytest.approx(left - s.cudagraph_gib, abs=1e-3)
    assert s.kv_cache_gib_per_gpu == pytest.approx(38.92, abs=0.01)  # was 37.48 (issue 26)
    v2 = calculator.compute(
        dataclasses.replace(h200, architecture=load_architecture("llama-3.1-8b"))
    )
    assert v2.cudagraph_gib == pytest.approx(0.6 + 0.015 * 32)  # the pool, outside the budget


# --- gpt-oss experts on the Triton MXFP4 backend (Hopper) --------------------------------------


def test_gpt_oss_experts_as_the_triton_backend_holds_them_on_hopper() -> None:
    """vllm-project/vllm@v0.24.0 (read in its wheel): ``GptOssMxfp4MoEMethod.create_weights``
    (model_executor/layers/quantization/mxfp4.py:183-262) makes uint8 ``w13_weight``
    (E, 2I, H/2), ``w2_weight`` (E, H, I/2), their scales (E, 2I, H/32), (E, H, I/32) and bf16
    biases, I padded to 64 for Triton (fused_moe/oracle/mxfp4.py:633-665). The Triton branch
    of ``convert_gpt_oss_weight_to_mxfp4_moe_kernel_format`` (oracle/mxfp4.py:1123-1157)
    casts the biases to float32, swizzles weights and scales (quantization/utils/
    mxfp4_utils.py:36-103 ``_swizzle_mxfp4``: on Hopper with torch >= 2.8.1 triton_kernels'
    HopperMXValueLayout and HopperMXScaleLayout, num_warps 8) and deletes the loaded weights
    only: ``layer.w13_weight_scale`` stays (``get_fused_moe_quant_config``, mxfp4.py:396).
    third_party/triton_kernels/tensor_details/layout_details/hopper_value.py:140 pads a
    value matrix to rows % 16 and K % 32 bytes; hopper_scale.py:25 a scale matrix to rows %
    (2 x 8 x 2 x 8 = 256) and K % 2. All of it runs in process_weights_after_loading, inside
    DeviceMemoryProfiler and the 20 MiB max_split scope, and only the tensors still held at
    the end are counted."""
    assert vf.mxfp4_layout("0.24.0", 9) == vf.Mxfp4Layout((64, 1), "Triton", True)
    # gpt-oss-20b, one rank of TP 1: E 32, H 2880, I 2880 (already a multiple of 64)
    held = mxfp4.triton_hopper_tensors(32, 2880, 2880, bias=True)
    assert held == (
        32 * 5760 * 1440,  # w13 values: 5760 % 16 == 0, 1440 % 32 == 0: no padding
        32 * 2880 * 1440,  # w2 values
        32 * 5760 * 90,  # loaded w13 scales (kept)
        32 * 2880 * 90,  # loaded w2 scales (kept)
        32 * 5888 * 90,  # swizzled w13 scales: 5760 -> 5888 rows
        32 * 3072 * 90,  # swizzled w2 scales: 2880 -> 3072 rows
        32 * 5760 * 4,  # float32 biases
        32 * 2880 * 4,
    )
    # TP 2: I 1440 -> 1472 (vLLM pads to 64), w2's scale K 46 (even), rows 2944 -> 3072
    tp2 = mxfp4.triton_hopper_tensors(32, 2880, 1472, bias=True)
    assert tp2[4:6] == (32 * 3072 * 90, 32 * 3072 * 46)
    assert mxfp4.triton_hopper_tensors(2, 100, 96, bias=False)[:2] == (
        2 * 192 * 64,  # w13: H 100 -> 128 values (64 bytes), 192 rows
        2 * 112 * 128 // 2,  # w2: H 100 -> 112 rows, I 96 -> 128 values (64 bytes)
    )
    # as the allocator counts them under max_split_size_mb:20 (sizing/allocator.py): the
    # values hold whole 2 MiB-rounded blocks (254 and 128 MiB), the 15.82 MiB loaded w13
    # scale its 16 MiB block; the rest is counted as allocated
    split = vf.load_max_split_bytes("0.24.0")
    blocks = [allocator.load_block_bytes(t, split) for t in held]
    assert blocks[:3] == [254 * MIB, 128 * MIB, 16 * MIB]
    assert blocks[3:] == [float(t) for t in held[3:]]
    goss = load_architecture("geometries/goss", base_dir=CALIBRATION.parent)
    assert vf.rope_cache_fp32(goss)  # models/gpt_oss.py:90 get_rope(dtype=torch.float32)
    assert not vf.rope_cache_fp32(load_architecture("llama-3.1-8b"))
    req = dataclasses.replace(
        requests.request_from_options("gpt-oss-20b", gpu="h200"),
        architecture=goss,
        engine_version="0.24.0",
        max_model_len=8192,
    )
    got = calculator.compute(req)
    experts = dict(got.weights_breakdown_gib)["experts"]
    assert experts == pytest.approx(24 * sum(blocks) / mem.GIB, abs=1e-4)
    # the rotary cache: 4096 x 32 (YaRN) positions x 64 in float32 (rotary_embedding/base.py:61)
    rope = dict(got.weights_breakdown_gib)["rope_cache"]
    assert rope == pytest.approx(131072 * 64 * 4 / mem.GIB, abs=1e-4)
    # our H200 run (h200-vllm0240-goss-gmu092-len8192): "Model loading took 13.58 GiB";
    # Marlin's padding, the bound used before, gave 13.77 (+1.4 %)
    assert got.weights_gib_per_gpu == pytest.approx(13.58, rel=0.001)
    marlin = mem.Sharding(tp=1, load_max_split=split)
    bound = sum(mem.weight_breakdown(goss, goss.quantization, 1, sharding=marlin).values())
    assert bound / mem.GIB == pytest.approx(13.77, abs=0.005)


def test_vllm_0_17_to_0_21_triton_kernels_pre_pads_the_values_to_64() -> None:
    """The triton_kernels vendored in vLLM 0.19.0 (read in its wheel, vllm-project/vllm@v0.19.0
    vllm/third_party/triton_kernels/tensor_details/layout_details/hopper_value.py:128-134)
    pads both dims of each value matrix to 64 before the layout's own padding ("Pre-pad both
    matrix dims to multiples of 64"); the 0.17.0, 0.18.0 and 0.21.0 wheels have it, 0.16.0,
    0.22.0, 0.23.0 and 0.24.0 do not. gpt-oss-20b at TP 2 (I 1440 -> 1472 a rank): w13's
    1440 bytes of inputs become 1472, w2's 736 become 768; the scales are as at 0.24.0."""
    assert vf.mxfp4_layout("0.19.0", 9).value_prepad == 64
    assert vf.mxfp4_layout("0.17.0", 9).value_prepad == 64
    assert vf.mxfp4_layout("0.16.0", 9).value_prepad == 1
    assert vf.mxfp4_layout("0.22.0", 9).value_prepad == 1
    at_024 = mxfp4.triton_hopper_tensors(32, 2880, 1472, bias=True)
    at_019 = mxfp4.triton_hopper_tensors(32, 2880, 1472, bias=True, prepad=64)
    assert at_024[:2] == (32 * 2944 * 1440, 32 * 2880 * 736)
    assert at_019[:2] == (32 * 2944 * 1472, 32 * 2880 * 768)
    assert at_019[2:] == at_024[2:]
    # llmd-v0190-gpt-oss-20b-h100-tp2 logged "Model loading took 7.01 GiB" (torch's default
    # max_split_size at 0.19.0: the 67.5 MiB w2 holds its 68 MiB block, w13 is split)
    rows = {str(c["id"]): c for c in REPORT_CASES}
    assert rows["llmd-v0190-gpt-oss-20b-h100-tp2"]["weights_gib"] == 7.01
    req = requests.request_from_options("gpt-oss-20b", gpu="h100", tp=2)
    got = calculator.compute(dataclasses.replace(req, engine_version="0.19.0"))
    assert got.weights_gib_per_gpu == pytest.approx(7.01, rel=0.002)
    blocks = [allocator.load_block_bytes(t, allocator.NO_MAX_SPLIT) for t in at_019]
    assert blocks[1] == 68 * MIB
    experts = dict(got.weights_breakdown_gib)["experts"]
    assert experts == pytest.approx(24 * sum(blocks) / mem.GIB, abs=1e-4)
    # without the pre-pad 24 x 5.5625 MiB less (as blocks): 6.89 GiB, -1.7 %
    unpadded = sum(allocator.load_block_bytes(t, allocator.NO_MAX_SPLIT) for t in at_024)
    assert 24 * (sum(blocks) - unpadded) == 24 * 5.5625 * MIB


def test_gpt_oss_on_hopper_before_vllm_0_12_is_sized_as_marlin() -> None:
    """vLLM ships triton_kernels in vllm/third_party from 0.12.0 (vllm-project/vllm#28788,
    vllm/utils/import_utils.py ``import_triton_kernels`` falls back to it); before, a pip
    install had none ("users have to install triton_kernels manually", #27370) and Hopper
    ran Marlin (pads I to 128, H to 256): gpt-oss-120b on an H100 logged 65.97 GiB on 0.10.1
    (issue23278). From 0.12 the Triton layout: 64.38 GiB logged on 0.14.1 (issue33155)."""
    assert vf.mxfp4_layout("0.11.2", 9) == vf.Mxfp4Layout((128, 256), "Marlin")
    assert vf.mxfp4_layout("0.24.0", 8).backend == "Marlin"  # A100: below Hopper
    rows = {str(c["id"]): c for c in REPORT_CASES}
    for cid, logged in (
        ("issue23278-gpt-oss-120b-h100-tp1-fail", 65.97),
        ("issue33155-gpt-oss-120b-h100-tp1-v0141", 64.38),
    ):
        case = rows[cid]
        version = str(case["vllm_version"] or case["inferred"]["vllm_version"])
        arch = load_architecture(str(case["model"]))
        req = dataclasses.replace(
            requests.request_from_options(str(case["model"]), gpu="h100"),
            architecture=arch,
            engine_version=version,
        )
        assert calculator.compute(req).weights_gib_per_gpu == pytest.approx(logged, rel=0.001)


def test_llava_next_sizes_its_largest_grid_pinpoint_and_its_feature_layers() -> None:
    """Issue 26: LLaVA-NeXT (granite-vision-3.3-2b) was refused. vLLM 0.19's log states the
    encoder budget, 8289 tokens: the 3840 x 384 pinpoint, 729 base features + 270 x 27 grid
    features + 270 row newlines (vllm/model_executor/models/llava_next.py
    ``get_num_image_tokens``), encoded as 1 + 10 crops of 27 x 27 patches."""
    arch = load_architecture("ibm-granite/granite-vision-3.3-2b")
    (enc,) = arch.encoders
    assert (enc.tokens_per_item, enc.patches_per_item) == (729 + 270 * 27 + 270, 11 * 729)
    # the projector reads the four feature layers concatenated: 4 x 1152 -> 2048 -> 2048, and
    # -1 among them loads the whole 27-layer tower
    vit = 4 * 1152 * 1152 + 4 * 1152 + 2 * 1152 * 4304 + 4304 + 1152 + 4 * 1152
    tower = 27 * vit + 3 * 14 * 14 * 1152 + 729 * 1152 + 4 * 1152
    projector = 4 * 1152 * 2048 + 2048 + 2048 * 2048 + 2048 + 2048
    assert enc.params == tower + projector


def test_llava_next_does_not_load_layers_past_its_deepest_feature_layer(tmp_path: Path) -> None:
    """``llava.py`` ``_get_num_hidden_layers``: with vision_feature_layer -2 the last of 27
    layers is not built (an int, not a list: one layer's features, 1152 wide)."""
    import json

    from llmdeploy.catalog import models

    entry = next(m for m in models._extra()["extra_models"] if m["name"] == "granite-vision-3.3-2b")
    cfg = json.loads(json.dumps(entry["config"]))
    full = load_architecture("ibm-granite/granite-vision-3.3-2b").encoders[0].params
    cfg["vision_feature_layer"] = -2
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (enc,) = load_architecture(str(tmp_path / "config.json")).encoders
    vit = 4 * 1152 * 1152 + 4 * 1152 + 2 * 1152 * 4304 + 4304 + 1152 + 4 * 1152
    assert full - enc.params == vit + 3 * 1152 * 2048
