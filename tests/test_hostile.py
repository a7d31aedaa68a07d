"""Hostile input: every user string comes out as exactly the same string, never as new YAML
structure or a shell command, and every bad file is a located SpecError, never a traceback.

Three kinds of tests:

* examples: YAML bombs, deep nesting, huge files and numbers, non-UTF-8, duplicate keys, tabs,
  Python tags, names that YAML or a shell would read as something else, path traversal;
* properties (hypothesis): any accepted spec renders to YAML that parses and validates; free-form
  strings (model id, served name, revision, node role, cluster name, discovery tag, monitor
  labels, Prometheus address, S3 URIs) survive load -> render -> parse unchanged, at the place
  they belong;
* the CLI: a user error never prints a Python traceback.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, event, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import unvalidated_kinds
from llmdeploy import pipeline
from llmdeploy.check.documents import parse_documents
from llmdeploy.cli.commands import app
from llmdeploy.errors import (
    DoesNotFitError,
    LlmdeployError,
    SpecError,
    ValidationFailedError,
)
from llmdeploy.spec.fast_yaml import fast_parse
from llmdeploy.spec.load import (
    MAX_BYTES,
    LoadedSpec,
    load_spec_file,
    load_spec_text,
    parse_yaml,
)

# --- building spec text --------------------------------------------------------------------------


def dq(value: str) -> str:
    """A YAML double-quoted scalar in pure printable ASCII: every other character is an escape,
    so the spec file itself can carry any string (newlines, NEL, U+2028, emoji, C1 controls)."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return dq(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(scalar(v) for v in value) + "]"
    raise TypeError(value)


def emit(data: dict[str, Any], indent: int = 0) -> str:
    """Block-style YAML for nested dicts; keys must be plain identifiers."""
    lines = []
    for key, value in data.items():
        k = key if re.fullmatch(r"[A-Za-z][\w./-]*", key) else dq(key)
        if isinstance(value, dict) and value:
            lines.append(f"{' ' * indent}{k}:\n{emit(value, indent + 2)}")
        elif isinstance(value, dict):
            lines.append(f"{' ' * indent}{k}: {{}}\n")
        else:
            lines.append(f"{' ' * indent}{k}: {scalar(value)}\n")
    return "".join(lines)


