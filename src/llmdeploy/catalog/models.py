"""Model architectures for sizing: the packaged catalog and local Hugging Face config.json files.

Sources:

- ``data/models.csv``: copy of ``shared/reference/models.csv`` (HF config fields with a ``source``
  column per row). Its ``?`` cells are filled only from ``data/models_extra.json``
  ``csv_overrides`` (the values the reference README names as expected), never guessed here.
- ``data/models_extra.json``: config.json excerpts of the models in the calibration set that the
  CSV lacks and of the multimodal / hybrid families, and pre-quantized repos (a catalog
  architecture + their ``quantization_config`` and any fields their config changes, such as
  an AWQ repo's padded ``intermediate_size``).
- A local ``config.json`` (with ``quantization_config``, ``text_config`` nesting, ...), parsed by
  :mod:`llmdeploy.catalog.hf_config`; the catalog rows go through the same parser.

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

from llmdeploy.catalog import hf_config
from llmdeploy.catalog.architecture import Architecture
from llmdeploy.errors import Diagnostic, UnknownArchitectureError

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

_CSV_SOURCE = "llmdeploy/catalog/data/models.csv (copy of shared/reference/models.csv)"


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
    return resources.files("llmdeploy.catalog").joinpath("data", name).read_text(encoding="utf-8")


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
    entry: _Entry,
    quant_cfg: dict[str, Any] | None = None,
    *,
    hf_id: str = "",
    source: str = "",
    geometry: dict[str, Any] | None = None,
) -> Architecture:
    cfg = dict(entry.config)
    cfg.update(geometry or {})  # a published repo's own config.json values (padded widths, ...)
    if quant_cfg is not None:
        cfg["quantization_config"] = quant_cfg
    return hf_config.architecture_from_config(
        cfg,
        name=entry.name,
        hf_id=hf_id or entry.hf_id,
        source=source or entry.source,
        file=f"<catalog {entry.name}>",
    )


@functools.cache
def _quantized_repo(ref: str) -> Architecture | None:
    quantized = {_norm(k): (k, v) for k, v in _extra()["quantized_aliases"].items()}
    if _norm(ref) not in quantized:
        return None
    repo, item = quantized[_norm(ref)]
    base = _entries()[item["base"]]
    return _from_entry(
        base,
        item["quantization_config"],
        hf_id=repo,
        source=f"{base.source}; quantization: {item['source']}",
        geometry=item.get("config"),
    )


@functools.cache
def _catalog_architecture(ref: str) -> Architecture | None:
    found = _quantized_repo(ref)
    if found is not None:
        return found
    index = _alias_index()
    name = index.get(_norm(ref)) or index.get(_strip_variant(ref))
    return _from_entry(_entries()[name]) if name else None


def is_catalog_ref(ref: str) -> bool:
    """Whether ``ref`` names a catalog architecture (rather than a config.json path)."""
    return _catalog_architecture(ref) is not None


def known_repo(model_id: str) -> Architecture | None:
    """The catalog architecture of a Hugging Face repo id: a published quantized repo, a
    listed id or alias, or a repo named exactly like a catalog model (``org/Llama-3.1-8B-Instruct``
    is llama-3.1-8b); None for a repo the catalog does not know."""
    return _catalog_architecture(model_id) if "/" in model_id else None


def quantized_checkpoint(model_id: str) -> Architecture | None:
    """The catalog's record of a published pre-quantized repo (its geometry and
    ``quantization_config``), or None when ``model_id`` is not one the catalog knows."""
    return _quantized_repo(model_id)


def quantized_repos(base: str, method: str) -> list[str]:
    """Published pre-quantized repos of catalog architecture ``base`` stored as ``method``
    (a :class:`CheckpointQuant` method: awq, gptq, fp8, int8, ...)."""
    out = []
    for repo, item in _extra()["quantized_aliases"].items():
        arch = _quantized_repo(repo)
        q = arch.quantization if arch is not None else None
        if item["base"] == base and q is not None and q.method == method:
            out.append(repo)
    return sorted(out)


# Where a pre-quantized repo's name stops naming the model: its quantization words
# (``-AWQ``, ``-FP8-dynamic``, ``-quantized.w4a16``).
_QUANT_SUFFIX = re.compile(r"[-_.](?:quantized[-_.])?(?:awq|gptq|fp8|int4|int8|w4a16|w8a8|w8a16)")


def _model_name(repo: str) -> str:
    """``org/Meta-Llama-3.1-8B-Instruct-quantized.w8a8`` -> ``llama-3.1-8b-instruct``."""
    name = _QUANT_SUFFIX.split(_norm(repo).rsplit("/", 1)[-1], maxsplit=1)[0]
    return re.sub(r"^meta-(?=llama)", "", name)


def releases_of(model_id: str, base: str) -> list[str]:
    """The catalog's pre-quantized releases of the model ``model_id`` (a 16-bit checkpoint of
    catalog architecture ``base``): repos of that architecture whose name without its
    quantization words (and without Meta's ``Meta-`` prefix) is ``model_id``'s, so an Instruct
    checkpoint finds the quantized Instruct releases and a base model none of them."""
    want = _model_name(model_id)
    return sorted(
        repo
        for repo, item in _extra()["quantized_aliases"].items()
        if item["base"] == base and _model_name(repo) == want
    )


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
        return hf_config.load_config_file(path)
    close = closest(ref)
    raise UnknownArchitectureError(
        [
            Diagnostic(
                f"unknown model architecture {ref!r}"
                + (f" (did you mean {close!r}?)" if close else "")
                + ": not a catalog name, a known Hugging Face id, or a path to a config.json",
                file="<model>",
                hint="`llmdeploy models [FILTER]` lists them with their Hugging Face ids; "
                "catalog names: " + ", ".join(catalog_names()),
            )
        ]
    )


def closest(ref: str, cutoff: float = 0.8) -> str | None:
    """The catalog name (for a name) or Hugging Face id (for ``org/repo``) nearest ``ref``
    (difflib's similarity ratio at least ``cutoff``)."""
    import difflib

    entries = _entries()
    if "/" in ref:
        # the ids the catalog lists, and the Instruct tune of each (known_repo takes it)
        listed = [i for e in entries.values() for i in (e.hf_id, *e.aliases) if "/" in i]
        listed += [
            f"{i}-Instruct" for i in listed if not re.search(r"-(instruct|it|chat)$", i, re.I)
        ]
        ids = {_norm(i): i for i in listed}
        ids |= {_norm(repo): repo for repo in _extra()["quantized_aliases"]}
        found = difflib.get_close_matches(_norm(ref), list(ids), n=1, cutoff=cutoff)
        return ids[found[0]] if found else None
    found = difflib.get_close_matches(_norm(ref), list(entries), n=1, cutoff=cutoff)
    return found[0] if found else None


def misspelt_repo(model_id: str, architecture: str) -> str | None:
    """A catalog repo of ``architecture`` that ``model_id`` (a repo the catalog does not know)
    is one or two typed characters away from (similarity at least 0.95), else None."""
    if known_repo(model_id) is not None:
        return None
    close = closest(model_id, cutoff=0.95)
    found = _catalog_architecture(close) if close else None
    return close if found is not None and found.name == architecture else None


@dataclass(frozen=True)
class CatalogModel:
    """One row of ``llmdeploy models``."""

    name: str
    hf_id: str
    aliases: tuple[str, ...]
    releases: tuple[str, ...]  # pre-quantized repos of this architecture
    architecture: Architecture


def catalog(filter_text: str = "") -> list[CatalogModel]:
    """The catalog's models by name, those whose name, Hugging Face ids, pre-quantized
    releases or ``model_type`` contain ``filter_text`` (case-insensitive) when one is given."""
    releases: dict[str, list[str]] = {}
    for repo, item in _extra()["quantized_aliases"].items():
        releases.setdefault(item["base"], []).append(repo)
    want = _norm(filter_text)
    out = []
    for name in catalog_names():
        e = _entries()[name]
        arch = _from_entry(e)
        repos = tuple(sorted(releases.get(name, ())))
        words = [e.name, e.hf_id, *e.aliases, *repos, arch.model_type]
        if want and not any(want in _norm(w) for w in words):
            continue
        out.append(CatalogModel(e.name, e.hf_id, e.aliases, repos, arch))
    return out
