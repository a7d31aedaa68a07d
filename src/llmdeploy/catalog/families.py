"""Model families whose layers differ from one another (Gemma 4, Llama 3.2 Vision) and the
rotary caches vLLM builds for each model.

Sources: vLLM 0.24.0 ``model_executor/models/gemma4.py`` (per-layer heads, KV sharing,
double-wide MLPs, per-layer embeddings), ``mllama.py`` (cross-attention layers) and
``layers/rotary_embedding/linear_scaling_rope.py`` (linear scaling builds
``max_position x factor`` rows); transformers' config classes for defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from llmdeploy.catalog.architecture import LayerShape
from llmdeploy.catalog.quant import refuse

# max_position_embeddings when config.json leaves it out (the transformers class default)
MAX_POSITION_DEFAULTS = {"gemma3_text": 131072, "mllama": 131072}


class Fields(Protocol):
    file: str

    def need(self, *keys: str) -> int: ...

    def opt(self, *keys: str, default: int = 0) -> int: ...


def _rope(cfg: Mapping[str, Any], kind: str | None = None) -> Mapping[str, Any]:
    """The rope scaling of ``cfg`` (``rope_scaling``, or transformers 5 ``rope_parameters``,
    which Gemma keys by layer type)."""
    found = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    if not isinstance(found, Mapping):
        return {}
    if kind is not None and isinstance(found.get(kind), Mapping):
        inner = found[kind]
        assert isinstance(inner, Mapping)
        return inner
    return found


def _rows(max_pos: int, rope: Mapping[str, Any]) -> int:
    """Positions of one cos/sin cache: linear scaling builds ``max_position x factor``."""
    kind = str(rope.get("rope_type") or rope.get("type") or "default")
    if kind == "linear":
        return int(max_pos * float(rope.get("factor") or 1.0))
    return max_pos


def rope_caches(
    mt: str, cfg: Mapping[str, Any], max_pos: int, head_dim: int, fields: Mapping[str, Any]
) -> tuple[int, tuple[int, ...]]:
    """(rotary_dim, elements of each distinct rotary cache vLLM builds)."""
    if fields.get("qk_rope_head_dim"):
        rotary = int(fields["qk_rope_head_dim"])
        return rotary, (max_pos * rotary,)
    partial = float(cfg.get("partial_rotary_factor", 1.0) or 1.0)
    rotary = int(head_dim * partial)
    if mt == "gemma3_text":  # global layers (linear x8) and local layers (own base) differ
        return head_dim, (_rows(max_pos, _rope(cfg)) * head_dim, max_pos * head_dim)
    if mt == "gemma4_text":
        full = _rope(cfg, "full_attention")
        global_dim = int(cfg.get("global_head_dim") or head_dim)
        full_rotary = int(global_dim * float(full.get("partial_rotary_factor") or 1.0))
        return head_dim, (_rows(max_pos, full) * full_rotary, max_pos * head_dim)
    return rotary, (_rows(max_pos, _rope(cfg)) * rotary,)


def gemma4_fields(
    cfg: Mapping[str, Any],
    f: Fields,
    kinds: tuple[str, ...],
    heads: int,
    kv_heads: int,
    head_dim: int,
    inter: int,
) -> dict[str, Any]:
    """Gemma 4 layers: global (full) layers use ``global_head_dim`` and, with
    ``attention_k_eq_v``, ``num_global_key_value_heads``; the last ``num_kv_shared_layers``
    reuse earlier layers' KV (and, with ``use_double_wide_mlp``, have a 2x MLP); E2B/E4B add a
    per-layer embedding table (``vocab_size_per_layer_input x layers x
    hidden_size_per_layer_input``, vocab-parallel) and per-layer input gates."""
    layers = len(kinds)
    global_dim = f.opt("global_head_dim", default=head_dim)
    k_eq_v = bool(cfg.get("attention_k_eq_v"))
    global_kv = f.opt("num_global_key_value_heads", default=kv_heads) if k_eq_v else kv_heads
    shared = f.opt("num_kv_shared_layers")
    first_shared = layers - shared
    double = bool(cfg.get("use_double_wide_mlp"))
    moe = bool(cfg.get("enable_moe_block"))
    shapes = []
    for i, kind in enumerate(kinds):
        full = kind == "full"
        width = inter * (2 if double and i >= first_shared else 1)
        shapes.append(
            LayerShape(
                kind,
                heads,
                global_kv if full else kv_heads,
                global_dim if full else head_dim,
                width,
                moe,
                owns_kv=i < first_shared,
            )
        )
    h = f.need("hidden_size")
    ple = f.opt("hidden_size_per_layer_input")
    out: dict[str, Any] = {"layer_shape_list": tuple(shapes)}
    if ple:
        vocab = f.opt("vocab_size_per_layer_input", default=f.need("vocab_size"))
        out["per_layer_embedding"] = vocab * layers * ple
        # model projection h -> layers x ple, its norm; per layer: gate, projection, norm
        out["extra_params"] = h * layers * ple + ple + layers * (2 * h * ple + h)
    return out


def mllama_kinds(cfg: Mapping[str, Any], layers: int) -> tuple[str, ...]:
    """Llama 3.2 Vision: ``cross_attention_layers`` attend to the image, the rest to text."""
    cross = cfg.get("cross_attention_layers")
    if not isinstance(cross, list) or not cross:
        raise refuse("mllama text_config.cross_attention_layers is missing", "<config>")
    wanted = {int(i) for i in cross}
    return tuple("cross" if i in wanted else "full" for i in range(layers))