BASE: dict[str, Any] = {
    "apiVersion": "llmdeploy.dev/v1alpha1",
    "kind": "ModelDeployment",
    "name": "demo",
    "namespace": "llm-serving",
    "model": {"id": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama-3.1-8b"},
    "hardware": {"instanceType": "g5.2xlarge"},
    "cluster": {"name": "demo-eks", "nodeRole": "KarpenterNodeRole-demo"},
}
GOOD = emit(BASE)


def with_(path: str, value: object, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of the spec with the dotted key path set."""
    data = copy.deepcopy(base if base is not None else BASE)
    node = data
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return data


def diagnostics(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec_text(text, "spec.yaml")
    assert info.value.diagnostics, "a SpecError must carry at least one diagnostic"
    return [f"{d.location()}: {d.message}" for d in info.value.diagnostics]


# --- rendering and looking things up -------------------------------------------------------------

Docs = dict[str, dict[str, Any]]  # kind -> the one document of that kind


def render_docs(loaded: LoadedSpec, crds: object = None) -> Docs:
    """Render through the real pipeline (forced past the sizing verdict), parse every file
    back the way Kubernetes reads it and index the documents by kind."""
    result = pipeline.render_loaded(
        loaded, header_command="llmdeploy render spec.yaml -o deploy", crds=crds, force=True
    )
    docs: Docs = {}
    for name, text in result.files:
        if not name.endswith(".yaml"):
            continue
        parsed = parse_documents(text, name)
        assert len(parsed) == 1, f"{name}: expected one document, got {len(parsed)}"
        doc = parsed[0][1]
        assert isinstance(doc, dict), f"{name}: not a mapping"
        kind = str(doc.get("kind"))
        assert kind not in docs, f"two documents of kind {kind}"
        docs[kind] = doc
    return docs


def render_text(text: str) -> Docs:
    return render_docs(load_spec_text(text, "spec.yaml"))


def container(docs: Docs, name: str | None = None, init: bool = False) -> dict[str, Any]:
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    items: list[dict[str, Any]] = pod.get("initContainers" if init else "containers", [])
    if name is None:
        assert len(items) == 1 or not init, items
        return items[0]
    found = [c for c in items if c["name"] == name]
    assert found, f"no container {name!r} in {[c['name'] for c in items]}"
    return found[0]


def flag_value(args: list[str], flag: str) -> str | None:
    """The value of `--flag VALUE` or `--flag=VALUE` in an argument list."""
    for index, word in enumerate(args):
        if word == flag and index + 1 < len(args):
            return args[index + 1]
        if word.startswith(flag + "="):
            return word[len(flag) + 1 :]
    return None


QUERY = re.compile(
    r'sum\(avg_over_time\((?P<metric>[a-z_:]+)\{namespace="(?P<ns>(?:[^"\\\n]|\\.)*)",'
    r'model_name="(?P<model>(?:[^"\\\n]|\\.)*)"\}\[[0-9]+s\]\)\)'
)


def promql_unquote(value: str) -> str:
    """Undo the escapes of a PromQL double-quoted string (Go string-literal escapes)."""
    escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}
    return re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), "\\" + m.group(1)), value)


def invalid(report: object) -> str:
    results = getattr(report, "results", ())
    return "; ".join(
        f"{r.kind}: {' / '.join(r.messages)}" for r in results if r.status == "invalid"
    )


# --- hostile files: refused with a located error -------------------------------------------------


def test_billion_laughs_is_refused_quickly() -> None:
    lines = ["apiVersion: llmdeploy.dev/v1alpha1", 'a0: &a0 ["lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    lines.append("model: {id: *a9}")
    start = time.monotonic()
    out = diagnostics("\n".join(lines) + "\n")
    assert time.monotonic() - start < 5
    assert any("more than" in o and "anchors/aliases" in o for o in out), out


def test_aliases_into_a_string_field_expand_to_the_same_string() -> None:
    # A harmless alias is not a bomb: it is resolved, and the value is the anchored string.
    text = GOOD.replace('  name: "demo-eks"', '  name: &c "demo-eks"\n  discoveryTag: *c')
    spec = load_spec_text(text, "spec.yaml").spec
    assert spec.cluster.discovery_tag == "demo-eks"


@pytest.mark.parametrize(
    "extra",
    ["x: &a [*a]\n", "x: &a {k: *a}\n", "model: &m {id: *m}\n"],
    ids=["self-list", "self-map", "self-model"],
)
def test_self_referencing_anchors_are_refused(extra: str) -> None:
    text = (
        GOOD.replace(
            'model:\n  id: "meta-llama/Llama-3.1-8B-Instruct"\n  architecture: "llama-3.1-8b"\n', ""
        )
        + extra
    )
    assert diagnostics(text)


@pytest.mark.parametrize("depth", [300, 600])
def test_deep_flow_nesting_is_a_spec_error_not_a_recursion_error(depth: int) -> None:
    out = diagnostics(GOOD + "x: " + "[" * depth + "]" * depth + "\n")
    assert any("nested too deeply" in o for o in out), out


def test_deep_block_nesting_is_a_spec_error() -> None:
    body = "".join(" " * (2 * i) + f"k{i}:\n" for i in range(2_000))
    assert diagnostics(GOOD + body)


def test_huge_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(GOOD + "# " + "x" * MAX_BYTES + "\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec_file(big)
    assert str(MAX_BYTES) in info.value.diagnostics[0].message


def test_huge_integers_are_refused_not_crashed() -> None:
    out = diagnostics(GOOD + "serving:\n  maxNumSeqs: " + "9" * 5000 + "\n")
    assert out


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("serving.maxNumBatchedTokens", 10**400),
        ("serving.maxNumSeqs", 10**400),
        ("slo.concurrentRequests", 10**400),
        ("slo.inputTokens", 10**400),
        ("autoscaling.pollingInterval", 10**400),
        ("cluster.gpuLimit", 10**400),
    ],
    ids=lambda v: v if isinstance(v, str) else "10**400",
)
def test_absurd_numbers_are_a_spec_error_or_render(path: str, value: int) -> None:
    """Unbounded integer fields must not crash the calculator (OverflowError) or the renderer."""
    text = emit(with_(path, value))
    try:
        docs = render_text(text)
    except SpecError:
        return
    except DoesNotFitError:
        return
    assert docs["Deployment"]


@pytest.mark.parametrize(
    "path", ["model.revision", "model.servedName", "cluster.discoveryTag", "monitoring.interval"]
)
def test_empty_strings_are_refused_or_rendered_never_a_crash(path: str) -> None:
    try:
        docs = render_text(emit(with_(path, "")))
    except SpecError:
        return
    assert docs["Deployment"]


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        (GOOD.encode() + b"namespace: caf\xe9\n", GOOD.count("\n") + 1),
        ("\n".join(GOOD.splitlines()[:3]).encode() + b"\n  id: \xff\xfe\n", 4),
    ],
)
def test_non_utf8_is_located(tmp_path: Path, raw: bytes, line: int) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(raw)
    with pytest.raises(SpecError) as info:
        load_spec_file(path)
    d = info.value.diagnostics[0]
    assert "UTF-8" in d.message and d.line == line and d.column is not None


def test_utf16_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(GOOD.encode("utf-16"))
    with pytest.raises(SpecError, match="UTF-8"):
        load_spec_file(path)


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert load_spec_file(path).spec.name == "demo"


def test_nul_byte_is_refused() -> None:
    assert diagnostics(GOOD + "\x00\n")


@pytest.mark.parametrize(
    "text",
    [
        GOOD + 'name: "other"\n',
        GOOD + "hardware:\n  tensorParallel: 2\n",
        GOOD.replace(
            '  instanceType: "g5.2xlarge"',
            '  instanceType: g5.2xlarge\n  "instanceType": g5.4xlarge',
        ),
        GOOD + "serving: {maxModelLen: 4096, maxModelLen: 8192}\n",
    ],
    ids=["top", "section", "quoted-vs-plain", "flow"],
)
def test_duplicate_keys_are_refused_with_a_position(text: str) -> None:
    out = diagnostics(text)
    assert re.match(r"spec\.yaml:\d+:\d+: YAML: duplicate key", out[0]), out


def test_tabs_in_indentation_are_refused_with_line_and_column() -> None:
    text = GOOD.replace('  nodeRole: "KarpenterNodeRole-demo"', '\t nodeRole: "x"')
    out = diagnostics(text)
    assert out[0].startswith("spec.yaml:") and "tab" in out[0], out


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system ['touch {marker}']",
        "!!python/object/new:os.system ['touch {marker}']",
        "!!python/name:os.system",
        "!!python/object:subprocess.Popen {{args: ['touch', '{marker}']}}",
        "!shell 'touch {marker}'",
    ],
)
def test_python_and_custom_tags_are_never_constructed(tmp_path: Path, tag: str) -> None:
    marker = tmp_path / "pwned"
    text = GOOD.replace('  name: "demo-eks"', "  name: " + tag.format(marker=marker))
    out = diagnostics(text)
    assert any("cluster.name" in o for o in out), out
    assert not marker.exists()


@pytest.mark.parametrize("key", ["1", "~", "[a, b]", "{a: 1}", "true"])
def test_non_string_keys_are_refused(key: str) -> None:
    assert diagnostics(GOOD + f"? {key}\n: x\n")


@pytest.mark.parametrize(
    "value",
    [
        "a\nb",
        "a: b",
        "No",
        "{{ name }}",
        "$(id)",
        "`id`",
        "a;rm -rf /",
        "../x",
        "a/b",
        "-lead",
        "trail-",
        "UPPER",
        "a_b",
        "a.b",
        "",
        "x" * 64,
        "демо",
        "a\x85b",
    ],
)
@pytest.mark.parametrize("field", ["name", "namespace"])
def test_names_that_are_not_dns_labels_are_refused(field: str, value: str) -> None:
    out = diagnostics(emit(with_(field, value)))
    assert any(f"`{field}`" in o for o in out), out


@pytest.mark.parametrize("value", ["no", "yes", "on", "off", "y", "n", "true", "null", "0"])
def test_names_yaml_1_1_reads_as_booleans_stay_strings(value: str) -> None:
    """Unquoted `name: no` is a string in the spec (YAML 1.2) and valid DNS, so it is accepted;
    Kubernetes reads YAML 1.1, where unquoted `no` is false: it must come out quoted."""
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", value):
        pytest.skip("not a DNS label")
    text = GOOD.replace('name: "demo"\n', f"name: {value}\n")
    try:
        loaded = load_spec_text(text, "spec.yaml")
    except SpecError:
        return  # refused is fine too (e.g. `true`, `null` are not strings in YAML 1.2)
    assert loaded.spec.name == value
    docs = render_docs(loaded)
    for kind in ("Deployment", "Service", "ScaledObject"):
        assert docs[kind]["metadata"]["name"] == value
    assert docs["Deployment"]["metadata"]["labels"]["app.kubernetes.io/instance"] == value


def test_multiple_documents_are_refused() -> None:
    assert any("exactly one YAML document" in o for o in diagnostics(GOOD + "---\n" + GOOD))


# --- free-form strings: exactly the same string, at the expected place ---------------------------

HOSTILE = [
    "{{ x }}",
    "{% if %}",
    "{#",
    "${X}",
    ": ",
    " #",
    "#",
    "&a",
    "*a",
    "!!python/object:os.system",
    "!tag",
    "- ",
    "? ",
    "%",
    "@",
    "`",
    "'",
    '"',
    "\\",
    "\n",
    "\r\n",
    "\r",
    "\t",
    "yes",
    "no",
    "on",
    "1e3",
    "0o17",
    "0x1F",
    "~",
    "null",
    "$(id)",
    "`id`",
    "; rm -rf /",
    "|",
    ">",
    "---",
    "...",
    "[a, b]",
    "{a: b}",
    ",",
    "é",
    "\u00a0",
    "\u200b",
    "\ufeff",
    "\U0001f600",
    "\x85",
    "\u2028",
    "\u2029",
    "\x7f",
    "\x9b",
    "\ufffe",
    "\x00",
    "\x1b[31m",
]

texts = st.one_of(
    st.text(min_size=1, max_size=40),
    st.sampled_from(HOSTILE),
    st.lists(st.sampled_from([*HOSTILE, "a", "b", " ", "/", "-"]), min_size=1, max_size=8).map(
        "".join
    ),
)
# Each example renders a whole deployment (~50 ms), so shrinking a failure could take minutes:
# these properties report the failing input as generated, and the characters that matter most
# are always tried first as explicit examples.
PROPERTY = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)
SPECIAL = ["\x85", "\u2028", "\x7f", "\ufffe", "{{ x }}", 'a"b\\', "a: b #c", "-x", "\n"]


def with_special_examples(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def decorate(test: Callable[..., None]) -> Callable[..., None]:
        for value in reversed(SPECIAL):
            test = example(**{name: value})(test)
        return test

    return decorate


# field -> (how to put the string into the spec, where to find it in the rendered output)
Place = Callable[[Docs], list[str]]


def _args(docs: Docs) -> list[str]:
    return [str(a) for a in container(docs, "vllm")["args"]]


CASES: dict[str, tuple[Callable[[str], dict[str, Any]], Callable[[str], Place]]] = {
    "model.id": (
        lambda s: with_("model.id", s),
        lambda s: lambda d: [a for a in _args(d) if a == s or a == f"--model={s}"],
    ),
    "model.servedName": (
        lambda s: with_("model.servedName", s),
        lambda s: lambda d: [flag_value(_args(d), "--served-model-name") or ""],
    ),
    "model.revision": (
        lambda s: with_("model.revision", s),
        lambda s: lambda d: [flag_value(_args(d), "--revision") or ""],
    ),
    "cluster.nodeRole": (
        lambda s: with_("cluster.nodeRole", s),
        lambda s: lambda d: [d["EC2NodeClass"]["spec"]["role"]],
    ),
    "cluster.name": (
        lambda s: with_("cluster.name", s),
        lambda s: (
            lambda d: [
                term["tags"]["karpenter.sh/discovery"]
                for key in ("subnetSelectorTerms", "securityGroupSelectorTerms")
                for term in d["EC2NodeClass"]["spec"][key]
            ]
        ),
    ),
    "cluster.discoveryTag": (
        lambda s: with_("cluster.discoveryTag", s),
        lambda s: (
            lambda d: [
                term["tags"]["karpenter.sh/discovery"]
                for key in ("subnetSelectorTerms", "securityGroupSelectorTerms")
                for term in d["EC2NodeClass"]["spec"][key]
            ]
        ),
    ),
    "monitoring.labels": (
        lambda s: with_("monitoring.labels", {"team": s}),
        lambda s: lambda d: [d["ServiceMonitor"]["metadata"]["labels"]["team"]],
    ),
    "autoscaling.prometheusAddress": (
        lambda s: with_("autoscaling.prometheusAddress", "http://prom.example:9090/" + s),
        lambda s: (
            lambda d: [
                d["ScaledObject"]["spec"]["triggers"][0]["metadata"]["serverAddress"][
                    len("http://prom.example:9090/") :
                ]
            ]
        ),
    ),
    "model.loading.s3Uri": (
        lambda s: with_(
            "model.loading",
            {"mode": "s3", "s3Uri": "s3://model-bucket/" + s, "hfTokenSecret": None},
            with_("serviceAccount.iamRoleArn", "arn:aws:iam::111122223333:role/model-reader"),
        ),
        lambda s: (
            lambda d: [
                # s5cmd takes the prefix's objects as "<s3Uri>/*" ("<s3Uri>*" after a '/')
                a[len("s3://model-bucket/") : -1 if s.endswith("/") else -2]
                for a in container(d, init=True)["args"]
                if str(a).startswith("s3://model-bucket/")
            ]
        ),
    ),
}


@pytest.mark.parametrize("field", sorted(CASES))
@PROPERTY
@given(value=texts)
@with_special_examples("value")
def test_user_strings_round_trip_unchanged(field: str, value: str) -> None:
    make_spec, place = CASES[field]
    text = emit(make_spec(value))
    try:
        loaded = load_spec_text(text, "spec.yaml")
    except SpecError:
        return  # refused with a located diagnostic: fine
    try:
        docs = render_docs(loaded)
    except ValidationFailedError as exc:
        pytest.fail(f"spec was accepted but renders invalid manifests: {invalid(exc.report)}")
    except DoesNotFitError:  # pragma: no cover - the base spec always has an instance
        return
    found = place(value)(docs)
    assert found, f"{field}: {value!r} not found where expected"
    assert all(f == value for f in found), f"{field}: {value!r} came out as {found!r}"


@PROPERTY
@given(served=texts)
@with_special_examples("served")
def test_served_name_in_the_autoscaler_query_is_escaped_not_injected(served: str) -> None:
    try:
        loaded = load_spec_text(emit(with_("model.servedName", served)), "spec.yaml")
    except SpecError:
        return
    query = str(render_docs(loaded)["ScaledObject"]["spec"]["triggers"][0]["metadata"]["query"])
    # one selector with exactly two matchers: nothing in the name closes a string or a brace
    match = QUERY.fullmatch(query)
    assert match, query
    assert promql_unquote(match["model"]) == served
    assert match["ns"] == "llm-serving"


# --- any accepted spec renders to YAML that parses and validates ---------------------------------

DNS = st.from_regex(r"[a-z]([-a-z0-9]{0,14}[a-z0-9])?", fullmatch=True)
LABEL_VALUE = st.from_regex(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?)?", fullmatch=True)


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["name"] = draw(DNS)
    data["namespace"] = draw(DNS)
    data["model"]["architecture"] = draw(
        st.sampled_from(["llama-3.1-8b", "llama-3-70b", "qwen2.5-7b", "mistral-7b-v0.3"])
    )
    hardware: dict[str, Any] = {"tensorParallel": draw(st.sampled_from([1, 2, 4, 8]))}
    if draw(st.booleans()):
        hardware["instanceType"] = draw(
            st.sampled_from(
                [
                    "g5.2xlarge",
                    "g5.12xlarge",
                    "g6e.12xlarge",
                    "p4d.24xlarge",
                    "p5.48xlarge",
                    "g6.48xlarge",
                ]
            )
        )
    else:
        hardware["instanceFamily"] = draw(st.sampled_from(["g5", "g6e", "p4d", "p5"]))
    data["hardware"] = hardware
    data["quantization"] = draw(st.sampled_from(["none", "fp8", "int4-awq"]))
    data["kvCacheDtype"] = draw(st.sampled_from(["auto", "fp8"]))
    serving: dict[str, Any] = {"maxModelLen": draw(st.sampled_from([2048, 4096, 8192, 32768]))}
    if draw(st.booleans()):
        serving["gpuMemoryUtilization"] = draw(st.sampled_from([0.8, 0.9, 0.95]))
    if draw(st.booleans()):
        serving["maxNumSeqs"] = draw(st.integers(1, 512))
    serving["prefixCaching"] = draw(st.booleans())
    data["serving"] = serving
    mode = draw(st.sampled_from(["huggingface", "s3", "pvc"]))
    loading: dict[str, Any] = {"mode": mode}
    if mode == "s3":
        loading["s3Uri"] = "s3://model-bucket/" + draw(DNS)
    if mode == "pvc":
        loading["pvcName"] = draw(DNS)
    if draw(st.booleans()):
        loading["hfTokenSecret"] = None
    data["model"]["loading"] = loading
    lo = draw(st.integers(1, 4))
    data["autoscaling"] = {"minReplicas": lo, "maxReplicas": draw(st.integers(max(lo, 1), 12))}
    data["monitoring"] = {
        "kind": draw(st.sampled_from(["ServiceMonitor", "PodMonitor", "none"])),
        "labels": draw(st.dictionaries(st.sampled_from(["team", "tier"]), LABEL_VALUE, max_size=2)),
    }
    network: dict[str, Any] = {"networkPolicy": draw(st.booleans())}
    if draw(st.booleans()):
        network["clientNamespaces"] = draw(st.lists(DNS, min_size=1, max_size=3, unique=True))
    data["network"] = network
    if draw(st.booleans()):
        data["serviceAccount"] = {"iamRoleArn": "arn:aws:iam::111122223333:role/model-reader"}
    if draw(st.booleans()):
        data["startup"] = {"overrideSeconds": draw(st.integers(60, 7200))}
    return data


@PROPERTY
@given(data=specs())
def test_any_accepted_spec_renders_valid_yaml(data: dict[str, Any], crds: object) -> None:
    try:
        loaded = load_spec_text(emit(data), "spec.yaml")
    except SpecError:
        assume(False)
        return
    try:
        result = pipeline.render_loaded(
            loaded, header_command="llmdeploy render s -o d", crds=crds, force=True
        )
    except ValidationFailedError as exc:
        pytest.fail(f"accepted spec renders invalid manifests: {invalid(exc.report)}")
    except LlmdeployError as exc:
        event(f"refused: {type(exc).__name__}")
        return  # e.g. no instance of the family fits at all: a clean, typed error
    event("rendered")
    assert result.report.ok
    assert not unvalidated_kinds(result.report, crds)
    for name, text in result.files:
        if name.endswith(".yaml"):
            assert parse_documents(text, name), name
    # the same spec renders byte-for-byte the same output
    again = pipeline.render_loaded(
        loaded, header_command="llmdeploy render s -o d", crds=None, force=True
    )
    assert again.files == result.files


# --- one typing rule: every value of an accepted spec has its schema type --------------------


@st.composite
def every_field(draw: st.DrawFn) -> dict[str, Any]:
    """A spec from ``specs()`` that also sets every other scalar the format has (either
    engine's section, SLOs, the rest of autoscaling, cluster, startup, network, monitoring)."""
    data = draw(specs())
    if draw(st.booleans()):
        data["engine"] = {
            "type": "vllm",
            "version": draw(st.sampled_from(["0.19.0", "0.11.2", "0.8.5"])),
            "enforceEager": draw(st.booleans()),
            "image": "vllm/vllm-openai:v0.19.0",
        }
    else:
        data["engine"] = {
            "type": "trtllm",
            "tritonVersion": "26.07",
            "artifactsS3Uri": "s3://engine-store/" + draw(DNS),
            "maxBatchSize": draw(st.integers(1, 256)),
            "maxInputLen": draw(st.integers(16, 2048)),
            "kvCacheFreeGpuMemFraction": draw(st.sampled_from([0.5, 0.9, 1])),
            "decoupled": draw(st.booleans()),
            "batchSchedulerPolicy": draw(
                st.sampled_from(["guaranteed_no_evict", "max_utilization"])
            ),
        }
    data["model"]["revision"] = draw(st.sampled_from(["main", "v1.0", "0123abcd"]))
    data["model"]["servedName"] = draw(st.sampled_from(["llama", "team/model"]))
    data["serving"]["maxNumBatchedTokens"] = draw(st.integers(2048, 16384))
    data["serving"]["chunkedPrefill"] = True
    data["slo"] = {
        "concurrentRequests": draw(st.integers(1, 500)),
        "inputTokens": draw(st.integers(1, 1024)),
        "outputTokens": draw(st.integers(1, 1024)),
        "ttftMs": draw(st.integers(1, 5000)),
        "itlMs": draw(st.integers(1, 500)),
    }
    data["autoscaling"] |= {
        "waitingRequestsPerReplica": draw(st.integers(1, 100)),
        "pollingInterval": draw(st.integers(1, 60)),
        "cooldownPeriod": draw(st.integers(0, 600)),
        "scaleDownStabilization": draw(st.integers(0, 600)),
        "prometheusAddress": "http://prometheus." + draw(DNS) + ":9090",
    }
    data["cluster"] |= {
        "discoveryTag": draw(DNS),
        "capacityTypes": draw(st.sampled_from([["on-demand"], ["spot", "on-demand"]])),
        "gpuLimit": draw(st.integers(1, 512)),
        "amiAlias": "al2023@v20251108",
        "rootVolumeGib": draw(st.integers(20, 500)),
        "expireAfter": draw(st.sampled_from(["720h", "Never", "24h30m"])),
    }
    data["startup"] = {
        "downloadGbps": draw(st.sampled_from([1, 2.5, 10])),
        "diskReadGbps": draw(st.sampled_from([4, 8.0])),
        "warmupSeconds": draw(st.integers(0, 900)),
        "safetyFactor": draw(st.sampled_from([1, 1.5, 2.0])),
    }
    data["monitoring"]["interval"] = draw(st.sampled_from(["15s", "500ms", "1m"]))
    data["monitoring"]["alerts"] = draw(st.booleans())
    data["monitoring"]["prometheus"] = draw(
        st.sampled_from(
            [
                {"flavor": "kube-prometheus", "namespace": "monitoring", "instance": "k8s"},
                {"flavor": "kube-prometheus-stack", "release": "kps", "namespace": "obs"},
                {
                    "flavor": "amazon-managed",
                    "workspaceId": "ws-0123abcd",
                    "region": "us-east-1",
                    "roleArn": "arn:aws:iam::111122223333:role/keda-amp",
                    "namespace": "agents",
                    "scraperLabels": {"app": "agent"},
                },
                {
                    "flavor": "custom",
                    "address": "http://vm.obs.svc:8481",
                    "namespace": "obs",
                    "scraperLabels": {"app": "vmagent"},
                },
            ]
        )
    )
    data["autoscaling"]["kedaNamespace"] = draw(DNS)
    data["autoscaling"]["fallback"] = {
        "failureThreshold": draw(st.integers(1, 10)),
        "replicas": draw(st.integers(1, 4)),
    }
    return data


Leaf = tuple[tuple[str | int, ...], Any]


def leaves(node: Any, path: tuple[str | int, ...] = ()) -> list[Leaf]:
    """Every scalar of a spec, with its path (list items included)."""
    if isinstance(node, dict) and node:
        return [leaf for key, value in node.items() for leaf in leaves(value, (*path, key))]
    if isinstance(node, list):
        return [leaf for i, value in enumerate(node) for leaf in leaves(value, (*path, i))]
    return [] if isinstance(node, dict) else [(path, node)]


def set_at(data: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node: Any = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


# One value of each YAML type; a leaf is replaced by one of another type.
OTHER_TYPES: list[Any] = [True, 7, 0.5, "12", "text", None, [1]]


@functools.cache
def schema_validator() -> Any:
    import jsonschema

    from llmdeploy.spec.sections import json_schema

    return jsonschema.Draft202012Validator(json_schema())


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=every_field(), pick=st.data())
def test_schema_and_loader_agree_on_every_value(data: dict[str, Any], pick: st.DataObject) -> None:
    """Any value of any field, replaced by a value of another YAML type: the loader accepts it
    only if the JSON Schema does, and when the schema refuses it the loader reports it at that
    value's own line and column. The fast path and ruamel read the file to the same Spec."""
    path, old = pick.draw(st.sampled_from(leaves(data)), label="leaf")
    choices = [v for v in OTHER_TYPES if type(v) is not type(old) and v != old]
    if isinstance(path[-1], int):  # a list item: a scalar (emit() writes flow lists)
        choices = [v for v in choices if not isinstance(v, list)]
    new = pick.draw(st.sampled_from(choices), label="replacement")
    mutated = set_at(data, path, new)
    text = emit(mutated)
    schema_ok = schema_validator().is_valid(mutated)
    try:
        load_spec_text(text, "spec.yaml")
    except SpecError as exc:
        event("refused")
        if not schema_ok:
            _, positions = parse_yaml(text, "spec.yaml")
            where = positions[path]
            assert any((d.line, d.column) == where for d in exc.diagnostics), (
                path,
                new,
                [f"{d.location()}: {d.message}" for d in exc.diagnostics],
            )
    else:
        event("accepted")
        assert schema_ok, f"the loader accepts {path}={new!r}, which the JSON Schema refuses"
    fast = fast_parse(text)
    if fast is not None:
        careful, _ = parse_yaml(text, "spec.yaml")
        assert _validated(fast) == _validated(careful)


def _validated(data: dict[str, Any]) -> object:
    from pydantic import ValidationError

    from llmdeploy.spec.sections import Spec

    try:
        return Spec.model_validate(data)
    except ValidationError as exc:
        return [(e["loc"], e["type"]) for e in exc.errors()]


NUMBERS = st.fixed_dictionaries(
    {
        "autoscaling": st.fixed_dictionaries(
            {
                "minReplicas": st.integers(1, 3),
                "maxReplicas": st.integers(3, 1000),
                "pollingInterval": st.integers(1, 3600),
                "cooldownPeriod": st.integers(0, 86_400),
                "scaleDownStabilization": st.integers(0, 3600),
                "waitingRequestsPerReplica": st.integers(1, 100_000),
            }
        ),
        "serving": st.fixed_dictionaries(
            {
                "maxModelLen": st.integers(16, 8192),
                "maxNumSeqs": st.integers(1, 65_536),
                "maxNumBatchedTokens": st.integers(8192, 10_485_760),
                "gpuMemoryUtilization": st.floats(0.5, 0.95).map(lambda f: round(f, 3)),
            }
        ),
        "cluster": st.fixed_dictionaries(
            {"gpuLimit": st.integers(1, 100_000), "rootVolumeGib": st.integers(20, 16384)}
        ),
    }
)


@PROPERTY
@given(numbers=NUMBERS)
def test_accepted_numbers_reach_the_output_unchanged(numbers: dict[str, Any]) -> None:
    data = copy.deepcopy(BASE)
    for section, values in numbers.items():
        data[section] = {**data.get(section, {}), **values}
    docs = render_text(emit(data))
    scaled = docs["ScaledObject"]["spec"]
    auto, serving, cluster = numbers["autoscaling"], numbers["serving"], numbers["cluster"]
    behavior = scaled["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert (scaled["minReplicaCount"], scaled["maxReplicaCount"]) == (
        auto["minReplicas"],
        auto["maxReplicas"],
    )
    assert (scaled["pollingInterval"], scaled["cooldownPeriod"]) == (
        auto["pollingInterval"],
        auto["cooldownPeriod"],
    )
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == auto["scaleDownStabilization"]
    assert scaled["triggers"][0]["metadata"]["threshold"] == str(auto["waitingRequestsPerReplica"])
    args = _args(docs)
    for flag, key in (
        ("--max-model-len", "maxModelLen"),
        ("--max-num-seqs", "maxNumSeqs"),
        ("--max-num-batched-tokens", "maxNumBatchedTokens"),
        ("--gpu-memory-utilization", "gpuMemoryUtilization"),
    ):
        assert flag_value(args, flag) == str(serving[key]), flag
    assert docs["NodePool"]["spec"]["limits"]["nvidia.com/gpu"] == cluster["gpuLimit"]
    volume = docs["EC2NodeClass"]["spec"]["blockDeviceMappings"][0]["ebs"]["volumeSize"]
    assert volume == f"{cluster['rootVolumeGib']}Gi"


# --- shell scripts: user strings stay one word, nothing they contain runs ---------------------

STUB = r"""#!/usr/bin/env bash
# Stand-in for a tool the generated scripts call: records its argv (NUL-separated, one file per
# call) and does the least the scripts need to carry on.
set -u
name="$(basename "$0")"
call="$(mktemp "$STUB_LOG/call.XXXXXX")"
printf '%s\0' "$name" "$@" >"$call"
case "$name" in
  python3) [[ "${1:-}" == "-c" ]] && echo "$STUB_TRTLLM" ;;
  nvidia-smi)
    if [[ " $* " == *" --list-gpus "* ]]; then
      for ((i = 0; i < STUB_GPUS; i++)); do echo "GPU $i: stub"; done
    else
      echo "$STUB_CAP"
    fi ;;
  hf | huggingface-cli)
    while (($#)); do
      if [[ "$1" == --local-dir ]]; then
        mkdir -p "$2" && touch "$2/tokenizer_config.json" "$2/config.json"
      fi
      shift
    done ;;
  aws) [[ "${STUB_AWS_FAIL:-0}" == 1 ]] && exit 1 ;;
esac
exit 0
"""
STUBBED = ("aws", "hf", "huggingface-cli", "python3", "nvidia-smi", "git", "trtllm-build", "mpirun")


def run_script(script: str, tmp: Path, aws_fails: bool = False) -> tuple[int, str, list[list[str]]]:
    """Run a generated bash script with stubbed tools and its absolute paths moved under tmp;
    return (exit code, stderr, argv of every stubbed call in order)."""
    bin_dir, log_dir = tmp / "bin", tmp / "log"
    bin_dir.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    stub = bin_dir / "stub"
    stub.write_text(STUB)
    stub.chmod(0o755)
    for name in STUBBED:
        if not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(stub)
    for root in ("/workspace", "/models", "/etc/llmdeploy", "/app"):
        moved = str(tmp / root.strip("/").replace("/", "-"))
        # only where a word (or an opening quote) starts, not "$examples"/models/...
        starts = r"(?:^|(?<=[\s=(':])|(?<=[\s=(]\")|(?<=^\"))"
        script = re.sub(starts + re.escape(root) + r"(?=[/\s'\"]|$)", moved, script, flags=re.M)
    # the example scripts the build looks for exist in the (moved) image paths
    for rel in re.findall(r"""\[\[ -f "\$1"/'?([^' \]]+)'? \]\]""", script):
        for examples in (tmp / "app" / "examples", tmp / "app-examples"):
            (examples / rel).parent.mkdir(parents=True, exist_ok=True)
            (examples / rel).touch()

    def constant(name: str, default: str) -> str:
        match = re.search(rf"^readonly {name}=(\S+)$", script, re.M)
        return match[1] if match else default

    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp),
        "HF_TOKEN": "stub",
        "STUB_LOG": str(log_dir),
        "STUB_TRTLLM": constant("EXPECTED_TRTLLM", "0"),
        "STUB_GPUS": constant("WORLD_SIZE", "1"),
        "STUB_CAP": constant("COMPUTE_CAP", "0"),
        "STUB_AWS_FAIL": "1" if aws_fails else "0",
    }
    path = tmp / "script.sh"
    path.write_text(script)
    proc = subprocess.run(
        ["bash", str(path)], cwd=tmp, env=env, capture_output=True, text=True, timeout=60
    )
    calls = [
        f.read_bytes().split(b"\0")[:-1]
        for f in sorted(log_dir.iterdir(), key=lambda f: f.stat().st_mtime_ns)
    ]
    return proc.returncode, proc.stderr, [[a.decode() for a in c] for c in calls]


def trtllm_scripts(tmp: Path, uri: str, model_id: str, revision: str) -> dict[str, str]:
    data = with_("engine", {"type": "trtllm", "artifactsS3Uri": uri})
    data["serviceAccount"] = {"iamRoleArn": "arn:aws:iam::111122223333:role/reader"}  # S3 reads
    data["model"]["id"] = model_id
    data["model"]["revision"] = revision
    loaded = load_spec_text(emit(data), "spec.yaml")
    result = pipeline.render_loaded(loaded, header_command="llmdeploy render s -o d", force=True)
    scripts = {name: text for name, text in result.files if name.endswith(".sh")}
    for name, text in result.files:
        if name == "configmap.yaml":
            config = parse_documents(text, name)[0][1]["data"]
            scripts |= {k: v for k, v in config.items() if k.endswith(".sh")}
    return scripts


@pytest.mark.parametrize(
    "inject",
    [
        ";touch${{IFS}}{canary};$(touch${{IFS}}{canary})`touch${{IFS}}{canary}`$HOME",
        "'\"q\\$(touch${{IFS}}{canary})'",
    ],
    ids=["substitution", "quotes"],
)
def test_trtllm_scripts_keep_user_strings_as_single_words(tmp_path: Path, inject: str) -> None:
    """S3 URIs (no whitespace allowed) and model ids carrying `$(...)`, backticks, `;` and quotes
    are passed to the tools as exactly one argument each, and nothing in them runs (bash is the
    parser under test; the tools are stubs that record their argv)."""
    canary = tmp_path / "PWNED"
    uri = "s3://model-store/x" + inject.format(canary=canary)
    model_id = f"org/m'$(touch {canary}) \"`touch {canary}`"
    revision = f"main$(touch {canary})"
    scripts = trtllm_scripts(tmp_path, uri, model_id, revision)
    assert {"build-engine.sh", "fetch-artifacts.sh"} <= set(scripts)
    for name, script in scripts.items():
        syntax = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        assert syntax.returncode == 0, f"{name}: {syntax.stderr}"

    code, err, calls = run_script(scripts["build-engine.sh"], tmp_path / "build")
    assert not canary.exists(), f"build-engine.sh ran a command from the spec\n{err}"
    assert code == 0, err
    downloads = [c for c in calls if c[0] in ("hf", "huggingface-cli")]
    assert downloads and downloads[0][2] == model_id and revision in downloads[0], downloads
    uploads = [a for c in calls if c[0] == "aws" for a in c if a.startswith("s3://")]
    assert uploads and all(a.startswith(uri + "/") for a in uploads), uploads

    for aws_fails in (False, True):
        work = tmp_path / f"fetch-{aws_fails}"
        code, err, calls = run_script(scripts["fetch-artifacts.sh"], work, aws_fails)
        assert not canary.exists(), f"fetch-artifacts.sh ran a command from the spec\n{err}"
        assert code == (1 if aws_fails else 0), err
        fetched = [a for c in calls if c[0] == "aws" for a in c if a.startswith("s3://")]
        assert fetched and all(a.startswith(uri + "/") for a in fetched), fetched
        if aws_fails:
            assert uri in err, "the error message should show the URI as written"


# --- labels, namespaces and names that Kubernetes would reject are refused up front --------------


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("monitoring.labels", {"release": "has space"}),
        ("monitoring.labels", {"release": "x" * 64}),
        ("monitoring.labels", {"bad key!": "v"}),
        ("network.clientNamespaces", ["Not_A_Namespace"]),
        ("monitoring.prometheus", {"flavor": "kube-prometheus", "namespace": "monitoring ns"}),
    ],
)
def test_values_kubernetes_rejects_are_spec_errors(path: str, value: object) -> None:
    """A spec the loader accepts must render manifests the API server accepts; otherwise the
    user gets exit 5 ("a bug in llmdeploy") for a typo in their own file."""
    text = emit(with_(path, value))
    with pytest.raises(SpecError):
        render_text(text)


