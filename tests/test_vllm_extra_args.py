"""`engine.extraArgs` and `engine.env` (issue 23 item 5): options and variables llmdeploy does
not own, each checked against the pinned release before anything is sized or written.

vLLM: every option of the release's server parser, as its wheel ships it (PyPI `vllm==X`,
`vllm/engine/arg_utils.py` and `vllm/entrypoints/openai/cli_args.py`, read by
`scripts/vllm_cli_options.py` into `engines/vllm/cli_options.json`). TensorRT-LLM:
llmdeploy's trtllm-serve table (NVIDIA/TensorRT-LLM `tensorrt_llm/commands/serve.py` @ 4c05a748
(1.1-era) and @ 00209af1, `engines/trtllm/flags.py`).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from llmdeploy import pipeline
from llmdeploy.cli.commands import app
from llmdeploy.engines.trtllm import extra as trtllm_extra
from llmdeploy.engines.vllm import extra, flags
from llmdeploy.errors import ExitCode, SpecError
from llmdeploy.spec.load import load_spec_text
from test_docs import load_script
from test_load import GOOD

REPO = Path(__file__).resolve().parents[1]
TABLE = json.loads((REPO / "src/llmdeploy/engines/vllm/cli_options.json").read_text())


def _spec(engine: str) -> str:
    """GOOD (test_load.py) with a vLLM `engine:` section after `model:` (`type` on line 7, the
    given lines from line 8 on)."""
    spec = GOOD.replace("hardware:\n", "engine:\n  type: vllm\n" + engine + "hardware:\n", 1)
    return spec + "autoscaling:\n  minReplicas: 2\n"  # no single-replica warning


def located(text: str) -> list[str]:
    try:
        found = pipeline.size_loaded(load_spec_text(text, "spec.yaml")).warnings
    except SpecError as exc:
        found = exc.diagnostics
    return [
        f"{d.location()}: {d.severity}: {d.message}" + (f" ({d.hint})" if d.hint else "")
        for d in found
    ]


def server_container(text: str) -> dict[str, Any]:
    result = pipeline.render_loaded(load_spec_text(text, "spec.yaml"), header_command="t")
    docs = dict(pipeline.yaml_documents(result.files))
    (container,) = docs["deployment.yaml"]["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


# --- the option table: every release's parser, and in agreement with the flag table -----------


def test_the_table_covers_every_checked_release_from_its_own_wheel() -> None:
    assert list(TABLE["releases"]) == list(flags.CHECKED_VERSIONS)
    for version, wheel in TABLE["releases"].items():
        assert wheel["wheel"].startswith(f"vllm-{version}-"), version
        assert len(wheel["sha256"]) == 64


@pytest.mark.parametrize("version", flags.CHECKED_VERSIONS)
def test_every_form_the_flag_table_renders_is_an_option_of_that_release(version: str) -> None:
    """The flag table was established by running each release's parser; the option table is
    read from the same releases' source. Every form the flag table gives for a release (and its
    negative) is in the option table for that release, and a form the flag table says is gone
    is not."""
    parsed = flags.parse_version(version)
    have = extra.options(version)
    for key, forms in flags.FLAGS.items():
        for form in forms:
            names = [n for n in (form.name, form.negative) if n is not None]
            for name in names:
                if form.covers(parsed):
                    assert extra.known(name, version), (version, key, name)
        if not any(f.covers(parsed) for f in forms) and key not in ("headless",):
            # gone (or not yet there) in this release: its spelling is not an option either,
            # unless another form of the table keeps the same name
            spelled = {f.name for f in forms}
            assert not spelled & have or any(f.covers(parsed) for f in forms), (version, key)


def test_tool_calling_options_by_release() -> None:
    """vLLM's tool calling and reasoning options, as the releases ship them: the auto tool
    choice and its parser in every checked release (cli_args.py@v0.6.0), the reasoning parser
    from 0.7.0 (arg_utils.py, then cli_args.py / StructuredOutputsConfig)."""
    for version in ("0.6.0", "0.24.0", "0.33.0"):
        assert {"--enable-auto-tool-choice", "--tool-call-parser", "--chat-template"} <= (
            extra.options(version)
        )
    assert "--reasoning-parser" not in extra.options("0.6.6")
    assert "--reasoning-parser" in extra.options("0.24.0")


def test_the_table_is_what_the_script_writes(tmp_path: Path) -> None:
    """scripts/vllm_cli_options.py reads option strings with ast: add_argument literals and the
    fields of the *FrontendArgs classes, which cli_args.py registers in a loop."""
    script = load_script("scripts/vllm_cli_options.py")
    source = (
        "class FrontendArgs:\n    tool_call_parser: str | None = None\n"
        "def make(parser):\n    parser.add_argument('--headless', action='store_true')\n"
        "    parser.add_argument('--api-server-count', '-asc', type=int)\n"
        "    parser.add_argument('model_tag')\n"
    )
    assert script.options_in(source) == {
        "--tool-call-parser",
        "--headless",
        "--api-server-count",
        "-asc",
    }
    src = tmp_path / "src"
    for version, body in (
        ("0.6.0", "x.add_argument('--a')\n"),
        ("0.7.0", "x.add_argument('--b')\n"),
    ):
        (src / version / "vllm/engine").mkdir(parents=True)
        (src / version / "vllm/engine/arg_utils.py").write_text(body)
    (src / "wheels.txt").write_text(
        "0.6.0 vllm-0.6.0-x.whl " + "0" * 64 + "\n0.7.0 vllm-0.7.0-x.whl " + "1" * 64 + "\n"
    )
    table = script.table(src, ["0.6.0", "0.7.0"])
    assert table["options"] == {"--a": [["0.6.0", "0.7.0"]], "--b": [["0.7.0", None]]}


# --- vLLM: what a user types ---------------------------------------------------------------


TOOLS = (
    "  extraArgs: [--enable-auto-tool-choice, --tool-call-parser, hermes, --reasoning-parser,"
    " qwen3]\n"
)


def test_tool_calling_arguments_are_appended_to_the_server_command_line() -> None:
    container = server_container(_spec(TOOLS))
    args = container["args"]
    assert args[-5:] == [
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--reasoning-parser",
        "qwen3",
    ]
    assert args.count("--enable-auto-tool-choice") == 1


def test_env_is_added_to_the_server_container_after_llmdeploys_own() -> None:
    container = server_container(_spec("  env:\n    VLLM_LOGGING_LEVEL: DEBUG\n    A_B: '1'\n"))
    env = [(e["name"], e.get("value")) for e in container["env"]]
    assert env[-2:] == [("A_B", "1"), ("VLLM_LOGGING_LEVEL", "DEBUG")]
    names = [n for n, _ in env]
    assert len(names) == len(set(names))


def test_an_unknown_option_is_a_located_error_with_the_nearest_option() -> None:
    text = _spec(
        "  extraArgs:\n    - --enable-auto-tool-choice\n    - --tool-call-parsr\n    - hermes\n"
    )
    assert located(text) == [
        "spec.yaml:10:7: error: `engine.extraArgs`: --tool-call-parsr is not an option of vLLM "
        "0.24.0's server (did you mean --tool-call-parser?)"
    ]


def test_an_option_of_a_later_release_is_refused_on_the_pinned_one() -> None:
    """--reasoning-parser first appears in 0.7.0's parser (the option table)."""
    text = _spec("  version: 0.6.6\n  extraArgs: [--reasoning-parser, deepseek_r1]\n")
    (problem,) = [d for d in located(text) if "extraArgs" in d]
    assert problem.startswith(
        "spec.yaml:9:15: error: `engine.extraArgs`: --reasoning-parser is not an option of "
        "vLLM 0.6.6's server"
    )


