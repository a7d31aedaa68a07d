#!/usr/bin/env python3
"""Predicted before the run, against measured, on the H200 arrival-pattern runs (issue 22;
docs/performance-model.md, "Measured on one H200").

Usage: python scripts/gpu_compare.py [--rows]

Three predictions of every row of tests/data/perf/h200-vllm-0.24.0-arrivals*.yaml (the first lease,
2026-12-01, the second to the fourth, 2026-12-02; rows marked ``excluded`` are left out):
  before  what tests/data/perf/predictions/KEY.json recorded before the lease (the commit named
          there; the harness's prefix-cache hits unknown then), against loadgen's own summary
          of the same window (throughput over the steady window, as predicted then);
  held    the cross-validation stored by scripts/perf_fit.py (the fit that did not see that
          geometry), from tests/data/perf/fit-residuals.json;
  now     the shipped constants (in sample for these rows).
Prints the median |error| per arrival pattern and metric (throughput, ITL p50, TTFT p50).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import perf_calibration as cal
import perf_residuals as res

DATA = cal.DATA
ROWS_FILES = (
    DATA / "h200-vllm-0.24.0-arrivals.yaml",
    DATA / "h200-vllm-0.24.0-arrivals-2.yaml",
    DATA / "h200-vllm-0.24.0-arrivals-3.yaml",
    DATA / "h200-vllm-0.24.0-arrivals-4.yaml",
)
LEASES = ("first", "second", "third", "fourth")
# runs of geometries measured before have plans of their own
LATER_PLANS = {"third": {"m1b": "m1bh", "qawq": "qawqh"}, "fourth": {"l8awq": "l8awq4"}}
METRICS = (("thr", "output_tok_s"), ("itl_p50", "itl_p50_ms"), ("ttft_p50", "ttft_p50_ms"))


def _key(row_id: str) -> str:
    return row_id.split("-")[2]  # h200-vllm0240-KEY-...


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="store_true")
    args = ap.parse_args(argv)
    stems = {f.stem: LEASES[i] for i, f in enumerate(ROWS_FILES)}
    cases = {c.id: c for c in cal.load_cases() if c.source in stems}
    stored = json.loads(res.RESIDUALS.read_text()) if res.RESIDUALS.exists() else {}
    held = {(r["id"], r["metric"]): r["rel_err"] for r in stored.get("cv", {}).get("rows", [])}
    errs: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    rows = [
        (stems[f.stem], row)
        for f in ROWS_FILES
        for row in yaml.safe_load(f.read_text())["arrivals"]
        if not row.get("excluded")
    ]
    for lease, row in rows:
        key, rid, arrival = _key(row["id"]), row["id"], row["arrival"]
        sweep = "/".join(
            [str(row["input_tokens"]), str(row["output_tokens"]), row["raw_summary"]["mode"],
             str(row["num_requests"])]
        )  # fmt: skip
        plan = LATER_PLANS.get(lease, {}).get(key, key)
        pred_file = DATA / "predictions" / f"{plan}.json"
        before = {}
        if pred_file.exists():
            runs = json.loads(pred_file.read_text())["models"][key]
            before = next((r for r in runs if r["sweep"] == sweep), {})
        now = cal.predict(cases[rid]) if rid in cases else {}
        steady = row["raw_summary"]["steady"]
        line = [f"{rid[14:]:34s}"]
        for metric, field in METRICS:
            measured = row["metrics"][field]
            skip_thr = metric == "thr" and (row.get("first_on_server") or row.get("warmup_stall"))
            replayed = lease in ("third", "fourth")
            if before and not (replayed and skip_thr):
                # the first two leases' predictions were of loadgen's steady window (throughput
                # too); the later ones replay the whole run, as the rows' throughput counts it
                target = steady[field] if metric == "thr" and not replayed else measured
                e = before[field] / target - 1
                errs[("before", lease, arrival, metric)].append(abs(e))
                line.append(f"{metric} before {e:+5.0%}")
            if (rid, metric) in held:
                errs[("held", lease, arrival, metric)].append(abs(held[(rid, metric)]))
                line.append(f"held {held[(rid, metric)]:+5.0%}")
            if now and not skip_thr:
                e = now[metric] / measured - 1
                errs[("now", lease, arrival, metric)].append(abs(e))
                line.append(f"now {e:+5.0%}")
        if args.rows:
            print("  ".join(line))
    print("| prediction | lease | arrival | rows | throughput | ITL p50 | TTFT p50 |")
    print("|---|---|---|---:|---:|---:|---:|")
    for kind in ("before", "held", "now"):
        for lease in (*LEASES, "every"):
            for arrival in ("closed-loop", "steady", "poisson", "all"):
                cells = []
                n = 0
                for metric, _ in METRICS:
                    xs = [
                        v
                        for (k, ls, a, m), vals in errs.items()
                        if k == kind and m == metric and lease in (ls, "every")
                        and arrival in (a, "all")
                        for v in vals
                    ]  # fmt: skip
                    n = max(n, len(xs))
                    cells.append(f"{statistics.median(xs):.0%}" if xs else "-")
                if n:
                    print(f"| {kind} | {lease} | {arrival} | {n} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