def test_engine_image_latest_is_refused_as_documented() -> None:
    """spec.py's description of engine.image says `latest` is refused."""
    text = emit(with_("engine", {"type": "vllm", "image": "vllm/vllm-openai:latest"}))
    with pytest.raises(SpecError):
        load_spec_text(text, "spec.yaml")


# --- file names and output paths -----------------------------------------------------------------


@pytest.mark.parametrize(
    "filename",
    [
        "spec.yaml",
        "we ird'name.yaml",
        "new\nline.yaml",
        "nel\x85key: value.yaml",
        "ls\u2028key: value.yaml",
        "$(id).yaml",
        "-dash.yaml",
    ],
)
def test_hostile_spec_file_names_only_change_comments(tmp_path: Path, filename: str) -> None:
    """The spec's path lands in the generated header comment: whatever it contains, the
    documents parse to exactly what `spec.yaml` gives."""
    try:
        path = tmp_path / filename
        path.write_text(GOOD, encoding="utf-8")
    except (OSError, ValueError):
        pytest.skip("file system refuses this name")
    plain = tmp_path / "plain.yaml"
    plain.write_text(GOOD, encoding="utf-8")

    def docs_for(p: Path) -> list[object]:
        loaded = load_spec_file(p)
        res = pipeline.render_loaded(
            loaded, header_command=f"llmdeploy render {p} -o d", force=True
        )
        out: list[object] = []
        for name, text in res.files:
            if name.endswith(".yaml"):
                out += [doc for _, doc in parse_documents(text, name)]
        return out

    assert docs_for(path) == docs_for(plain)


