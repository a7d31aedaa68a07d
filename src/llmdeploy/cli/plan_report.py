"""Presentation of ``llmdeploy plan``: the ranked table, its JSON, and the winner as spec edits.

The CLI prints and writes what these return; nothing here prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmdeploy.perf.search import Candidate, SearchResult, engine_section

if TYPE_CHECKING:
    from rich.console import RenderableType

    from llmdeploy.spec.sections import Spec


def _config(c: Candidate) -> dict[str, Any]:
    values = dict(c.changes)
    inst = c.sizing.instance
    return {
        "engine": values["engine.type"],
        "instance": inst.name if inst else None,
        "tp": values["hardware.tensorParallel"],
        "quantization": values["quantization"],
        "kv_cache_dtype": values["kvCacheDtype"],
    }


def _row_json(rank: int, c: Candidate) -> dict[str, Any]:
    p = c.performance
    e = p.estimate
    assert e is not None
    return {
        "rank": rank,
        **_config(c),
        "meets_slo": c.meets,
        "replicas": p.replicas_needed,
        "concurrent_requests_per_replica": p.concurrency_per_replica,
        "ttft_p99_ms": round(e.ttft_p99_ms, 1),
        "itl_p99_ms": round(e.itl_p99_ms, 2),
        "output_tokens_per_s_per_replica": round(e.output_tokens_per_s, 1),
        "usd_per_hour": round(c.fleet_usd_per_hour, 2) if p.on_demand else None,
        "usd_per_1m_output_tokens": round(c.usd_per_1m_output_tokens, 3) if p.on_demand else None,
        "misses": list(p.misses()),
    }


def to_json(result: SearchResult, top: int) -> dict[str, Any]:
    return {
        "tried": result.tried,
        "refused": result.refused,
        "not_fitting": result.not_fitting,
        "not_modelled": result.not_modelled,
        "not_simulated": result.pruned,
        "price_basis": "on-demand, us-east-1 (catalog price list date per row)",
        "configurations": [_row_json(i, c) for i, c in enumerate(result.candidates[:top], 1)],
    }


def table(result: SearchResult, top: int) -> RenderableType:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    t = Table(
        title="fits, cheapest per 1M output tokens first (on-demand $; p99 ms)",
        title_justify="left",
        box=None,
    )
    for column in ("#", "engine", "instance", "TP", "quant", "KV", "repl", "TTFT", "ITL",
                   "SLO", "$/h", "$/1M"):  # fmt: skip
        t.add_column(column, justify="left" if column in ("engine", "instance", "quant", "KV",
                                                           "SLO") else "right")  # fmt: skip
    for i, c in enumerate(result.candidates[:top], 1):
        row = _row_json(i, c)
        t.add_row(
            str(i),
            row["engine"],
            row["instance"],
            str(row["tp"]),
            row["quantization"],
            row["kv_cache_dtype"],
            str(row["replicas"] or "-"),
            f"{row['ttft_p99_ms']:.0f}",
            f"{row['itl_p99_ms']:.1f}",
            ("meets" if c.meets else "misses") if c.performance.targets else "-",
            f"{row['usd_per_hour']:.2f}" if row["usd_per_hour"] is not None else "-",
            f"{row['usd_per_1m_output_tokens']:.2f}"
            if row["usd_per_1m_output_tokens"] is not None
            else "-",
        )
    note = Text(
        f"{result.tried} configurations tried: {result.refused} refused by the spec or the "
        f"engine, {result.not_fitting} do not fit, {result.not_modelled} not modelled, "
        f"{result.pruned} not simulated (their cost bound cannot reach the top {top})",
        style="dim",
    )
    return Group(t, note)


def winner_edits(
    spec: Spec, c: Candidate
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], tuple[str, ...]]:
    """(changes, whole sections replaced, paths dropped) that turn ``spec`` into the winner
    (:func:`llmdeploy.spec.edit.with_changes`): every other key and comment is the user's."""
    values = dict(c.changes)
    inst = c.sizing.instance
    assert inst is not None
    changes: dict[str, Any] = {
        "hardware.instanceType": inst.name,
        "hardware.tensorParallel": values["hardware.tensorParallel"],
    }
    if values["quantization"] != spec.quantization:
        changes["quantization"] = values["quantization"]
    if values["kvCacheDtype"] != spec.kv_cache_dtype:
        changes["kvCacheDtype"] = values["kvCacheDtype"]
    replace: dict[str, dict[str, Any]] = {}
    if values["engine.type"] != spec.engine.type:
        replace["engine"] = engine_section(values["engine.type"])
    needed = c.performance.replicas_needed or 1
    a = spec.autoscaling
    if not a.enabled:  # a fixed fleet: minReplicas replicas run
        if needed != a.min_replicas:
            changes["autoscaling.minReplicas"] = needed
            if needed > a.max_replicas:
                changes["autoscaling.maxReplicas"] = needed
    elif needed > a.max_replicas:
        changes["autoscaling.maxReplicas"] = needed
    return changes, replace, ("hardware.instanceFamily",)
