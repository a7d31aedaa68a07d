"""benchmarks/bench.py: its helpers, and one quick run end to end in this process with its
commands faked, asserting the figures it reports (a real run takes minutes: .ci/run's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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


# What each faked command "takes" (wall s, CPU s): the figures the report must carry.
FAKE = {
    "version": (0.10, 0.08),
    "quick size": (0.30, 0.24),
    "size preset": (0.50, 0.40),
    "floor": (0.20, 0.15),
    "render": (0.50, 0.45),
    "kustomize": (0.10, 0.09),
    "fleet": (1.50, 1.40),
    "fleet kustomize": (2.00, 1.90),
    "plan": (1.25, 1.20),
}


def _fake_kind(words: list[str]) -> str:
    if words[0] == "sh":  # bench.fleet_kustomize: every folder in turn
        return "fleet kustomize"
    if words[0] == "kubectl":
        return "kustomize"
    if "-c" in words:
        return "floor"
    command = words[1]
    if command == "--version":
        return "version"
    if command == "size":
        return "quick size" if "--model" in words else "size preset"
    if command == "render":
        return "render" if "--preset" in words else "fleet"
    assert command == "plan", words
    return "plan"


def test_a_quick_run_reports_the_figures_it_measured(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """main() end to end in this process with every command faked: the table, the goal lines
    and the imports table carry the figures computed by hand from the fakes (the real run is
    .ci/run's `bench.py --quick --fleet 200`, printed, never asserted)."""
    seen: list[list[str]] = []

    def measure(cmd: list[str], env: object = None) -> Any:
        words = list(cmd)
        seen.append(words)
        kind = _fake_kind(words)
        if kind == "fleet":  # what `render DIR -o OUT` writes: one folder per spec
            for name in ("a", "b"):
                (Path(words[-1]) / name).mkdir(parents=True)
                (Path(words[-1]) / name / "kustomization.yaml").write_text("resources: []\n")
        wall, cpu = FAKE[kind]
        return bench.Sample(wall, cpu, 16 * 2**20, 0, "")

    def importtime(args: list[str]) -> str:
        lines = ["import time: self [us] | cumulative | imported package"]
        lines.append("import time:      3000 |       3000 | typer")
        if args[0] == "size" and "--model" in args:  # a module it must not import
            lines.append("import time:      1000 |       1000 |   pydantic.main")
        return "\n".join(lines)

    def write_fleet(dest: Path, count: int, presets: list[str]) -> int:
        assert count == 2 and "gpt-oss-20b-vllm-g6e" not in presets
        dest.mkdir()
        return 2

    monkeypatch.setattr(bench, "measure", measure)
    monkeypatch.setattr(bench, "importtime", importtime)
    monkeypatch.setattr(bench, "write_fleet", write_fleet)
    monkeypatch.setattr(bench, "find_kubectl", lambda install: ("kubectl", ""))
    monkeypatch.setattr(bench, "compile_bytecode", lambda where: f"bytecode: compiled in {where}")
    monkeypatch.setattr(bench, "tool_version", lambda cmd: "Client Version: v1.34.0")
    monkeypatch.setattr(
        bench, "renders", lambda name: "SpecError: x" if name == "gpt-oss-20b-vllm-g6e" else ""
    )
    samples = tmp_path / "samples.json"
    argv = ["--quick", "--runs", "1", "--fleet", "2", "--crd-dir", str(tmp_path / "no-crds")]
    assert bench.main([*argv, "--json", str(samples)]) == 0
    out = capsys.readouterr().out
    assert "- kubectl: Client Version: v1.34.0" in out
    assert f"- bytecode: compiled in {REPO / 'src' / 'llmdeploy'}" in out
    for row in (
        "| llmdeploy --version | 1 | 0.100 | 0.100 | 0.100 | - | 0.080 | 16 |",
        "| size --model llama-3-70b --instance p4d.24xlarge --tp 4 --json | 1 | 0.300 |",
        "| render --preset llama3-70b-vllm-p4d -o DIR | 1 | 0.500 | 0.500 | 0.500 | - | 0.450 |",
        "| kubectl kustomize (rendered 70B dir) | 1 | 0.100 |",
        "| render DIR of 2 specs -o DIR | 1 | 1.500 |",
        "| kubectl kustomize of the 2 folders it wrote | 1 | 2.000 |",
        "| plan --preset llama3-70b-vllm-p4d | 1 | 1.250 |",
    ):
        assert row in out, row
    assert (
        "- render --preset llama3-70b-vllm-p4d -o DIR --crd-dir CRDS: NOT MEASURED: no CRD" in out
    )
    assert "- preset skipped: gpt-oss-20b-vllm-g6e: SpecError: x" in out
    goals = out.split("## Goals", 1)[1].split("## Imports per command", 1)[0]
    assert goals.strip().splitlines() == [
        "- cold render of one spec (render --preset llama3-70b-vllm-p4d -o DIR) <= 4 x kubectl "
        "kustomize (moonshot 2 x): 5.0 x (median of 1 alternated pairs; medians 0.500 s and "
        "0.100 s): NOT MET",
        "- cold render of one spec (render --preset llama3-70b-vllm-p4d -o DIR --crd-dir CRDS) "
        "<= 4 x kubectl kustomize (moonshot 2 x): needs kubectl and a successful render: "
        "NOT MEASURED",
        "  - importing the runtime dependencies alone takes 2.0 x kubectl kustomize (0.200 s)",
        "- cold quick-mode size < 250 ms CPU: 240 ms CPU (median; wall 300 ms): MET",
        "- render DIR of 200 specs faster than kubectl kustomize of what it writes: 0.8 x "
        "(median of 1 alternated pairs; medians 1.500 s and 2.000 s): MET (judged on 2 specs, "
        "not 200)",
        "- plan --preset llama3-70b-vllm-p4d < 3 s: 1.25 s: MET",
    ]
    imports = out.split("## Imports per command", 1)[1]
    assert "| llmdeploy --version | 3 | 1 | pydantic, llmdeploy.spec," in imports
    quick = next(line for line in imports.splitlines() if "size --model" in line)
    assert quick.startswith("| llmdeploy size --model llama-3-70b --instance p4d.24xlarge")
    assert quick.endswith(
        "| 4 | 2 | pydantic, ruamel, llmdeploy.spec, jsonschema, jsonschema_rs, "
        "kubernetes_validate, celpy, cel_expr_python | pydantic |"
    )
    # the fleet's kustomize runs over the folder the fleet render wrote, right after it
    fleet_at = [i for i, w in enumerate(seen) if _fake_kind(w) == "fleet"]
    assert [_fake_kind(seen[i + 1]) for i in fleet_at] == ["fleet kustomize"]
    assert seen[fleet_at[0] + 1][-1] == seen[fleet_at[0]][-1]
    recorded = json.loads(samples.read_text())
    assert recorded["plan --preset llama3-70b-vllm-p4d"]["samples"][0]["wall"] == 1.25


def test_bytecode_is_compiled_before_timing(bench: ModuleType, tmp_path: Path) -> None:
    """Timed runs must not compile llmdeploy from source (an editable install under
    PYTHONDONTWRITEBYTECODE would on every run): the benchmark writes the .pyc files first."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("X = 1\n")
    (pkg / "sub" / "mod.py").write_text("Y = 2\n")
    line = bench.compile_bytecode(pkg)
    assert line.startswith(f"bytecode: compiled in {pkg} before timing")
    assert "(2 .pyc files written;" in line
    assert len(list(pkg.rglob("__pycache__/*.pyc"))) == 2
    assert "(0 .pyc files written;" in bench.compile_bytecode(pkg)  # already compiled


def test_fleet_kustomize_builds_every_folder(bench: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "fleet-out"
    for name in ("a-spec", "b-spec"):
        (out / name).mkdir(parents=True)
    log = tmp_path / "calls"
    fake = tmp_path / "kubectl"  # records its arguments: one call per folder, in order
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    fake.chmod(0o755)
    cmd = bench.fleet_kustomize(str(fake), out)
    assert subprocess.run(cmd, check=False).returncode == 0
    assert log.read_text().splitlines() == [f"kustomize {out}/a-spec/", f"kustomize {out}/b-spec/"]
    fake.write_text("#!/bin/sh\nexit 3\n")  # a failing build fails the whole command
    assert subprocess.run(cmd, check=False).returncode == 1


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