def test_spec_name_never_escapes_the_output_directory(tmp_path: Path) -> None:
    """Fleet mode puts each spec in a subdirectory named after the spec: with names that are
    DNS labels nothing lands outside -o DIR."""
    specs_dir = tmp_path / "specs"
    specs_dir.mkdir()
    for name in ("a", "b"):
        (specs_dir / f"{name}.yaml").write_text(emit(with_("name", name)), encoding="utf-8")
    out = tmp_path / "work" / "deploy"
    out.parent.mkdir()
    before = {p for p in tmp_path.rglob("*")}
    result = CliRunner().invoke(app, ["render", str(specs_dir), "-o", str(out), "--force"])
    assert result.exit_code == 0, result.stderr
    created = {p for p in tmp_path.rglob("*")} - before
    assert created and all(p == out or out in p.parents for p in created), sorted(created)


def test_relative_output_outside_cwd_is_a_user_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "spec.yaml").write_text(GOOD, encoding="utf-8")
    monkeypatch.chdir(work)
    result = CliRunner().invoke(app, ["render", "spec.yaml", "-o", "../x", "--force"])
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "x" / "kustomization.yaml").is_file()


def test_symlinked_output_file_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "spec.yaml").write_text(GOOD, encoding="utf-8")
    out = tmp_path / "deploy"
    runner = CliRunner()
    assert (
        runner.invoke(
            app, ["render", str(tmp_path / "spec.yaml"), "-o", str(out), "--force"]
        ).exit_code
        == 0
    )
    (out / "deployment.yaml").unlink()
    (out / "deployment.yaml").symlink_to(victim)
    result = runner.invoke(app, ["render", str(tmp_path / "spec.yaml"), "-o", str(out), "--force"])
    assert result.exit_code == 7, (result.exit_code, result.stderr)
    assert victim.read_text() == "precious\n"


