"""What the engine and the kubelet do with the workload llmdeploy renders, modelled from their
source and checked against the rendered manifests (docs/production.md §3, §8).

- vLLM's ``ModelConfig._verify_quantization`` decides whether the server starts with the
  rendered ``--quantization`` on the checkpoint the spec names;
- the kubelet evicts a pod whose ephemeral storage exceeds its limits, so the model cache must
  hold what the download writes;
- an HPA (KEDA's) owns ``spec.replicas``, so the Deployment must not carry it.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmdeploy import pipeline
from llmdeploy.catalog import models
from llmdeploy.errors import SpecError
from llmdeploy.sizing import memory as mem
from llmdeploy.spec import load

BASE = {
    "apiVersion": "llmdeploy.dev/v1alpha1",
    "name": "m",
    "cluster": {"name": "c", "nodeRole": "r"},
}
GIB = 2**30


def spec_text(**over: Any) -> str:
    data: dict[str, Any] = {**BASE, **over}
    return yaml.safe_dump(data, sort_keys=False)


def line_of(text: str, key: str) -> int:
    """1-based line of a top-level key in a spec made by :func:`spec_text`."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(f"{key}:"))


def render(crds: object = None, **over: Any) -> pipeline.Rendered:
    loaded = load.load_spec_text(spec_text(**over), "spec.yaml")
    return pipeline.render_loaded(loaded, header_command="t", crds=crds)


def docs_of(result: pipeline.Rendered) -> list[dict[str, Any]]:
    return [doc for _, doc in pipeline.yaml_documents(result.files)]


def one(result: pipeline.Rendered, kind: str) -> dict[str, Any]:
    (doc,) = [d for d in docs_of(result) if d["kind"] == kind]
    return doc


def server_args(result: pipeline.Rendered) -> list[str]:
    pod = one(result, "Deployment")["spec"]["template"]["spec"]
    args: list[str] = pod["containers"][0]["args"]
    return args


def flag_value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


# --- vLLM: --quantization against the checkpoint --------------------------------------------

# vllm/config/model.py@v0.19.0 (same logic in every release llmdeploy renders; 0.6.x had it in
# vllm/config.py), ModelConfig._verify_quantization: the method comes from the checkpoint's
# quantization_config; "override" methods may claim it first (awq_marlin for an AutoAWQ GEMM
# checkpoint when the user gave no flag, `marlin` or `awq_marlin`: awq_marlin.py
# override_quantization_method; gptq_marlin likewise); then a user value that differs raises
# "Quantization method specified in the model config (X) does not match the quantization method
# specified in the `quantization` argument (Y)."
MARLIN_OVERRIDE = {"awq": ("awq_marlin", {None, "marlin", "awq_marlin"})}
MARLIN_OVERRIDE["gptq"] = ("gptq_marlin", {None, "gptq_marlin"})


def vllm_verify_quantization(checkpoint_method: str | None, user: str | None) -> str | None:
    """The method vLLM runs with; ValueError where vLLM refuses to start."""
    if checkpoint_method is None:
        return user  # a 16-bit checkpoint: the flag (fp8) quantizes at load, or nothing
    method = checkpoint_method
    override = MARLIN_OVERRIDE.get(method)
    if override is not None and user in override[1]:
        method = user = override[0]
    if user is None:
        return method
    if user != method:
        raise ValueError(
            f"Quantization method specified in the model config ({method}) does not match the "
            f"quantization method specified in the `quantization` argument ({user})."
        )
    return method


def test_the_vllm_rule_as_modelled() -> None:
    assert vllm_verify_quantization(None, "fp8") == "fp8"
    assert vllm_verify_quantization("compressed-tensors", None) == "compressed-tensors"
    assert vllm_verify_quantization("awq", None) == "awq_marlin"
    assert vllm_verify_quantization("awq", "awq") == "awq"  # explicit awq: the slow kernel
    with pytest.raises(ValueError, match=r"model config \(compressed-tensors\) does not match"):
        vllm_verify_quantization("compressed-tensors", "fp8")  # the issue's RedHatAI case
    with pytest.raises(ValueError, match="does not match"):
        vllm_verify_quantization("awq", "fp8")


