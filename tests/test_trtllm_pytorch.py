"""TensorRT-LLM's PyTorch-backend path (``engine.backend: pytorch``, trtllm-serve).

Each test encodes a rule of trtllm-serve or the LLM API with its source (docs/trtllm.md): every
rendered flag and YAML key is parsed back out of the manifests and checked against the version
table for the pinned TensorRT-LLM; probes, monitor and KEDA query are checked against the
endpoints and metric names that version serves.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from llmdeploy import pipeline
from llmdeploy.catalog import ec2
from llmdeploy.catalog.models import load_architecture
from llmdeploy.engines.trtllm import budget as trtllm_budget
from llmdeploy.engines.trtllm.flags import problem
from llmdeploy.engines.trtllm.spec import TrtllmEngine
from llmdeploy.errors import SpecError
from llmdeploy.sizing import gpu_memory
from llmdeploy.sizing.requests import size_spec
from llmdeploy.spec.checks import check_spec
from llmdeploy.spec.load import load_spec_text
from spec_helpers import merge

BASE: dict[str, Any] = {
    "apiVersion": "llmdeploy.dev/v1alpha1",
    "name": "llama33-70b",
    "model": {"id": "nvidia/Llama-3.3-70B-Instruct-FP8", "architecture": "llama-3.3-70b"},
    "engine": {"type": "trtllm", "backend": "pytorch", "maxBatchSize": 128},
    "quantization": "fp8",
    "hardware": {"instanceType": "p5.48xlarge", "tensorParallel": 4},
    "serving": {"maxModelLen": 16384},
    "cluster": {"name": "example-eks", "nodeRole": "KarpenterNodeRole-example-eks"},
}


def render(crds: object = None, **over: Any) -> dict[str, Any]:
    """Render BASE with overrides through the real pipeline; documents by file name."""
    loaded = load_spec_text(yaml.safe_dump(merge(BASE, over)), "spec.yaml")
    result = pipeline.render_loaded(loaded, header_command="llmdeploy render spec.yaml", crds=crds)
    assert result.report.ok
    out: dict[str, Any] = {"files": dict(result.files), "sizing": result.sizing}
    for name, doc in pipeline.yaml_documents(result.files):
        out[name] = doc
    return out


def server(out: dict[str, Any]) -> dict[str, Any]:
    (container,) = out["deployment.yaml"]["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def flag_pairs(words: list[str]) -> list[tuple[str, str | None]]:
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        assert words[i].startswith("--"), f"stray word {words[i]!r}"
        if i + 1 < len(words) and not words[i + 1].startswith("--"):
            pairs.append((words[i], words[i + 1]))
            i += 2
        else:
            pairs.append((words[i], None))
            i += 1
    return pairs


def options(out: dict[str, Any]) -> dict[str, Any]:
    text = out["configmap.yaml"]["data"]["extra-llm-api-options.yaml"]
    parsed = yaml.safe_load(text)
    assert isinstance(parsed, dict)
    return parsed


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat |= flatten(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def as_word(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


VARIANTS: dict[str, dict[str, Any]] = {
    "fp8-tp4": {},
    "fp8-kv-tp8": {"kvCacheDtype": "fp8", "hardware": {"tensorParallel": 8}},
    "16bit-g6e-tp2": {
        "model": {"id": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama-3.1-8b"},
        "quantization": "none",
        "hardware": {"instanceType": "g6e.12xlarge", "tensorParallel": 2},
        "serving": {"maxModelLen": 8192, "prefixCaching": False},
    },
    "16bit-a100-no-chunking": {
        "model": {"id": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama-3.1-8b"},
        "quantization": "none",
        "hardware": {"instanceType": "p4d.24xlarge", "tensorParallel": 1},
        "serving": {"maxModelLen": 8192, "chunkedPrefill": False},
    },
    "s3": {
        "model": {"loading": {"mode": "s3", "s3Uri": "s3://bucket/llama", "hfTokenSecret": None}}
    },
    "pvc": {"model": {"loading": {"mode": "pvc", "pvcName": "weights"}}},
}


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest, crds: object) -> dict[str, Any]:
    return render(crds, **VARIANTS[request.param])


# --- the spec: which path, and fields that only mean something on one --------------------------


def section(**engine: Any) -> TrtllmEngine:
    return TrtllmEngine.model_validate({"type": "trtllm", **engine})


def test_the_path_defaults_by_version_and_keeps_old_specs_on_the_engine_path() -> None:
    assert section(artifactsS3Uri="s3://bucket/x").path == "engine"  # every existing spec
    assert section(version="1.2.1").path == "pytorch"  # a release image is pinned
    assert section(backend="pytorch").path == "pytorch"
    assert section(
        backend="engine", tritonVersion="26.03", artifactsS3Uri="s3://bucket/x"
    ).path == ("engine")


@pytest.mark.parametrize(
    ("engine", "wrong"),
    [
        ({"backend": "pytorch", "artifactsS3Uri": "s3://bucket/x"}, ["artifactsS3Uri"]),
        ({"version": "1.2.1", "tritonVersion": "26.07"}, ["tritonVersion"]),
        (
            {"backend": "pytorch", "maxInputLen": 4096, "decoupled": False},
            ["maxInputLen", "decoupled"],
        ),
        ({"backend": "pytorch", "buildJob": {"enabled": False}}, ["buildJob"]),
        ({"backend": "engine", "version": "1.2.1", "artifactsS3Uri": "s3://bucket/x"}, ["version"]),
    ],
)
def test_a_field_of_the_other_path_is_an_error_at_its_line(
    engine: dict[str, Any], wrong: list[str]
) -> None:
    data = merge(BASE, {})
    data["engine"] = {"type": "trtllm", **engine}
    text = yaml.safe_dump(data)
    with pytest.raises(SpecError) as err:
        check_spec(load_spec_text(text, "spec.yaml"))
    diags = [d for d in err.value.diagnostics if d.severity == "error"]
    assert sorted(str(d.field) for d in diags) == sorted(f"engine.{key}" for key in wrong)
    lines = text.splitlines()
    for d in diags:
        key = str(d.field).split(".")[-1]
        at = next(i for i, line in enumerate(lines, 1) if line.strip().startswith(f"{key}:"))
        assert d.line in (at, at + 1), d  # the key, or the first line of its mapping


def test_the_engine_path_still_needs_its_s3_prefix() -> None:
    data = merge(BASE, {})
    data["engine"] = {"type": "trtllm", "backend": "engine"}
    with pytest.raises(SpecError) as err:
        check_spec(load_spec_text(yaml.safe_dump(data), "spec.yaml"))
    (diag,) = [d for d in err.value.diagnostics if d.severity == "error"]
    assert diag.field == "engine.artifactsS3Uri" and diag.line is not None


@pytest.mark.parametrize("version", ["1.1.0", "1.3.0", "1.3.0rc29", "1.4.0rc1", "0.21.0"])
def test_versions_outside_the_verified_line_are_refused_at_engine_version(version: str) -> None:
    text = yaml.safe_dump(merge(BASE, {"engine": {"version": version}}))
    with pytest.raises(SpecError) as err:
        load_spec_text(text, "s.yaml")
    (diag,) = err.value.diagnostics
    # the half-open range said as it is: 1.3.0 itself is outside it (NVIDIA/TensorRT-LLM
    # PR #12545 renames every Prometheus metric in 1.3; engines/trtllm/releases.py)
    assert "verified for 1.2.x (1.2.0 or later, before 1.3.0) only" in diag.message
    assert "up to 1.3.0" not in diag.message and version in diag.message
    assert diag.source_line is not None and diag.source_line.strip().startswith("version:")


# --- every flag and key against the table of the pinned version ------------------------------


def test_every_rendered_flag_and_key_is_accepted_by_the_pinned_version(
    variant: dict[str, Any],
) -> None:
    c = server(variant)
    version = c["image"].rsplit(":", 1)[1]
    assert c["command"] == ["trtllm-serve"]
    model, *flags = c["args"]
    assert not model.startswith("-") and model != "serve"  # 0.17/0.18 have no subcommand
    pairs = flag_pairs(flags)
    for flag, value in pairs:
        assert problem("trtllm-serve", flag, value, version) is None, (flag, value)
    assert len({f for f, _ in pairs}) == len(pairs), "a flag given twice"
    for key, value in flatten(options(variant)).items():
        assert problem("llm-api", key, as_word(value), version) is None, (key, value)


def test_the_table_refuses_what_1_2_does_not_take() -> None:
    for flag, value in [
        ("--served_model_name", "x"),
        ("--config", "f.yaml"),
        ("--revision", "main"),
        ("--backend", "trt"),
        ("--max_output_len", "2048"),
    ]:
        assert problem("trtllm-serve", flag, value, "1.2.1") is not None, flag
    for key, value in [
        ("cuda_graph_config.padding_enabled", "true"),
        ("use_cuda_graph", "true"),
        ("pytorch_backend_config.use_cuda_graph", "false"),
        ("kv_cache_config.dtype", "int8"),
        ("max_output_len", "2048"),
    ]:
        assert problem("llm-api", key, value, "1.2.1") is not None, key
    # older releases: no YAML file before 0.19, no Prometheus endpoint before 1.1
    assert problem("trtllm-serve", "--extra_llm_api_options", "f", "0.18.2") is not None
    assert problem("llm-api", "return_perf_metrics", "true", "1.0.0") is not None
    assert problem("llm-api", "cuda_graph_config.enable_padding", "true", "0.21.0") is not None
    # and the engine tools keep their own range
    assert problem("trtllm-build", "--max_seq_len", "8192", "1.2.1") is None
    assert problem("trtllm-serve", "--tp_size", "4", "1.3.0") is not None


def test_yaml_keys_follow_the_flags_they_replace(variant: dict[str, Any]) -> None:
    """serve.py applies the YAML after the flags, so a kv_cache_config section there replaces
    the one --kv_cache_free_gpu_memory_fraction built: the fraction must live in the YAML."""
    flags = dict(flag_pairs(server(variant)["args"][1:]))
    assert "--kv_cache_free_gpu_memory_fraction" not in flags
    opts = options(variant)
    assert opts["kv_cache_config"]["free_gpu_memory_fraction"] == 0.9
    assert flags["--host"] == "0.0.0.0"  # trtllm-serve binds localhost by default
    assert flags["--backend"] == "pytorch"
    assert flags["--extra_llm_api_options"].startswith("/etc/llmdeploy/")


# --- multi-GPU ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_ranks_start_inside_trtllm_serve_with_shared_memory_for_them(tp: int, crds: object) -> None:
    """The LLM API spawns its TP ranks (MpiPoolSession) when not started by mpirun; the pod asks
    for exactly TP GPUs and a memory-backed /dev/shm for NCCL and the MPI queues."""
    out = render(crds, hardware={"tensorParallel": tp})
    c = server(out)
    assert c["command"] == ["trtllm-serve"]
    assert dict(flag_pairs(c["args"][1:]))["--tp_size"] == str(tp)
    assert c["resources"]["limits"]["nvidia.com/gpu"] == str(tp)
    text = out["files"]["deployment.yaml"]
    assert "mpirun" not in text and "trtllm-llmapi-launch" not in text
    pod = out["deployment.yaml"]["spec"]["template"]["spec"]
    (shm,) = [v for v in pod["volumes"] if v["name"] == "dshm"]
    assert shm["emptyDir"]["medium"] == "Memory"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["OMPI_MCA_btl_vader_single_copy_mechanism"] == "none"
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}  # hence no CMA


# --- health, metrics, autoscaling ----------------------------------------------------------------


def test_probes_monitor_and_scaler_use_what_trtllm_serve_1_2_serves(crds: object) -> None:
    out = render(crds)
    c = server(out)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/health", "port": "http"}, probe
    (endpoint,) = out["servicemonitor.yaml"]["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/prometheus/metrics")
    # /prometheus/metrics is mounted only when return_perf_metrics is true (mount_metrics)
    assert options(out)["return_perf_metrics"] is True
    (trigger,) = out["scaledobject.yaml"]["spec"]["triggers"]
    query = trigger["metadata"]["query"]
    assert re.fullmatch(
        r'sum\(rate\(request_queue_time_seconds_sum\{namespace="llm-serving",'
        r'pod=~"llama33-70b-\[a-z0-9\]\+-\[a-z0-9\]\+"\}\[\d+s\]\)\)',
        query,
    ), query


@pytest.mark.parametrize(("interval", "window"), [("15s", 60), ("30s", 120), ("1m", 240)])
def test_the_rate_window_holds_several_scrapes(interval: str, window: int, crds: object) -> None:
    out = render(crds, monitoring={"interval": interval})
    (trigger,) = out["scaledobject.yaml"]["spec"]["triggers"]
    assert trigger["metadata"]["query"].endswith(f"[{window}s]))")


def test_the_queue_regex_selects_the_deployments_pods_only() -> None:
    """ReplicaSet pods are <deployment>-<hash>-<suffix>; another deployment's name that shares
    the prefix, and the engine-build Job's pods, must not match."""
    pattern = re.compile("llama33-70b-[a-z0-9]+-[a-z0-9]+")
    assert pattern.fullmatch("llama33-70b-6d9f7c5b8-x2k9q")
    assert not pattern.fullmatch("llama33-70b-large-6d9f7c5b8-x2k9q")
    assert not pattern.fullmatch("llama33-70b-build-1a2b3c4d5e-x2k9q")


