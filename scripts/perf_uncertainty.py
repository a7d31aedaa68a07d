#!/usr/bin/env python3
"""The performance model's error per engine family, GPU architecture and arrival pattern
(issue 22 item 6; docs/performance-model.md, "Honest uncertainty").

Usage: python scripts/perf_uncertainty.py [--write]

Reads the leave-one-group-out cross-validation rows that ``scripts/perf_fit.py --cv --write``
stored in tests/data/perf/fit-residuals.json, tags each with its case's engine family, GPU
architecture (catalog/data/gpus.csv) and arrival pattern (closed-loop, steady, poisson, burst,
saturated), and prints the median and 90th percentile |error| of each group of at least
MIN_ROWS rows, per metric (the same rule as perf_residuals.uncertainty); an open loop's
throughput figure is its capacity's, the steady mix's (OPEN_LOOP). ``--write`` rewrites
the GROUPED UNCERTAINTY block of src/llmdeploy/perf/uncertainty.py. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import perf_calibration as cal
import perf_fit
import perf_residuals as res

from llmdeploy.catalog import ec2

MIN_ROWS = 3


def arrival(case: cal.Case) -> str:
    wl = case.workload
    if wl.request_rate is not None:
        return "burst" if math.isinf(wl.request_rate) else "poisson"
    if wl.num_requests is None:
        return "saturated" if case.load == "saturated" else "steady"
    return "steady" if wl.output_spread > 0 else "closed-loop"


def gpu_arch(case: cal.Case) -> str:
    for g in ec2.gpus().values():
        if g.model == case.hw.name:
            return g.arch
    return "unknown"


def groups(rows: Sequence[res.Row], cases: Sequence[cal.Case]) -> dict[tuple[str, str, str], list]:
    by_id = {c.id: c for c in cases}
    out: dict[tuple[str, str, str], list[res.Row]] = defaultdict(list)
    for r in rows:
        c = by_id.get(r["id"])
        if c is not None:
            out[(c.family, gpu_arch(c), arrival(c))].append(r)
    return out


def group_uncertainty(rows: Sequence[res.Row], pooled: dict[str, float]) -> dict[str, float]:
    """res.uncertainty of the group's rows; a metric the group has no row of takes the pooled
    figure (never a placeholder)."""
    u = res.uncertainty(rows)
    mine = dict(u)
    for name in ("throughput", "itl", "ttft"):
        counted = [
            r
            for r in rows
            if r["weight"] >= 0.5
            and (
                (name == "throughput" and r["metric"] == "thr")
                or (name == "itl" and r["metric"].startswith("itl"))
                or (
                    name == "ttft"
                    and r["metric"].startswith("ttft")
                    and r["load"] in ("low", "moderate")
                )
            )
        ]
        if not counted:
            mine[f"{name}_median"] = pooled[f"{name}_median"]
            mine[f"{name}_p90"] = pooled[f"{name}_p90"]
        else:
            mine[f"{name}_median"] = u[f"{name}_median"]
            mine[f"{name}_p90"] = u[f"{name}_p90"]
    return mine


# An open loop below saturation delivers its offered rate, which a replay of the benchmark's
# own arrivals gets right by construction (its throughput residuals are about 0): the error
# that decides an open-loop verdict is that of the replica's capacity, the rate at which it
# stops keeping up. An open-loop group's throughput figure is the steady mix's of the same
# engine family and GPU architecture (the capacity under staggered arrivals), else pooled.
OPEN_LOOP = ("poisson",)
CAPACITY_OF = "steady"


def figures(
    grouped: dict[tuple[str, str, str], list[res.Row]],
    key: tuple[str, str, str],
    pooled: dict[str, float],
) -> dict[str, float]:
    """The group's uncertainty (:func:`group_uncertainty`), an open loop's throughput taken
    from its capacity group (``OPEN_LOOP``)."""
    u = group_uncertainty(grouped[key], pooled)
    if key[2] in OPEN_LOOP:
        cap_key = (key[0], key[1], CAPACITY_OF)
        cap = pooled
        if len({r["id"] for r in grouped.get(cap_key, [])}) >= MIN_ROWS:
            cap = group_uncertainty(grouped[cap_key], pooled)
        u["throughput_median"] = cap["throughput_median"]
        u["throughput_p90"] = cap["throughput_p90"]
    return u


def block(
    grouped: dict[tuple[str, str, str], list[res.Row]], basis: str, pooled: dict[str, float]
) -> str:
    lines = ["GROUPS: dict[tuple[str, str, str], Uncertainty] = {"]
    for key in sorted(grouped):
        rows = grouped[key]
        ids = {r["id"] for r in rows}
        if len(ids) < MIN_ROWS:
            continue
        u = figures(grouped, key, pooled)
        label = f"{key[0]} on {key[1]}, {key[2]} arrivals"
        lines.append(f"    {key!r}: Uncertainty(")
        lines += [f"        {k}={v:.3f}," for k, v in u.items()]
        lines += [
            f"        basis={basis!r},",
            f"        group={label!r},",
            f"        rows={len(ids)},",
            "    ),",
        ]
    return "\n".join([*lines, "}"])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    stored = json.loads(res.RESIDUALS.read_text())
    if "cv" not in stored:
        raise SystemExit(
            f"{res.relative(res.RESIDUALS)}: no cross-validation rows (perf_fit.py --cv)"
        )
    grouped = groups(stored["cv"]["rows"], cal.load_cases())
    pooled = stored["uncertainty"]
    print(f"{'group':48s} {'cases':>5s}  thr med/p90    ITL med/p90   TTFT med/p90")
    for key in sorted(grouped):
        rows = grouped[key]
        n = len({r["id"] for r in rows})
        u = figures(grouped, key, pooled)
        mark = "" if n >= MIN_ROWS else "  (too few: not used)"
        print(
            f"{' / '.join(key):48s} {n:5d}  {u['throughput_median']:5.0%} "
            f"{u['throughput_p90']:5.0%}"
            f"  {u['itl_median']:5.0%} {u['itl_p90']:5.0%}  {u['ttft_median']:5.0%} "
            f"{u['ttft_p90']:5.0%}{mark}"
        )
    if args.write:
        path = perf_fit.UNCERTAINTY_FILE
        text = perf_fit.replace_block(
            path.read_text(),
            "GROUPED UNCERTAINTY",
            block(grouped, "leave-one-group-out CV", pooled),
        )
        path.write_text(text)
        print(f"wrote the GROUPED UNCERTAINTY block of {res.relative(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