@pytest.mark.parametrize(
    ("word", "field"),
    [
        ("--tensor-parallel-size=2", "set `hardware.tensorParallel` instead"),
        ("--tensor_parallel_size", "set `hardware.tensorParallel` instead"),
        ("--max-model-len", "set `serving.maxModelLen` instead"),
        ("--no-enable-prefix-caching", "set `serving.prefixCaching` instead"),
        ("--gpu-memory-utilization", "set `serving.gpuMemoryUtilization` instead"),
        ("--served-model-name", "set `model.servedName` instead"),
        ("--api-key", "set `engine.apiKeySecret` instead"),
        ("--port", "llmdeploy decides it (the Service and probes: llmdeploy listens on port 8000)"),
    ],
)
def test_an_option_llmdeploy_renders_names_the_field_to_use(word: str, field: str) -> None:
    flag = "--" + word.split("=")[0][2:].replace("_", "-")
    assert located(_spec(f"  extraArgs: [{word!r}, '8']\n")) == [
        f"spec.yaml:8:15: error: `engine.extraArgs`: llmdeploy already renders {flag} ({field})"
    ]


def test_options_llmdeploy_does_not_render_are_the_users() -> None:
    """--trust-remote-code is in the flag table but never rendered; values (a negative number
    too) are not options."""
    text = _spec("  extraArgs: [--trust-remote-code, --seed, '-1', --max-logprobs=5]\n")
    assert located(text) == []
    assert server_container(text)["args"][-4:] == [
        "--trust-remote-code",
        "--seed",
        "-1",
        "--max-logprobs=5",
    ]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("HF_HOME: /x", "llmdeploy already sets HF_HOME (set `model.loading` instead)"),
        (
            "VLLM_API_KEY: k",
            "llmdeploy already sets VLLM_API_KEY (set `engine.apiKeySecret` instead)",
        ),
        (
            "OPENAI_API_KEY: k",
            "OPENAI_API_KEY looks like a credential, and a value here is rendered in plain text "
            "(keep it in a Secret: `engine.apiKeySecret`, `model.loading.hfTokenSecret`)",
        ),
        ("'1BAD': x", "'1BAD' is not a variable name"),
    ],
)
def test_env_names_llmdeploy_sets_or_that_hold_credentials_are_refused(
    env: str, message: str
) -> None:
    (line,) = located(_spec(f"  env:\n    {env}\n"))
    col = 4 + len(env.split(":")[0]) + 3  # at the value, as every field's diagnostic
    assert line == f"spec.yaml:9:{col}: error: `engine.env`: {message}"


def test_every_variable_a_preset_renders_is_reserved() -> None:
    """RESERVED_ENV cannot drift from the plan: every variable of every vLLM preset's server
    container (and a multi-node, EFA and API-key one) is listed."""
    from llmdeploy import presets

    for p in presets.catalog():
        if p.sizing.engine != "vllm":
            continue
        loaded = load_spec_text(p.path.read_text(), p.name)
        result = pipeline.render_loaded(loaded, header_command="t")
        for name, doc in pipeline.yaml_documents(result.files):
            spec = doc.get("spec", {})
            template = spec.get("template") or spec.get("leaderWorkerTemplate", {}).get(
                "workerTemplate", {}
            )
            for c in template.get("spec", {}).get("containers", []):
                for var in c.get("env", []):
                    assert var["name"] in extra.RESERVED_ENV, (p.name, name, var["name"])


def test_the_cli_refuses_and_writes_nothing(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(_spec("  extraArgs: [--tool-call-parsr, hermes]\n"))
    out = tmp_path / "deploy"
    result = CliRunner().invoke(app, ["render", str(spec), "-o", str(out)])
    assert result.exit_code == ExitCode.SPEC
    assert f"{spec}:8:15: error: `engine.extraArgs`: --tool-call-parsr" in result.stderr
    assert "did you mean --tool-call-parser?" in result.stderr
    assert not out.exists()


def test_a_word_that_is_not_a_command_line_word_is_refused() -> None:
    (line,) = located(_spec('  extraArgs: ["a\\nb"]\n'))  # YAML's "\n": a newline
    assert "not a command-line word" in line and line.startswith("spec.yaml:8:")


def test_extra_args_survive_as_written() -> None:
    words = ["--chat-template", "{% for m in messages %}{{ m.content }}{% endfor %}", "--seed=7"]
    container = server_container(_spec(f"  extraArgs: {json.dumps(words)}\n"))
    assert container["args"][-3:] == words
    assert shlex.join(words)  # nothing shell-quoted into them: args go to exec as they are


# --- TensorRT-LLM (backend pytorch) -------------------------------------------------------

TRT = (
    "apiVersion: llmdeploy.dev/v1alpha1\nname: q\nmodel:\n  id: nvidia/Llama-3.3-70B-Instruct-FP8\n"
    "  architecture: llama-3.3-70b\nengine:\n  type: trtllm\n  backend: pytorch\n"
    "{extra}quantization: fp8\nhardware:\n  instanceType: p5.48xlarge\n  tensorParallel: 4\n"
    "serving:\n  maxModelLen: 16384\ncluster:\n  name: e\n  nodeRole: R\n  expireAfter: Never\n"
)


def test_trtllm_serve_takes_a_reasoning_parser() -> None:
    """--reasoning_parser: serve.py @ 4c05a748 (1.1-era) and @ 00209af1."""
    text = TRT.format(extra="  extraArgs: [--reasoning_parser, deepseek-r1]\n")
    assert located(text) == []
    container = server_container(text)
    assert container["args"][-2:] == ["--reasoning_parser", "deepseek-r1"]


def test_trtllm_serve_tool_parser_is_refused_on_the_verified_line() -> None:
    """--tool_parser and --chat_template are in serve.py @ 00209af1 only, not @ 4c05a748 (the
    1.1-era source): not established for 1.2.x."""
    text = TRT.format(extra="  extraArgs: [--tool_parser, qwen3]\n")
    (line,) = located(text)
    assert line.startswith(
        "spec.yaml:9:15: error: `engine.extraArgs`: trtllm-serve of TensorRT-LLM 1.2.1: "
        "accepted only in [1.3.0, now)"
    )


@pytest.mark.parametrize(
    ("word", "hint"),
    [
        ("--tp_size", "set `hardware.tensorParallel` instead"),
        ("--max_seq_len", "set `serving.maxModelLen` instead"),
        ("--config", "llmdeploy decides it (llmdeploy's LLM API options file in the ConfigMap)"),
    ],
)
def test_trtllm_serve_flags_llmdeploy_renders_name_the_field(word: str, hint: str) -> None:
    (line,) = located(TRT.format(extra=f"  extraArgs: [{word}, '1']\n"))
    assert (
        line
        == f"spec.yaml:9:15: error: `engine.extraArgs`: llmdeploy already renders {word} ({hint})"
    )


def test_trtllm_serve_unknown_flag_gets_the_nearest() -> None:
    (line,) = located(TRT.format(extra="  extraArgs: [--reasoning-parser, x]\n"))
    assert line.endswith("(did you mean --reasoning_parser?)"), line


def test_trtllm_engine_backend_takes_neither() -> None:
    text = GOOD.replace(
        "hardware:\n",
        "engine:\n  type: trtllm\n  artifactsS3Uri: s3://model-store/demo\n"
        "  extraArgs: [--x]\n  env:\n    A: b\nhardware:\n",
    )
    assert [
        line.split(": error: ")[1].split(";")[0] for line in located(text) if "error" in line
    ] == [
        "`engine.extraArgs` only applies to backend pytorch (trtllm-serve)",
        "`engine.env` only applies to backend pytorch (trtllm-serve)",
    ]


def test_trtllm_env_reserved_names() -> None:
    assert trtllm_extra.RESERVED_ENV["TMPDIR"]
    (line,) = located(TRT.format(extra="  env:\n    TMPDIR: /x\n"))
    assert line.startswith("spec.yaml:10:13: error: `engine.env`: llmdeploy already sets TMPDIR")


def test_yaml_roundtrip_of_the_section() -> None:
    data = yaml.safe_load(_spec(TOOLS))
    assert data["engine"]["extraArgs"][0] == "--enable-auto-tool-choice"
