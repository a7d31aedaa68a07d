"""Tests for llmdeploy.vllm_args: the version-aware table of vLLM server flags."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmdeploy.engines.vllm import flags as va
from llmdeploy.engines.vllm.flags import (
    API_SERVER_COMMAND,
    DEFAULT_VLLM_VERSION,
    FLAGS,
    SERVE_COMMAND,
    UnsupportedFlagError,
    build_args,
    command_for,
    metric_name,
    parse_version,
)
from llmdeploy.errors import UnsupportedVersionError

MODEL = "meta-llama/Llama-3.1-8B-Instruct"

# Sample values that every release accepts for the value flags.
SAMPLE_VALUES: Mapping[str, object] = {
    "host": "0.0.0.0",
    "port": 8000,
    "uvicorn_log_level": "warning",
    "served_model_name": "llama",
    "revision": "main",
    "dtype": "bfloat16",
    "quantization": "fp8",
    "max_model_len": 8192,
    "download_dir": "/models",
    "tensor_parallel_size": 2,
    "pipeline_parallel_size": 1,
    "distributed_executor_backend": "mp",
    "nnodes": 2,
    "node_rank": 1,
    "master_addr": "llama-0.llama-0.llm-serving",
    "master_port": 29501,
    "gpu_memory_utilization": 0.9,
    "kv_cache_dtype": "fp8",
    "kv_cache_memory_bytes": 8 * 2**30,
    "swap_space": 4,
    "max_num_batched_tokens": 8192,
    "max_num_seqs": 256,
    "show_hidden_metrics_for_version": "0.10",
    "data_parallel_size": 2,
    "limit_mm_per_prompt": {"image": 2},
    "mm_encoder_tp_mode": "data",
}


def all_options(version: str, flag: bool) -> dict[str, object]:
    """Every option `version` supports: sample values, and `flag` for every boolean."""
    out: dict[str, object] = {}
    for key in va.supported_keys(version):
        spec = va.flag_spec(key, version)
        assert spec is not None
        out[key] = SAMPLE_VALUES[key] if spec.kind == "value" else flag
    return out


def option_words(version: str) -> set[str]:
    """Every option string the table allows for `version` (names and negative forms)."""
    words: set[str] = set()
    for key in FLAGS:
        spec = va.flag_spec(key, version)
        if spec is not None:
            words.add(spec.name)
            if spec.negative is not None:
                words.add(spec.negative)
    return words


def flag_tokens(args: tuple[str, ...]) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("-")]


# --- golden vectors -------------------------------------------------------------------------
# Each argument vector below was fed to that release's own parser (the wheel from PyPI, see the
# module docstring) and parsed to the intended values; the argv after the command is shown.
GOLDEN: list[tuple[str, va.Entrypoint | None, dict[str, object], tuple[str, ...]]] = [
    (
        "0.19.0",
        None,
        {
            "tensor_parallel_size": 4,
            "gpu_memory_utilization": 0.92,
            "max_model_len": 32768,
            "enable_chunked_prefill": True,
            "enable_prefix_caching": False,
            "kv_cache_dtype": "fp8",
            "host": "0.0.0.0",
            "port": 8000,
            "served_model_name": "llama",
            "enable_log_requests": False,
        },
        (
            MODEL,
            "--host", "0.0.0.0",
            "--port", "8000",
            "--no-enable-log-requests",
            "--served-model-name", "llama",
            "--max-model-len", "32768",
            "--tensor-parallel-size", "4",
            "--gpu-memory-utilization", "0.92",
            "--kv-cache-dtype", "fp8",
            "--no-enable-prefix-caching",
            "--enable-chunked-prefill",
        ),
    ),
    (
        "0.6.2",
        None,
        {
            "tensor_parallel_size": 4,
            "enable_chunked_prefill": True,
            "enable_prefix_caching": False,
            "enforce_eager": True,
            "disable_log_requests": True,
            "swap_space": 0,
        },
        (
            "--model", MODEL,
            "--disable-log-requests",
            "--enforce-eager",
            "--tensor-parallel-size", "4",
            "--swap-space", "0",
            "--enable-chunked-prefill",
        ),
    ),
    (
        "0.8.4",
        "serve",
        {"enable_chunked_prefill": False, "disable_custom_all_reduce": True},
        (MODEL, "--disable-custom-all-reduce", "--enable-chunked-prefill=false"),
    ),
    (
        "0.8.5",
        "serve",
        {"enable_chunked_prefill": False, "disable_custom_all_reduce": False},
        (MODEL, "--no-disable-custom-all-reduce", "--no-enable-chunked-prefill"),
    ),
    (
        "0.33.0",
        "serve",
        {
            "enable_prefix_caching": False,
            "enable_chunked_prefill": False,
            "disable_log_requests": True,
            "enforce_eager": False,
        },
        (
            MODEL,
            "--disable-log-requests",
            "--no-enforce-eager",
            "--disable-prefix-caching",
            "--disable-chunked-prefill",
        ),
    ),
    (
        "0.10.2",
        "api_server",
        {"kv_cache_memory_bytes": 4 * 2**30, "disable_log_requests": False},
        ("--model", MODEL, "--no-disable-log-requests", "--kv-cache-memory-bytes", "4294967296"),
    ),
    # data and expert parallelism, multimodal limits (the parser probes of each release:
    # --data-parallel-size 2, --enable-expert-parallel, --limit-mm-per-prompt '{"image": 2}',
    # --skip-mm-profiling, --mm-encoder-tp-mode data; image=2 refused from 0.8.5)
    (
        "0.19.0",
        None,
        {
            "tensor_parallel_size": 2,
            "data_parallel_size": 2,
            "enable_expert_parallel": True,
            "limit_mm_per_prompt": {"image": 2},
            "skip_mm_profiling": True,
            "mm_encoder_tp_mode": "data",
        },
        (
            MODEL,
            "--tensor-parallel-size", "2",
            "--data-parallel-size", "2",
            "--enable-expert-parallel",
            "--limit-mm-per-prompt", '{"image": 2}',
            "--skip-mm-profiling",
            "--mm-encoder-tp-mode", "data",
        ),
    ),
    (
        "0.8.4",
        None,
        {"limit_mm_per_prompt": {"video": 1, "image": 2}, "data_parallel_size": 2},
        (MODEL, "--data-parallel-size", "2", "--limit-mm-per-prompt", "image=2,video=1"),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("version", "entrypoint", "options", "expected"), GOLDEN)
def test_golden_vectors(
    version: str,
    entrypoint: va.Entrypoint | None,
    options: dict[str, object],
    expected: tuple[str, ...],
) -> None:
    assert build_args(version, MODEL, options, entrypoint) == expected


# --- the default version ----------------------------------------------------------------------


@pytest.mark.parametrize("flag", [True, False])
def test_every_flag_emitted_for_default_version_is_in_the_table(flag: bool) -> None:
    args = build_args(DEFAULT_VLLM_VERSION, MODEL, all_options(DEFAULT_VLLM_VERSION, flag))
    allowed = option_words(DEFAULT_VLLM_VERSION)
    emitted = flag_tokens(args)
    assert emitted, "nothing emitted"
    assert set(emitted) <= allowed
    assert args[0] == MODEL


def test_default_version_uses_vllm_serve() -> None:
    assert DEFAULT_VLLM_VERSION == "0.24.0"
    assert command_for(DEFAULT_VLLM_VERSION) == ("vllm", "serve")
    assert command_for(DEFAULT_VLLM_VERSION, "api_server") == API_SERVER_COMMAND


def test_default_version_supports_the_planner_flags() -> None:
    keys = set(va.supported_keys(DEFAULT_VLLM_VERSION))
    assert {
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "gpu_memory_utilization",
        "max_model_len",
        "max_num_batched_tokens",
        "max_num_seqs",
        "enable_chunked_prefill",
        "enable_prefix_caching",
        "kv_cache_dtype",
        "quantization",
        "enforce_eager",
        "enable_log_requests",
        "kv_cache_memory_bytes",
    } <= keys
    assert "swap_space" not in keys  # removed in 0.18.0
    assert "disable_log_requests" not in keys  # removed in 0.17.0


# --- booleans ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.6.2", "0.8.4", "0.8.5", "0.19.0", "0.33.0"])
def test_bool_true_renders_bare(version: str) -> None:
    args = build_args(version, MODEL, all_options(version, True))
    for i, word in enumerate(args):
        if word.startswith("--"):
            nxt = args[i + 1] if i + 1 < len(args) else ""
            assert nxt.lower() not in {"true", "false"}, (word, nxt)
    assert "--enable-chunked-prefill" in args


def test_false_forms_by_version() -> None:
    def prefix_false(v: str) -> tuple[str, ...]:
        return build_args(v, MODEL, {"enable_prefix_caching": False}, "serve")[1:]

    assert prefix_false("0.6.4") == ()  # store_true: False is the default
    assert prefix_false("0.6.5") == ("--no-enable-prefix-caching",)
    assert prefix_false("0.32.0") == ("--no-enable-prefix-caching",)
    assert prefix_false("0.33.0") == ("--disable-prefix-caching",)

    def chunked_false(v: str) -> tuple[str, ...]:
        return build_args(v, MODEL, {"enable_chunked_prefill": False}, "serve")[1:]

    assert chunked_false("0.6.2") == ("--enable-chunked-prefill=false",)
    assert chunked_false("0.8.4") == ("--enable-chunked-prefill=false",)
    assert chunked_false("0.8.5") == ("--no-enable-chunked-prefill",)


def test_bool_option_needs_a_bool() -> None:
    with pytest.raises(TypeError):
        build_args("0.19.0", MODEL, {"enforce_eager": "true"})
    with pytest.raises(TypeError):
        build_args("0.19.0", MODEL, {"enforce_eager": 1})


# --- entrypoints ---------------------------------------------------------------------------


def test_062_uses_api_server_with_model_option() -> None:
    assert command_for("0.6.2") == API_SERVER_COMMAND
    args = build_args("0.6.2", MODEL, {"enable_chunked_prefill": True})
    assert args == ("--model", MODEL, "--enable-chunked-prefill")


def test_serve_takes_model_positionally() -> None:
    for version in ("0.6.2", "0.7.0", "0.9.0", "0.19.0", "0.33.0"):
        args = build_args(version, MODEL, {}, "serve")
        assert args == (MODEL,)
        assert "--model" not in args
    assert command_for("0.7.0") == SERVE_COMMAND
    assert command_for("0.6.6.post1") == API_SERVER_COMMAND


def test_model_must_be_a_positional_word() -> None:
    with pytest.raises(ValueError, match="invalid model"):
        build_args("0.19.0", "--model", {})
    with pytest.raises(ValueError, match="invalid model"):
        build_args("0.19.0", "", {})


# --- ranges ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "options"),
    [
        ("0.19.0", {"swap_space": 4}),
        ("0.18.0", {"swap_space": 4}),
        ("0.19.0", {"disable_log_requests": True}),
        ("0.17.0", {"disable_log_requests": False}),
        ("0.6.2", {"enable_log_requests": True}),
        ("0.10.0", {"enable_log_requests": True}),
        ("0.6.2", {"kv_cache_memory_bytes": 2**30}),
        ("0.10.1", {"kv_cache_memory_bytes": 2**30}),
        ("0.7.3", {"enable_expert_parallel": True}),
        ("0.7.3", {"show_hidden_metrics_for_version": "0.7"}),
    ],
)
def test_flag_outside_its_range_raises(version: str, options: dict[str, object]) -> None:
    with pytest.raises(UnsupportedFlagError) as info:
        build_args(version, MODEL, options)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.version == version
    assert err.flag.startswith("--")
    assert err.reason


@pytest.mark.parametrize("key", ["nnodes", "node_rank", "master_port"])
def test_multinode_flags_first_in_0_11_1(key: str) -> None:
    """/work/notes/vllm-parallel-flags.md §2: 0.11.0 refuses all four, 0.11.1 takes them."""
    with pytest.raises(UnsupportedFlagError):
        build_args("0.11.0", MODEL, {key: 1})
    assert build_args("0.11.1", MODEL, {key: 1})[2] == "1"
    assert build_args("0.11.1", MODEL, {"master_addr": va.EnvRef("LWS_LEADER_ADDRESS")})[1:] == (
        "--master-addr",
        "$(LWS_LEADER_ADDRESS)",
    )


def test_headless_from_0_9_0() -> None:
    with pytest.raises(UnsupportedFlagError):
        build_args("0.8.5", MODEL, {"headless": True})
    assert build_args("0.9.0", MODEL, {"headless": True})[1:] == ("--headless",)
    with pytest.raises(ValueError):
        va.EnvRef("lws worker")  # not an environment variable name


def test_flag_range_edges() -> None:
    assert build_args("0.17.1", MODEL, {"swap_space": 4})[1:] == ("--swap-space", "4")
    assert build_args("0.16.0", MODEL, {"disable_log_requests": True})[1:] == (
        "--disable-log-requests",
    )
    assert build_args("0.10.1.1", MODEL, {"enable_log_requests": True})[1:] == (
        "--enable-log-requests",
    )
    assert build_args("0.8.0", MODEL, {"enable_expert_parallel": True})[1:] == (
        "--enable-expert-parallel",
    )


@pytest.mark.parametrize(
    ("version", "key", "value"),
    [
        ("0.24.0", "quantization", "gguf"),  # in-tree up to 0.23
        ("0.10.0", "quantization", "mxfp4"),  # first in 0.10.1
        ("0.19.0", "quantization", "fbgemm_fp8"),  # deprecated from 0.14
        ("0.19.0", "quantization", "no-such-method"),
        ("0.10.2", "kv_cache_dtype", "fp8_ds_mla"),  # first in 0.11.1
        ("0.19.0", "kv_cache_dtype", "nvfp4"),  # first in 0.20.0
        ("0.6.6", "distributed_executor_backend", "uni"),
        ("0.19.0", "dtype", "fp8"),
    ],
)
def test_value_outside_its_range_raises(version: str, key: str, value: str) -> None:
    with pytest.raises(UnsupportedFlagError):
        build_args(version, MODEL, {key: value})


def test_accepted_values() -> None:
    assert va.accepted_values("kv_cache_dtype", "0.6.2") == ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
    quant = va.accepted_values("quantization", "0.19.0")
    assert quant is not None
    assert {"fp8", "awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors"} <= set(quant)
    assert build_args("0.23.0", MODEL, {"quantization": "gguf"})[1:] == ("--quantization", "gguf")
    assert va.accepted_values("port", "0.19.0") is None


def test_unknown_key_raises() -> None:
    with pytest.raises(KeyError):
        build_args("0.19.0", MODEL, {"tensor_paralel_size": 2})
    with pytest.raises(KeyError):
        build_args("0.19.0", MODEL, {"model": MODEL})


# --- values ----------------------------------------------------------------------------------


def test_numbers_have_no_float_noise() -> None:
    def one(key: str, value: object) -> str:
        return build_args("0.19.0", MODEL, {key: value})[2]

    assert one("gpu_memory_utilization", 0.9) == "0.9"
    assert one("gpu_memory_utilization", 0.1 + 0.2) == "0.3"
    assert one("gpu_memory_utilization", 1) == "1"
    assert one("max_model_len", 8192) == "8192"
    assert build_args("0.17.1", MODEL, {"swap_space": 4.0})[2] == "4"
    with pytest.raises(TypeError):
        build_args("0.19.0", MODEL, {"max_model_len": 8192.0})
    with pytest.raises(TypeError):
        build_args("0.19.0", MODEL, {"max_model_len": True})
    with pytest.raises(ValueError, match="finite"):
        build_args("0.19.0", MODEL, {"gpu_memory_utilization": float("nan")})


def test_string_values() -> None:
    names = build_args("0.19.0", MODEL, {"served_model_name": ["a", "b"]})
    assert names[1:] == ("--served-model-name", "a", "b")
    dashed = build_args("0.19.0", MODEL, {"revision": "-rc"})
    assert dashed[1:] == ("--revision=-rc",)
    with pytest.raises(ValueError, match="starting with '-'"):
        build_args("0.19.0", MODEL, {"served_model_name": ["-a", "b"]})
    with pytest.raises(ValueError, match="empty"):
        build_args("0.19.0", MODEL, {"revision": ""})
    with pytest.raises(TypeError):
        build_args("0.19.0", MODEL, {"revision": 3})


def test_none_means_omit_and_order_is_the_tables() -> None:
    a = build_args("0.19.0", MODEL, {"port": 8000, "tensor_parallel_size": 2, "host": None})
    b = build_args("0.19.0", MODEL, {"tensor_parallel_size": 2, "port": 8000})
    assert a == b == (MODEL, "--port", "8000", "--tensor-parallel-size", "2")


# --- versions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.19.0", (0, 19, 0)),
        ("v0.19.0", (0, 19, 0)),
        ("0.8.5.post1", (0, 8, 5)),
        ("0.10.1.1", (0, 10, 1)),
        ("0.20.0rc1", (0, 20, 0)),
        ("0.19", (0, 19, 0)),
        ("0.19.0+cu128", (0, 19, 0)),
    ],
)
def test_parse_version(text: str, expected: tuple[int, int, int]) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize("text", ["", "latest", "nightly", "x0.19.0", "0"])
def test_parse_version_rejects(text: str) -> None:
    with pytest.raises(UnsupportedVersionError):
        parse_version(text)


def test_versions_older_than_the_table_are_refused() -> None:
    with pytest.raises(UnsupportedVersionError):
        command_for("0.5.5")
    with pytest.raises(UnsupportedVersionError):
        build_args("0.5.5", MODEL, {})


@pytest.mark.parametrize("version", ["0.33.1", "0.34.0", "0.99.0", "1.0.0"])
def test_versions_newer_than_the_newest_checked_release_are_refused(version: str) -> None:
    """Issue 23: no parser of a release after the newest checked one (0.33.0, PyPI's vllm
    wheels as dumped for CHECKED_VERSIONS) was run; 0.99.0 does not exist, and its image
    vllm/vllm-openai:v0.99.0 cannot be pulled."""
    with pytest.raises(UnsupportedVersionError) as err:
        build_args(version, MODEL, {})
    assert err.value.message == (
        f"vLLM {version} is newer than 0.33.0, the newest release whose parser llmdeploy "
        "checked: its flags are unknown, and a release that does not exist renders an image "
        "that cannot be pulled"
    )
    assert build_args(va.NEWEST_CHECKED_VERSION, MODEL, {})


# --- metrics ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.6.2", "vllm:gpu_cache_usage_perc"),
        ("0.9.1", "vllm:gpu_cache_usage_perc"),
        ("0.9.2", "vllm:kv_cache_usage_perc"),
        ("0.11.0", "vllm:kv_cache_usage_perc"),
        ("0.19.0", "vllm:kv_cache_usage_perc"),
        ("0.33.0", "vllm:kv_cache_usage_perc"),
    ],
)
def test_kv_usage_metric_rename(version: str, expected: str) -> None:
    assert metric_name(version, "kv_usage") == expected


@pytest.mark.parametrize("version", ["0.6.2", "0.19.0", "0.33.0"])
def test_queue_metrics_are_stable(version: str) -> None:
    assert metric_name(version, "waiting") == "vllm:num_requests_waiting"
    assert metric_name(version, "running") == "vllm:num_requests_running"


# --- the table itself ----------------------------------------------------------------------


def test_table_ranges_are_ordered_and_disjoint() -> None:
    for key, forms in FLAGS.items():
        assert forms, key
        names = {f.name for f in forms}
        assert len(names) == 1, key  # one flag per key; forms differ by kind or negative
        for form in forms:
            assert form.source, key
            assert parse_version(form.since) >= parse_version(va.OLDEST_SUPPORTED_VERSION)
            if form.until is not None:
                assert parse_version(form.since) < parse_version(form.until), key
        for earlier, later in itertools.pairwise(forms):
            assert earlier.until is not None, key
            assert parse_version(earlier.until) <= parse_version(later.since), key


def test_flagspec_checks_its_fields() -> None:
    with pytest.raises(ValueError, match="negative"):
        va.FlagSpec("--x", "bool_optional", "0.6.0", None, "src")
    with pytest.raises(ValueError, match="value_type"):
        va.FlagSpec("--x", "value", "0.6.0", None, "src")


def test_checked_versions_parse_and_cover_the_default() -> None:
    parsed = [parse_version(v) for v in va.CHECKED_VERSIONS]
    assert parsed == sorted(parsed)
    assert parse_version(DEFAULT_VLLM_VERSION) in parsed
    assert parse_version(va.NEWEST_CHECKED_VERSION) == max(parsed)


# --- properties ------------------------------------------------------------------------------

ENTRYPOINTS: tuple[va.Entrypoint, ...] = ("serve", "api_server")
versions = st.one_of(
    st.sampled_from(va.CHECKED_VERSIONS),
    st.builds(lambda m, p: f"0.{m}.{p}", st.integers(6, 33), st.integers(0, 3)).filter(
        lambda v: parse_version(v) <= parse_version(va.NEWEST_CHECKED_VERSION)
    ),
)
model_names = st.from_regex(r"[a-z][a-z0-9._-]{0,20}(/[a-zA-Z0-9._-]{1,30})?", fullmatch=True)


def _value_strategy(key: str, version: str) -> st.SearchStrategy[object]:
    spec = va.flag_spec(key, version)
    assert spec is not None
    if spec.kind != "value":
        return st.booleans()
    choices = va.accepted_values(key, version)
    if choices is not None:
        usable = [
            c
            for c in choices
            if not (
                key == "quantization"
                and c in va.DEPRECATED_QUANTIZATION_METHODS
                and va._in_ranges(parse_version(version), va.DEPRECATED_QUANTIZATION_METHODS[c])
            )
        ]
        return st.sampled_from(usable)
    if spec.value_type == "int":
        return st.integers(0, 2**40)
    if spec.value_type == "float":
        return st.floats(0, 64, allow_nan=False, allow_infinity=False)
    # free-text values are the user's; "true"/"false" there would be a real revision or name
    words = st.from_regex(r"[A-Za-z0-9_./:-]{1,20}", fullmatch=True).filter(
        lambda w: w.lower() not in {"true", "false"}
    )
    if spec.value_type == "str_list":
        return st.one_of(words, st.lists(words.filter(lambda w: w[0] != "-"), min_size=1))
    if spec.value_type in ("kv_map", "json_map"):
        modality = st.sampled_from(["image", "video", "audio"])
        return st.dictionaries(modality, st.integers(0, 64), min_size=1)
    return words


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, va.Entrypoint, dict[str, object]]:
    version = draw(versions)
    entrypoint = draw(st.sampled_from(ENTRYPOINTS))
    keys = draw(st.lists(st.sampled_from(va.supported_keys(version)), unique=True))
    options = {k: draw(_value_strategy(k, version)) for k in keys}
    return version, draw(model_names), entrypoint, options


@settings(max_examples=300, deadline=None)
@given(requests())
def test_property_no_bool_words_and_only_table_flags(
    req: tuple[str, str, va.Entrypoint, dict[str, object]],
) -> None:
    version, model, entrypoint, options = req
    args = build_args(version, model, options, entrypoint)
    assert "true" not in (a.lower() for a in args if a != model)
    assert "false" not in (a.lower() for a in args if a != model)
    allowed = option_words(version) | {"--model"}
    assert set(flag_tokens(args)) <= allowed
    if entrypoint == "serve":
        assert args[0] == model
    else:
        assert args[:2] == ("--model", model)


@settings(max_examples=200, deadline=None)
@given(versions, st.sampled_from(sorted(FLAGS)), st.booleans())
def test_property_unsupported_keys_raise(version: str, key: str, flag: bool) -> None:
    spec = va.flag_spec(key, version)
    value = flag if spec is None or spec.kind != "value" else SAMPLE_VALUES[key]
    if spec is None:
        with pytest.raises(UnsupportedFlagError):
            build_args(version, MODEL, {key: value})
    else:
        assert build_args(version, MODEL, {key: value})


def test_the_default_is_the_newest_release_with_flags_memory_and_performance_verified() -> None:
    """Issue 23: the default vLLM is the newest release that the repository verifies on all
    three counts: its parser was run (CHECKED_VERSIONS, which also dates the metric names),
    real start-ups calibrate its memory (tests/data/calibration/vllm-startup.yaml), and
    measured serving runs calibrate its performance (tests/data/perf/). 0.25.0-0.33.0 have
    checked flags only, so none of them can be the default."""
    import yaml

    data = Path(__file__).parent / "data"
    cases = yaml.safe_load((data / "calibration" / "vllm-startup.yaml").read_text())
    memory = {parse_version(str(c["vllm_version"])) for c in cases if c["vllm_version"]}
    served = set()
    for path in (data / "perf").glob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        rows = doc.get("serving", []) if isinstance(doc, dict) else doc
        served |= {
            parse_version(str(r["engine_version"]))
            for r in rows
            if r.get("engine") == "vllm" and r.get("measured", True)
        }
    flags = {parse_version(v) for v in va.CHECKED_VERSIONS}
    assert parse_version(DEFAULT_VLLM_VERSION) == max(flags & memory & served) == (0, 24, 0)
