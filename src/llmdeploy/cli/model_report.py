"""Presentation of ``llmdeploy models``: the model catalog as a table and as JSON.

The CLI prints what these return; nothing here prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmdeploy.catalog.models import CatalogModel

if TYPE_CHECKING:
    from rich.console import RenderableType

# Pre-quantized releases are listed under the table when this few models are shown.
LIST_RELEASES_UP_TO = 5


def _kind(m: CatalogModel) -> str:
    a = m.architecture
    words = ["MoE" if a.is_moe else "dense"]
    if a.is_mla:
        words.append("MLA")
    if a.has_state_space:
        words.append("SSM")
    if a.multimodal:
        words.append("vision")
    return " ".join(words)


def to_json(models: list[CatalogModel]) -> list[dict[str, Any]]:
    """``models --json``: one object per model, by name; key order is part of the interface."""
    return [
        {
            "name": m.name,
            "hf_id": m.hf_id,
            "aliases": list(m.aliases),
            "model_type": m.architecture.model_type,
            "kind": _kind(m),
            "params_b": round(m.architecture.total_params_b, 2),
            "layers": m.architecture.layers,
            "max_position_embeddings": m.architecture.max_position_embeddings,
            "pre_quantized": list(m.releases),
        }
        for m in models
    ]


def table(models: list[CatalogModel]) -> RenderableType:
    """One row per model: catalog name (``model.architecture``), the Hugging Face id it is
    known by (``model.id``), size, context, kind, and how many pre-quantized releases."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    t = Table(box=None, padding=(0, 1), pad_edge=False)
    for column in ("name", "Hugging Face id", "params", "context", "kind", "quant."):
        t.add_column(column, justify="right" if column in ("params", "context", "quant.")
                     else "left", no_wrap=column != "Hugging Face id",
                     overflow="fold" if column == "Hugging Face id" else "ellipsis")  # fmt: skip
    for m in models:
        a = m.architecture
        t.add_row(
            m.name,
            m.hf_id,
            f"{a.total_params_b:.1f}B",
            f"{a.max_position_embeddings:,}",
            _kind(m),
            str(len(m.releases)) if m.releases else "-",
        )
    notes: list[RenderableType] = []
    if len(models) <= LIST_RELEASES_UP_TO:
        for m in models:
            notes += [Text(f"{m.name}: pre-quantized {r}") for r in m.releases]
    notes.append(
        Text(
            f"{len(models)} model{'s' if len(models) != 1 else ''}; a spec names one by "
            "model.architecture (the name) and model.id (the repo to serve)",
            style="dim",
        )
    )
    return Group(t, *notes)
