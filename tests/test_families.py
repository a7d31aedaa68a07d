"""Sizing of the families issue 14 added: checkpoint formats, multimodal encoders and their
profile, hybrid attention / state-space layers, expert and data parallelism, and the
version-dependent parts of vLLM's budget (Model Runner V2, MLA blocks, KV grouping)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from llmdeploy.catalog import architecture as arch_mod
from llmdeploy.catalog.models import load_architecture
from llmdeploy.engines.vllm import facts as vf
from llmdeploy.errors import UnknownArchitectureError
from llmdeploy.sizing import calculator, requests
from llmdeploy.sizing import kv as kvm
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.types import Sizing, SizingRequest
from test_models import LLAMA_8B


def _write(tmp_path: Path, cfg: dict[str, Any], name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def _size(model: str, gpu: str = "h100", **kw: Any) -> Sizing:
    req: SizingRequest = dataclasses.replace(
        requests.request_from_options(model, gpu=gpu), max_model_len=8192, **kw
    )
    return calculator.compute(req)


# --- checkpoint formats -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("qcfg", "method", "per_weight"),
    [
        (
            {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
            "bnb-4bit",
            0.5 + 4 / 64,
        ),
        (
            {
                "quant_method": "bitsandbytes",
                "load_in_4bit": True,
                "bnb_4bit_use_double_quant": True,
            },
            "bnb-4bit",
            0.5 + 1 / 64 + 4 / (64 * 256),
        ),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "bnb-8bit", 1.0),
        (
            {  # NVFP4 as llm-compressor writes it: strategy tensor_group
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "group_0": {
                        "weights": {
                            "num_bits": 4,
                            "type": "float",
                            "strategy": "tensor_group",
                            "group_size": 16,
                        }
                    }
                },
            },
            "nvfp4",
            0.5 + 1 / 16,
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {
                        "weights": {
                            "num_bits": 4,
                            "type": "int",
                            "strategy": "group",
                            "group_size": 128,
                            "symmetric": False,
                        }
                    }
                },
            },
            "w4a16",
            0.5 + 2.5 / 128,
        ),
        ({"quant_method": "modelopt", "quant_algo": "MXFP8"}, "mxfp8", 1 + 1 / 32),
        ({"quant_method": "gptq", "bits": 8, "group_size": 128}, "gptq", 1 + 3 / 128),
    ],
)
def test_checkpoint_formats(
    tmp_path: Path, qcfg: dict[str, Any], method: str, per_weight: float
) -> None:
    arch = load_architecture(str(_write(tmp_path, {**LLAMA_8B, "quantization_config": qcfg})))
    assert arch.quantization is not None and arch.quantization.method == method
    assert arch.quantization.bytes_per_weight == pytest.approx(per_weight)
    assert arch.quantization.quantized_fraction("lm_head") == 0  # a ParallelLMHead


def test_ignore_lists_keep_weights_16bit(tmp_path: Path) -> None:
    qcfg = {
        "quant_method": "modelopt",
        "quant_algo": "NVFP4",
        "exclude_modules": [
            "lm_head",
            "model.layers.0.self_attn*",
            "model.layers.1.self_attn.q_proj",
        ],
    }
    arch = load_architecture(str(_write(tmp_path, {**LLAMA_8B, "quantization_config": qcfg})))
    q = arch.quantization
    assert q is not None
    assert q.quantized_fraction("attention") == 0  # a wildcard keeps the class 16-bit
    skip_one = {**qcfg, "exclude_modules": ["model.layers.3.self_attn.o_proj"]}
    q1 = load_architecture(
        str(_write(tmp_path, {**LLAMA_8B, "quantization_config": skip_one}))
    ).quantization
    assert q1 is not None and q1.quantized_fraction("attention") == pytest.approx(31 / 32)
    per = mem.weight_breakdown(arch, q, 1)["attention"]
    full = mem.weight_breakdown(arch, None, 1)["attention"]
    assert per == full  # attention stays 16-bit


def test_modelopt_hf_quant_config_sidecar_and_name_from_file(tmp_path: Path) -> None:
    (tmp_path / "hf_quant_config.json").write_text(
        json.dumps(
            {
                "producer": {"name": "modelopt", "version": "0.19.0"},
                "quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head"]},
            }
        ),
        encoding="utf-8",
    )
    arch = load_architecture(str(_write(tmp_path, LLAMA_8B)))
    assert arch.quantization is not None and arch.quantization.label == "modelopt fp8"
    # a config.json of a Hub snapshot is named after its directory; any other file after itself
    assert arch.name == tmp_path.name
    other = load_architecture(str(_write(tmp_path, LLAMA_8B, "openai--my-model.json")))
    assert other.name == "openai--my-model"
    named = load_architecture(
        str(_write(tmp_path, {**LLAMA_8B, "_name_or_path": "org/model"}, "x.json"))
    )
    assert named.name == "org/model"


def test_gptq_act_order_stores_g_idx(tmp_path: Path) -> None:
    base = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    plain = load_architecture(str(_write(tmp_path, {**LLAMA_8B, "quantization_config": base})))
    act = load_architecture(
        str(_write(tmp_path, {**LLAMA_8B, "quantization_config": {**base, "desc_act": True}}))
    )
    assert act.quantization is not None and act.quantization.per_input_bytes == 4
    diff = mem.weight_breakdown(act, act.quantization, 1)["mlp"]
    diff -= mem.weight_breakdown(plain, plain.quantization, 1)["mlp"]
    assert diff == 32 * (4096 + 14336) * 4  # int32 g_idx per input channel (gate_up, down)


def test_awq_repo_with_padded_intermediate_size() -> None:
    awq = load_architecture("Qwen/Qwen2.5-72B-Instruct-AWQ")
    assert awq.intermediate_size == 29696 and awq.quantization is not None
    # 29568 / 8 = 3696 is not a multiple of 128; the padded 29696 / 8 = 3712 = 29 x 128 is
    ok = _size("Qwen/Qwen2.5-72B-Instruct-AWQ", tp=8)
    assert not [r for r in ok.reasons if "group size" in r]
    base = _size("qwen2.5-72b", tp=8, quantization="int4-awq")
    assert [r for r in base.reasons if "group size" in r]


def test_bitsandbytes_is_gone_from_vllm_0_28() -> None:
    arch = load_architecture("llama-3.1-8b")
    q = arch_mod.CheckpointQuant("bnb-4bit", 4, 64, 0.5625, quant_method="bitsandbytes")
    assert not vf.quantization_problem("0.27.1", q)
    assert "bitsandbytes" in vf.quantization_problem("0.28.0", q)
    assert arch.quantization is None


def test_mxfp4_padding_follows_the_moe_backend() -> None:
    assert vf.mxfp4_layout("0.10.1", 9) == vf.Mxfp4Layout((128, 256), "Marlin")
    assert vf.mxfp4_layout("0.11.2", 9).backend == "Marlin"  # triton_kernels not in the wheel
    assert vf.mxfp4_layout("0.12.0", 9) == vf.Mxfp4Layout((64, 1), "Triton", True)
    assert vf.mxfp4_layout("0.19.0", 9) == vf.Mxfp4Layout((64, 1), "Triton", True, 64)
    assert vf.mxfp4_layout("0.19.0", 10) == vf.Mxfp4Layout((256, 256), "FlashInfer TRT-LLM")
    b200 = _size("gpt-oss-20b", gpu="b200")
    h100 = _size("gpt-oss-20b")
    assert dict(b200.weights_breakdown_gib)["experts"] > dict(h100.weights_breakdown_gib)["experts"]


# --- rope caches, Model Runner V2, MLA blocks, grouping -------------------------------------


def test_linear_scaled_rope_cache_of_gemma3() -> None:
    gemma = load_architecture("gemma-3-4b")
    # global layers: 131072 x 8 positions (linear x8), local layers: a second cache of 131072
    assert gemma.rope_caches == (131072 * 8 * 256, 131072 * 256)
    parts = mem.weight_breakdown(gemma, None, 1)
    assert parts["rope_cache"] / mem.GIB == pytest.approx(0.5625)


def test_model_runner_v2_by_version_and_architecture() -> None:
    llama = load_architecture("llama-3.1-8b")
    gemma = load_architecture("gemma-3-4b")
    moe = load_architecture("qwen3-30b-a3b")
    assert not vf.model_runner_v2("0.21.0", llama, False)
    assert not vf.model_runner_v2("0.22.1", llama, False)  # Qwen3 only in 0.22
    assert vf.model_runner_v2("0.23.0", llama, False)
    assert not vf.model_runner_v2("0.23.0", llama, True)  # quantized models stay on V1
    assert vf.model_runner_v2("0.24.0", llama, True)
    assert not vf.model_runner_v2("0.24.0", gemma, False)
    assert vf.model_runner_v2("0.25.1", gemma, False)  # every dense model from 0.25
    assert not vf.model_runner_v2("0.28.0", moe, False)
    assert vf.model_runner_v2("0.29.0", moe, False)
    v24 = vf.vllm_facts("0.24.0", llama)
    assert v24.runner_v2 and not v24.cudagraph_in_budget and v24.sampler_bytes == 6.0
    assert vf.vllm_facts("0.29.0", llama).cudagraph_in_budget


def test_h200_vllm_0_24_kv_is_the_runner_v2_budget() -> None:
    """Measured 112.28 GiB (shared/perf/h200-vllm-0.24.0.yaml): no CUDA-graph term, 6 B/elt."""
    s = _size("llama-3.1-8b", gpu="h200", engine_version="0.24.0", gpu_memory_utilization=0.92)
    assert s.kv_cache_gib_per_gpu == pytest.approx(112.28, rel=0.005)
    assert any("Model Runner V2" in a for a in s.assumptions)
    v1 = _size("llama-3.1-8b", gpu="h200", engine_version="0.22.1", gpu_memory_utilization=0.92)
    assert v1.kv_cache_gib_per_gpu < s.kv_cache_gib_per_gpu - 1.5  # MRv1: graphs + sampler


def test_mla_block_size_by_version_and_gpu() -> None:
    assert vf.mla_block_size("0.7.3", 9) == 16
    assert vf.mla_block_size("0.17.1", 9) == 64
    assert vf.mla_block_size("0.18.0", 9) == 16
    assert vf.mla_block_size("0.17.1", 10) == 128
    assert vf.mla_block_size("0.19.0", 10) == 32
    assert vf.mla_block_size("0.19.0", 8) == 16


def test_hybrid_grouping_threshold_by_version() -> None:
    kinds = ("sliding",) * 10 + ("full",) * 14
    arch = dataclasses.replace(
        load_architecture("llama-3.1-8b"),
        num_layers=24,
        layer_attention=kinds,
        sliding_window=4096,
    )
    for version, size in (("0.11.2", 10), ("0.17.1", 10), ("0.18.0", 14)):
        policy = kvm.KvPolicy(16, vf.group_ratio(version))
        assert kvm.kv_layout(arch, 1, 2, policy).group_size == size, version
    unified = kvm.kv_layout(arch, 1, 2, kvm.KvPolicy(16, vf.group_ratio("0.9.0")))
    assert unified.groups == ("full",) and unified.group_size == 24


# --- hybrid attention / state-space -----------------------------------------------------------


@pytest.mark.parametrize(
    ("tp", "state", "block"),
    [(1, 1_097_728, 544), (2, 548_864, 544), (4, 274_432, 272), (8, 137_216, 144)],
)
def test_qwen3_next_state_and_attention_block(tp: int, state: int, block: int) -> None:
    """Gated DeltaNet state per layer (mamba_utils.gated_delta_net_state_shape) and the
    attention block that makes an attention page hold it (_align_hybrid_block_size)."""
    arch = load_architecture("qwen3-next-80b-a3b")
    assert arch.layer_attention.count("mamba") == 36 and arch.ssm is not None
    layout = kvm.kv_layout(arch, tp, 2, kvm.KvPolicy(16, 1.5, "none"))
    assert layout.state_bytes_per_layer == state
    assert layout.block_size == block
    assert layout.groups == ("mamba", "mamba", "mamba", "full") and layout.group_size == 12
    # one request: one state page in each mamba group, cdiv(L, block) in the attention group
    pages = kvm.pages_per_request(arch, layout, 8192, 8192)
    assert pages == 3 + -(-8192 // block)


def test_qwen3_next_sizes_and_prefix_caching_doubles_state_pages() -> None:
    off = _size("qwen3-next-80b-a3b", tp=4, engine_version="0.24.0", prefix_caching=False)
    on = _size("qwen3-next-80b-a3b", tp=4, engine_version="0.24.0")
    assert off.fits and on.fits
    assert on.kv_layout is not None and on.kv_layout.mamba_mode == "align"
    assert on.max_concurrency < off.max_concurrency
    assert off.state_bytes_per_sequence == 36 * 274_432
    assert "state-space layers: mamba cache mode 'none' (prefix caching off)" in off.assumptions
    assert "state-space layers: mamba cache mode 'align' (prefix caching on)" in on.assumptions
    # sized from the first release with mamba cache modes (vLLM 0.17.0), refused before it
    assert _size("qwen3-next-80b-a3b", tp=4, engine_version="0.17.0", prefix_caching=False).fits
    old = _size("qwen3-next-80b-a3b", tp=4, engine_version="0.16.0")
    assert not old.fits and any("0.17.0" in r for r in old.reasons)


def _jamba_v01() -> dict[str, Any]:
    """transformers JambaConfig defaults (documented as ai21labs/Jamba-v0.1)."""
    return {
        "architectures": ["JambaForCausalLM"],
        "model_type": "jamba",
        "vocab_size": 65536,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 262144,
        "num_experts": 16,
        "num_experts_per_tok": 2,
    }


def test_jamba_mamba1_layers_and_state(tmp_path: Path) -> None:
    arch = load_architecture(str(_write(tmp_path, _jamba_v01())))
    assert arch.layer_attention.count("full") == 4 and arch.moe_layers == 16
    assert arch.total_params / 1e9 == pytest.approx(51.6, rel=0.01)  # Jamba-v0.1: 52B
    assert arch.active_params / 1e9 == pytest.approx(12.1, rel=0.02)  # 12B active
    assert arch.ssm is not None
    # conv (8192 x 3) + ssm (8192 x 16), 16-bit: mamba_utils.mamba1_state_shape
    assert kvm.state_bytes(arch.ssm, 1, 2) == (8192 * 3 + 8192 * 16) * 2


def test_nemotron_h_pattern_and_fp32_ssm_state(tmp_path: Path) -> None:
    cfg = {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "hybrid_override_pattern": "M-M-M*-M-",
        "hidden_size": 4096,
        "num_hidden_layers": 9,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 131072,
        "max_position_embeddings": 8192,
        "intermediate_size": 21504,
    }
    arch = load_architecture(str(_write(tmp_path, cfg)))
    kinds = {"M": "mamba", "-": "none", "*": "full"}
    assert arch.layer_attention == tuple(kinds[c] for c in "M-M-M*-M-")
    assert arch.ssm is not None and arch.ssm.ssm_state_fp32 and not arch.gated_mlp
    s = arch.ssm  # 128 heads x 64 x 128 fp32 ssm + (8192 + 2 x 8 x 128) x 3 conv, 16-bit
    assert kvm.state_bytes(s, 1, 2) == (8192 + 2 * 8 * 128) * 3 * 2 + 128 * 64 * 128 * 4
    # n_groups 8 at TP 16: groups are replicated up to the TP size (extra_groups_for_head_shards)
    assert kvm.state_bytes(s, 16, 2) == (8192 + 2 * 16 * 128) // 16 * 3 * 2 + 8 * 64 * 128 * 4


def test_granite_4_hybrid_layer_types(tmp_path: Path) -> None:
    types = ["mamba"] * 9 + ["attention"]
    cfg = {
        "architectures": ["GraniteMoeHybridForCausalLM"],
        "model_type": "granitemoehybrid",
        "hidden_size": 1536,
        "num_hidden_layers": 10,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "vocab_size": 100352,
        "max_position_embeddings": 131072,
        "intermediate_size": 512,
        "num_local_experts": 62,
        "num_experts_per_tok": 6,
        "shared_intermediate_size": 1024,
        "layer_types": types,
        "mamba_n_heads": 48,
        "mamba_d_head": 64,
        "mamba_d_state": 128,
    }
    arch = load_architecture(str(_write(tmp_path, cfg)))
    assert arch.layer_attention.count("mamba") == 9 and arch.moe_layers == 10
    s = _size(str(_write(tmp_path, cfg)), engine_version="0.24.0")
    assert s.fits and s.kv_layout is not None and s.kv_layout.mamba_mode == "all"
    assert s.kv_layout.block_size % 256 == 0  # prefix caching: chunk-aligned blocks


# --- multimodal -------------------------------------------------------------------------------


def test_gemma3_encoder_profile_matches_the_log() -> None:
    """v0.19 log: "budget of 8192 tokens, and profiled with 32 image items"; 57.05x."""
    s = _size(
        "gemma-3-4b", gpu_memory_utilization=0.95, gpu_total_gib=79.19, engine_version="0.19.0"
    )
    assert any("32 dummy image item(s) of 256 tokens" in a for a in s.assumptions)
    assert s.max_concurrency == pytest.approx(57.05, abs=0.15)  # predicted, not logged, KV


def test_language_only_and_skip_profiling() -> None:
    full = _size("gemma-3-27b")
    text = _size("gemma-3-27b", mm_limits=(("image", 0),))
    assert "vision" in dict(full.weights_breakdown_gib)
    assert "vision" not in dict(text.weights_breakdown_gib)
    assert text.kv_cache_gib_per_gpu > full.kv_cache_gib_per_gpu
    old = _size("gemma-3-27b", mm_limits=(("image", 0),), engine_version="0.10.0")
    assert not old.fits and any("0.10.1" in r for r in old.reasons)
    skip = _size("gemma-3-27b", mm_skip_profiling=True)
    assert skip.activation_gib < full.activation_gib


def test_encoder_tp_data_replicates_the_tower() -> None:
    split = _size("qwen2.5-vl-7b", tp=2)
    data = _size("qwen2.5-vl-7b", tp=2, mm_encoder_tp_mode="data")
    vision = dict(split.weights_breakdown_gib)["vision"]
    assert dict(data.weights_breakdown_gib)["vision"] == pytest.approx(2 * vision, rel=1e-3)
    gemma = _size("gemma-3-4b", tp=2, mm_encoder_tp_mode="data")
    assert any("not supported" in r for r in gemma.reasons)
    text = _size("llama-3.1-8b", mm_skip_profiling=True)
    assert any("no multimodal encoder" in r for r in text.reasons)


def test_qwen2_5_vl_profiles_one_16k_token_image() -> None:
    s = _size("qwen2.5-vl-7b")
    assert any("encoder budget 16384 tokens, 1 dummy image" in a for a in s.assumptions)
    arch = load_architecture("qwen2.5-vl-7b")
    assert arch.vision_params / 1e6 == pytest.approx(676.6, rel=0.01)  # research notes A.1


def test_gemma4_kv_sharing_per_layer_embeddings_and_page_unification() -> None:
    arch = load_architecture("gemma-4-e2b")
    owners = [s for s in arch_mod.layer_shapes(arch) if s.owns_kv]
    assert len(owners) == 15 and sum(s.mixer == "full" for s in owners) == 3
    assert arch.per_layer_embedding == 262144 * 35 * 256  # 4.38 GiB in bf16
    s = _size("gemma-4-e2b", engine_version="0.24.0")
    layout = s.kv_layout
    assert layout is not None
    # sliding pages (head_dim 256) hold twice the tokens of full ones (head_dim 512)
    assert dict(zip(layout.groups, layout.group_blocks, strict=True)) == {"sliding": 32, "full": 16}
    assert s.kv_bytes_per_token_per_gpu == 12 * 2 * 256 * 2 + 3 * 2 * 512 * 2


def test_llama_3_2_vision_only_up_to_vllm_0_10_2() -> None:
    ok = _size("llama-3.2-11b-vision", engine_version="0.10.2")
    assert ok.fits and ok.kv_cache_groups == ("full+cross",)
    gone = _size("llama-3.2-11b-vision", engine_version="0.11.0")
    assert not gone.fits and gone.reasons == (
        "llama-3.2-11b-vision: encoder-decoder (cross-attention) models were removed from vLLM "
        "after 0.10.2 (PR #24907); pin engine.version 0.10.2 or older",
    )


def test_refused_families_name_the_reason(tmp_path: Path) -> None:
    with pytest.raises(UnknownArchitectureError) as err:
        load_architecture(str(_write(tmp_path, {**LLAMA_8B, "model_type": "gemma3n"})))
    assert "AltUp" in err.value.message


# --- expert and data parallelism -------------------------------------------------------------


def test_deepseek_v3_weights_per_gpu_by_layout() -> None:
    """Research notes D: TP8 79.1 GiB, DP8+EP 93.7, TP2xDP4 85.3 (+ rope cache and norms)."""
    tp8 = _size("deepseek-v3", tp=8)
    dp8 = _size("deepseek-v3", tp=1, data_parallel=8, expert_parallel=True)
    mix = _size("deepseek-v3", tp=2, data_parallel=4, expert_parallel=True)
    assert tp8.weights_gib_per_gpu == pytest.approx(79.3, abs=0.1)
    assert dp8.weights_gib_per_gpu == pytest.approx(93.9, abs=0.1)
    assert mix.weights_gib_per_gpu == pytest.approx(85.6, abs=0.1)
    experts = {dict(s.weights_breakdown_gib)["experts"] for s in (tp8, dp8, mix)}
    assert len(experts) == 1  # experts / (TP x DP) either way
    # MLA KV is not split by TP: DP ranks each hold the full latent
    assert tp8.kv_bytes_per_token_per_gpu == dp8.kv_bytes_per_token_per_gpu == 61 * 576 * 2


def test_expert_parallel_skips_the_expert_tp_divisibility() -> None:
    tp8 = _size("Qwen/Qwen3-235B-A22B-FP8", tp=8)
    assert any("group size 128" in r for r in tp8.reasons)  # 1536 / 8 = 192
    ep = _size("Qwen/Qwen3-235B-A22B-FP8", tp=8, expert_parallel=True)
    assert not [r for r in ep.reasons if "group size" in r]
    assert ep.weights_gib_per_gpu == pytest.approx(27.7, abs=0.1)


def test_data_parallel_pod_needs_tp_times_dp_gpus() -> None:
    req = requests.request_from_options(
        "qwen3-30b-a3b", instance="p5.48xlarge", tp=4, dp=4, expert_parallel=True
    )
    s = calculator.compute(req)
    assert any("= 16 exceeds the 8 GPU(s)" in r for r in s.reasons)
    two = calculator.compute(dataclasses.replace(req, data_parallel=2))
    assert two.fits and two.data_parallel == 2
    one = calculator.compute(dataclasses.replace(req, data_parallel=1))
    assert two.slo_requests_per_replica >= 2 * min(one.slo_requests_per_replica, 1)
    dense = _size("llama-3.1-8b", expert_parallel=True)
    assert any("mixture-of-experts" in r for r in dense.reasons)