# --- the CLI never shows a traceback for a user error --------------------------------------------

MUTATIONS = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=30),
    st.sampled_from(
        [
            "\t",
            "  ",
            "- ",
            ": ",
            "&a ",
            "*a",
            "[",
            "{",
            "]",
            "}",
            "!!binary ",
            "<<: *a\n",
            "%YAML 1.1\n",
            "--- ",
            "... ",
            "'",
            '"',
            "? ",
            "\n",
        ]
    ),
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(position=st.integers(0, len(GOOD)), insert=MUTATIONS, delete=st.integers(0, 8))
def test_cli_mangled_specs_never_crash(
    tmp_path_factory: pytest.TempPathFactory, position: int, insert: str, delete: int
) -> None:
    text = GOOD[:position] + insert + GOOD[position + delete :]
    path = tmp_path_factory.mktemp("mangled") / "spec.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    result = CliRunner().invoke(app, ["render", str(path), "-o", "-"])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}"
    )
    assert result.exit_code in (0, 2, 3, 4, 7), (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    if result.exit_code == 3:
        assert re.search(r"^\S.*?(:\d+:\d+)?: error: ", result.stderr, re.M), result.stderr


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blob=st.binary(max_size=400))
def test_cli_random_bytes_never_crash(
    tmp_path_factory: pytest.TempPathFactory, blob: bytes
) -> None:
    path = tmp_path_factory.mktemp("bytes") / "spec.yaml"
    path.write_bytes(blob)
    result = CliRunner().invoke(app, ["render", str(path), "-o", "-"])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}"
    )
    assert result.exit_code in (2, 3, 7), (result.exit_code, result.stderr)


@pytest.mark.parametrize(
    "content",
    [
        b"x: " + b"[" * 20_000 + b"]" * 20_000 + b"\n",
        GOOD.encode() + b"serving:\n  maxNumSeqs: " + b"9" * 5000 + b"\n",
        b"\xff\xfe\x00\x00",
        b"a: &a [*a, *a]\nb: *a\n",
    ],
    ids=["deep", "bigint", "binary", "recursive"],
)
def test_cli_subprocess_prints_no_traceback(tmp_path: Path, content: bytes) -> None:
    """The real entry point (not CliRunner): stderr has a diagnostic, never a traceback."""
    path = tmp_path / "spec.yaml"
    path.write_bytes(content)
    env = {k: v for k, v in os.environ.items() if k != "LLMDEPLOY_CRD_DIR"}
    proc = subprocess.run(
        [sys.executable, "-m", "llmdeploy", "render", str(path), "-o", "-"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert "error:" in proc.stderr
    assert proc.stdout == ""


def test_debug_flag_is_the_only_way_to_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: [\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "llmdeploy", "--debug", "render", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr
