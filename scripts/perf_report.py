#!/usr/bin/env python3
"""Accuracy of the shipped performance-model constants (docs/performance-model.md).

Usage: python scripts/perf_report.py [DIR] [--table]

DIR holds calibration files in the format of tests/data/perf/ (``calibration.yaml``: published
rows; ``*.yaml`` with ``startup``/``serving``: measured sweeps); default tests/data/perf, the
copies of ../shared/perf the constants were fitted on. Prints the median absolute relative
error per metric class (one value per case): output throughput, ITL (p50, else mean), TTFT
(p50, else mean) at low/moderate and at high/saturated load, overall and per source; then the
leave-one-group-out cross-validation that ``scripts/perf_fit.py --cv --write`` stored in
tests/data/perf/fit-residuals.json (errors on cases each refit did not see). ``--table``:
every case's predictions and errors. Standard library only: no fit is run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import perf_calibration as cal
import perf_residuals as res

GOAL = "goal (issue 13, held-out data): throughput and ITL <= 15%, TTFT low/moderate <= 25%"


def rows_of(directory: Path) -> list[res.Row]:
    """Residual rows of the shipped constants on every case of ``directory``."""
    cases = cal.load_cases(directory)
    return res.residual_rows(cases, [cal.predict(c) for c in cases])


def report(directory: Path, table: bool) -> list[str]:
    rows = rows_of(directory)
    if not rows:
        raise SystemExit(f"{directory}: no calibration cases (calibration.yaml or sweep *.yaml)")
    fitted_on = directory.resolve() == cal.DATA.resolve()
    label = "in-sample (the data fitted on)" if fitted_on else "held-out"
    lines = [f"shipped constants on {res.relative(directory)}: {label}"]
    if table:
        lines += res.table(rows)
        lines.append(
            "cells: prediction, error against the measurement; * = not fitted (burst TTFT)"
        )
    lines += [res.SUMMARY_HEAD, res.summary_line("all cases", res.headline(rows))]
    for source in dict.fromkeys(r["source"] for r in rows):
        mine = [r for r in rows if r["source"] == source]
        lines.append(res.summary_line(f"  source {source}", res.headline(mine)))
    if res.RESIDUALS.exists():
        stored = json.loads(res.RESIDUALS.read_text())
        if "cv" in stored:
            lines += [
                "",
                f"cross-validation: each group held out in turn ({stored['generated_by']})",
            ]
            lines.append(res.SUMMARY_HEAD)
            for fold, summary in stored["cv"]["folds"].items():
                lines.append(res.summary_line(f"  {fold}", summary))
            lines.append(res.summary_line("all held-out cases pooled", stored["cv"]["pooled"]))
    lines.append(GOAL)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("perf_dir", nargs="?", type=Path, default=cal.DATA)
    ap.add_argument("--table", action="store_true", help="every case's predictions and errors")
    args = ap.parse_args(argv)
    print("\n".join(report(args.perf_dir, args.table)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
