#!/usr/bin/env python3
"""Isolated admission steps of a step probe against the step model (issue 22).

Usage: python scripts/gpu_probe_steps.py PROBE.jsonl[.gz] CONFIG.json [ISL]

For each step of the probe (scripts/gpu_probe/sitecustomize.py) that admits requests and whose
three neighbours on either side are small decode steps (at most 64 tokens, none admitting),
the cost beyond a decode step is measured as the sum of the four periods around it (the step
before, the step, the two after: with async scheduling a step's host and GPU time spread over
its neighbours' periods) less four decode periods (the median of the periods three steps
before and after). The model's figure is the shipped step model's time of the same step
(decodes: running less admitted; prompt tokens: the rest, one chunk per admitted request;
context: ISL/2 + 64 per decode, ISL 512 unless given) less its decode step, for the geometry
in CONFIG served as the toolkit serves it (one H200, TP 1, vLLM 0.24.0's defaults). Printed per
band of scheduled tokens: the medians of both, and of the decode step itself (docs/
performance-model.md section 1, "Steps above the largest CUDA graph").
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
BANDS = ((65, 512), (513, 1024), (1025, 2048), (2049, 4096), (4097, 8192))
SMALL = 64


def step_model(config: Path) -> Any:
    """The step model of ``config`` as the toolkit serves it (gpu_predict.toolkit_request)."""
    from gpu_predict import toolkit_request

    from llmdeploy.engines import registry
    from llmdeploy.perf.inputs import geometry, hardware
    from llmdeploy.perf.step import build_step_model
    from llmdeploy.sizing.suggest import size

    sz = size(toolkit_request(config))
    run = registry.get("vllm").engine_run(sz, None)
    assert sz.instance is not None
    hw, m = hardware(sz.instance), geometry(sz.request.architecture)
    return build_step_model(hw, m, run.deployment, run.constants)


def isolated_steps(path: Path) -> list[tuple[int, int, int, float, float]]:
    """(tokens, running, admitted, measured cost beyond a decode step, decode period) of every
    isolated admission step, in seconds."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        recs = [json.loads(line) for line in fh if line.strip()]
    sched = {r["seq"]: r for r in recs if r["e"] == "s"}
    upd = {r["seq"]: r for r in recs if r["e"] == "u"}
    period = {b: upd[b]["t1"] - upd[b - 1]["t1"] for b in upd if b - 1 in upd}
    out = []
    for b, s in sorted(sched.items()):
        if s["tok"] <= SMALL or not s["new"]:
            continue
        near = [b + d for d in (-3, -2, -1, 1, 2, 3)]
        if any(n not in sched or sched[n]["tok"] > SMALL or sched[n]["new"] for n in near):
            continue
        window = [b - 1, b, b + 1, b + 2]
        if any(not 0.0 < period.get(x, -1.0) < 0.5 for x in [*window, b - 3, b + 3]):
            continue
        decode = statistics.median([period[b - 3], period[b + 3]])
        cost = sum(period[x] for x in window) - 4 * decode
        out.append((s["tok"], s["run"], s["new"], cost, decode))
    return out


def report(probe: Path, config: Path, isl: int = 512) -> list[str]:
    sm = step_model(config)
    lines = [
        f"{probe.name}: tokens | steps | decode ms measured, modelled"
        " | beyond it measured, modelled"
    ]
    rows = isolated_steps(probe)
    for lo, hi in BANDS:
        band = [r for r in rows if lo <= r[0] <= hi]
        if len(band) < 3:
            continue
        meas, mod, dec_meas, dec_mod, toks = [], [], [], [], []
        for tok, run, new, cost, decode in band:
            ndec = max(0, run - new)
            pf = tok - ndec
            ctx = ndec * (isl // 2 + 64)
            d = sm.step(ndec, ctx)
            a = sm.step(ndec, ctx, pf, pf * pf / 2 / max(1, new), 0.0, new, new)
            meas.append(cost)
            mod.append(a - d)
            dec_meas.append(decode)
            dec_mod.append(d)
            toks.append(tok)
        med = statistics.median
        lines.append(
            f"{lo}-{hi} (median {med(toks):.0f}) | {len(band)} | {1e3 * med(dec_meas):.2f}, "
            f"{1e3 * med(dec_mod):.2f} | {1e3 * med(meas):.1f}, {1e3 * med(mod):.1f}"
        )
    return lines


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__)
        return 2
    print("\n".join(report(Path(argv[0]), Path(argv[1]), int(argv[2]) if len(argv) == 3 else 512)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
