"""Presentation of ``llmdeploy plan``: the ranked table, its JSON, and the winner as spec edits.

The CLI prints and writes what these return; nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llmdeploy.errors import LlmdeployError, worst_exit_code
from llmdeploy.perf.search import RANKINGS, Candidate, SearchResult, engine_section

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table

    from llmdeploy.spec.sections import Spec


def _config(c: Candidate) -> dict[str, Any]:
    values = dict(c.changes)
    inst = c.sizing.instance
    return {
        "model_id": values["model.id"],
        "engine": values["engine.type"],
        "instance": inst.name if inst else None,
        "tp": values["hardware.tensorParallel"],
        "quantization": values["quantization"],
        "kv_cache_dtype": values["kvCacheDtype"],
        # the batch limits each configuration is planned with (decided where the spec leaves
        # them out: docs/performance-model.md, "Batch limits", "Token budget")
        "max_num_seqs": c.sizing.max_num_seqs,
        "max_num_batched_tokens": c.sizing.max_num_batched_tokens,
    }


def _row_json(rank: int, c: Candidate) -> dict[str, Any]:
    p = c.performance
    e = p.estimate
    assert e is not None
    return {
        "rank": rank,
        **_config(c),
        "meets_slo": c.meets,
        "replicas": c.replicas if p.replicas_needed is not None else None,
        "concurrent_requests_per_replica": p.concurrency_per_replica,
        "ttft_p99_ms": round(e.ttft_p99_ms, 1),
        "itl_p99_ms": round(e.itl_p99_ms, 2),
        "output_tokens_per_s_per_replica": round(e.output_tokens_per_s, 1),
        "gpus": c.fleet_gpus,
        "usd_per_hour": round(c.fleet_usd_per_hour, 2) if p.on_demand else None,
        "usd_per_1m_output_tokens": round(c.usd_per_1m_output_tokens, 3) if p.on_demand else None,
        "misses": list(c.misses()),
    }


def to_json(result: SearchResult, top: int) -> dict[str, Any]:
    return {
        "rank_by": result.rank_by,
        "tried": result.tried,
        "refused": result.refused,
        "not_fitting": result.not_fitting,
        "not_modelled": result.not_modelled,
        "not_simulated": result.pruned,
        "price_basis": "on-demand, us-east-1 (catalog price list date per row)",
        "configurations": [_row_json(i, c) for i, c in enumerate(result.candidates[:top], 1)],
    }


def _slo_cell(c: Candidate) -> str:
    if not c.performance.targets:
        return "-"
    if c.meets:
        return "meets"
    return "limit" if c.latency_meets else "misses"


_LEFT = {"name", "engine", "instance", "quant", "ckpt", "KV", "SLO"}


def _table(title: str, first: str, ref: dict[str, str], rows: list[Candidate]) -> Table:
    """The ranked table's columns for ``rows``; "ckpt" only when a row serves another
    checkpoint (its note's number). Instance names are never cut; a long name folds."""
    from rich.table import Table

    widest = max((len(c.sizing.instance.name) for c in rows if c.sizing.instance), default=8)

    t = Table(title=title, title_justify="left", box=None, padding=(0, 1), pad_edge=False)
    for column in (first, "engine", "instance", "TP", "quant", *(["ckpt"] if ref else []), "KV",
                   "repl", "TTFT", "ITL", "SLO", "$/h", "$/1M"):  # fmt: skip
        t.add_column(column, justify="left" if column in _LEFT else "right",
                     overflow="fold" if column == "name" else "ellipsis",
                     min_width=widest if column == "instance" else None)  # fmt: skip
    return t


def _cells(c: Candidate, ref: dict[str, str]) -> list[str]:
    row = _row_json(0, c)
    per_m = row["usd_per_1m_output_tokens"]
    return [
        row["engine"],
        row["instance"],
        str(row["tp"]),
        row["quantization"],
        *([ref.get(row["model_id"], "-")] if ref else []),
        row["kv_cache_dtype"],
        str(row["replicas"] or "-"),
        f"{row['ttft_p99_ms']:.0f}",
        f"{row['itl_p99_ms']:.1f}",
        _slo_cell(c),
        f"{row['usd_per_hour']:.2f}" if row["usd_per_hour"] is not None else "-",
        f"{per_m:.2f}" if per_m is not None else "-",
    ]


def _refs(pairs: list[tuple[Candidate, str]]) -> dict[str, str]:
    """``[n]`` for each checkpoint a row serves instead of its spec's ``model.id``."""
    others = sorted({dict(c.changes)["model.id"] for c, own in pairs} - {own for _, own in pairs})
    return {model_id: f"[{i}]" for i, model_id in enumerate(others, 1)}


def _ref_notes(ref: dict[str, str]) -> list[RenderableType]:
    from rich.text import Text

    return [
        Text(f"{n} model.id: {m} (a pre-quantized release of the same model)")
        for m, n in ref.items()
    ]


def table(result: SearchResult, top: int, spec_model_id: str) -> RenderableType:
    """The ranked table; a row serving another checkpoint than ``spec_model_id`` names it in a
    numbered note below (the ``model.id`` that ``--write`` sets)."""
    from rich.console import Group
    from rich.text import Text

    shown = result.candidates[:top]
    ref = _refs([(c, spec_model_id) for c in shown])
    t = _table(f"fits, by {RANKINGS[result.rank_by]} (on-demand $; p99 ms)", "#", ref, list(shown))
    for i, c in enumerate(shown, 1):
        t.add_row(str(i), *_cells(c, ref))
    notes = _ref_notes(ref)
    limited = [(i, c.over_limit) for i, c in enumerate(shown, 1) if c.latency_meets]
    notes += [Text(f"#{i} limit: {why}", style="yellow") for i, why in limited if why]
    beyond = [c for c in result.candidates if c.latency_meets and not c.meets]
    if (
        beyond
        and shown
        and shown[0].meets
        and beyond[0].key(result.rank_by)[2:] < shown[0].key(result.rank_by)[2:]
    ):
        b = beyond[0]
        notes.append(
            Text(
                f"better beyond the limits: {_summary(b)} ({dict(b.changes)['model.id']}), "
                f"${b.fleet_usd_per_hour:.2f}/h, {b.over_limit}",
                style="yellow",
            )
        )
    why = f" (their bound cannot reach the top {top})" if result.pruned else ""
    notes.append(
        Text(
            f"{result.tried} configurations tried: {result.refused} refused by the spec or the "
            f"engine, {result.not_fitting} do not fit, {result.not_modelled} not modelled, "
            f"{result.pruned} not simulated{why}",
            style="dim",
        )
    )
    return Group(t, *notes)


def winner_edits(
    spec: Spec, c: Candidate
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], tuple[str, ...]]:
    """(changes, whole sections replaced, paths dropped) that turn ``spec`` into the winner
    (:func:`llmdeploy.spec.edit.with_changes`): every other key and comment is the user's."""
    values = dict(c.changes)
    inst = c.sizing.instance
    assert inst is not None
    changes: dict[str, Any] = {}
    if values["model.id"] != spec.model.id:
        changes["model.id"] = values["model.id"]
    changes |= {
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
    needed = c.replicas
    a = spec.autoscaling
    if not a.enabled and needed != a.min_replicas:  # a fixed fleet: minReplicas replicas run
        changes["autoscaling.minReplicas"] = needed
        if needed > a.max_replicas:
            changes["autoscaling.maxReplicas"] = needed
    # a winner meets the SLO within autoscaling.maxReplicas: the ceiling stays the user's
    drop = ["hardware.instanceFamily"]
    if "model.id" in changes:
        drop.append("model.revision")  # pinned the old checkpoint's commit
    return changes, replace, tuple(drop)


def exit_code(result: SearchResult) -> int:
    """0: the best meets the SLO; 8: none does; 4: none fits (docs/exit-codes.md)."""
    from llmdeploy.errors import ExitCode

    if not result.candidates:
        return int(ExitCode.DOES_NOT_FIT)
    return int(ExitCode.OK if result.candidates[0].meets else ExitCode.MISSES_SLO)


def _summary(c: Candidate) -> str:
    values = dict(c.changes)
    inst = c.sizing.instance
    assert inst is not None
    return (
        f"{values['engine.type']} {inst.name} TP{values['hardware.tensorParallel']} "
        f"{values['quantization']}/{values['kvCacheDtype']}"
    )


@dataclass(frozen=True)
class SpecPlan:
    """One spec of ``plan DIR``: its search (or the error that stopped it) and exit code."""

    label: str  # the file, as given
    name: str  # the spec's name (unique in a fleet): the table's first column
    model_id: str  # the spec's model.id
    outcome: SearchResult | LlmdeployError
    exit_code: int


def fleet_json(plans: list[SpecPlan], top: int) -> dict[str, Any]:
    """``plan DIR --json``: one entry per spec, in the order given, and the worst exit code."""
    specs = []
    for sp in plans:
        entry: dict[str, Any] = {"spec": sp.label, "exit_code": sp.exit_code}
        if isinstance(sp.outcome, SearchResult):
            entry |= to_json(sp.outcome, top)
        else:
            entry["error"] = sp.outcome.message
        specs.append(entry)
    return {
        "exit_code": worst_exit_code(sp.exit_code for sp in plans),
        "fleet_usd_per_hour": round(sum(c.fleet_usd_per_hour for c in _winners(plans)), 2),
        "specs": specs,
    }


def _winners(plans: list[SpecPlan]) -> list[Candidate]:
    return [sp.outcome.candidates[0] for sp in plans
            if isinstance(sp.outcome, SearchResult) and sp.exit_code == 0]  # fmt: skip


def fleet_table(plans: list[SpecPlan]) -> RenderableType:
    """``plan DIR``: one row per spec with its best configuration; the fleet's $/h below."""
    from rich.console import Group
    from rich.text import Text

    best = [(sp.outcome.candidates[0], sp.model_id) for sp in plans
            if isinstance(sp.outcome, SearchResult) and sp.outcome.candidates]  # fmt: skip
    ref = _refs(best)
    title = "best configuration per spec (on-demand $; p99 ms)"
    t = _table(title, "name", ref, [c for c, _ in best])
    blank = ["-"] * (len(t.columns) - 2)
    for sp in plans:
        if isinstance(sp.outcome, LlmdeployError):
            t.add_row(sp.name, f"error (exit {sp.exit_code})", *blank)
        elif not sp.outcome.candidates:
            t.add_row(sp.name, "none fits", *blank)
        else:
            t.add_row(sp.name, *_cells(sp.outcome.candidates[0], ref))
    total = sum(c.fleet_usd_per_hour for c in _winners(plans))
    meeting = sum(sp.exit_code == 0 for sp in plans)
    note = Text(f"{meeting} of {len(plans)} specs meet their SLO; their fleets: ${total:.2f}/h")
    return Group(t, *_ref_notes(ref), note)


def with_rationale(text: str, spec: Spec, c: Candidate, rank_by: str) -> str:
    """``text`` (the spec ``--write`` writes) with its leading comment, the rationale that
    described the configuration it had, replaced by one for ``c``; a schema comment for the
    editor (``# yaml-language-server: ...``) stays first."""
    import textwrap

    lines = text.splitlines(keepends=True)
    head = 0
    while head < len(lines) and (lines[head].startswith("#") or not lines[head].strip()):
        head += 1
    keep = [line for line in lines[:head] if line.startswith("# yaml-language-server:")]
    values = dict(c.changes)
    inst, p, slo = c.sizing.instance, c.performance, spec.slo
    assert inst is not None and p.estimate is not None
    model = values["model.id"]
    if model != spec.model.id:
        model += f" (a pre-quantized release of {spec.model.id})"
    n = c.replicas
    weights = "16-bit" if values["quantization"] == "none" else values["quantization"]
    summary = (
        f"{model} on {values['engine.type']}, {n} replica{'s' if n != 1 else ''} of TP "
        f"{values['hardware.tensorParallel']} on {inst.name} ({weights} weights, "
        f"{values['kvCacheDtype']} KV cache): chosen by `llmdeploy plan`, ranked by "
        f"{RANKINGS[rank_by]}."
    )
    ttft = f"p99 TTFT {p.estimate.ttft_p99_ms:.0f} ms" + (
        f" (slo.ttftMs {slo.ttft_ms})" if slo.ttft_ms else ""
    )
    itl = f"p99 ITL {p.estimate.itl_p99_ms:.1f} ms" + (
        f" (slo.itlMs {slo.itl_ms})" if slo.itl_ms else ""
    )
    cost = p.on_demand
    if cost is None:
        money = "no on-demand price in the catalog"
    else:
        money = f"${cost.fleet_usd_per_hour:.2f}/h on-demand for {cost.nodes} node"
        money += "s" if cost.nodes != 1 else ""
        if cost.usd_per_1m_output_tokens is not None:
            money += f", ${cost.usd_per_1m_output_tokens:.2f} per 1M output tokens"
        money += f" (prices of {cost.as_of})" if cost.as_of else ""
    details = (
        f"At the SLO load ({slo.concurrent_requests} concurrent requests of "
        f"{slo.input_tokens}+{slo.output_tokens} tokens, {p.concurrency_per_replica} per "
        f"replica) the performance model estimates {ttft} and {itl}; {money}. Run "
        "`llmdeploy plan` again after changing the SLO or the model."
    )

    def wrap(paragraph: str) -> list[str]:
        return [f"# {line}\n" for line in textwrap.wrap(paragraph, 96, break_on_hyphens=False)]

    return "".join([*keep, *wrap(summary), "#\n", *wrap(details), *lines[head:]])
