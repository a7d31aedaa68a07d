"""Command line (:mod:`llmdeploy.cli.commands`). The only package that prints or exits."""

from __future__ import annotations

import gc
import sys

# One command is one short process that allocates about 90,000 objects the cyclic garbage
# collector tracks (classes, schemas, the plan) and frees few cycles: with Python's default
# thresholds (700, 10, 10) a cold render ran about 125 collections, one of them over the whole
# heap, 50-70 ms of its 450-550 ms of CPU (issue 25). At 100,000 a render of one spec runs none;
# a fleet's workers still collect, every 100,000 allocations. mypy does the same.
GC_THRESHOLD = (100_000, 10, 10)


def main() -> None:
    """The console script: the collector's threshold first, then the commands (importing
    them is a third of the collections). When the command is done, every object is moved out
    of the collector's reach (``gc.freeze``): tearing the interpreter down runs full
    collections over the whole heap, about 100 ms of a render's CPU, and the process is about
    to give all of its memory back anyway. Exit codes, output and ``atexit`` are unchanged.
    A ``render`` forks its validator first (:mod:`llmdeploy.check.ahead`), reaped at the end."""
    gc.set_threshold(*GC_THRESHOLD)
    # a render's validator, forked while this process has one thread (check/ahead.py)
    from llmdeploy.check import ahead

    ahead.start(sys.argv[1:])
    from llmdeploy.cli.commands import main as run

    try:
        run()
    finally:
        ahead.stop()
        gc.freeze()


__all__ = ["GC_THRESHOLD", "main"]
