"""The validator forked at start-up (llmdeploy.check.ahead): the same reports and errors as
validation in the process, and validation in the process whenever the child cannot answer.

The forking runs in fresh interpreters, which each test starts: a fork of the test process
would copy pytest's state (and refuses where it has threads, which a case here checks).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from llmdeploy import pipeline
from llmdeploy.check import ahead
from llmdeploy.check.bundled import bundled_registry
from llmdeploy.errors import ExitCode
from llmdeploy.spec.load import load_spec_file

PRESET = "llama3-70b-vllm-p4d"

# Runs in a fresh interpreter: for each case (preset, Kubernetes version, how its files are
# spoilt), the report or error of check_files through a forked child and in this process.
DRIVER = """
import json, sys
from llmdeploy import pipeline
from llmdeploy.check import ahead
from llmdeploy.check.bundled import bundled_registry
from llmdeploy.errors import LlmdeployError
from llmdeploy.spec.load import load_spec_file

def spoil(files, how):
    out = []
    for name, text in files:
        if how == "unknown-field" and name == "deployment.yaml":
            text = text.replace("spec:\\n", "spec:\\n  replicaz: 3\\n", 1)
        if how == "cel" and name == "nodepool.yaml":
            text = text.replace("spec:\\n  weight:", "spec:\\n  replicas: 2\\n  weight:", 1)
        if how == "bad-yaml" and name == "service.yaml":
            text += "\\n  - : [\\n"
        out.append((name, text))
    return out

def outcome(files, kube_version):
    try:
        report = ahead.check_files(files, crds=bundled_registry(), kube_version=kube_version)
    except LlmdeployError as exc:
        return ["error", type(exc).__name__, str(exc), int(exc.exit_code)]
    return ["report", repr(report)]

cases = json.loads(sys.argv[1])
results = []
for preset, kube_version, how in cases:
    loaded = load_spec_file(pipeline.preset_path(preset))
    files = spoil(pipeline.render_loaded(loaded, header_command="x").files, how)
    forked = ahead.start(["render"])
    ahead.prepare(kube_version)
    via_child = outcome(files, kube_version)
    child_pid = ahead._CHILD[0].pid if ahead._CHILD else None
    ahead.stop()
    here = outcome(files, kube_version)
    results.append([forked, child_pid is not None, via_child, here])
print(json.dumps(results))
"""


def run_driver(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_forked_reports_and_errors_equal_in_process_ones() -> None:
    """Valid renders, a schema error, a CEL rule's error, unreadable YAML and a Kubernetes
    version kubernetes-validate lacks: the same report (or the same error, message and exit
    code) whether the child answered or this process validated."""
    presets = ["llama3-70b-vllm-p4d", "llama3-8b-vllm-g5", *pipeline.preset_names()[:3]]
    cases = [[p, "1.35.0", ""] for p in dict.fromkeys(presets)]
    cases += [
        [PRESET, "1.34.0", "unknown-field"],
        [PRESET, "1.35.0", "cel"],
        [PRESET, "1.35.0", "bad-yaml"],
        [PRESET, "1.10.0", ""],
    ]
    results = json.loads(run_driver(DRIVER, json.dumps(cases)))
    for case, (forked, had_child, via_child, here) in zip(cases, results, strict=True):
        assert forked and had_child, case
        assert via_child == here, case
        spoilt = case[2] in ("unknown-field", "cel")
        failed = case[2] == "bad-yaml" or case[1] == "1.10.0"
        assert here[0] == ("error" if failed else "report"), case
        assert ("status='invalid'" in here[1]) is spoilt, case


# The child is made to fail in each way; check_files still returns the in-process report.
FALLBACK_DRIVER = """
import os, sys, time
from llmdeploy import pipeline
from llmdeploy.check import ahead, documents
from llmdeploy.check.bundled import bundled_registry
from llmdeploy.spec.load import load_spec_file

files = pipeline.render_loaded(
    load_spec_file(pipeline.preset_path("llama3-70b-vllm-p4d")), header_command="x"
).files
crds = bundled_registry()
here = documents.check_documents(
    documents.rendered_documents(files), crds=crds, kube_version="1.35.0"
)

def check():
    report = ahead.check_files(files, crds=crds, kube_version="1.35.0")
    return report == here

how = sys.argv[1]
if how == "killed":
    assert ahead.start(["render"])
    os.kill(ahead._CHILD[0].pid, 9)
    os.waitpid(ahead._CHILD[0].pid, 0)
    print(check())
elif how == "silent":  # a child that never answers: the timeout
    ahead.REPLY_TIMEOUT_S = 0.5
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    ahead._CHILD.append(ahead._Child(pid, requests_w, replies_r))
    started = time.monotonic()
    print(check(), time.monotonic() - started < 30)
    ahead.stop()
elif how == "garbage":  # an answer that is not a report
    requests_r, requests_w = os.pipe()
    replies_r, replies_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        ahead._write(replies_w, b"not a pickle")
        os._exit(0)
    ahead._CHILD.append(ahead._Child(pid, requests_w, replies_r))
    print(check())
