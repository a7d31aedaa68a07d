"""Reports people look at (issue 23 item 7): `--format markdown|json` of `size`, `plan` and
`render --check`, and `llmdeploy report SPEC -o report.html`, opened in headless Chromium
(Debian's `chromium`; .ci/run installs it) whose screenshot must show the plots."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmdeploy.cli import html_report
from llmdeploy.cli.commands import app
from llmdeploy.errors import ExitCode

REPO = Path(__file__).resolve().parents[1]
PRESET = "llama3-70b-vllm-p4d"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    return result.exit_code, result.stdout, result.stderr


# --- --format ---------------------------------------------------------------------------------


def test_size_markdown_says_what_size_json_says() -> None:
    code, out, _ = invoke("size", "--preset", PRESET, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    code, md, _ = invoke("size", "--preset", PRESET, "--format", "markdown")
    assert code == 0
    perf = doc["performance"]
    lines = md.splitlines()
    assert lines[0] == f"### llmdeploy size `preset {PRESET}`: FITS, MEETS THE SLO"
    assert f"| TTFT | {perf['ttft_ms']['p99']:.0f} ms | 500 ms | met |" in lines
    assert f"| ITL | {perf['itl_ms']['p99']:.1f} ms | 50 ms | met |" in lines
    r = perf["replicas"]
    assert (
        f"- replicas: {r['needed']} needed ({r['for_memory']} for memory, "
        f"{r['for_latency']} for latency)"
    ) in lines
    cost = perf["cost"]["on_demand"]
    assert (
        f"- on-demand: ${cost['usd_per_hour_at_peak']:.2f}/h at the peak "
        f"({cost['nodes_at_peak']} nodes), "
        f"${cost['usd_per_1m_output_tokens']:.2f}/1M output tokens [2026-01-21]"
    ) in lines
    # --json is --format json
    assert invoke("size", "--preset", PRESET, "--json")[1] == out


def test_a_miss_keeps_its_exit_code_in_markdown(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    text = (REPO / "presets" / f"{PRESET}.yaml").read_text().replace("itlMs: 50", "itlMs: 20")
    assert "itlMs: 20" in text
    spec.write_text(text)
    code, md, _ = invoke("size", str(spec), "--format", "markdown")
    assert code == ExitCode.MISSES_SLO
    assert md.splitlines()[0] == f"### llmdeploy size `{spec}`: FITS, MISSES THE SLO"
    assert "| ITL |" in md and "| 20 ms | **missed** |" in md


def test_plan_markdown_is_the_ranked_table_of_plan_json() -> None:
    args = ("plan", "--preset", "llama3-8b-vllm-g5", "--family", "g5", "--top", "3")
    code, out, _ = invoke(*args, "--format", "json")
    doc = json.loads(out)
    code_md, md, _ = invoke(*args, "--format", "markdown")
    assert code == code_md
    rows = [line for line in md.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == len(doc["configurations"]) >= 1
    best = doc["configurations"][0]
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[:4] == ["1", best["engine"], best["instance"], str(best["tp"])]
    assert cells[-2] == f"${best['usd_per_hour']:.2f}"
    assert md.splitlines()[0].startswith("### llmdeploy plan `preset llama3-8b-vllm-g5`: ")


def test_render_check_json_and_markdown_name_what_drifted(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    assert invoke("render", "--preset", "llama3-8b-vllm-g5", "-o", str(out))[0] == 0
    code, text, _ = invoke(
        "render", "--check", "--preset", "llama3-8b-vllm-g5", "-o", str(out), "--format", "json"
    )
    assert code == 0
    clean = json.loads(text)
    assert clean["up_to_date"] is True and clean["drifted"] == {} and clean["diff"] == ""
    (out / "service.yaml").write_text((out / "service.yaml").read_text() + "# edited\n")
    (out / "poddisruptionbudget.yaml").unlink()
    code, text, _ = invoke(
        "render", "--check", "--preset", "llama3-8b-vllm-g5", "-o", str(out), "--format", "json"
    )
    assert code == ExitCode.DRIFT
    doc = json.loads(text)
    assert doc["drifted"] == {"poddisruptionbudget.yaml": "missing", "service.yaml": "changed"}
    assert doc["files"] == clean["files"]
    code, md, _ = invoke(
        "render", "--check", "--preset", "llama3-8b-vllm-g5", "-o", str(out), "--format", "markdown"
    )
    assert code == ExitCode.DRIFT
    assert md.splitlines()[:5] == [
        f"### llmdeploy render --check `{out}`: 2 files differ from what the spec renders",
        "",
        "- `poddisruptionbudget.yaml` (missing)",
        "- `service.yaml` (changed)",
        "",
    ]
    assert "-# edited" in md  # the diff, from the file to what the spec renders


def test_format_is_refused_where_it_means_nothing() -> None:
    code, _, err = invoke("render", "--preset", PRESET, "-o", "-", "--format", "json")
    assert code == ExitCode.USAGE and "--format json is a format of `render --check` only" in err
    code, _, err = invoke("size", "--preset", PRESET, "--format", "yaml")
    assert code == ExitCode.USAGE and "expected one of text, json, markdown" in err


# --- the report's numbers ---------------------------------------------------------------------


def _point(itl: float, usd: float) -> html_report.CostPoint:
    return html_report.CostPoint(f"{itl}/{usd}", itl, usd, True)


def test_the_front_is_what_no_other_candidate_beats_on_both() -> None:
    a, b, c, d, e = _point(10, 50), _point(20, 30), _point(30, 30), _point(40, 10), _point(15, 60)
    # c: same cost as b, slower; e: slower and dearer than a
    assert html_report.front([e, d, c, b, a]) == (a, b, d)


def test_concurrency_points() -> None:
    assert html_report.concurrency_points(25) == (1, 2, 4, 8, 16, 25, 32)
    assert html_report.concurrency_points(3) == (1, 2, 3, 4, 8)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    code, _, err = invoke("report", "--preset", PRESET, "-o", str(path))
    assert code == 0, err
    assert err.endswith(f"wrote {path}\n")
    return path


def test_the_page_is_self_contained(report: Path) -> None:
    text = report.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert text.count("<svg ") == 4
    for fetches in ("<script", "src=", "href=", "@import", "url("):
        assert fetches not in text
    assert "SLO 500 ms" in text and "SLO 50 ms" in text
    assert "cheapest-per-latency front" in text
    assert "weights 32.86 GiB" in text  # size --json's weights_gib_per_gpu of the preset


def test_other_commands_do_not_import_the_report(tmp_path: Path) -> None:
    """Cold start: `size` and `render` never import html_report (python -X importtime)."""

    def imported(*args: str) -> str:
        run = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "llmdeploy", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "100"},
            check=False,
        )
        return run.stderr

    sized = imported("size", "--preset", PRESET, "--json")
    assert "llmdeploy.cli.html_report" not in sized
    # nor the extraArgs checker (with difflib) for a spec that has none (issue 23 item 5)
    assert "llmdeploy.engines.vllm.extra" not in sized
    assert "llmdeploy.cli.html_report" not in imported("render", "--preset", PRESET, "-o", "-")
    # the check can fail: `report` itself imports it
    page = tmp_path / "r.html"
    assert "llmdeploy.cli.html_report" in imported("report", "--preset", PRESET, "-o", str(page))


# --- headless Chromium ------------------------------------------------------------------------


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB rows of an 8-bit RGB/RGBA, non-interlaced PNG (Chromium's)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + best) & 0xFF
        rows.append(bytes(b for i, b in enumerate(line) if i % channels < 3))
        prev = line
    return width, height, rows


def _rows_with(rows: list[bytes], colour: str) -> list[int]:
    rgb = bytes.fromhex(colour[1:])
    return [
        y for y, row in enumerate(rows) if rgb in {row[i : i + 3] for i in range(0, len(row), 3)}
    ]


def test_chromium_shows_the_plots(report: Path, tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it where apt exists)")
    shot = tmp_path / "shot.png"
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--force-device-scale-factor=1", "--window-size=1000,1900",
         f"--screenshot={shot}", report.as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    width, height, rows = _png_pixels(shot.read_bytes())
    assert (width, height) == (1000, 1900)
    found = {
        name: _rows_with(rows, colour)
        for name, colour in (
            ("ttft p99", html_report.TTFT_P99),
            ("itl p99", html_report.ITL_P99),
            ("slo", html_report.SLO_LINE),
            ("front", html_report.FRONT),
            ("weights", html_report.MEMORY[0][1]),
        )
    }
    for name, ys in found.items():
        assert len(ys) >= 5, f"{name}: not drawn"
    # the figures in page order: the TTFT curve above the ITL curve above the plan above memory
    centre = {name: sorted(ys)[len(ys) // 2] for name, ys in found.items()}
    assert centre["ttft p99"] < centre["itl p99"] < centre["front"] < centre["weights"]
    assert max(found["weights"]) - min(found["weights"]) > 100  # the weights bar is tall
