"""Presentation of a :class:`~llmdeploy.perf.assess.Performance`: the ``performance`` object of
``size --json`` (stable key order) and the performance section of ``size``'s table.

The CLI prints what these return; nothing here prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmdeploy.perf.assess import Cost, Performance, planning_margin

if TYPE_CHECKING:
    from rich.console import RenderableType

    from llmdeploy.perf.uncertainty import Uncertainty


def verdict(p: Performance) -> str:
    """meets | misses | within-error | no-targets | not-modelled"""
    if p.estimate is None:
        return "not-modelled"
    if p.meets_slo is None:
        return "no-targets"
    if not p.meets_slo:
        return "misses"
    return "meets" if all(t.within_margin for t in p.targets) else "within-error"


def _r(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(x, nd)


def _cost_json(c: Cost | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "usd_per_hour_per_replica": round(c.usd_per_hour, 3),
        "nodes_at_peak": c.nodes,
        "usd_per_hour_at_peak": round(c.fleet_usd_per_hour, 2),
        "usd_per_1m_output_tokens": _r(c.usd_per_1m_output_tokens, 3),
        "price_as_of": c.as_of,
    }


def to_json(p: Performance | None) -> dict[str, Any] | None:
    """The ``performance`` object of ``size --json`` (None: the configuration does not fit)."""
    if p is None:
        return None
    u = p.uncertainty
    e = p.estimate
    out: dict[str, Any] = {
        "verdict": verdict(p),
        "unsupported": p.unsupported,
        "constants": p.engine_label or None,
        "uncertainty": {
            "basis": u.basis,
            "group": u.group,
            "group_rows": u.rows,
            "measured_for_this_group": u.measured,
            "median_abs_error": {
                "throughput": u.throughput_median,
                "itl": u.itl_median,
                "ttft": u.ttft_median,
            },
            "p90_abs_error": {"throughput": u.throughput_p90, "itl": u.itl_p90, "ttft": u.ttft_p90},
            "planning_margin": {
                "itl": planning_margin("itl", u),
                "ttft": planning_margin("ttft", u),
            },
        },
    }
    if e is None:
        return out
    out |= {
        "arrival": p.arrival,
        "requests_per_s_offered_per_replica": _r(p.requests_per_s_per_replica, 3),
        "max_requests_per_s_per_replica_meeting_slo": _r(p.max_rate_meeting_slo, 3),
        "concurrent_requests_per_replica": p.concurrency_per_replica,
        "replicas_at_peak": p.replicas_at_peak,
        "ttft_ms": {"p50": _r(e.ttft_p50_ms), "p99": _r(e.ttft_p99_ms)},
        "itl_ms": {"p50": _r(e.itl_p50_ms, 2), "p99": _r(e.itl_p99_ms, 2)},
        "output_tokens_per_s_per_replica": _r(e.output_tokens_per_s),
        "requests_per_s_per_replica": _r(e.requests_per_s, 3),
        "mean_decode_batch": _r(e.mean_batch),
        "kv_bound": e.kv_bound,
        "dominant_term": e.dominant_term,
        "ttft_dominant_term": e.ttft_dominant_term,
        "step_breakdown": {k: round(v, 3) for k, v in e.step_breakdown},
        "max_concurrency_per_replica_meeting_slo": p.max_concurrency_meeting_slo,
        "replicas": {
            "for_memory": p.replicas_for_memory,
            "for_latency": p.replicas_for_latency,
            "needed": p.replicas_needed,
            "reachable": p.replicas_reachable,
        },
        "targets": [
            {
                "metric": t.metric,
                "slo_ms": t.slo_ms,
                "predicted_p99_ms": _r(t.predicted_p99_ms),
                "planned_ms": _r(t.planned_ms),
                "met": t.met,
                "met_with_margin": t.within_margin,
                "dominant_term": t.dominant_term,
            }
            for t in p.targets
        ],
        "misses": list(p.misses()),
        "warnings": list(p.warnings()),
        "cost": {"on_demand": _cost_json(p.on_demand), "spot": _cost_json(p.spot)},
        "autoscaling_queue_threshold": p.queue_threshold,
        "autoscaling_queue_threshold_in_spec": p.spec_queue_threshold,
    }
    return out


def _cost_text(label: str, c: Cost | None, replicas: int) -> str:
    if c is None:
        return f"{label}: no price in the catalog"
    per_m = (
        f", ${c.usd_per_1m_output_tokens:.2f}/1M output tokens"
        if c.usd_per_1m_output_tokens is not None
        else ""
    )
    dated = f" [{c.as_of}]" if c.as_of else ""
    fleet = f"{replicas} replica{'s' if replicas != 1 else ''} on {c.nodes} node"
    fleet += "s" if c.nodes != 1 else ""
    return f"{label}: ${c.fleet_usd_per_hour:.2f}/h for {fleet}{per_m}{dated}"


def _threshold_text(model: int, spec: int | None) -> str:
    def n(x: int) -> str:
        return f"{x} waiting request{'s' if x != 1 else ''} per replica"

    if spec is None:
        return f"autoscaling threshold: {n(model)} (the model's queue depth at the TTFT target)"
    return f"autoscaling threshold: {n(spec)} (the spec's; the model's: {model})"


def _group_text(u: Uncertainty) -> str:
    if not u.group:
        return ""
    if not u.measured:
        return f"\n    ({u.group})"
    return f"\n    ({u.group}: {u.rows} rows)"


ARRIVAL_TEXT = {
    "closed-loop": "closed loop: clients start together, fixed lengths, waves",
    "steady": "steady: staggered clients, outputs +-50 %",
    "poisson": "Poisson arrivals, outputs +-50 %",
}


def _load_text(p: Performance) -> str:
    """The load point every figure of the section assumes, with its arrival pattern."""
    reps = f"{p.replicas_at_peak} replica{'s' if p.replicas_at_peak != 1 else ''}"
    how = ARRIVAL_TEXT.get(p.arrival, p.arrival)
    if p.requests_per_s_per_replica is not None:
        return (
            f"load: {p.requests_per_s_per_replica:.3g} requests/s per replica x {reps} "
            f"(about {p.concurrency_per_replica} in flight; {how})"
        )
    return f"load: {p.concurrency_per_replica} concurrent requests per replica x {reps} ({how})"


def table(p: Performance) -> RenderableType:
    """The performance section of ``size``: estimates, verdict, replicas and cost."""
    from rich.console import Group
    from rich.text import Text

    u = p.uncertainty
    if p.estimate is None:
        return Text(f"performance: not modelled: {p.unsupported}", style="dim")
    e = p.estimate
    lines = [
        f"performance at the SLO load ({p.engine_label}):",
        f"  model error (median, held out): throughput {u.throughput_median:.0%}, "
        f"ITL {u.itl_median:.0%}, TTFT {u.ttft_median:.0%}{_group_text(u)}",
        "  " + _load_text(p),
        f"  TTFT p50/p99: {e.ttft_p50_ms:.0f} / {e.ttft_p99_ms:.0f} ms (mostly "
        f"{e.ttft_dominant_term})",
        f"  ITL p50/p99: {e.itl_p50_ms:.1f} / {e.itl_p99_ms:.1f} ms (mostly "
        f"{e.dominant_term}{', KV-cache bound' if e.kv_bound else ''})",
        f"  output: {e.output_tokens_per_s:.0f} tokens/s per replica",
    ]
    if p.max_rate_meeting_slo is not None:
        lines.append(
            "  misses the SLO (with the error margin) even at a trickle of requests"
            if p.max_rate_meeting_slo == 0
            else f"  meets the SLO (with the error margin) up to {p.max_rate_meeting_slo:.3g} "
            "requests/s per replica"
        )
    elif p.max_concurrency_meeting_slo == 0:
        lines.append("  misses the SLO (with the error margin) even with 1 request per replica")
    elif p.max_concurrency_meeting_slo is not None:
        lines.append(
            f"  meets the SLO (with the error margin) up to {p.max_concurrency_meeting_slo} "
            "concurrent requests per replica"
        )
    needed = p.replicas_needed
    lines.append(
        f"  replicas: {p.replicas_for_memory or '-'} for memory, "
        f"{p.replicas_for_latency or '-'} for latency; needed: {needed or 'n/a'}"
    )
    lines.append("  " + _cost_text("on-demand", p.on_demand, p.replicas_at_peak))
    lines.append("  " + _cost_text("spot", p.spot, p.replicas_at_peak))
    if p.queue_threshold is not None:
        lines.append("  " + _threshold_text(p.queue_threshold, p.spec_queue_threshold))
    parts: list[RenderableType] = [Text("\n".join(lines))]
    v = verdict(p)
    if v != "no-targets":
        label = {"meets": "MEETS THE SLO", "within-error": "MEETS THE SLO (within the error)"}
        style = "bold red" if v == "misses" else "bold green"
        parts.append(Text(label.get(v, "MISSES THE SLO"), style=style))
        parts.extend(Text(f"  - {m}", style="red") for m in p.misses())
        parts.extend(Text(f"  - {w}", style="yellow") for w in p.warnings())
    return Group(*parts)