# --- checkpoints --------------------------------------------------------------------------------


def test_a_16bit_checkpoint_is_not_quantized_at_load(crds: object) -> None:
    """The PyTorch backend loads a checkpoint as stored: fp8 needs an FP8 repo, and the error
    names the one the catalog knows."""
    with pytest.raises(SpecError) as err:
        render(
            crds, model={"id": "meta-llama/Llama-3.3-70B-Instruct", "architecture": "llama-3.3-70b"}
        )
    (diag,) = err.value.diagnostics
    assert "cannot quantize a 16-bit checkpoint to fp8" in diag.message
    assert diag.hint is not None and "nvidia/Llama-3.3-70B-Instruct-FP8" in diag.hint
    assert diag.source_line is not None and diag.source_line.startswith("quantization:")


def test_compressed_tensors_checkpoints_are_not_offered_on_1_2(crds: object) -> None:
    ct = "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic"
    with pytest.raises(SpecError) as err:
        render(crds, model={"id": ct, "architecture": ct})
    assert "compressed-tensors" in err.value.diagnostics[0].message


def test_fp8_needs_fp8_tensor_cores(crds: object) -> None:
    with pytest.raises(SpecError) as err:
        render(crds, hardware={"instanceType": "p4d.24xlarge", "tensorParallel": 8})
    assert [d.field for d in err.value.diagnostics] == ["quantization"]
    with pytest.raises(SpecError) as err:
        render(
            crds,
            model={"id": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama-3.1-8b"},
            quantization="none",
            kvCacheDtype="fp8",
            hardware={"instanceType": "p4d.24xlarge", "tensorParallel": 1},
        )
    assert [d.field for d in err.value.diagnostics] == ["kvCacheDtype"]


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"model": {"revision": "main"}}, "--revision"),
        ({"serving": {"chunkedPrefill": False, "maxNumBatchedTokens": 4096}}, "chunkedPrefill"),
    ],
)
def test_what_trtllm_serve_1_2_cannot_do_is_refused(
    over: dict[str, Any], needle: str, crds: object
) -> None:
    with pytest.raises(SpecError) as err:
        render(crds, **over)
    assert needle in " ".join(d.message for d in err.value.diagnostics)


