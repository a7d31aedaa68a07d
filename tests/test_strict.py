"""Strict input (issue 12): each wrong value is refused with its exact message at its own
FILE:LINE:COL, the other field of a conflict is a located note, no credential is rendered,
`size` and `render` run one validation path, and a field the engine does not use is reported.

Every case changes one thing in a valid spec. The properties (schema and loader agree on every
value's type; accepted numbers reach the output unchanged) are in ``test_hostile.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from llmdeploy import pipeline
from llmdeploy.cli.commands import app
from llmdeploy.errors import Diagnostic, SpecError
from llmdeploy.spec import load
from llmdeploy.spec.load import load_spec_text
from test_load import GOOD

VLLM = GOOD  # test_load.py: the 8B spec on a g5.2xlarge, ten lines
TRTLLM = VLLM.replace(
    "hardware:\n", "engine:\n  type: trtllm\n  artifactsS3Uri: s3://model-store/demo\nhardware:\n"
)  # the hardware section starts on line 9


# Two replicas on one-GPU nodes: no warning about a node expiry taking the only replica, so
# the tests below see only the diagnostics they are about (appended last: no line moves).
TWO_NODES = "autoscaling:\n  minReplicas: 2\n"


def located(text: str) -> list[str]:
    """`file:line:col: severity: message` of every diagnostic, loading and checking the spec the
    way `size` and `render` do."""
    try:
        loaded = load_spec_text(text, "spec.yaml")
        found: tuple[Diagnostic, ...] = pipeline.size_loaded(loaded).warnings
    except SpecError as exc:
        found = exc.diagnostics
    return [f"{d.location()}: {d.severity}: {d.message}" for d in found]


def only(text: str) -> Diagnostic:
    with pytest.raises(SpecError) as info:
        pipeline.size_loaded(load_spec_text(text, "spec.yaml"))
    (diagnostic,) = info.value.diagnostics
    return diagnostic


# --- one typing rule: a value has its JSON Schema type exactly ---------------------------------

TYPES = [
    (
        "autoscaling:\n  maxReplicas: true\n",
        "spec.yaml:12:16: error: `autoscaling.maxReplicas`: expected an integer, got true "
        "(a boolean)",
    ),
    (
        'autoscaling:\n  maxReplicas: "12"\n',
        "spec.yaml:12:16: error: `autoscaling.maxReplicas`: expected an integer, got the string "
        "'12'",
    ),
    (
        "autoscaling:\n  maxReplicas: 12.0\n",
        "spec.yaml:12:16: error: `autoscaling.maxReplicas`: expected an integer, got 12.0 "
        "(a number)",
    ),
    (
        "serving:\n  gpuMemoryUtilization: true\n",
        "spec.yaml:12:25: error: `serving.gpuMemoryUtilization`: expected a number, got true "
        "(a boolean)",
    ),
    (
        'serving:\n  gpuMemoryUtilization: "0.9"\n',
        "spec.yaml:12:25: error: `serving.gpuMemoryUtilization`: expected a number, got the "
        "string '0.9'",
    ),
    (
        "serving:\n  prefixCaching: 1\n",
        "spec.yaml:12:18: error: `serving.prefixCaching`: expected true or false, got 1 "
        "(an integer)",
    ),
    (
        'serving:\n  prefixCaching: "yes"\n',
        "spec.yaml:12:18: error: `serving.prefixCaching`: expected true or false, got the "
        "string 'yes'",
    ),
    (
        "startup:\n  downloadGbps: false\n",
        "spec.yaml:12:17: error: `startup.downloadGbps`: expected a number, got false (a boolean)",
    ),
    (
        "network:\n  clientNamespaces: [team-a, 7]\n",
        "spec.yaml:12:30: error: `network.clientNamespaces.1`: expected a string, got 7 "
        "(an integer)",
    ),
    (
        "cluster:\n  name: demo-eks\n  nodeRole: KarpenterNodeRole-demo\n  gpuLimit: yes\n",
        "spec.yaml:12:13: error: `cluster.gpuLimit`: expected an integer, got the string 'yes'",
    ),
]


@pytest.mark.parametrize(("extra", "expected"), TYPES)
def test_values_of_the_wrong_type_are_refused_where_they_are(extra: str, expected: str) -> None:
    text = VLLM + extra
    if extra.startswith("cluster:"):
        text = VLLM.replace("cluster:\n  name: demo-eks\n  nodeRole: KarpenterNodeRole-demo\n", "")
        text = text + "\n" + extra
    assert located(text) == [expected]


def test_a_number_where_a_number_is_expected_and_an_integer_for_a_number() -> None:
    spec = load_spec_text(VLLM + "serving:\n  gpuMemoryUtilization: 1\n", "s").spec
    assert spec.serving.gpu_memory_utilization == 1.0
    assert isinstance(spec.serving.gpu_memory_utilization, float)


def test_type_errors_carry_a_hint_that_fixes_them() -> None:
    assert only(VLLM + 'autoscaling:\n  maxReplicas: "12"\n').hint == (
        "remove the quotes: a number is written unquoted"
    )
    assert only(VLLM + 'serving:\n  prefixCaching: "yes"\n').hint == (
        "write true or false, unquoted"
    )
    assert only(VLLM.replace("name: demo\n", "name: 1e3\n")).hint == (
        "quote the value: YAML reads it unquoted as a number or boolean"
    )


# --- tags ------------------------------------------------------------------------------------


def test_an_explicit_str_tag_makes_a_string() -> None:
    text = VLLM.replace("  architecture:", "  revision: !!str 0x1F\n  architecture:")
    text = text.replace("name: demo\n", "name: !!str demo\n")
    spec = load_spec_text(text, "spec.yaml").spec
    assert spec.model.revision == "0x1F"
    assert spec.name == "demo"
    args = pipeline.render_loaded(
        load_spec_text(text, "spec.yaml"), header_command="llmdeploy render", force=True
    )
    deployment = dict(args.files)["deployment.yaml"]
    assert '- "--revision"\n            - "0x1F"\n' in deployment


@pytest.mark.parametrize(
    ("value", "tag"),
    [
        ("!!binary ZGVtby1la3M=", "!!binary"),
        ("!!timestamp 2024-01-01", "!!timestamp"),
        ('!!int "7"', "!!int"),
        ("!!python/name:os.system", "!!python/name:os.system"),
        ("!shell x", "!shell"),
        ("! demo", "!"),
    ],
)
def test_other_tags_are_refused_at_the_tag(value: str, tag: str) -> None:
    text = VLLM.replace("  name: demo-eks", f"  name: {value}")
    assert located(text) == [
        f"spec.yaml:9:9: error: tag {tag!r} is not allowed in `cluster.name`: a spec holds only "
        "strings, numbers, booleans, lists and mappings"
    ]


def test_tags_on_collections_and_keys_are_refused_too() -> None:
    text = VLLM + "monitoring:\n  labels: !!omap\n    - a: b\n"
    assert located(text) == [
        "spec.yaml:12:11: error: tag '!!omap' is not allowed in `monitoring.labels`: a spec holds "
        "only strings, numbers, booleans, lists and mappings"
    ]
    keyed = VLLM + "monitoring:\n  labels:\n    !!binary cmVsZWFzZQ==: kps\n"
    assert located(keyed) == [
        "spec.yaml:13:5: error: tag '!!binary' is not allowed in `monitoring.labels`: a spec "
        "holds only strings, numbers, booleans, lists and mappings"
    ]


# --- no credential is ever rendered ----------------------------------------------------------

KEDA_HINT = (
    "keep credentials out of the URL: KEDA reads them from a TriggerAuthentication (authModes "
    "basic or bearer with a Secret; for Amazon Managed Prometheus, AWS SigV4 with podIdentity "
    "provider aws), https://keda.sh/docs/2.20/scalers/prometheus/"
)


@pytest.mark.parametrize(
    ("address", "problem", "masked"),
    [
        (
            "http://user:pass@prom:9090",
            "carries credentials before '@'",
            "http://***@prom:9090",
        ),
        (
            "https://token@prom.example",
            "carries credentials before '@'",
            "https://***@prom.example",
        ),
        (
            "http://prom:9090/?access_token=s3cr3t",
            "carries a credential in its query parameter 'access_token'",
            "http://prom:9090/?access_token=***",
        ),
    ],
)
def test_credentials_in_the_prometheus_address_are_refused_and_never_echoed(
    address: str, problem: str, masked: str
) -> None:
    d = only(VLLM + f"autoscaling:\n  prometheusAddress: {address}\n")
    assert d.location() == "spec.yaml:12:22"
    assert d.message == (
        f"`autoscaling.prometheusAddress`: the Prometheus address {problem}; "
        + ("it would" if "query" in problem else "they would")
        + " be rendered in plain text"
    )
    assert d.hint == KEDA_HINT
    assert d.source_line == f"  prometheusAddress: {masked}"
    assert "pass" not in d.message and "s3cr3t" not in d.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            VLLM.replace(
                "meta-llama/Llama-3.1-8B-Instruct", "https://user:hf_xyz@hub.example/llama"
            ),
            "spec.yaml:4:7: error: `model.id`: the model id carries credentials before '@'; "
            "they would be rendered in plain text",
        ),
        (
            VLLM.replace(
                "  architecture: llama-3.1-8b\n",
                "  architecture: llama-3.1-8b\n  loading:\n    mode: s3\n"
                "    s3Uri: s3://models/llama?X-Amz-Signature=abc\n",
            ),
            "spec.yaml:8:12: error: `model.loading.s3Uri`: the S3 URI carries a credential in its "
            "query parameter 'X-Amz-Signature'; it would be rendered in plain text",
        ),
        (
            TRTLLM.replace("s3://model-store/demo", "s3://model-store/demo?token=abc"),
            "spec.yaml:8:19: error: `engine.artifactsS3Uri`: the S3 URI carries a credential in "
            "its query parameter 'token'; it would be rendered in plain text",
        ),
    ],
)
def test_every_url_field_refuses_credentials(text: str, expected: str) -> None:
    assert located(text) == [expected]


# --- reserved labels ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["app.kubernetes.io/instance", "app.kubernetes.io/team"])
def test_labels_llmdeploy_sets_are_refused_at_the_key(key: str) -> None:
    d = only(VLLM + f"monitoring:\n  labels:\n    release: kps\n    {key}: other\n")
    assert f"{d.location()}: {d.message}" == (
        f"spec.yaml:14:5: `monitoring.labels`: label key {key!r} is reserved: llmdeploy sets the "
        "app.kubernetes.io/* labels on every object"
    )
    assert d.hint == "use a key of your own, such as `release` or `team`"


def test_every_label_on_a_monitor_that_llmdeploy_sets_is_reserved() -> None:
    from llmdeploy.spec.fields import RESERVED_LABEL_PREFIX

    rendered = pipeline.render_loaded(load_spec_text(VLLM, "s"), header_command="x", force=True)
    monitor = dict(rendered.files)["servicemonitor.yaml"]
    import yaml

    labels = yaml.safe_load(monitor.split("\n", 2)[2])["metadata"]["labels"]
    # besides the recommended labels, only the one the chosen Prometheus selects monitors by
    # (kube-prometheus-stack's `release`, the default flavour); a user label contradicting it is
    # refused at its line (tests/test_prometheus.py)
    assert labels and all(
        key.startswith(RESERVED_LABEL_PREFIX) or key == "release" for key in labels
    )


# --- errors at the field that is wrong, conflicts with a note at the other field ------------


def test_unknown_and_gpu_less_hardware_is_reported_at_the_hardware_field() -> None:
    assert located(VLLM.replace("g5.2xlarge", "m5.large")) == [
        "spec.yaml:7:17: error: `hardware.instanceType`: 'm5.large' is not a GPU instance type: "
        "llmdeploy's catalog has no family 'm5'"
    ]
    assert located(VLLM.replace("g5.2xlarge", "g5.12xlarg")) == [
        "spec.yaml:7:17: error: `hardware.instanceType`: 'g5.12xlarg' is not a size of the g5 "
        "family (did you mean 'g5.12xlarge'?)"
    ]
    assert located(VLLM.replace("instanceType: g5.2xlarge", "instanceFamily: g55")) == [
        "spec.yaml:7:19: error: `hardware.instanceFamily`: 'g55' is not a GPU instance family "
        "in llmdeploy's catalog (did you mean 'g5'?)"
    ]


def test_all_problems_of_a_file_are_reported_in_one_pass() -> None:
    text = VLLM.replace("g5.2xlarge", "m5.large").replace("llama-3.1-8b", "llama-9")
    assert located(text) == [
        "spec.yaml:5:17: error: unknown model architecture 'llama-9': not a catalog name, a "
        "known Hugging Face id, or a path to a config.json",
        "spec.yaml:7:17: error: `hardware.instanceType`: 'm5.large' is not a GPU instance type: "
        "llmdeploy's catalog has no family 'm5'",
    ]


def test_fp8_on_a_gpu_without_fp8_is_at_the_dtype_with_a_note_at_the_instance() -> None:
    text = TRTLLM.replace("g5.2xlarge", "g4dn.12xlarge") + "kvCacheDtype: fp8\nquantization: fp8\n"
    d_kv, d_quant = all_diagnostics(text)
    assert f"{d_kv.location()}: {d_kv.message}" == (
        "spec.yaml:14:15: `kvCacheDtype` fp8 needs an FP8 GPU (Ada, Hopper or newer)"
    )
    assert f"{d_quant.location()}: {d_quant.message}" == (
        "spec.yaml:15:15: `quantization` fp8 needs an FP8 GPU (Ada, Hopper or newer)"
    )
    for d in (d_kv, d_quant):
        (note,) = d.notes
        assert f"{note.location()}: {note.severity}: {note.message}" == (
            "spec.yaml:10:17: note: g4dn.12xlarge has NVIDIA T4, without FP8 support"
        )


def all_diagnostics(text: str) -> tuple[Diagnostic, ...]:
    with pytest.raises(SpecError) as info:
        pipeline.size_loaded(load_spec_text(text, "spec.yaml"))
    return info.value.diagnostics


def test_max_input_len_above_max_model_len_is_at_max_input_len() -> None:
    text = TRTLLM.replace("  artifactsS3Uri:", "  maxInputLen: 9000\n  artifactsS3Uri:")
    d = only(text + "serving:\n  maxModelLen: 8192\n")
    assert f"{d.location()}: {d.message}" == (
        "spec.yaml:8:16: `engine.maxInputLen` 9000 exceeds `serving.maxModelLen` 8192 "
        "(trtllm-build --max_seq_len counts prompt + output)"
    )
    (note,) = d.notes
    assert f"{note.location()}: {note.message}" == "spec.yaml:16:16: serving.maxModelLen is 8192"
    # a limit the file does not set is the default: the note says so and points nowhere
    (default,) = only(text).notes
    assert (default.line, default.message) == (None, "serving.maxModelLen is 8192 (the default)")


def test_a_conflict_prints_like_rustc(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    text = TRTLLM.replace("  artifactsS3Uri:", "  maxInputLen: 9000\n  artifactsS3Uri:")
    spec.write_text(text + "serving:\n  maxModelLen: 8192\n")
    result = CliRunner().invoke(app, ["size", str(spec)])
    assert result.exit_code == 3
    assert result.stderr == (
        f"{spec}:8:16: error: `engine.maxInputLen` 9000 exceeds `serving.maxModelLen` 8192 "
        "(trtllm-build --max_seq_len counts prompt + output)\n"
        "  8 |   maxInputLen: 9000\n"
        "    |                ^\n"
        f"    = note: {spec}:16:16: serving.maxModelLen is 8192\n"
        " 16 |   maxModelLen: 8192\n"
        "    |                ^\n"
        "    = hint: lower engine.maxInputLen, or raise serving.maxModelLen\n"
        "1 error in spec\n"
    )


# --- size and render: one validation path ---------------------------------------------------

REFUSED_BY_BOTH = {
    "fp8-kv-on-t4": TRTLLM.replace("g5.2xlarge", "g4dn.12xlarge") + "kvCacheDtype: fp8\n",
    "max-input-len": TRTLLM.replace("  artifactsS3Uri:", "  maxInputLen: 9000\n  artifactsS3Uri:"),
    "unknown-instance": VLLM.replace("g5.2xlarge", "g5.3xlarge"),
    "unknown-family": VLLM.replace("instanceType: g5.2xlarge", "instanceFamily: m7i"),
    "unknown-triton": TRTLLM.replace(
        "  artifactsS3Uri:", "  tritonVersion: '24.01'\n  artifactsS3Uri:"
    ),
    "old-vllm": VLLM.replace("hardware:", "engine:\n  type: vllm\n  version: 0.4.0\nhardware:"),
    "gmu-on-trtllm": TRTLLM + "serving:\n  gpuMemoryUtilization: 0.8\n",
    "pvc-on-trtllm": TRTLLM.replace(
        "  architecture: llama-3.1-8b\n",
        "  architecture: llama-3.1-8b\n  loading:\n    mode: pvc\n    pvcName: weights\n",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED_BY_BOTH))
def test_size_and_render_refuse_the_same_specs_the_same_way(tmp_path: Path, case: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(REFUSED_BY_BOTH[case])
    runner = CliRunner()
    sized = runner.invoke(app, ["size", str(spec)])
    rendered = runner.invoke(app, ["render", str(spec), "-o", str(tmp_path / "out")])
    assert (sized.exit_code, rendered.exit_code) == (3, 3), sized.stderr + rendered.stderr
    assert sized.stderr == rendered.stderr
    assert sized.stderr.startswith(f"{spec}:"), sized.stderr  # located: FILE:LINE:COL
    assert not (tmp_path / "out").exists()


# --- fields the engine does not use: an error or a warning, never silence --------------------


def test_a_memory_knob_trtllm_does_not_use_is_an_error_at_its_line() -> None:
    d = only(TRTLLM + "serving:\n  gpuMemoryUtilization: 0.8\n")
    assert f"{d.location()}: {d.message}" == (
        "spec.yaml:15:25: `serving.gpuMemoryUtilization` does not apply to engine trtllm: "
        "TensorRT-LLM gives the KV cache a fraction of the memory left free after loading, not "
        "of the total"
    )
    assert d.hint == "set engine.kvCacheFreeGpuMemFraction instead"


def test_a_name_triton_does_not_use_is_a_warning_that_render_and_size_print(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "spec.yaml"
    # the pods copy the engine from S3: they need an AWS identity (render refuses it otherwise)
    identity = "serviceAccount:\n  iamRoleArn: arn:aws:iam::111122223333:role/reader\n"
    spec.write_text(
        TRTLLM.replace("  architecture:", "  servedName: llama\n  architecture:")
        + TWO_NODES
        + identity
    )
    warning = (
        f"{spec}:5:15: warning: `model.servedName` does not apply to engine trtllm: Triton "
        "serves the model under its model-repository names (`ensemble`), and trtllm-serve up "
        "to 1.2.x has no --served_model_name (/v1/models reports the model argument)\n"
        " 5 |   servedName: llama\n"
        "   |               ^\n"
        "   = hint: remove it, or use engine.type vllm for a name of your choice\n"
    )
    runner = CliRunner()
    sized = runner.invoke(app, ["size", str(spec)])
    rendered = runner.invoke(app, ["render", str(spec), "-o", str(tmp_path / "out")])
    assert sized.exit_code == rendered.exit_code == 0
    assert sized.stderr == warning
    assert rendered.stderr.startswith(warning)


def test_chunked_prefill_off_on_vllm_v1_is_a_warning() -> None:
    assert located(VLLM + "serving:\n  chunkedPrefill: false\n" + TWO_NODES) == [
        "spec.yaml:12:19: warning: `serving.chunkedPrefill` false has no effect: vLLM 0.24.0 "
        "always chunks prefill (V1 engine, from 0.8.0)"
    ]
    assert located(VLLM + "serving:\n  chunkedPrefill: true\n" + TWO_NODES) == []


def test_ignored_fields_are_declared_by_the_engine_not_by_shared_code() -> None:
    from llmdeploy.engines import registry

    trtllm = registry.get("trtllm").ignored_fields
    assert trtllm["serving.gpuMemoryUtilization"].severity == "error"
    assert trtllm["model.servedName"].severity == "warning"
    shared = Path(load.__file__).parent / "checks.py"
    assert "trtllm" not in shared.read_text() and "vllm" not in shared.read_text()


# --- a misspelt required key -------------------------------------------------------------------


def test_a_misspelt_api_version_is_an_unknown_field_at_its_own_line() -> None:
    text = VLLM.replace("apiVersion:", "name2: x\napVersion:", 1)
    assert located(text) == [
        "spec.yaml:1:1: error: unknown field 'name2' (did you mean 'name'?)",
        "spec.yaml:2:1: error: unknown field 'apVersion' (did you mean 'apiVersion'?)",
    ]


def test_an_engine_without_type_names_the_missing_key() -> None:
    assert located(VLLM.replace("hardware:", "engine:\n  version: 0.19.0\nhardware:")) == [
        "spec.yaml:7:3: error: missing required field `engine.type` (one of 'vllm', 'trtllm')"
    ]


def test_a_file_that_is_not_a_spec_still_gets_one_error() -> None:
    assert located("foo: 1\nbar: 2\n") == ["spec.yaml:1:1: error: missing `apiVersion`"]
