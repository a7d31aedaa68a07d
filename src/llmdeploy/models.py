"""Model architectures for sizing: the packaged catalog and local Hugging Face config.json files.

Sources:

- ``data/models.csv``: copy of ``shared/reference/models.csv`` (HF config fields with a ``source``
  column per row). Its ``?`` cells are filled only from ``data/models_extra.json``
  ``csv_overrides`` (the values the reference README names as expected), never guessed here.
- ``data/models_extra.json``: config.json excerpts of the models in the calibration set that the
  CSV lacks, and pre-quantized repos (a catalog architecture + their ``quantization_config``).
- A local ``config.json`` (with ``quantization_config``, ``text_config`` nesting, ...), parsed by
  :mod:`llmdeploy.models_hf`; the catalog rows go through the same parser.

Anything the calculator cannot model is refused with :class:`UnknownArchitectureError`.
"""

from __future__ import annotations

import csv
import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from llmdeploy.errors import Diagnostic, UnknownArchitectureError


@dataclass(frozen=True)
class CheckpointQuant:
    """How the checkpoint stores its quantized weights (from ``quantization_config``)."""

    method: str  # fp8 | fp8-block | int8 | awq | gptq | w4a16 | nvfp4 | mxfp4
    weight_bits: int
    group_size: int | None  # AWQ/GPTQ/W4A16 group, fp8 block edge, mx/nv block
    bytes_per_weight: float  # payload + group/block scales and zeros, per weight element
    per_channel_scale_bytes: int  # bytes per output channel (per-channel scales), else 0
    experts_only: bool  # mxfp4: only MoE experts are quantized
    quantize_lm_head: bool = False
    quantize_vision: bool = False
    label: str = ""


@dataclass(frozen=True)
class Architecture:
    """Shapes the calculator needs. Parameter counts are computed from them."""

    name: str
    hf_id: str
    model_type: str
    architectures: tuple[str, ...]
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width (0 when every layer is MoE)
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    rotary_dim: int
    torch_dtype: str
    qkv_bias: bool = False
    o_bias: bool = False
    norms_per_layer: int = 2
    qk_norm: bool = False
    # Mixture of experts
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0  # total width of the always-on shared experts
    dense_layers: int = 0  # layers with a dense MLP instead of experts (MoE models)
    expert_bias: bool = False
    # Multi-head latent attention (DeepSeek V2/V3)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0  # 0 = not MLA
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # Attention pattern, one entry per layer: "full" | "sliding" | "chunked"
    layer_attention: tuple[str, ...] = ()
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    vision_params: int = 0
    quantization: CheckpointQuant | None = None
    total_params: int = 0
    active_params: int = 0
    source: str = ""
    notes: tuple[str, ...] = ()

    @property
    def layers(self) -> int:
        return self.num_layers

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads

    @property
    def vocab(self) -> int:
        return self.vocab_size

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.num_layers - self.dense_layers if self.is_moe else 0

    @property
    def total_params_b(self) -> float:
        return self.total_params / 1e9

    @property
    def hybrid(self) -> bool:
        return any(kind != "full" for kind in self.layer_attention)


# --- parameter counts ------------------------------------------------------------------------


def attention_params(a: Architecture) -> int:
    """Attention weights (and biases) of one layer."""
    h = a.hidden_size
    if a.is_mla:
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        heads = a.num_attention_heads
        q = (
            (h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * heads * qk)
            if a.q_lora_rank
            else (h * heads * qk)
        )
        kv_a = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
        kv_b = a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim)
        return q + kv_a + kv_b + heads * a.v_head_dim * h
    q_dim = a.num_attention_heads * a.head_dim
    kv_dim = a.num_kv_heads * a.head_dim
    total = h * q_dim + 2 * h * kv_dim + q_dim * h
    if a.qkv_bias:
        total += q_dim + 2 * kv_dim
    if a.o_bias:
        total += h
    if a.qk_norm:
        total += 2 * a.head_dim
    return total


def mlp_params(a: Architecture, width: int) -> int:
    """A gated MLP (gate, up, down) of the given intermediate width."""
    return 3 * a.hidden_size * width