# The spec's `quantization` names how the weights are stored in GPU memory (the field's
# description): these are the checkpoint schemes (CheckpointQuant.method) each value admits.
# vLLM makes only FP8 from a 16-bit checkpoint at load (`--quantization fp8`).
WEIGHTS = {
    "fp8": {"fp8", "fp8-block"},
    "int8": {"int8"},
    "int4-awq": {"awq", "w4a16"},
    "int4-gptq": {"gptq", "w4a16"},
}
QUANTIZED = sorted(models._extra()["quantized_aliases"])  # every published repo the catalog has
CHECKPOINTS = [
    *((repo, repo) for repo in QUANTIZED),
    *((repo, models.quantized_checkpoint(repo).name) for repo in QUANTIZED),  # type: ignore[union-attr]
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
]
HARDWARE = {"instanceType": "p5.48xlarge", "tensorParallel": 4}
TP8 = {"llama-3.1-405b"}  # needs all eight H100s even in FP8
# MoE width 768 / TP4 = 192 is no whole 128 x 128 FP8 block (test_fp8_blocks_must_divide_...)
TP2 = {"qwen3-30b-a3b"}


@pytest.mark.parametrize("quantization", ["none", *sorted(WEIGHTS)])
@pytest.mark.parametrize(("model_id", "architecture"), CHECKPOINTS)
def test_rendered_quantization_flag_is_one_vllm_starts_with(
    model_id: str, architecture: str, quantization: str
) -> None:
    """Every (checkpoint, spec quantization) either renders flags vLLM starts with, running
    the weights the spec asked for, or is refused at the `quantization` line."""
    over = {
        "model": {"id": model_id, "architecture": architecture},
        "quantization": quantization,
        "hardware": HARDWARE,
        "serving": {"maxModelLen": 4096},
    }
    if models.load_architecture(architecture).name in TP8:
        over["hardware"] = {**HARDWARE, "tensorParallel": 8}
    if models.load_architecture(architecture).name in TP2:
        over["hardware"] = {**HARDWARE, "tensorParallel": 2}
    stored = models.load_architecture(architecture).quantization
    from_id = models.quantized_checkpoint(model_id)
    if stored is None and from_id is not None:
        stored = from_id.quantization  # the repo the server downloads
    if stored is None:
        workable = quantization in ("none", "fp8")
    else:
        workable = quantization == "none" or stored.method in WEIGHTS[quantization]
    try:
        result = render(**over)
    except SpecError as exc:
        (diag,) = exc.diagnostics
        assert diag.line == line_of(spec_text(**over), "quantization"), diag
        assert not workable, diag.message
        return
    assert workable
    user = flag_value(server_args(result), "--quantization")
    vllm_verify_quantization(stored.quant_method if stored else None, user)  # starts
    if stored is None:
        assert user == ("fp8" if quantization == "fp8" else None)
    else:
        assert user is None, "a pre-quantized checkpoint needs no --quantization"


def test_the_issue_case_fp8_dynamic_renders_without_the_flag() -> None:
    result = render(
        model={
            "id": "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",
            "architecture": "llama-3.3-70b",
        },
        quantization="fp8",
        hardware={"instanceType": "p5.48xlarge", "tensorParallel": 2},
    )
    assert "--quantization" not in server_args(result)
    assert result.sizing.quantization.startswith("compressed-tensors")


def test_runtime_fp8_of_a_16bit_checkpoint_keeps_the_flag() -> None:
    result = render(
        model={"id": "meta-llama/Llama-3.1-70B-Instruct", "architecture": "llama-3.1-70b"},
        quantization="fp8",
        hardware={"instanceType": "p5.48xlarge", "tensorParallel": 2},
    )
    assert flag_value(server_args(result), "--quantization") == "fp8"


