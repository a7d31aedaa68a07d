"""One version parser (llmdeploy/versions.py) behind every table keyed on a release: a leading
``v`` (image tags) names the same release, in quick mode, in a spec and in every engine table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmdeploy import pipeline, versions
from llmdeploy.cli import commands as cli
from llmdeploy.engines.trtllm.flags import version_key
from llmdeploy.engines.vllm.budget import vllm_facts
from llmdeploy.engines.vllm.flags import parse_version
from llmdeploy.errors import ExitCode, UnsupportedVersionError
from llmdeploy.spec.load import load_spec_text

REPO = Path(__file__).resolve().parents[1]

SAME_RELEASE = [
    ("0.19.0", (0, 19, 0)),
    ("v0.19.0", (0, 19, 0)),
    ("0.19", (0, 19, 0)),
    ("0.8.5.post1", (0, 8, 5)),
    ("0.10.1.1", (0, 10, 1)),
    ("0.20.0rc1", (0, 20, 0)),
    ("0.19.0+cu128", (0, 19, 0)),
    ("1.0.3.2510", (1, 0, 3)),  # TensorRT-LLM in Triton 25.11
    ("1.2.0rc6", (1, 2, 0)),
]
NOT_RELEASES = ["", "latest", "nightly", "x0.19.0", "0", "vv0.19.0", "0.19x", "0.19.0-cu128"]


@pytest.mark.parametrize(("text", "expected"), SAME_RELEASE)
def test_every_table_reads_a_release_the_same_way(text: str, expected: tuple[int, ...]) -> None:
    assert versions.parse(text) == expected
    assert parse_version(text) == expected  # vLLM flags
    assert version_key(text) == expected  # TensorRT-LLM flags
    assert vllm_facts(text).version == expected  # vLLM memory budget


@pytest.mark.parametrize("text", NOT_RELEASES)
def test_what_is_not_a_release_is_refused_everywhere(text: str) -> None:
    for parse in (versions.parse, parse_version, version_key, vllm_facts):
        with pytest.raises(UnsupportedVersionError):
            parse(text)


def _size_json(*version: str) -> tuple[int, dict[str, object]]:
    args = ["size", "--model", "llama-3-70b", "--instance", "p4d.24xlarge", "--tp", "4", "--json"]
    result = CliRunner().invoke(cli.app, [*args, *version])
    return result.exit_code, json.loads(result.stdout)


def test_quick_mode_sizes_an_image_tag_version_as_its_release() -> None:
    # v0.19.0 was read as vLLM 19.0 by the budget's own parser: another KV cache and verdict
    plain, tagged = (
        _size_json("--engine-version", "0.19.0"),
        _size_json("--engine-version", "v0.19.0"),
    )
    assert tagged == plain
    assert plain[1]["engine_version"] == "0.19.0"
    # ... and differs from a release whose budget differs, so the comparison can fail
    assert _size_json("--engine-version", "0.21.0")[1] != plain[1]


def test_quick_mode_refuses_a_version_that_is_not_a_release() -> None:
    result = CliRunner().invoke(
        cli.app, ["size", "--model", "llama-3.1-8b", "--gpu", "h100", "--engine-version", "latest"]
    )
    assert result.exit_code == ExitCode.USAGE
    assert "--engine-version: not a release version: 'latest'" in result.stderr


# the g5 preset pinned to 0.19.0 (these tests are about how a pin is read, not which one)
SPEC = (
    (REPO / "presets" / "llama3-8b-vllm-g5.yaml")
    .read_text(encoding="utf-8")
    .replace("  version: 0.24.0\n", "  version: 0.19.0\n", 1)
)


def _render(version: str) -> dict[str, str]:
    text = SPEC.replace("  version: 0.19.0\n", f"  version: {version}\n", 1)
    assert f"version: {version}\n" in text
    return dict(pipeline.render_loaded(load_spec_text(text, "s.yaml"), header_command="t").files)


def test_a_spec_version_with_a_leading_v_renders_as_its_release() -> None:
    plain = _render("0.19.0")
    assert _render("v0.19.0") == plain
    assert "vllm/vllm-openai:v0.19.0" in plain["deployment.yaml"]
    assert _render("0.10.1.1")["deployment.yaml"].count("vllm/vllm-openai:v0.10.1.1") == 1


@pytest.mark.parametrize("version", ["0.19.0+cu128", "latest", "vv0.19.0"])
def test_a_spec_version_that_cannot_be_an_image_tag_is_refused(
    version: str, tmp_path: Path
) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("  version: 0.19.0\n", f"  version: {version!r}\n", 1))
    result = CliRunner().invoke(cli.app, ["size", str(spec)])
    assert result.exit_code == ExitCode.SPEC, result.stderr
    assert "not a release version" in result.stderr


def test_render_refuses_a_vllm_release_that_was_never_checked(tmp_path: Path) -> None:
    """Issue 23: `version: 0.99.0` used to render vllm/vllm-openai:v0.99.0, an image that cannot
    be pulled; now it is an error at the version's own line naming the newest checked release,
    and nothing is written."""
    spec = tmp_path / "s.yaml"
    text = SPEC.replace("  version: 0.19.0\n", "  version: 0.99.0\n", 1)
    assert "version: 0.99.0" in text
    spec.write_text(text)
    out = tmp_path / "deploy"
    result = CliRunner().invoke(cli.app, ["render", str(spec), "-o", str(out)])
    assert result.exit_code == ExitCode.SPEC, result.stderr
    line = next(n for n, t in enumerate(text.splitlines(), 1) if "version: 0.99.0" in t)
    assert f"{spec}:{line}:12: error: `engine.version`: vLLM 0.99.0 is newer than 0.33.0" in (
        result.stderr
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("since", "until", "said"),
    [
        ("1.2.0", "1.3.0", "1.2.x (1.2.0 or later, before 1.3.0)"),
        ("0.17.0", "1.3.0", "(0.17.0 or later, before 1.3.0)"),
        ("1.0.0", "2.0.0", "1.x (1.0.0 or later, before 2.0.0)"),
        ("1.2.1", "1.3.0", "(1.2.1 or later, before 1.3.0)"),
    ],
)
def test_a_half_open_range_is_said_as_it_is(since: str, until: str, said: str) -> None:
    assert versions.span(since, until) == said


def test_quick_mode_refuses_a_vllm_release_that_was_never_checked() -> None:
    result = CliRunner().invoke(
        cli.app,
        [
            "size",
            "--model",
            "llama-3.1-8b",
            "--instance",
            "g6e.2xlarge",
            "--engine-version",
            "0.99.0",
        ],
    )
    assert result.exit_code == ExitCode.SPEC
    assert "vLLM 0.99.0 is newer than 0.33.0, the newest release whose parser llmdeploy" in (
        result.stderr
    )
