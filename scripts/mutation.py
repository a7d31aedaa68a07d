#!/usr/bin/env python3
"""Mutation testing of the core stages with mutmut, one target group at a time.

Usage: python scripts/mutation.py [--group NAME ...] [--list-survivors] [--max-children N]
                                  [--keep] [--list-groups] [--only GLOB ...]
                                  [--sample N [--seed S]]

For each group: copies the repository's tracked files (as they are in the work tree) to a
temporary directory, writes a ``[mutmut]`` section to its ``setup.cfg`` that mutates only the
group's modules and runs only the test files that exercise them, runs ``mutmut run``, and prints
killed / survived / score (killed over killed + survived; timeouts count as killed, as mutmut
counts them). ``--list-survivors`` prints the surviving mutants' names; ``mutmut show NAME`` in
the kept copy (``--keep``) prints a mutant's diff.

``--sample N --seed S`` measures a group too large to run whole: mutmut generates every mutant
of the group (a ``mutmut run`` whose name filter matches none of them stops after generating
them and collecting which tests reach which function), the script draws N of their names
without replacement with ``random.Random(S)`` from the sorted list (the same seed and the same
source give the same sample), and ``mutmut run NAME ...`` tests exactly those. The score is
printed with its 95 % Wilson interval, an estimate of the whole group's score.

mutmut is in the ``dev`` extra; it is not part of ``.ci/run`` or the pytest suite (a group takes
minutes to an hour on two cores). Results and their date: docs/CONTRIBUTING.md, "Mutation
testing".
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Group:
    name: str
    mutate: tuple[str, ...]  # mutmut ``only_mutate`` globs, relative to the repository
    tests: tuple[str, ...]  # the test files that exercise them


GROUPS = (
    Group(
        "sizing",
        ("src/llmdeploy/sizing/*",),
        (
            "tests/test_size.py",
            "tests/test_size_report.py",
            "tests/test_pipeline_sizing.py",
            "tests/test_doc_numbers.py",
            "tests/test_families.py",
            "tests/test_workload.py",
            "tests/test_golden.py",
        ),
    ),
    Group(
        "plan",
        ("src/llmdeploy/plan/*",),
        (
            "tests/test_production.py",
            "tests/test_workload.py",
            "tests/test_capacity.py",
            "tests/test_amis.py",
            "tests/test_prometheus.py",
            "tests/test_multinode.py",
            "tests/test_golden.py",
        ),
    ),
    Group("write", ("src/llmdeploy/write.py",), ("tests/test_write.py", "tests/test_cli.py")),
    # the performance stage, against tests that state values (no goldens, no stored residuals)
    Group(
        "perf",
        ("src/llmdeploy/perf/*", "src/llmdeploy/sizing/batching.py"),
        (
            "tests/test_perf_hand.py",
            "tests/test_perf_hand_step.py",
            "tests/test_perf_hand_verdict.py",
            "tests/test_perf_layouts.py",
            "tests/test_perf_model.py",
            "tests/test_perf_verdict.py",
            "tests/test_token_budget.py",
        ),
    ),
    Group(
        "budgets",
        ("src/llmdeploy/engines/vllm/budget.py", "src/llmdeploy/engines/trtllm/budget.py"),
        (
            "tests/test_size.py",
            "tests/test_size_report.py",
            "tests/test_pipeline_sizing.py",
            "tests/test_versions.py",
            "tests/test_doc_numbers.py",
            "tests/test_families.py",
            "tests/test_trtllm.py",
            "tests/test_trtllm_pytorch.py",
            "tests/test_golden.py",
        ),
    ),
)
KILLED = ("killed", "timeout")
SURVIVED = ("survived",)
# A name no mutant has: ``mutmut run`` given it generates the mutants, collects the stats, then
# stops with this message (mutmut 3.8.1, ``collect_source_file_mutation_data``).
GENERATE_ONLY = "llmdeploy-mutation-generate-only"
NOTHING_MATCHES = "Filtered for specific mutants, but nothing matches"


def _config(group: Group, timeout_multiplier: float | None = None, isolation: str = "fork") -> str:
    def block(key: str, values: tuple[str, ...]) -> str:
        return f"{key} =\n" + "".join(f"    {v}\n" for v in values)

    timeout = "" if timeout_multiplier is None else f"timeout_multiplier = {timeout_multiplier}\n"
    return (
        "[mutmut]\nsource_paths = src\n"
        + f"process_isolation = {isolation}\n"
        + timeout
        + block("only_mutate", group.mutate)
        + block("pytest_add_cli_args_test_selection", group.tests)
        + block("pytest_add_cli_args", ("-p", "no:cacheprovider"))
        + block("also_copy", ("templates", "presets", "scripts", "docs", "README.md", "benchmarks"))
    )


def _copy_repo(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():  # a file deleted in the work tree is not copied
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _results(workdir: Path) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=workdir,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = (line.strip().rpartition(": ") for line in out.splitlines() if ": " in line)
    return {name: status for name, _, status in rows}


def wilson(killed: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a proportion killed / n (95 % for the default z)."""
    if n == 0:
        return (0.0, 1.0)
    p = killed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def sample(names: list[str], size: int, seed: int) -> list[str]:
    """``size`` of ``names`` drawn without replacement, reproducibly: the same names and seed give
    the same sample whatever order mutmut listed them in."""
    ordered = sorted(set(names))
    return sorted(random.Random(seed).sample(ordered, min(size, len(ordered))))