def refusal(model_id: str, architecture: str) -> Any:
    """The one located diagnostic of an int4-awq spec on 4 x L40S."""
    with pytest.raises(SpecError) as info:
        render(
            model={"id": model_id, "architecture": architecture},
            quantization="int4-awq",
            hardware={"instanceType": "g6e.12xlarge", "tensorParallel": 4},
        )
    (diag,) = info.value.diagnostics
    return diag


def test_a_contradiction_is_a_located_spec_error_with_a_suggestion() -> None:
    diag = refusal("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b")
    assert (diag.file, diag.source_line, diag.column) == ("spec.yaml", "quantization: int4-awq", 15)
    assert "cannot quantize a 16-bit checkpoint to int4-awq" in diag.message
    assert diag.hint is not None and "Qwen/Qwen2.5-72B-Instruct-AWQ" in diag.hint


def test_a_published_repo_under_another_architecture_is_refused_at_the_architecture() -> None:
    diag = refusal("Qwen/Qwen2.5-72B-Instruct-AWQ", "llama-3-70b")
    assert diag.source_line is not None and "architecture: llama-3-70b" in diag.source_line


QWEN_FP8 = {
    "Qwen/Qwen3-8B-FP8": "qwen3-8b",
    "Qwen/Qwen3-14B-FP8": "qwen3-14b",
    "Qwen/Qwen3-32B-FP8": "qwen3-32b",
    "Qwen/Qwen3-30B-A3B-FP8": "qwen3-30b-a3b",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
}


@pytest.mark.parametrize(("repo", "base"), sorted(QWEN_FP8.items()))
def test_qwens_own_fp8_releases_are_catalogued(repo: str, base: str) -> None:
    """Qwen's FP8 repos store block FP8 (quant_method fp8, 128 x 128): vLLM reads the method
    from their config, so they render with no --quantization and no "may already be quantized"
    warning, sized as stored (about half the 16-bit base)."""
    arch = models.quantized_checkpoint(repo)
    assert arch is not None and arch.quantization is not None
    assert (arch.quantization.method, arch.quantization.group_size) == ("fp8-block", 128)
    assert arch.quantization.quant_method == "fp8"
    ratio = mem.checkpoint_bytes(arch) / mem.checkpoint_bytes(models.load_architecture(base))
    assert 0.5 < ratio < 0.6  # FP8 weights, 16-bit embeddings, norms and head
    if base == "qwen3-8b":
        result = render(
            model={"id": repo, "architecture": base},
            quantization="fp8",
            hardware={"instanceType": "g6e.xlarge", "tensorParallel": 1},
        )
        assert not [n for n in result.notices if n.key_path == "model.id"]
        assert flag_value(server_args(result), "--quantization") is None


@pytest.mark.parametrize(
    ("tp", "expert_parallel", "fits"), [(2, False, True), (4, False, False), (4, True, True)]
)
def test_fp8_blocks_must_divide_each_ranks_share(
    tp: int, expert_parallel: bool, fits: bool
) -> None:
    """vLLM refuses block FP8 weights whose per-rank output is not whole blocks ("The
    output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n
    = 128", vllm/model_executor/layers/quantization/fp8.py@v0.19.0 Fp8MoEMethod.create_weights;
    linear layers: utils/fp8_utils.py validate_fp8_block_shape). Qwen3-30B-A3B's experts are 768
    wide: TP2 gives 384 (3 blocks), TP4 192; expert parallelism keeps each expert whole."""
    text = spec_text(
        model={"id": "Qwen/Qwen3-30B-A3B-FP8", "architecture": "qwen3-30b-a3b"},
        quantization="fp8",
        hardware={"instanceType": "g6e.12xlarge", "tensorParallel": tp},
        serving={"expertParallel": expert_parallel},
    )
    sizing = pipeline.size_loaded(load.load_spec_text(text, "spec.yaml")).sizing
    assert sizing.fits is fits
    reason = (
        "MoE intermediate size 768 / TP 4 = 192 is not a multiple of the fp8-block group size 128"
    )
    assert (reason in sizing.reasons) is not fits