def test_a_served_name_is_a_warning_trtllm_serve_1_2_has_no_flag_for_it() -> None:
    loaded = load_spec_text(yaml.safe_dump(merge(BASE, {"model": {"servedName": "x"}})), "s.yaml")
    (warning,) = check_spec(loaded)
    assert warning.severity == "warning" and warning.field == "model.servedName"
    assert "--served_model_name" in warning.message


def test_a_revision_is_fine_when_the_files_are_staged(crds: object) -> None:
    out = render(
        crds,
        model={
            "revision": "abc123",
            "loading": {"mode": "s3", "s3Uri": "s3://bucket/m", "hfTokenSecret": None},
        },
    )
    assert server(out)["args"][0] == "/models/model"
    env = {e["name"]: e.get("value") for e in server(out)["env"]}
    assert env["HF_HUB_OFFLINE"] == "1"


# --- sizing ---------------------------------------------------------------------------------------


def _sizing(**over: Any) -> Any:
    loaded = load_spec_text(yaml.safe_dump(merge(BASE, over)), "spec.yaml")
    return size_spec(loaded.spec, suggest=False)


def test_pytorch_budget_is_the_fraction_of_total_minus_the_profiled_peak() -> None:
    s = _sizing()
    peak = s.weights_gib_per_gpu + s.activation_gib + s.non_torch_gib + s.cudagraph_gib
    free = s.gpu_total_gib - gpu_memory.CUDA_CONTEXT_GIB - peak
    assert s.kv_cache_gib_per_gpu == pytest.approx(0.9 * free, abs=0.01)
    assert s.cudagraph_gib > 0 and s.block_size == trtllm_budget.TOKENS_PER_BLOCK
    assert s.engine_version == "1.2.1"
    half = _sizing(engine={"kvCacheFreeGpuMemFraction": 0.45})
    assert half.kv_cache_gib_per_gpu == pytest.approx(s.kv_cache_gib_per_gpu / 2, abs=0.01)