def _score(statuses: list[str]) -> str:
    counts = Counter(statuses)
    killed = sum(counts[s] for s in KILLED)
    survived = sum(counts[s] for s in SURVIVED)
    others = ", ".join(f"{s} {n}" for s, n in sorted(counts.items()) if s not in KILLED + SURVIVED)
    score = f"{100 * killed / (killed + survived):.1f}%" if killed + survived else "-"
    line = f"mutants: {len(statuses)}  killed: {killed}  survived: {survived}  score: {score}"
    if counts["timeout"]:
        line += f"  (killed by a timeout: {counts['timeout']})"
    return line + (f"  ({others})" if others else "")


def _interval(statuses: list[str]) -> str:
    counts = Counter(statuses)
    killed = sum(counts[s] for s in KILLED)
    low, high = wilson(killed, killed + sum(counts[s] for s in SURVIVED))
    return f"95% Wilson interval: {100 * low:.1f}% to {100 * high:.1f}%"


def _mutmut(workdir: Path, args: list[str], log: Path) -> tuple[int, str]:
    """``python -m mutmut ARGS`` in the copy, its output appended to ``log`` as it runs (and
    returned). ``CI=1`` loads the tests' derandomized hypothesis profile (tests/conftest.py): a
    property test draws the same examples for every mutant, so a rerun with the same seed gives
    the same verdicts."""
    start = log.stat().st_size if log.exists() else 0
    with log.open("a", encoding="utf-8") as out:
        code = subprocess.run(
            [sys.executable, "-m", "mutmut", *args],
            cwd=workdir,
            env={**os.environ, "CI": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        ).returncode
    with log.open("rb") as raw:
        raw.seek(start)
        return code, raw.read().decode("utf-8", errors="replace")


def run_group(
    group: Group,
    *,
    max_children: int,
    keep: bool,
    list_survivors: bool,
    only: list[str],
    sample_size: int | None = None,
    seed: int = 0,
    timeout_multiplier: float | None = None,
    isolation: str = "fork",
) -> int:
    workdir = Path(tempfile.mkdtemp(prefix=f"llmdeploy-mutation-{group.name}-"))
    _copy_repo(workdir)
    (workdir / "setup.cfg").write_text(
        _config(group, timeout_multiplier, isolation), encoding="utf-8"
    )
    log = workdir / "mutmut.log"
    print(f"== {group.name}: mutating {' '.join(group.mutate)}", flush=True)
    print(f"   tests: {' '.join(group.tests)}", flush=True)
    selected = only
    if sample_size is not None:
        code, out = _mutmut(
            workdir, ["run", "--max-children", str(max_children), GENERATE_ONLY], log
        )
        if code == 0 or NOTHING_MATCHES not in out:
            print(f"   generating the mutants failed (exit {code}); log: {log}")
            return 1
        names = list(_results(workdir))
        if only:
            names = [n for n in names if any(fnmatch.fnmatchcase(n, g) for g in only)]
        selected = sample(names, sample_size, seed)
        print(f"   sample: {len(selected)} of {len(names)} mutants, seed {seed}", flush=True)
    code, _ = _mutmut(workdir, ["run", "--max-children", str(max_children), *selected], log)
    if code != 0:
        print(f"   mutmut run failed (exit {code}); log: {log}")
        return 1
    results = _results(workdir)
    if sample_size is not None:
        chosen = set(selected)
        results = {n: s for n, s in results.items() if n in chosen}
    elif only:  # mutmut lists every mutant it generated; count the ones this run tested
        results = {n: s for n, s in results.items() if s != "not checked"}
    print(f"   {_score(list(results.values()))}")
    if sample_size is not None:
        print(f"   {_interval(list(results.values()))}")
    by_module: dict[str, list[str]] = {}
    for name, status in results.items():
        by_module.setdefault(re.split(r"\.x[_\u01c1]", name)[0], []).append(status)
    for module, statuses in sorted(by_module.items()):
        print(f"     {module}: {_score(statuses)}")
    if list_survivors:
        for name in sorted(n for n, s in results.items() if s in SURVIVED):
            print(f"   survived: {name}")
    if keep:
        print(f"   kept: {workdir} (mutmut show NAME there prints a mutant)")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    names = [g.name for g in GROUPS]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", action="append", choices=names, help="default: every group")
    parser.add_argument("--list-survivors", action="store_true")
    parser.add_argument("--list-groups", action="store_true")
    parser.add_argument("--max-children", type=int, default=1, help="parallel mutant runs")
    parser.add_argument("--keep", action="store_true", help="keep each group's copy")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GLOB",
        help="test only the mutants whose names match, e.g. 'llmdeploy.plan.pod.*'",
    )
    parser.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="test a reproducible random sample of N mutants (of those --only matches)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument(
        "--timeout-multiplier",
        type=float,
        metavar="X",
        help="mutmut's timeout_multiplier (default 15): a mutant is stopped after "
        "2 X (its tests' time in the stats run + 1 s) of CPU time and counted killed",
    )
    parser.add_argument(
        "--isolation",
        choices=("fork", "forkserver"),
        default="fork",
        help="mutmut's process_isolation: fork (default) forks each mutant's run from the "
        "process that ran the clean tests, with their caches; forkserver from one that ran none",
    )
    args = parser.parse_args(argv)
    if args.sample is not None and args.sample < 1:
        parser.error("--sample needs at least one mutant")
    if args.list_groups:
        for g in GROUPS:
            print(f"{g.name}: {' '.join(g.mutate)}")
            print(f"  tests: {' '.join(t.removeprefix('tests/') for t in g.tests)}")
        return 0
    if shutil.which("git") is None:
        print("git is needed to list the repository's files", file=sys.stderr)
        return 2
    try:
        import mutmut  # noqa: F401
    except ImportError:
        print("mutmut is not installed: pip install -e '.[dev]'", file=sys.stderr)
        return 2
    chosen = [g for g in GROUPS if args.group is None or g.name in args.group]
    status = 0
    for group in chosen:
        status |= run_group(
            group,
            max_children=args.max_children,
            keep=args.keep,
            list_survivors=args.list_survivors,
            only=args.only,
            sample_size=args.sample,
            seed=args.seed,
            timeout_multiplier=args.timeout_multiplier,
            isolation=args.isolation,
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
