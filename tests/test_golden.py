"""Golden files: every preset and every docs example renders byte-for-byte as committed, and
every rendered document validates (kubernetes-validate strict + the official CRDs).

Refresh after an intended change with ``pytest tests/test_golden.py --update-golden`` and
review the diff.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import unvalidated_kinds
from llmdeploy import pipeline
from llmdeploy.spec import load

GOLDEN = Path(__file__).resolve().parent / "golden"
PRESETS = pipeline.preset_names()
CASES = sorted(p.parent.name for p in GOLDEN.glob("*/spec.yaml"))


def render_case(label: str, path: Path, command: str, crds: object) -> pipeline.Rendered:
    loaded = load.load_spec_file(path)
    loaded = load.LoadedSpec(spec=loaded.spec, path=path, label=label)
    result = pipeline.render_loaded(loaded, header_command=command, crds=crds)
    assert result.report.ok
    assert not unvalidated_kinds(result.report, crds), "documents not validated"
    return result


def compare(expected_dir: Path, files: dict[str, str], update: bool) -> None:
    if update:
        if expected_dir.exists():
            for old in expected_dir.rglob("*"):
                if old.is_file():
                    old.unlink()
        for name, text in files.items():
            (expected_dir / name).parent.mkdir(parents=True, exist_ok=True)
            (expected_dir / name).write_text(text, encoding="utf-8")
        return
    assert expected_dir.is_dir(), f"no golden files at {expected_dir}; run with --update-golden"
    existing = sorted(
        p.relative_to(expected_dir).as_posix() for p in expected_dir.rglob("*") if p.is_file()
    )
    assert existing == sorted(files), "set of rendered files changed"
    problems = []
    for name, text in sorted(files.items()):
        want = (expected_dir / name).read_text(encoding="utf-8")
        if want != text:
            problems.append(
                "".join(
                    difflib.unified_diff(
                        want.splitlines(keepends=True),
                        text.splitlines(keepends=True),
                        fromfile=f"golden/{name}",
                        tofile=f"rendered/{name}",
                    )
                )
            )
    assert not problems, "rendered output differs from golden files:\n" + "\n".join(problems)


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_matches_golden(preset: str, crds: object, update_golden: bool) -> None:
    path = pipeline.preset_path(preset)
    assert path is not None
    result = render_case(
        f"preset {preset}", path, f"llmdeploy render --preset {preset} -o deploy", crds
    )
    # a preset is a configuration to start from: nothing in it deserves a warning
    warned = [d.message for d in result.warnings if d.severity == "warning"]
    assert not warned, warned
    compare(GOLDEN / "presets" / preset, dict(result.files), update_golden)


@pytest.mark.parametrize("case", CASES)
def test_case_matches_golden(case: str, crds: object, update_golden: bool) -> None:
    spec = GOLDEN / case / "spec.yaml"
    result = render_case("spec.yaml", spec, "llmdeploy render spec.yaml -o deploy", crds)
    compare(GOLDEN / case / "expected", dict(result.files), update_golden)


SIZED = sorted(p.parent.name for p in GOLDEN.glob("*/size.json"))


@pytest.mark.parametrize("case", SIZED)
def test_case_sizing_matches_golden(case: str, update_golden: bool) -> None:
    """The sizing and performance verdicts of a case (``llmdeploy size spec.yaml --json``),
    byte for byte."""
    import json

    from llmdeploy import pipeline
    from llmdeploy.cli import size_report

    sized = pipeline.size_loaded(load.load_spec_file(GOLDEN / case / "spec.yaml"), performance=True)
    doc = size_report.document(sized.sizing, sized.performance)
    text = json.dumps(doc, indent=2) + "\n"
    expected = GOLDEN / case / "size.json"
    if update_golden:
        expected.write_text(text, encoding="utf-8")
    assert expected.read_text(encoding="utf-8") == text, f"{case}: sizing changed"


def test_at_least_the_required_presets_exist() -> None:
    assert {"llama3-70b-vllm-p4d", "llama3-8b-vllm-g5"} <= set(PRESETS)


def test_output_is_identical_across_hash_seeds(tmp_path: Path) -> None:
    outputs = []
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-m", "llmdeploy", "render", "--preset", PRESETS[0], "-o", "-"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            cwd=tmp_path,
        )
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[0].count("\n---\n") + 1 >= 8