def test_the_pytorch_budget_is_chosen_by_the_same_switch_as_the_plan() -> None:
    """Same model and GPU: the PyTorch backend also loses CUDA-graph memory before the KV pool."""
    arch = load_architecture("llama-3.1-8b")
    inst = ec2.instance("p5.48xlarge")
    assert inst is not None
    common = {
        "model": {"id": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama-3.1-8b"},
        "quantization": "none",
        "hardware": {"instanceType": "p5.48xlarge", "tensorParallel": 1},
    }
    pytorch = _sizing(**common)
    engine = _sizing(
        **common, engine={"type": "trtllm", "backend": "engine", "artifactsS3Uri": "s3://bucket/x"}
    )
    assert engine.engine == pytorch.engine == "trtllm" and arch.name == "llama-3.1-8b"
    assert engine.cudagraph_gib == 0 < pytorch.cudagraph_gib
    assert pytorch.kv_cache_gib_per_gpu < engine.kv_cache_gib_per_gpu
    assert any("PyTorch backend" in a for a in pytorch.assumptions)
    assert not any("PyTorch backend" in a for a in engine.assumptions)


@settings(max_examples=30, deadline=None)
@given(tokens=st.sampled_from([2048, 4096, 8192, 16384, 32768]))
def test_a_larger_profiling_batch_never_leaves_more_kv(tokens: int) -> None:
    smaller = _sizing(serving={"maxModelLen": 16384, "maxNumBatchedTokens": tokens})
    larger = _sizing(serving={"maxModelLen": 16384, "maxNumBatchedTokens": tokens * 2})
    assert larger.kv_cache_gib_per_gpu <= smaller.kv_cache_gib_per_gpu


# --- the preset ---------------------------------------------------------------------------------


def test_the_70b_preset_serves_the_modelopt_fp8_checkpoint_on_p5(crds: object) -> None:
    path = pipeline.preset_path("llama33-70b-trtllm-fp8-p5")
    assert path is not None
    loaded = load_spec_text(path.read_text(encoding="utf-8"), "preset", path)
    result = pipeline.render_loaded(loaded, header_command="x", crds=crds)
    files = dict(result.files)
    assert "job.yaml" not in files and "build-engine.sh" not in files  # no engine build
    docs = dict(pipeline.yaml_documents(result.files))
    (c,) = docs["deployment.yaml"]["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "nvcr.io/nvidia/tensorrt-llm/release:1.2.1"
    assert c["args"][0] == "nvidia/Llama-3.3-70B-Instruct-FP8"
    assert result.sizing.fits and result.sizing.quantization == "modelopt fp8"
    assert result.sizing.instance is not None and result.sizing.instance.name == "p5.48xlarge"