def expert_params(a: Architecture) -> int:
    """Routed experts of one MoE layer (all resident), with biases where the model has them."""
    per = mlp_params(a, a.moe_intermediate_size)
    if a.expert_bias:
        per += 2 * a.moe_intermediate_size + a.hidden_size
    return a.num_experts * per


def router_params(a: Architecture) -> int:
    return a.hidden_size * a.num_experts + (a.num_experts if a.expert_bias else 0)


def count_params(a: Architecture) -> tuple[int, int]:
    """(total, active) parameters; active counts top-k experts and both embeddings."""
    h = a.hidden_size
    embed = a.vocab_size * h * (1 if a.tie_word_embeddings else 2) + h
    per_layer_common = attention_params(a) + a.norms_per_layer * h
    total = embed + a.vision_params + a.num_layers * per_layer_common
    active = total
    dense_mlp = mlp_params(a, a.intermediate_size)
    if a.is_moe:
        shared = mlp_params(a, a.shared_expert_intermediate_size)
        if a.shared_expert_intermediate_size and a.model_type == "qwen2_moe":
            shared += h  # shared_expert_gate
        moe = expert_params(a) + router_params(a) + shared
        moe_active = (
            moe - expert_params(a) + expert_params(a) * a.experts_per_token // max(1, a.num_experts)
        )
        total += a.dense_layers * dense_mlp + a.moe_layers * moe
        active += a.dense_layers * dense_mlp + a.moe_layers * moe_active
    else:
        total += a.num_layers * dense_mlp
        active += a.num_layers * dense_mlp
    return total, active


# --- catalog ---------------------------------------------------------------------------------

_ARCH_TO_TYPE = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Gemma2ForCausalLM": "gemma2",
    "Phi3ForCausalLM": "phi3",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "GptOssForCausalLM": "gpt_oss",
}

_CSV_SOURCE = "llmdeploy/data/models.csv (copy of shared/reference/models.csv)"


@dataclass(frozen=True)
class _Entry:
    name: str
    hf_id: str
    config: dict[str, Any]
    source: str
    aliases: tuple[str, ...]


def catalog_name(model_column: str) -> str:
    """Stable lowercase catalog name of a models.csv ``model`` cell (Instruct/v0.1 dropped)."""
    name = model_column.lower()
    name = re.sub(r"-instruct(?=-|$)", "", name)
    return re.sub(r"-v0\.1$", "", name)


def _cell(value: str) -> str | None:
    value = value.strip()
    return None if value in {"", "?", "n/a", "null"} else value


def _csv_config(row: dict[str, str]) -> dict[str, Any]:
    """A models.csv row as the config.json keys its model_type uses."""
    arch = row["architectures"]
    model_type = _ARCH_TO_TYPE.get(arch, "")
    cfg: dict[str, Any] = {"architectures": [arch], "model_type": model_type}
    ints = {
        "hidden_size": "hidden_size",
        "num_hidden_layers": "num_hidden_layers",
        "num_attention_heads": "num_attention_heads",
        "num_key_value_heads": "num_key_value_heads",
        "intermediate_size": "intermediate_size",
        "vocab_size": "vocab_size",
        "max_position_embeddings": "max_position_embeddings",
        "sliding_window": "sliding_window",
        "q_lora_rank": "q_lora_rank",
        "kv_lora_rank": "kv_lora_rank",
        "qk_nope_head_dim": "qk_nope_head_dim",
        "qk_rope_head_dim": "qk_rope_head_dim",
        "v_head_dim": "v_head_dim",
        "first_k_dense_replace": "first_k_dense_replace",
        "num_experts_per_tok": "num_experts_per_tok",
        "moe_intermediate_size": "moe_intermediate_size",
    }
    for column, key in ints.items():
        value = _cell(row[column])
        if value is not None:
            cfg[key] = int(value)
    head_dim = _cell(row["head_dim"])
    if head_dim is not None and head_dim.isdigit():
        cfg["head_dim"] = int(head_dim)
    tie = _cell(row["tie_word_embeddings"])
    if tie is not None:
        cfg["tie_word_embeddings"] = tie == "True"
    dtype = _cell(row["torch_dtype"])
    if dtype is not None:
        cfg["torch_dtype"] = dtype.split()[0]
    experts = _cell(row["num_experts"])
    if experts is not None:
        key = {"deepseek_v3": "n_routed_experts", "qwen3_moe": "num_experts"}.get(
            model_type, "num_local_experts"
        )
        cfg[key] = int(experts)
        shared = _cell(row["n_shared_experts"])
        if model_type == "deepseek_v3" and shared is not None:
            cfg["n_shared_experts"] = int(shared)
    if model_type in {"qwen2", "qwen3"} and "sliding_window" in cfg:
        cfg["use_sliding_window"] = False  # Qwen ships the window with use_sliding_window=false
    return cfg


