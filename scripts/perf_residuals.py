"""Residuals of the performance model on calibration cases, and their summaries.

Shared by scripts/perf_fit.py (which stores them in tests/data/perf/fit-residuals.json) and
scripts/perf_report.py (which prints them). Standard library only.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from perf_calibration import DATA, Case

RESIDUALS = DATA / "fit-residuals.json"  # written by perf_fit.py --write
Row = dict[str, Any]
Summary = dict[str, Any]


def residual_rows(cases: Sequence[Case], preds: Iterable[dict[str, float]]) -> list[Row]:
    """One row per (case, published metric): measured, predicted, relative error."""
    rows: list[Row] = []
    for case, pred in zip(cases, preds, strict=True):
        for t in case.targets:
            p = pred[t.metric]
            rows.append(
                {
                    "id": case.id,
                    "source": case.source,
                    "engine": f"{case.family} {case.version}",
                    "load": case.load,
                    "metric": t.metric,
                    "weight": t.weight,
                    "measured": t.value,
                    "predicted": round(p, 6) if math.isfinite(p) else p,
                    "rel_err": round((p - t.value) / t.value, 6) if math.isfinite(p) else p,
                }
            )
    return rows


def _first(metrics: dict[str, float], keys: Sequence[str]) -> float | None:
    return next((metrics[k] for k in keys if k in metrics), None)


def _median(xs: list[float]) -> float | None:
    return statistics.median(abs(x) for x in xs) if xs else None


def headline(rows: Sequence[Row]) -> Summary:
    """Median |relative error| per metric class, one value per case: throughput; ITL (p50, else
    mean); TTFT (p50, else mean) at low/moderate load and at high/saturated load; the p99s."""
    by_case: dict[str, dict[str, float]] = {}
    loads: dict[str, str] = {}
    for r in rows:
        by_case.setdefault(r["id"], {})[r["metric"]] = r["rel_err"]
        loads[r["id"]] = r["load"]
    classes: dict[str, list[float]] = {
        k: []
        for k in ("throughput", "itl", "ttft_low_moderate", "ttft_high", "itl_p99", "ttft_p99")
    }
    for rid, m in by_case.items():
        for cls, value in (
            ("throughput", m.get("thr")),
            ("itl", _first(m, ("itl_p50", "itl_mean"))),
            (
                "ttft_low_moderate" if loads[rid] in ("low", "moderate") else "ttft_high",
                _first(m, ("ttft_p50", "ttft_mean")),
            ),
            ("itl_p99", m.get("itl_p99")),
            ("ttft_p99", m.get("ttft_p99")),
        ):
            if value is not None:
                classes[cls].append(value)
    out: Summary = {}
    for cls, xs in classes.items():
        med = _median(xs)
        out[cls] = None if med is None else round(med, 4)
        out[f"n_{cls}"] = len(xs)
    return out


def _quantile(xs: list[float], p: float) -> float:
    """Linear-interpolation quantile of |xs| (numpy's default method)."""
    s = sorted(abs(x) for x in xs)
    pos = p * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def uncertainty(rows: Sequence[Row]) -> dict[str, float]:
    """Median and 90th percentile of |error| per metric of the rows weighted >= 0.5 (TTFT at
    low/moderate load only): the margins an SLO verdict plans with (perf/uncertainty.py)."""
    cls: dict[str, list[float]] = {"throughput": [], "itl": [], "ttft": []}
    for r in rows:
        if r["weight"] < 0.5:
            continue
        if r["metric"] == "thr":
            cls["throughput"].append(r["rel_err"])
        elif r["metric"].startswith("itl"):
            cls["itl"].append(r["rel_err"])
        elif r["metric"].startswith("ttft") and r["load"] in ("low", "moderate"):
            cls["ttft"].append(r["rel_err"])
    out: dict[str, float] = {}
    for name, xs in cls.items():
        out[f"{name}_median"] = round(_quantile(xs, 0.5), 6) if xs else 0.5
        out[f"{name}_p90"] = round(_quantile(xs, 0.9), 6) if xs else 0.5
    return out


def pct(value: float | None) -> str:
    return f"{100 * value:5.1f}%" if value is not None else "     -"


CLASSES = ("throughput", "itl", "ttft_low_moderate", "ttft_high")


def summary_line(label: str, s: Summary) -> str:
    cells = "".join(f"  {pct(s[c])} ({s[f'n_{c}']:2d})" for c in CLASSES)
    return f"{label:44s}{cells}"


SUMMARY_HEAD = f"{'median |error| (cases)':44s}" + "".join(
    f"  {h:>11s}" for h in ("throughput", "ITL", "TTFT low/mod", "TTFT high")
)
ORDER = ("thr", "ttft_p50", "ttft_mean", "ttft_p99", "itl_p50", "itl_mean", "itl_p99")
COLUMNS = ("throughput", "TTFT p50", "TTFT mean", "TTFT p99", "ITL p50", "ITL mean", "ITL p99")


def table(rows: Sequence[Row]) -> list[str]:
    """Per-case table: each cell is the predicted value and its error against the measurement."""
    by_case: dict[str, dict[str, Row]] = {}
    for r in rows:
        by_case.setdefault(r["id"], {})[r["metric"]] = r
    lines = [f"{'case':52s} " + " ".join(f"{c:>13s}" for c in COLUMNS)]
    # a cell: the prediction (tokens/s, ms) and its error against the measurement
    for rid, ms in by_case.items():
        cells = []
        for m in ORDER:
            r = ms.get(m)
            if r is None:
                cells.append("")
            else:
                flag = "*" if r["weight"] == 0 else " "
                v = r["predicted"]
                shown = f"{v:6.0f}" if abs(v) >= 1000 else f"{v:6.3g}"
                cells.append(f"{shown} {100 * r['rel_err']:+4.0f}%{flag}")
        lines.append(f"{rid[:52]:52s} " + " ".join(f"{c:>13s}" for c in cells))
    return lines


def relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(DATA.parents[2]))
    except ValueError:
        return str(path)
