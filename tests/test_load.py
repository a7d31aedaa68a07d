"""The load stage: located diagnostics, all errors in one pass, hostile YAML refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdeploy.errors import SpecError
from llmdeploy.spec.load import MAX_BYTES, load_spec_file, load_spec_text

GOOD = """\
apiVersion: llmdeploy.dev/v1alpha1
name: demo
model:
  id: meta-llama/Llama-3.1-8B-Instruct
  architecture: llama-3.1-8b
hardware:
  instanceType: g5.2xlarge
cluster:
  name: demo-eks
  nodeRole: KarpenterNodeRole-demo
"""


def diags(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec_text(text, "spec.yaml")
    return [f"{d.location()}: {d.message}" for d in info.value.diagnostics]


def test_good_spec_loads_with_defaults() -> None:
    spec = load_spec_text(GOOD, "spec.yaml").spec
    assert spec.name == "demo"
    assert spec.namespace == "llm-serving"
    assert spec.engine.type == "vllm"
    assert spec.hardware.tensor_parallel == 1


def test_misspelled_keys_and_enum_values_all_reported_with_positions() -> None:
    text = GOOD.replace(
        "  instanceType: g5.2xlarge", "  instanceType: g5.2xlarge\n  tensorParalel: 2"
    )
    text += "quantization: int4awq\n"
    out = diags(text)
    assert (
        "spec.yaml:8:3: unknown field 'tensorParalel' in `hardware` (did you mean "
        "'tensorParallel'?)" in out
    )
    assert any(o.startswith("spec.yaml:12:15:") and "did you mean 'int4-awq'" in o for o in out)
    assert len(out) == 2


def test_engine_type_typo_suggests_the_tag() -> None:
    out = diags(GOOD + "engine:\n  type: vlm\n")
    assert any("did you mean 'vllm'" in o for o in out), out


def test_unknown_field_inside_engine_union_is_located() -> None:
    out = diags(GOOD + "engine:\n  type: vllm\n  verison: 0.19.0\n")
    assert out == ["spec.yaml:13:3: unknown field 'verison' in `engine` (did you mean 'version'?)"]


def test_missing_required_field() -> None:
    out = diags(GOOD.replace("  nodeRole: KarpenterNodeRole-demo\n", ""))
    assert any("missing required field `cluster.nodeRole`" in o for o in out), out


def test_duplicate_keys_refused() -> None:
    out = diags(GOOD + "name: other\n")
    assert out and "duplicate key" in out[0] and out[0].startswith("spec.yaml:11:")


def test_tabs_refused_with_position() -> None:
    out = diags(GOOD.replace("  nodeRole", "\tnodeRole"))
    assert out[0].startswith("spec.yaml:10:1: tab character")


def test_yaml_bomb_refused() -> None:
    lines = ["apiVersion: llmdeploy.dev/v1alpha1", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    out = diags("\n".join(lines) + "\n")
    assert "more than" in out[0] and "nodes" in out[0]


def test_non_utf8_and_huge_files_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(GOOD.encode() + b"namespace: caf\xe9\n")
    with pytest.raises(SpecError) as info:
        load_spec_file(bad)
    assert "not UTF-8" in info.value.diagnostics[0].message
    assert info.value.diagnostics[0].line == 11
    big = tmp_path / "big.yaml"
    big.write_text(GOOD + "#" * (MAX_BYTES + 1))
    with pytest.raises(SpecError) as info2:
        load_spec_file(big)
    assert "limit" in info2.value.diagnostics[0].message


@pytest.mark.parametrize("value", ["Yes", "a: b", "{{ x }}", "x\ny", "$(rm -rf /)", "a" * 41])
def test_names_with_yaml_or_shell_meaning_are_refused_as_names(value: str) -> None:
    import json

    out = diags(GOOD.replace("\nname: demo\n", f"\nname: {json.dumps(value)}\n"))
    assert any("DNS-1123" in o or "at most 40" in o for o in out), out


def test_not_a_mapping_and_multiple_documents() -> None:
    assert "a spec is a YAML mapping" in diags("- a\n- b\n")[0]
    assert "exactly one YAML document" in diags(GOOD + "---\n" + GOOD)[0]


def test_wrong_api_version_is_reported() -> None:
    out = diags(GOOD.replace("llmdeploy.dev/v1alpha1", "llmdeploy.dev/v2"))
    assert any("apiVersion" in o for o in out)


@pytest.mark.parametrize("value", ["yes", "1e3", "no", "0x10"])
def test_quoted_yaml_lookalikes_stay_strings(value: str) -> None:
    spec = load_spec_text(GOOD.replace("\nname: demo\n", f'\nname: "{value}"\n'), "s").spec
    assert spec.name == value


def test_unquoted_float_is_a_type_error_not_a_silent_string() -> None:
    out = diags(GOOD.replace("\nname: demo\n", "\nname: 1e3\n"))
    assert out[0] == "spec.yaml:2:7: `name`: expected a string, got 1000.0 (a number)"


# --- the libyaml fast path agrees with the ruamel path whenever it answers -------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from llmdeploy.spec.fast_yaml import fast_parse  # noqa: E402
from llmdeploy.spec.load import parse_yaml  # noqa: E402

SCALARS = [
    "=",
    "|#",
    ">#",
    "[]",
    "{}",
    "0.19.0",
    "26.07",
    "v20251108",
    "1_000",
    "0755",
    "0x1F",
    "0o17",
    "0b101",
    "2024-01-01",
    "1:30",
    ".5",
    "+1",
    "-1",
    "1e3",
    "1E3",
    "1.",
    "1.e3",
    "-.inf",
    ".nan",
    "0",
    "-0",
    "007",
    "720h",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "~",
    "null",
    "Null",
    "true",
    "False",
    "TRUE",
    "abc",
    "a b",
    "12e",
    "3.0.1-rc1",
    "1,000",
    "@x",
    "`x",
    "'q'",
    '"d"',
    "0.9",
    "1.5e-3",
]


def _plain_equal(a: object, b: object) -> bool:
    return (type(a) is type(b) and a == b) or (
        isinstance(a, float) and isinstance(b, float) and a != a and b != b
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SCALARS) | st.text(max_size=12), min_size=1, max_size=6))
def test_fast_path_reads_every_scalar_as_ruamel_does(values: list[str]) -> None:
    import json

    lines = ["apiVersion: llmdeploy.dev/v1alpha1"]
    for i, v in enumerate(values):
        lines.append(f"k{i}: {v}")
        lines.append(f"q{i}: {json.dumps(v)}")
    text = "\n".join(lines) + "\n"
    where: dict[tuple[str | int, ...], tuple[int, int]] = {}
    fast = fast_parse(text, where)
    if fast is None:
        return
    try:
        slow, positions = parse_yaml(text, "s.yaml")
    except SpecError:
        pytest.fail(f"fast path accepted what ruamel refuses: {text!r}")
    assert where in ({}, positions), text  # {}: an empty value, positions left to ruamel
    assert fast.keys() == slow.keys()
    for key in fast:
        sv = slow[key]
        sv = int(sv) if type(sv).__name__.endswith("Int") else sv
        sv = float(sv) if type(sv).__name__ == "ScalarFloat" else sv
        assert _plain_equal(fast[key], sv), (key, fast[key], slow[key], text)


_KEYS = st.sampled_from(["a", "b", "engine", "extraArgs", "x-y", "k 1", "'q'"])
_LEAVES = st.sampled_from(["1", "v", '"two words"', "'s'", "[]", "{}", "[1, x]", "{k: v}", "~"])


def _block(depth: int) -> st.SearchStrategy[list[str]]:
    """Lines of a block mapping or sequence (indent 0), with nested blocks, flow collections,
    comments, blank lines and plain scalars that continue on the next line."""
    value = _LEAVES.map(lambda v: [v])
    if depth > 0:
        nested = _block(depth - 1).map(lambda ls: ["", *("  " + ln for ln in ls)])
        value = value | nested | _LEAVES.map(lambda v: [v + " # note"])
        value = value | st.just(["long", "  words continued"])

    def entry(key: str, lines: list[str], seq: bool) -> list[str]:
        head = "-" if seq else f"{key}:"
        first, rest = lines[0], lines[1:]
        if seq and first == "" and rest:  # a mapping item of a sequence starts on its dash
            return [f"- {rest[0].strip()}", *rest[1:]]
        return [f"{head} {first}".rstrip(), *rest]

    mapping = st.lists(st.tuples(_KEYS, value), min_size=1, max_size=4, unique_by=lambda t: t[0])
    seq = st.lists(value, min_size=1, max_size=3)
    as_map = mapping.map(lambda kv: [ln for k, v in kv for ln in entry(k, v, False)])
    as_seq = seq.map(lambda vs: [ln for v in vs for ln in entry("", v, True)])
    return as_map | as_seq if depth < 3 else as_map


@settings(max_examples=300, deadline=None)
@given(_block(3), st.booleans())
def test_fast_path_positions_are_ruamels(lines: list[str], comment: bool) -> None:
    """Where the fast path reads a spec, it records the same line and column for every key and
    value as ruamel does, so a note on a spec it read is placed where the careful path would."""
    text = ("# a spec\n\n" if comment else "") + "\n".join(lines) + "\n"
    where: dict[tuple[str | int, ...], tuple[int, int]] = {}
    if fast_parse(text, where) is None:
        return
    _, positions = parse_yaml(text, "s.yaml")
    assert where in ({}, positions), text  # {}: an empty value, positions left to ruamel


def test_an_empty_value_leaves_the_positions_to_ruamel() -> None:
    # ruamel places `k:`'s null on the next node's line, libyaml after the colon
    where: dict[tuple[str | int, ...], tuple[int, int]] = {}
    assert fast_parse("apiVersion: v\nk:\nq: 1\n", where) == {"apiVersion": "v", "k": None, "q": 1}
    assert where == {}
    assert parse_yaml("apiVersion: v\nk:\nq: 1\n", "s.yaml")[1][("k",)] == (3, 1)
    assert fast_parse("apiVersion: v\nq: 1\n", where) is not None
    assert where == {("apiVersion",): (1, 13), ("apiVersion", "<key>"): (1, 1), ("q",): (2, 4),
                     ("q", "<key>"): (2, 1)}  # fmt: skip


def test_fast_path_positions_on_every_shipped_spec() -> None:
    repo = Path(__file__).resolve().parents[1]
    files = [*repo.glob("presets/*.yaml"), *repo.glob("tests/golden/*/spec.yaml")]
    files += [*repo.glob("docs/**/*.yaml"), *repo.glob("tests/data/**/*.yaml")]
    read = 0
    for path in sorted(files):
        text = path.read_text()
        where: dict[tuple[str | int, ...], tuple[int, int]] = {}
        if fast_parse(text, where) is None:
            continue
        read += 1
        assert where == parse_yaml(text, path.name)[1], path
    assert read >= 40  # the presets and goldens at least


def test_fast_path_is_taken_for_the_presets() -> None:
    from llmdeploy import pipeline

    for name in pipeline.preset_names():
        path = pipeline.preset_path(name)
        assert path is not None
        assert fast_parse(path.read_text()) is not None, name


@pytest.mark.parametrize(
    ("yaml_value", "what"),
    [
        ('name: "demo\\n"', "DNS-1123"),
        ('monitoring:\n  labels:\n    release: "kps\\n"', "label"),
        ('hardware:\n  instanceType: "g5.2xlarge\\n"', "instance type"),
    ],
)
def test_a_trailing_newline_is_not_a_valid_name(yaml_value: str, what: str) -> None:
    # Python's `$` also matches before a final newline: the spec's checks use fullmatch.
    text = GOOD.replace("\nname: demo\n", "\n").replace(
        "hardware:\n  instanceType: g5.2xlarge\n", ""
    )
    if not yaml_value.startswith("hardware"):
        text += "hardware:\n  instanceType: g5.2xlarge\n"
    if not yaml_value.startswith("name"):
        text += "name: demo\n"
    out = diags(text + yaml_value + "\n")
    assert any(what in o for o in out), out
