"""Model architectures: catalog, HF id aliases, config.json parsing, refusals."""

from __future__ import annotations

import csv
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from llmdeploy.catalog import architecture as models
from llmdeploy.catalog.models import catalog_name, catalog_names, load_architecture
from llmdeploy.errors import ExitCode, UnknownArchitectureError

LLAMA_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def _csv_rows() -> list[dict[str, str]]:
    text = resources.files("llmdeploy.catalog").joinpath("data", "models.csv").read_text("utf-8")
    return list(csv.DictReader(text.splitlines()))


def _write(tmp_path: Path, cfg: dict[str, Any], name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def test_catalog_has_the_documented_names() -> None:
    names = catalog_names()
    for expected in (
        "llama-3-70b",
        "llama-3.1-8b",
        "mixtral-8x7b",
        "qwen2.5-7b",
        "deepseek-v3",
        "gemma-2-9b",
        "gpt-oss-20b",
        "qwen3-14b",
        "qwen1.5-moe-a2.7b",
    ):
        assert expected in names
    assert names == sorted(names)
    assert all(n == n.lower() for n in names)


def _half_unit(cell: str) -> float:
    """Half a unit in the last printed digit: how far a value may be from its rounded cell."""
    return 0.5 * 10.0 ** -len(cell.partition(".")[2])


@pytest.mark.parametrize("row", _csv_rows(), ids=lambda r: r["model"])
def test_params_match_models_csv_to_its_printed_precision(row: dict[str, str]) -> None:
    arch = load_architecture(catalog_name(row["model"]))
    for count, cell in (
        (arch.total_params, row["computed_total_params_b"]),
        (arch.active_params, row["computed_active_params_b"]),
    ):
        assert abs(count / 1e9 - float(cell)) <= _half_unit(cell), (count, cell)
    assert arch.hf_id == row["hf_id"]
    assert arch.source


def test_every_catalog_entry_loads_with_positive_shapes() -> None:
    for name in catalog_names():
        arch = load_architecture(name)
        assert arch.layers > 0 and arch.kv_heads > 0 and arch.head_dim > 0
        assert arch.max_position_embeddings > 0 and arch.vocab > 0
        assert len(arch.layer_attention) == arch.layers


@pytest.mark.parametrize(
    ("ref", "name"),
    [
        ("meta-llama/Meta-Llama-3-70B", "llama-3-70b"),
        ("meta-llama/Meta-Llama-3-70B-Instruct", "llama-3-70b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("google/gemma-2-9b-it", "gemma-2-9b"),
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
        ("LLAMA-3-70B", "llama-3-70b"),
        ("openai/gpt-oss-20b", "gpt-oss-20b"),
    ],
)
def test_hf_id_aliases(ref: str, name: str) -> None:
    assert load_architecture(ref).name == name


def test_variants_with_a_different_config_are_not_aliased() -> None:
    # the Llama-4 Scout base release has another max_position_embeddings than the Instruct one
    with pytest.raises(UnknownArchitectureError):
        load_architecture("meta-llama/Llama-4-Scout-17B-16E")


def test_checkpoint_quantization_of_catalog_entries() -> None:
    ds = load_architecture("deepseek-v3")
    assert ds.quantization is not None and ds.quantization.method == "fp8-block"
    assert ds.is_mla and ds.dense_layers == 3 and ds.shared_expert_intermediate_size == 2048
    oss = load_architecture("gpt-oss-20b")
    assert oss.quantization is not None and oss.quantization.experts_only
    assert oss.quantization.bytes_per_weight == pytest.approx(0.5 + 1 / 32)
    fp8 = load_architecture("RedHatAI/Llama-3.3-70B-Instruct-fp8-dynamic")
    assert fp8.name == "llama-3.3-70b" and fp8.quantization is not None
    assert fp8.quantization.method == "fp8" and fp8.quantization.per_channel_scale_bytes == 4
    assert fp8.quantization.quantized_fraction("lm_head") == 0


def test_sliding_and_chunked_layer_patterns() -> None:
    gemma = load_architecture("gemma-2-9b")
    assert gemma.layer_attention[:2] == ("sliding", "full") and gemma.sliding_window == 4096
    oss = load_architecture("gpt-oss-20b")
    assert oss.layer_attention.count("sliding") == 12 and oss.sliding_window == 128
    scout = load_architecture("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert scout.layer_attention.count("chunked") == 36 and scout.attention_chunk_size == 8192
    assert scout.vision_params > 0 and scout.num_experts == 16
    qwen = load_architecture("qwen2.5-7b")  # ships a window with use_sliding_window=false
    assert set(qwen.layer_attention) == {"full"}


def test_local_config_json(tmp_path: Path) -> None:
    path = _write(tmp_path, LLAMA_8B)
    arch = load_architecture(str(path))
    assert arch.total_params / 1e9 == pytest.approx(8.03, rel=0.01)
    assert arch.head_dim == 128 and arch.quantization is None
    # relative to base_dir, and a directory holding config.json
    assert load_architecture("config.json", base_dir=tmp_path).total_params == arch.total_params
    assert load_architecture(str(tmp_path)).total_params == arch.total_params


@pytest.mark.parametrize(
    ("qcfg", "method", "per_weight", "per_channel"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "awq", 0.5 + 2.5 / 128, 0),
        ({"quant_method": "gptq", "bits": 4, "group_size": 64}, "gptq", 0.5 + 2.5 / 64, 0),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8-block", 1 + 4 / 16384, 0),
        ({"quant_method": "mxfp4"}, "mxfp4", 0.5 + 1 / 32, 0),
        (
            {
                "quant_method": "compressed-tensors",
                "ignore": ["lm_head"],
                "config_groups": {
                    "g": {
                        "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                        "input_activations": {"num_bits": 8},
                    }
                },
            },
            "fp8",
            1.0,
            4,
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {"weights": {"num_bits": 8, "type": "int", "strategy": "channel"}}
                },
            },
            "int8",
            1.0,
            4,
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
                        }
                    }
                },
            },
            "w4a16",
            0.5 + 2 / 128,
            0,
        ),
    ],
)
def test_quantization_config(
    tmp_path: Path, qcfg: dict[str, Any], method: str, per_weight: float, per_channel: int
) -> None:
    arch = load_architecture(str(_write(tmp_path, {**LLAMA_8B, "quantization_config": qcfg})))
    assert arch.quantization is not None
    assert arch.quantization.method == method
    assert arch.quantization.bytes_per_weight == pytest.approx(per_weight)
    assert arch.quantization.per_channel_scale_bytes == per_channel


@pytest.mark.parametrize(
    ("fields", "experts", "moe_width", "shared"),
    [
        ({"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}, 8, 14336, 0),
        (
            {
                "model_type": "qwen2_moe",
                "num_experts": 60,
                "num_experts_per_tok": 4,
                "moe_intermediate_size": 1408,
                "shared_expert_intermediate_size": 5632,
            },
            60,
            1408,
            5632,
        ),
        (
            {
                "model_type": "qwen3_moe",
                "num_experts": 128,
                "num_experts_per_tok": 8,
                "moe_intermediate_size": 768,
            },
            128,
            768,
            0,
        ),
    ],
)
def test_moe_field_names(
    tmp_path: Path, fields: dict[str, Any], experts: int, moe_width: int, shared: int
) -> None:
    arch = load_architecture(str(_write(tmp_path, {**LLAMA_8B, **fields})))
    assert arch.num_experts == experts
    assert arch.moe_intermediate_size == moe_width
    assert arch.shared_expert_intermediate_size == shared
    assert arch.active_params < arch.total_params


def test_text_config_nesting_and_layer_types(tmp_path: Path) -> None:
    text = {
        **LLAMA_8B,
        "model_type": "mistral",
        "sliding_window": 4096,
        "layer_types": ["sliding_attention", "full_attention"] * 16,
    }
    text.pop("tie_word_embeddings")
    cfg = {
        "model_type": "mistral3",
        "architectures": ["Mistral3ForConditionalGeneration"],
        "text_config": text,
        "vision_config": {
            "model_type": "pixtral",
            "hidden_size": 1024,
            "intermediate_size": 4096,
            "num_hidden_layers": 24,
            "patch_size": 14,
            "image_size": 1540,
        },
    }
    arch = load_architecture(str(_write(tmp_path, cfg)))
    assert arch.vision_params > 400_000_000
    assert arch.layer_attention.count("sliding") == 16 and arch.sliding_window == 4096


def test_mla_fields(tmp_path: Path) -> None:
    cfg = {
        "model_type": "deepseek_v2",
        "hidden_size": 2048,
        "intermediate_size": 10944,
        "moe_intermediate_size": 1408,
        "num_hidden_layers": 27,
        "num_attention_heads": 16,
        "kv_lora_rank": 512,
        "q_lora_rank": None,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "n_routed_experts": 64,
        "n_shared_experts": 2,
        "num_experts_per_tok": 6,
        "first_k_dense_replace": 1,
        "vocab_size": 102400,
        "max_position_embeddings": 163840,
    }
    arch = load_architecture(str(_write(tmp_path, cfg)))
    assert arch.is_mla and arch.rotary_dim == 64 and arch.dense_layers == 1
    assert arch.total_params / 1e9 == pytest.approx(15.7, rel=0.01)  # DeepSeek-V2-Lite


def test_unknown_model_type_is_refused_naming_it(tmp_path: Path) -> None:
    path = _write(tmp_path, {**LLAMA_8B, "model_type": "mamba2"})
    with pytest.raises(UnknownArchitectureError) as err:
        load_architecture(str(path))
    assert "mamba2" in err.value.message
    assert err.value.exit_code == ExitCode.SPEC


def test_missing_fields_are_all_reported(tmp_path: Path) -> None:
    cfg = {k: v for k, v in LLAMA_8B.items() if k not in {"hidden_size", "vocab_size"}}
    with pytest.raises(UnknownArchitectureError) as err:
        load_architecture(str(_write(tmp_path, cfg)))
    messages = " ".join(d.message for d in err.value.diagnostics)
    assert "hidden_size" in messages and "vocab_size" in messages
    assert len(err.value.diagnostics) == 2


@pytest.mark.parametrize(
    "bad",
    [
        {"quantization_config": {"quant_method": "bitsandbytes"}},
        {"model_type": "llava_onevision", "text_config": {}},
        {
            "model_type": "mistral3",
            "text_config": {**LLAMA_8B, "model_type": "mistral"},
            "vision_config": {"model_type": "qwen2_vl"},
        },
    ],
)
def test_unsupported_configs_are_refused(tmp_path: Path, bad: dict[str, Any]) -> None:
    with pytest.raises(UnknownArchitectureError):
        load_architecture(str(_write(tmp_path, {**LLAMA_8B, **bad})))


def test_unknown_reference_and_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(UnknownArchitectureError) as err:
        load_architecture("no-such-model")
    assert err.value.diagnostics[0].hint and "llama-3-70b" in err.value.diagnostics[0].hint
    with pytest.raises(UnknownArchitectureError):
        load_architecture(str(tmp_path / "missing.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(UnknownArchitectureError):
        load_architecture(str(broken))


def test_architecture_is_frozen() -> None:
    arch = load_architecture("llama-3.1-8b")
    with pytest.raises(AttributeError):
        arch.num_layers = 1  # type: ignore[misc]
    assert isinstance(models.count_params(arch), tuple)
