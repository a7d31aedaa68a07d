#!/usr/bin/env python3
"""Time commands in alternation: round after round, each command once, in the given order.

On a machine whose load changes while it is measured, alternation lets every command see the
same load, so the ratio of two commands within a round is steadier than the ratio of medians
measured minutes apart. The first command is the reference: each row gives the median, over the
rounds, of its wall time divided by the reference's in the same round.

    python benchmarks/alternate.py --runs 15 'kubectl kustomize deploy' \\
        'env PYTHONPATH=/tmp/main/src python -m llmdeploy render -p llama3-8b-vllm-g5 -o {out}' \\
        'python -m llmdeploy render -p llama3-8b-vllm-g5 -o {out}'

``{out}`` becomes a fresh, absent directory for each run. Figures are printed, never asserted.
CPU is the child's user + system time (``os.wait4``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path


def run(words: Sequence[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run; exits when the command fails."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(words, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code not in (0, 4):  # 4: `llmdeploy size` says "does not fit"
            err.seek(0)
            tail = err.read().decode("utf-8", "replace").strip()[-300:]
            raise SystemExit(f"{shlex.join(words)}: exit {code}: {tail}")
    return wall, usage.ru_utime + usage.ru_stime


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commands", nargs="+", help="shell-quoted commands, the reference first")
    parser.add_argument("--runs", type=int, default=9, help="timed rounds (default 9)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be >= 1, --warmup >= 0")
    commands = [shlex.split(c) for c in args.commands]
    samples: list[list[tuple[float, float]]] = [[] for _ in commands]
    with tempfile.TemporaryDirectory(prefix="llmdeploy-alternate-") as tmp:
        for round_ in range(-args.warmup, args.runs):
            for index, words in enumerate(commands):
                out = Path(tmp) / f"out-{round_ + args.warmup}-{index}"
                result = run([w.replace("{out}", str(out)) for w in words])
                if round_ >= 0:
                    samples[index].append(result)
    print(f"{args.runs} rounds after {args.warmup} warm-up; load average {os.getloadavg()[0]:.1f}")
    print()
    print("| command | CPU ms, median (min) | wall ms, median | wall / first, median of rounds |")
    print("|---|---:|---:|---:|")
    for index, command in enumerate(args.commands):
        walls = [w for w, _ in samples[index]]
        cpus = [c for _, c in samples[index]]
        pairs = zip(samples[index], samples[0], strict=True)
        ratio = statistics.median(wall / ref for (wall, _), (ref, _) in pairs)
        print(
            f"| `{command}` | {statistics.median(cpus) * 1000:.0f} ({min(cpus) * 1000:.0f}) "
            f"| {statistics.median(walls) * 1000:.0f} | {ratio:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
