#!/usr/bin/env python3
"""What one engine's step probe says (scripts/gpu_probe/sitecustomize.py; issue 22).

Usage: python scripts/gpu_probe_report.py PROBE.jsonl[.gz] ...

A probe file holds the time of every step vLLM's scheduler planned ("s": scheduled tokens, new
requests, running requests) and when its outputs came back ("u"). The step's period is the
time between the ends of two consecutive output updates: with async scheduling the engine
plans step k+1 while step k runs, so a step's period is the longer of its GPU time and the
host time of planning and launching the next one. The sweeps of a server are split where the
engine idled for over 0.2 s. For each sweep of at least ``MIN_STEPS`` steps:

    decode period   the median period of a step that admits nothing and follows one that
                    admitted nothing (a pure decode step at the sweep's batch)
    admission cost  (the sweep's time - its steps x the decode period) / steps that admit:
                    what each admission step costs beyond a decode step, whatever the
                    mechanism (its prefill compute, a run without CUDA graphs, its planning)

``--stalls GRAPH``: per file, how often the engine stalled (a period over ``STALL_S`` while
requests ran) in the period before a step whose token count it had not scheduled before, split
at GRAPH tokens (the server's largest CUDA graph), against the steps whose count repeats: a
kernel compiled for each new step size shows as stalls before first-seen sizes only (the ninth
lease's gpt-oss-20b, docs/performance-model.md).
"""

from __future__ import annotations

import gzip
import itertools
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIN_STEPS = 1000
IDLE_S = 0.2
STALL_S = 0.5


@dataclass(frozen=True)
class Sweep:
    steps: int
    seconds: float
    running: float  # mean running requests per step
    decode_ms: float  # median period of a pure decode step
    admissions: int  # steps that admit at least one request
    above_512: int  # ... of which with more than 512 scheduled tokens
    admission_ms: float  # cost of an admission step beyond a decode step


def _records(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def sweeps(path: Path) -> list[Sweep]:
    recs = _records(path)
    sched = {r["seq"]: r for r in recs if r["e"] == "s"}
    upd = {r["seq"]: r for r in recs if r["e"] == "u"}
    seqs = sorted(s for s in upd if s in sched)
    groups: list[list[int]] = [[seqs[0]]] if seqs else []
    for a, b in itertools.pairwise(seqs):
        if upd[b]["t0"] - upd[a]["t1"] > IDLE_S:
            groups.append([])
        groups[-1].append(b)
    out = []
    for g in groups:
        if len(g) < MIN_STEPS:
            continue
        period = {b: upd[b]["t1"] - upd[a]["t1"] for a, b in itertools.pairwise(g)}
        decode = [p for b, p in period.items() if not sched[b]["new"] and not sched[b - 1]["new"]]
        d50 = statistics.median(decode)
        seconds = upd[g[-1]]["t1"] - upd[g[0]]["t1"]
        adm = [b for b in g[1:] if sched[b]["new"]]
        out.append(
            Sweep(
                steps=len(g) - 1,
                seconds=seconds,
                running=statistics.fmean(sched[b]["run"] for b in g),
                decode_ms=1e3 * d50,
                admissions=len(adm),
                above_512=sum(1 for b in adm if sched[b]["tok"] > 512),
                admission_ms=1e3 * (seconds - (len(g) - 1) * d50) / max(1, len(adm)),
            )
        )
    return out


def stalls(path: Path, graph: int) -> dict[str, tuple[int, int]]:
    """(steps, stalled) before a step of a first-seen or a repeated token count, above and at
    or below ``graph`` tokens; a step's period is the time between two output updates."""
    recs = _records(path)
    sched = {r["seq"]: r for r in recs if r["e"] == "s"}
    upd = {r["seq"]: r for r in recs if r["e"] == "u"}
    seqs = sorted(s for s in upd if s in sched)
    seen: set[int] = set()
    out = {k: (0, 0) for k in ("new above", "repeat above", "new at/below", "repeat at/below")}
    for a, b, c in zip(seqs, seqs[1:], seqs[2:], strict=False):
        busy = sched[b]["run"] > 0 and sched[b]["tok"] > 0
        tok = sched[c]["tok"]
        key = ("repeat " if tok in seen else "new ") + ("above" if tok > graph else "at/below")
        seen.add(tok)
        if busy:
            n, k = out[key]
            out[key] = (n + 1, k + (upd[b]["t1"] - upd[a]["t1"] > STALL_S))
    return out


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--stalls":
        graph = int(argv[1])
        print(f"file | next step's token count (graph {graph}): steps, stalled over {STALL_S} s")
        for arg in argv[2:]:
            got = stalls(Path(arg), graph)
            print(f"{Path(arg).name} | " + " | ".join(f"{k} {n}, {s}" for k, (n, s) in got.items()))
        return 0
    print("file | steps | s | running | decode ms | admission steps (>512 tokens) | ms each")
    for arg in argv:
        for s in sweeps(Path(arg)):
            print(
                f"{Path(arg).name} | {s.steps} | {s.seconds:.1f} | {s.running:.1f} | "
                f"{s.decode_ms:.2f} | {s.admissions} ({s.above_512}) | {s.admission_ms:.1f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
