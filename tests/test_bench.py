"""Smoke test of benchmarks/bench.py: its helpers, and one quick run end to end (< 20 s)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import load_script

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "bench.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("benchmarks/bench.py")


def test_iqr(bench: ModuleType) -> None:
    assert bench.iqr([1.0, 2.0, 3.0]) is None
    assert bench.iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0)


def test_measure_reports_one_child(bench: ModuleType) -> None:
    # The wrapper's only child allocates ~64 MiB; the figure is that child's, not the wrapper's.
    sample = bench.measure(
        [sys.executable, "-c", "b = bytearray(64 * 2**20); b[::4096] = b'x' * len(b[::4096])"]
    )
    assert sample.rc == 0
    assert 64 * 2**20 <= sample.rss < 256 * 2**20
    assert sample.wall > 0
    missing = bench.measure(["/nonexistent/llmdeploy-bench-command"])
    assert missing.rc == 127


def test_importtime_owners(bench: ModuleType) -> None:
    text = "\n".join(
        [
            "import time: self [us] | cumulative | imported package",
            "import time:       100 |        100 |       re",
            "import time:       300 |        400 |     pydantic",
            "import time:       200 |        600 |   typer",
            "import time:        50 |        650 | llmdeploy.cli",
        ]
    )
    roots = bench.parse_importtime(text)
    assert [r.name for r in roots] == ["llmdeploy.cli"]
    owners = bench.import_owners(roots)
    assert owners["pydantic"] == (400, "typer")  # re counts for the package that imported it
    assert owners["typer"] == (200, "llmdeploy.cli")
    assert owners["llmdeploy.cli"][0] == 50


def test_fleet_specs_are_valid_and_distinct(bench: ModuleType, tmp_path: Path) -> None:
    from llmdeploy.spec import load

    distinct = bench.write_fleet(tmp_path, 6, [bench.FALLBACK_PRESET])
    files = sorted(tmp_path.glob("*.yaml"))
    assert len(files) == 6 and distinct == 6
    specs = [load.load_spec_file(f).spec for f in files]
    assert len({s.name for s in specs}) == 6
    combos = {
        (s.model.architecture, s.hardware.instance_type, s.hardware.tensor_parallel) for s in specs
    }
    assert len(combos) == 6


def test_quick_run_prints_table_and_goals(tmp_path: Path) -> None:
    # No CRD directory here, to stay well under 20 s: that row must say why it is missing.
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--quick",
            "--runs",
            "1",
            "--fleet",
            "2",
            "--crd-dir",
            str(tmp_path / "no-crds"),
            "--json",
            str(tmp_path / "samples.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "CPU: " in out and "Python: " in out
    for row in (
        "| llmdeploy --version | 1 |",
        "| size --model llama-3-70b",
        "| size --preset",
        "| render DIR of 2 specs -o DIR |",
        "| runtime dependencies imported, no llmdeploy code | 1 |",
    ):
        assert row in out
    assert "--crd-dir CRDS: NOT MEASURED: no CRD directory" in out
    goals = out.split("## Goals", 1)[1]
    assert goals.count("\n- ") == 4
    assert "quick-mode size < 250 ms" in goals and "ESTIMATED from 2 specs" in goals
    if shutil.which("kubectl"):  # the render goal is a ratio of alternated pairs
        assert "(median of 1 alternated pairs;" in goals
        assert "importing the runtime dependencies alone takes" in goals
    assert (tmp_path / "samples.json").is_file()


def test_alternate_prints_one_row_per_command_with_ratios() -> None:
    script = REPO / "benchmarks" / "alternate.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--runs", "2", "--warmup", "0", "true", "sleep 0.2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == ["true", "sleep 0.2"]
    assert rows[0].endswith("| 1.00 |")
    assert float(rows[1].rsplit("|", 2)[1]) > 1.0  # sleep is slower than true
    failing = subprocess.run(
        [sys.executable, str(script), "--runs", "1", "true", "false"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert failing.returncode == 1 and "false: exit 1" in failing.stderr
