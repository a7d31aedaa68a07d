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
    fast = fast_parse(text)
    if fast is None:
        return
    try:
        slow, _ = parse_yaml(text, "s.yaml")
    except SpecError:
        pytest.fail(f"fast path accepted what ruamel refuses: {text!r}")
    assert fast.keys() == slow.keys()
    for key in fast:
        sv = slow[key]
        sv = int(sv) if type(sv).__name__.endswith("Int") else sv
        sv = float(sv) if type(sv).__name__ == "ScalarFloat" else sv
        assert _plain_equal(fast[key], sv), (key, fast[key], slow[key], text)


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