elif how == "second":  # a fleet's second spec: the child answered one render and exited
    assert ahead.start(["render"])
    print(check(), check())
elif how == "threads":
    import threading
    stop = threading.Event()
    threading.Thread(target=stop.wait).start()
    print(ahead.start(["render"]) is False, check())
    stop.set()
elif how == "worker":  # a forked worker of a fleet inherits the handle, never uses it
    assert ahead.start(["render"])
    pid = os.fork()
    if pid == 0:
        ok = ahead._usable() is None and check()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    print(status == 0, check())
ahead.stop()
try:
    os.waitpid(-1, os.WNOHANG)
    print("a child is left")
except ChildProcessError:
    print("no child left")
"""


@pytest.mark.parametrize("how", ["killed", "silent", "garbage", "second", "threads", "worker"])
def test_a_child_that_cannot_answer_means_validating_here(how: str) -> None:
    *verdicts, left = run_driver(FALLBACK_DRIVER, how).splitlines()
    assert left == "no child left"
    assert verdicts and all(word == "True" for line in verdicts for word in line.split())


@pytest.mark.parametrize(
    ("args", "environ", "wanted"),
    [
        (["render", "--preset", PRESET, "-o", "-"], {}, True),
        (["render", "spec.yaml"], {"LLMDEPLOY_CRD_DIR": ""}, True),
        (["render", "--preset", PRESET], {ahead.ENV: "0"}, False),
        (["render", "--preset", PRESET, "--crd-dir", "crds"], {}, False),
        (["render", "--crd-dir=crds", "spec.yaml"], {}, False),
        (["render", "spec.yaml"], {"LLMDEPLOY_CRD_DIR": "crds"}, False),
        (["render", "--help"], {}, False),
        (["--debug", "render", "spec.yaml"], {}, False),
        (["validate", "deploy/"], {}, False),
        (["size", "--preset", PRESET], {}, False),
        ([], {}, False),
    ],
)
def test_only_a_render_with_the_bundled_schemas_forks(
    args: list[str], environ: dict[str, str], wanted: bool
) -> None:
    assert ahead.wanted(args, environ) is wanted


def test_the_console_script_renders_the_same_with_and_without_the_child(tmp_path: Path) -> None:
    """Files, stdout, stderr and exit code of the console script, with the child and with
    LLMDEPLOY_CHECK_AHEAD=0; a failing render (an unknown Kubernetes version) too."""
    script = Path(sys.executable).with_name("llmdeploy")
    runs = []
    for value in ("1", "0"):
        out = tmp_path / value / "deploy"  # the header names the directory
        for args in (
            ["render", "--preset", PRESET, "-o", str(out)],
            ["render", "--preset", PRESET, "-o", "-", "--kube-version", "1.10.0"],
            ["render", "--preset", PRESET, "-o", "-"],
        ):
            proc = subprocess.run(
                [str(script), *args],
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, ahead.ENV: value},
            )
            runs.append((proc.returncode, proc.stdout, proc.stderr.replace(str(out), "DIR")))
        files = {p.name: p.read_text() for p in sorted(out.iterdir())}
        runs.append((0, json.dumps(files), ""))
    half = len(runs) // 2
    assert runs[:half] == runs[half:]
    assert [r[0] for r in runs[:half]] == [0, int(ExitCode.IO), 0, 0]
    assert "1.10.0" in runs[1][2]


def test_the_kinds_prepared_are_the_ones_presets_render() -> None:
    """Every kind of RENDERED_KINDS is rendered by some preset, and every kind that more than
    a quarter of the presets render is prepared."""
    counts: Counter[tuple[str, str]] = Counter()
    names = pipeline.preset_names()
    for name in names:
        path = pipeline.preset_path(name)
        assert path is not None
        rendered = pipeline.render_loaded(load_spec_file(path), header_command="x")
        docs = pipeline.yaml_documents(rendered.files)
        counts.update({(d["apiVersion"], d["kind"]) for _, d in docs})
    assert set(ahead.RENDERED_KINDS) <= set(counts)
    common = {kind for kind, n in counts.items() if n > len(names) / 4}
    assert common <= set(ahead.RENDERED_KINDS), common - set(ahead.RENDERED_KINDS)
    assert len(set(ahead.RENDERED_KINDS)) == len(ahead.RENDERED_KINDS)


def test_preparing_a_kind_changes_no_verdict() -> None:
    """prepare_kind fills caches only: the report after it is the report before it."""
    from llmdeploy.check import documents

    loaded = load_spec_file(pipeline.preset_path(PRESET))  # type: ignore[arg-type]
    files = pipeline.render_loaded(loaded, header_command="x").files
    docs = documents.rendered_documents(files)
    crds = bundled_registry()
    before = documents.check_documents(docs, crds=crds, kube_version="1.33.0")
    for api_version, kind in ahead.RENDERED_KINDS:
        documents.prepare_kind(api_version, kind, crds=crds, kube_version="1.33.0")
    assert documents.check_documents(docs, crds=crds, kube_version="1.33.0") == before