def test_an_unknown_repo_is_an_assumption_not_a_guess_in_silence() -> None:
    result = render(
        model={"id": "example-org/Llama-3.1-8B-Instruct-FP8", "architecture": "llama-3.1-8b"},
        quantization="fp8",
        hardware={"instanceType": "g6e.xlarge", "tensorParallel": 1},
    )
    (notice,) = [n for n in result.notices if n.key_path == "model.id"]
    assert notice.severity == "warning"
    assert "may already be quantized" in notice.message


# --- published quantized checkpoints keep their own geometry -------------------------------


def test_qwen25_72b_awq_at_tp4_on_4x_l40s_renders() -> None:
    """Qwen/Qwen2.5-72B-Instruct-AWQ pads intermediate_size 29568 -> 29696 (its config.json),
    so each TP4 shard (7424) is 58 whole AWQ groups of 128; the 16-bit base's 7392 is not."""
    repo = models.quantized_checkpoint("Qwen/Qwen2.5-72B-Instruct-AWQ")
    assert repo is not None and repo.intermediate_size == 29696
    assert (29696 // 4) % 128 == 0 and (29568 // 4) % 128 != 0
    for architecture in ("Qwen/Qwen2.5-72B-Instruct-AWQ", "qwen2.5-72b"):
        result = render(
            model={"id": "Qwen/Qwen2.5-72B-Instruct-AWQ", "architecture": architecture},
            quantization="int4-awq",
            hardware={"instanceType": "g6e.12xlarge", "tensorParallel": 4},
        )
        assert result.sizing.fits and "--quantization" not in server_args(result)
        assert flag_value(server_args(result), "--tensor-parallel-size") == "4"


# --- the kubelet: ephemeral storage -----------------------------------------------------------

# Bytes of weight files as published (model.safetensors.index.json "total_size", indexed copies
# of both repos; shared notes cluster-facts §10). Their `original/` folder (consolidated .pth)
# is as large again and is never downloaded: vLLM's LoadConfig.ignore_patterns defaults to
# ["original/**/*"] (vllm/config/load.py@v0.19.0) and the S3 sync excludes "original/*".
PUBLISHED_BYTES = {"llama-3.1-70b": 141_107_412_992, "llama-3.1-8b": 16_060_522_496}
TOKENIZER_AND_CONFIG = 100 * 2**20  # tokenizer.json, config.json, generation_config.json, ...


@pytest.mark.parametrize(("name", "size"), sorted(PUBLISHED_BYTES.items()))
def test_checkpoint_bytes_match_the_published_index(name: str, size: int) -> None:
    assert mem.checkpoint_bytes(models.load_architecture(name)) == size


# DeepSeek-V3's weight files as published (688,586,727,753 B at afb92e1f, creator repository
# weight files only), 685B parameters with the 14B multi-token-prediction module
# (model.layers.61); its FP8 block layout is modelled, so the match is to 0.01 %.
DEEPSEEK_V3_BYTES = 688_586_727_753


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-r1"])
def test_deepseek_checkpoint_holds_the_mtp_module_gpus_do_not(name: str) -> None:
    """The MTP layer is in the files (download, cache, fetch deadline, read time) and not in
    GPU memory: vLLM skips it when it loads the served model (deepseek_v2.py@v0.19.0
    load_weights, "skip spec decode layers for main model")."""
    arch = models.load_architecture(name)
    assert arch.mtp_layers == 1
    stored = mem.checkpoint_bytes(arch)
    assert abs(stored - DEEPSEEK_V3_BYTES) / DEEPSEEK_V3_BYTES < 1e-4
    without = mem.checkpoint_bytes(dataclasses.replace(arch, mtp_layers=0))
    assert 14e9 < stored - without < 16e9  # about 14B parameters, mostly FP8 experts
    assert (stored - without) / stored > 0.02  # what the cache and deadlines were short


def quantity(q: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    for suffix, factor in units.items():
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * factor)
    return int(q)


def kubelet_evicts(pod: dict[str, Any], written: dict[str, int]) -> list[str]:
    """The kubelet's local-storage eviction checks (pkg/kubelet/eviction/eviction_manager.go,
    localStorageEviction; https://kubernetes.io/docs/concepts/storage/ephemeral-storage/): an
    emptyDir past its sizeLimit ("Usage of EmptyDir volume %q exceeds the limit %q."), and the
    pod's emptyDirs plus its containers' usage past the sum of the containers' limits ("Pod
    ephemeral local storage usage exceeds the total limit of containers %s."). Memory-backed
    emptyDirs count as memory, not here. ``written``: bytes per volume name (and "logs")."""
    reasons = []
    disk = {
        v["name"]: v["emptyDir"]
        for v in pod["volumes"]
        if "emptyDir" in v and v["emptyDir"].get("medium") != "Memory"
    }
    for name, empty_dir in disk.items():
        if "sizeLimit" in empty_dir and written.get(name, 0) > quantity(empty_dir["sizeLimit"]):
            reasons.append(f"Usage of EmptyDir volume {name!r} exceeds the limit")
    limits = [c["resources"].get("limits", {}).get("ephemeral-storage") for c in pod["containers"]]
    total_limit = sum(quantity(x) for x in limits if x)
    used = sum(written.get(name, 0) for name in disk) + written.get("logs", 0)
    if any(limits) and used > total_limit:
        reasons.append("Pod ephemeral local storage usage exceeds the total limit of containers")
    return reasons


def test_kubelet_model_evicts_what_it_should() -> None:
    pod = {
        "volumes": [{"name": "models", "emptyDir": {"sizeLimit": "92Gi"}}],
        "containers": [{"resources": {"limits": {"ephemeral-storage": "122Gi"}}}],
    }
    # the issue's case: runtime FP8 sized from FP8 weights, the 16-bit download is ~131 GiB
    assert kubelet_evicts(pod, {"models": PUBLISHED_BYTES["llama-3.1-70b"]})
    assert not kubelet_evicts(pod, {"models": 60 * GIB, "logs": GIB})
    assert kubelet_evicts(pod, {"models": 92 * GIB, "logs": 31 * GIB})  # the pod-level sum


@pytest.mark.parametrize("mode", ["huggingface", "s3"])
@pytest.mark.parametrize(
    ("architecture", "model_id", "quantization", "hardware"),
    [
        ("llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct", "fp8", ("p5.48xlarge", 2)),
        ("llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct", "none", ("p4de.24xlarge", 4)),
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", "none", ("g5.xlarge", 1)),
    ],
)
def test_the_model_cache_holds_the_download_and_the_pod_is_not_evicted(
    architecture: str, model_id: str, quantization: str, hardware: tuple[str, int], mode: str
) -> None:
    loading: dict[str, Any] = {"mode": mode}
    if mode == "s3":
        loading["s3Uri"] = "s3://models/llama"
    result = render(
        model={"id": model_id, "architecture": architecture, "loading": loading},
        quantization=quantization,
        hardware={"instanceType": hardware[0], "tensorParallel": hardware[1]},
        serviceAccount={"iamRoleArn": "arn:aws:iam::111122223333:role/r"},
    )
    pod = one(result, "Deployment")["spec"]["template"]["spec"]
    download = PUBLISHED_BYTES[architecture] + TOKENIZER_AND_CONFIG
    # Everything the pod may write at once: the download, HOME and /tmp full, 1 GiB of logs.
    full = {"models": download, "home": 20 * GIB, "tmp": 10 * GIB, "logs": GIB}
    assert not kubelet_evicts(pod, full), (hardware, pod["volumes"])
    if mode == "s3":
        (fetch,) = pod["initContainers"]
        args = fetch["args"]
        assert "original/*" in [args[i + 1] for i, a in enumerate(args) if a == "--exclude"]


# --- an autoscaler owns spec.replicas ---------------------------------------------------------


@pytest.mark.parametrize("preset", pipeline.preset_names())
def test_no_replicas_while_a_scaled_object_owns_the_deployment(preset: str) -> None:
    """kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#migrating-deployments-
    and-statefulsets-to-horizontal-autoscaling: with an HPA, spec.replicas is removed from the
    manifest, or every apply scales the Deployment back to it. KEDA's ScaledObject creates that
    HPA for its scaleTargetRef."""
    path = pipeline.preset_path(preset)
    assert path is not None
    result = pipeline.render_loaded(load.load_spec_file(path), header_command="t")
    (workload,) = [d for d in docs_of(result) if d["kind"] in ("Deployment", "LeaderWorkerSet")]
    targets = [
        (ref["kind"], ref["name"])
        for d in docs_of(result)
        if d["kind"] == "ScaledObject"
        for ref in [d["spec"]["scaleTargetRef"]]
    ]
    assert targets == [(workload["kind"], workload["metadata"]["name"])]
    assert "replicas" not in workload["spec"]


def test_without_autoscaling_the_deployment_keeps_its_count() -> None:
    result = render(
        model={"id": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama-3.1-8b"},
        hardware={"instanceType": "g5.xlarge", "tensorParallel": 1},
        autoscaling={"enabled": False, "minReplicas": 2},
    )
    assert one(result, "Deployment")["spec"]["replicas"] == 2
    assert not [d for d in docs_of(result) if d["kind"] == "ScaledObject"]


# --- the S3 download: credentials, a deadline, a tool built for throughput --------------------

S3_MODEL = {
    "id": "meta-llama/Llama-3.1-70B-Instruct",
    "architecture": "llama-3.1-70b",
    "loading": {"mode": "s3", "s3Uri": "s3://models/llama-3.1-70b"},
}
# s5cmd v2.3.0's command line (peak/s5cmd command/app.go global flags, command/sync.go +
# command/cp.go NewSharedFlags): what the rendered arguments may use.
S5CMD_GLOBAL = {"--log": 1, "--numworkers": 1, "--retry-count": 1, "--endpoint-url": 1}
S5CMD_SYNC = {"--concurrency": 1, "--part-size": 1, "--exclude": 1, "--include": 1, "--delete": 0}


def parse_s5cmd(args: list[str]) -> tuple[dict[str, list[str]], dict[str, list[str]], list[str]]:
    """(global flags, sync flags, positionals) as s5cmd 2.3.0 reads them; unknown flags fail."""
    out: list[dict[str, list[str]]] = [{}, {}]
    table, i, part, positionals = S5CMD_GLOBAL, 0, 0, []
    while i < len(args):
        word = args[i]
        if word == "sync" and part == 0:
            table, part, i = S5CMD_SYNC, 1, i + 1
            continue
        if word.startswith("--"):
            assert word in table, f"s5cmd has no {word} {'for sync' if part else 'global'} flag"
            out[part].setdefault(word, []).extend(args[i + 1 : i + 1 + table[word]])
            i += 1 + table[word]
            continue
        positionals.append(word)
        i += 1
    assert part == 1, "no sync command"
    return out[0], out[1], positionals


def fetch(**over: Any) -> tuple[pipeline.Rendered, dict[str, Any]]:
    result = render(
        model=S3_MODEL,
        hardware={"instanceType": "p4de.24xlarge", "tensorParallel": 4},
        **over,
    )
    pod = one(result, "Deployment")["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    return result, init


def test_s3_without_an_aws_identity_is_refused_at_the_service_account() -> None:
    """EC2NodeClass metadataOptions default httpPutResponseHopLimit 1 with IMDSv2 (Karpenter
    docs, nodeclasses.md): a container cannot reach the instance profile's credentials."""
    with pytest.raises(SpecError) as info:
        render(model=S3_MODEL, hardware={"instanceType": "p4de.24xlarge", "tensorParallel": 4})
    (diag,) = info.value.diagnostics
    assert "no AWS identity" in diag.message and diag.hint and "podIdentity" in diag.hint
    with pytest.raises(SpecError):  # both is ambiguous
        render(
            model=S3_MODEL,
            hardware={"instanceType": "p4de.24xlarge", "tensorParallel": 4},
            serviceAccount={"iamRoleArn": "arn:aws:iam::111122223333:role/r", "podIdentity": True},
        )


def test_irsa_downloads_with_s5cmd_under_a_deadline() -> None:
    result, init = fetch(serviceAccount={"iamRoleArn": "arn:aws:iam::111122223333:role/r"})
    assert init["image"] == "peakcom/s5cmd:v2.3.0"
    shell, flag, script, name = init["command"]
    assert (shell, flag, name) == ("/bin/sh", "-c", "fetch-model")
    assert 'timeout "$left" /s5cmd "$@"' in script
    (seconds,) = re.findall(r"^deadline=(\d+);", script)
    global_flags, sync_flags, (source, dest) = parse_s5cmd(init["args"])
    assert source == "s3://models/llama-3.1-70b/*" and dest == "/models/model/"
    assert sync_flags["--exclude"] == ["original/*"]
    assert int(sync_flags["--concurrency"][0]) > 5  # s5cmd's default, for a few large shards
    # the deadline leaves the download time at startup.downloadGbps (2 Gbit/s), x1.5
    gbits = PUBLISHED_BYTES["llama-3.1-70b"] * 8 / 1e9
    assert int(seconds) >= gbits / 2.0 * 1.5
    # the init container has the server's CPU (free: the pod requests the larger of the two)
    pod = one(result, "Deployment")["spec"]["template"]["spec"]
    assert init["resources"]["limits"]["cpu"] == pod["containers"][0]["resources"]["limits"]["cpu"]
    assert global_flags["--numworkers"]


def run_fetch(init: dict[str, Any], tmp: Path, fails: int, deadline: int | None = None) -> int:
    """Run the init container's script with /bin/sh, its tool replaced by a stub that fails
    ``fails`` times and then succeeds (the pause shortened, the deadline optionally): how many
    attempts it made, or -1 when the script gave up."""
    shell, flag, script, name = init["command"]
    stub = tmp / "s5cmd"
    stub.write_text(
        '#!/bin/sh\nn=$(cat "$0.count" 2>/dev/null || echo 0); echo $((n + 1)) > "$0.count"\n'
        f'[ "$n" -ge {fails} ]\n'
    )
    stub.chmod(0o755)
    script = script.replace(" /s5cmd ", f" {stub} ").replace("sleep 10", "sleep 0")
    if deadline is not None:
        script = re.sub(r"^deadline=\d+;", f"deadline={deadline};", script)
    done = subprocess.run(
        [shell, flag, script, name, *init["args"]], capture_output=True, text=True, timeout=60
    )
    attempts = int((tmp / "s5cmd.count").read_text())
    return attempts if done.returncode == 0 else -1


def test_a_failed_sync_is_retried_inside_the_init_container(tmp_path: Path) -> None:
    """An S3 error or a slow attempt does not end the container (which the kubelet would
    restart, and a LeaderWorkerSet would then recreate its whole group); past the deadline it
    exits 1."""
    _, init = fetch(serviceAccount={"iamRoleArn": "arn:aws:iam::111122223333:role/r"})
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert run_fetch(init, tmp_path / "a", fails=2) == 3
    assert run_fetch(init, tmp_path / "b", fails=10**6, deadline=1) == -1


def test_pod_identity_downloads_with_the_aws_cli() -> None:
    """s5cmd 2.3.0's aws-sdk-go (v1.44.298, its go.mod) predates EKS Pod Identity (Go SDK v1
    1.47.11; AWS CLI v2 2.15.0, EKS user guide pod-id-minimum-sdk)."""
    _, init = fetch(serviceAccount={"podIdentity": True})
    assert init["image"] == "amazon/aws-cli:2.22.0"
    shell, flag, script, name = init["command"]
    assert (shell, flag, name) == ("/bin/sh", "-c", "fetch-model")
    assert script.split(" && ")[2].startswith("deadline=")  # after the two `aws configure`
    assert 'timeout "$left" aws "$@"' in script
    words = init["args"]
    assert words[:2] == ["s3", "sync"]
    assert words[words.index("--exclude") : words.index("--exclude") + 2] == [
        "--exclude",
        "original/*",
    ]
    assert "max_concurrent_requests 64" in script