def _data(name: str) -> str:
    return resources.files("llmdeploy").joinpath("data", name).read_text(encoding="utf-8")


@functools.cache
def _extra() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_data("models_extra.json"))
    return loaded


@functools.cache
def _entries() -> dict[str, _Entry]:
    extra = _extra()
    out: dict[str, _Entry] = {}
    for row in csv.DictReader(_data("models.csv").splitlines()):
        name = catalog_name(row["model"])
        cfg = _csv_config(row)
        override = dict(extra["csv_overrides"].get(name, {}))
        note = override.pop("source", None)
        cfg.update(override)
        source = f"{_CSV_SOURCE}; row source: {row['source']}"
        if note:
            source += f"; filled: {note}"
        aliases = tuple(extra["csv_aliases"].get(name, ()))
        out[name] = _Entry(name, row["hf_id"], cfg, source, aliases)
    for item in extra["extra_models"]:
        out[item["name"]] = _Entry(
            item["name"], item["hf_id"], item["config"], item["source"], tuple(item["aliases"])
        )
    return out


def catalog_names() -> list[str]:
    """Every catalog architecture name, sorted."""
    return sorted(_entries())


def _norm(ref: str) -> str:
    return ref.strip().lower()


def _strip_variant(ref: str) -> str:
    """``org/Meta-Llama-3-70B-Instruct`` -> ``llama-3-70b`` (same architecture as the base)."""
    base = _norm(ref).rsplit("/", 1)[-1]
    base = re.sub(r"^meta-(?=llama)", "", base)
    return re.sub(r"-(instruct|it|chat)$", "", base)


@functools.cache
def _alias_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for entry in _entries().values():
        for key in (entry.name, entry.hf_id, *entry.aliases):
            index.setdefault(_norm(key), entry.name)
    return index


def _from_entry(
    entry: _Entry, quant_cfg: dict[str, Any] | None = None, *, hf_id: str = "", source: str = ""
) -> Architecture:
    from llmdeploy import models_hf

    cfg = dict(entry.config)
    if quant_cfg is not None:
        cfg["quantization_config"] = quant_cfg
    return models_hf.architecture_from_config(
        cfg,
        name=entry.name,
        hf_id=hf_id or entry.hf_id,
        source=source or entry.source,
        file=f"<catalog {entry.name}>",
    )


@functools.cache
def _catalog_architecture(ref: str) -> Architecture | None:
    key = _norm(ref)
    quantized = {_norm(k): (k, v) for k, v in _extra()["quantized_aliases"].items()}
    if key in quantized:
        repo, item = quantized[key]
        base = _entries()[item["base"]]
        return _from_entry(
            base,
            item["quantization_config"],
            hf_id=repo,
            source=f"{base.source}; quantization: {item['source']}",
        )
    index = _alias_index()
    name = index.get(key) or index.get(_strip_variant(ref))
    return _from_entry(_entries()[name]) if name else None


def load_architecture(ref: str, base_dir: Path | None = None) -> Architecture:
    """A catalog name, an HF id alias, or a path to a config.json (relative to ``base_dir``)."""
    arch = _catalog_architecture(ref)
    if arch is not None:
        return arch
    path = Path(ref)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if path.is_dir():
        path = path / "config.json"
    if path.suffix == ".json" or path.is_file():
        from llmdeploy import models_hf

        return models_hf.load_config_file(path)
    raise UnknownArchitectureError(
        [
            Diagnostic(
                f"unknown model architecture {ref!r}: not a catalog name, a known Hugging Face "
                "id, or a path to a config.json",
                file="<model>",
                hint="catalog names: " + ", ".join(catalog_names()),
            )
        ]
    )
