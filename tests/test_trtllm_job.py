"""The TensorRT-LLM engine build as a Kubernetes Job (backend engine).

Each test models what a controller or the script does with the Job: the Job controller (name
and immutable template, podFailurePolicy), the scheduler (node selector, tolerations, whole
node), the Service/PDB selectors (must not pick the build pod), IRSA (which ServiceAccount),
and the script itself run with stubbed tools (an existing build is not redone).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmdeploy import pipeline
from llmdeploy.catalog import ec2
from llmdeploy.errors import SpecError
from llmdeploy.spec.load import load_spec_text
from spec_helpers import merge

BASE: dict[str, Any] = {
    "apiVersion": "llmdeploy.dev/v1alpha1",
    "name": "llama3-70b",
    "model": {"id": "meta-llama/Meta-Llama-3-70B-Instruct", "architecture": "llama-3-70b"},
    "engine": {
        "type": "trtllm",
        "artifactsS3Uri": "s3://example-model-store/llama3-70b",
        "maxBatchSize": 64,
        "buildJob": {"iamRoleArn": "arn:aws:iam::111122223333:role/build-writer"},
    },
    "quantization": "int4-awq",
    "hardware": {"instanceType": "p4d.24xlarge", "tensorParallel": 4},
    "serving": {"maxModelLen": 6144},
    "serviceAccount": {"iamRoleArn": "arn:aws:iam::111122223333:role/reader"},
    "cluster": {"name": "example-eks", "nodeRole": "KarpenterNodeRole-example-eks"},
}


def render(crds: object = None, **over: Any) -> tuple[dict[str, str], list[dict[str, Any]]]:
    loaded = load_spec_text(yaml.safe_dump(merge(BASE, over)), "spec.yaml")
    result = pipeline.render_loaded(loaded, header_command="llmdeploy render spec.yaml", crds=crds)
    assert result.report.ok
    return dict(result.files), [doc for _, doc in pipeline.yaml_documents(result.files)]


def kind(docs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == name]


def job_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (job,) = kind(docs, "Job")
    return job


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    """Kubernetes' rule (k8s.io/api core/v1 Toleration.ToleratesTaint)."""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("key") and toleration["key"] != taint["key"]:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return bool(toleration.get("value") == taint.get("value"))


# --- the Job controller ------------------------------------------------------------------------


def test_rendered_by_default_on_the_engine_path_only(crds: object) -> None:
    files, docs = render(crds)
    assert "job.yaml" in files and len(kind(docs, "Job")) == 1
    config = kind(docs, "ConfigMap")[0]["data"]
    assert config["build-engine.sh"] == files["build-engine.sh"]  # the Job runs this very file
    files, docs = render(crds, engine={"buildJob": {"enabled": False}})
    assert "job.yaml" not in files and not kind(docs, "Job")
    assert "build-engine.sh" not in kind(docs, "ConfigMap")[0]["data"]
    assert "build-engine.sh" in files  # still there to run by hand


BUILD_INPUTS = [
    {"engine": {"maxBatchSize": 128}},
    {"quantization": "none"},
    {"serving": {"maxModelLen": 8192}},
    {"engine": {"artifactsS3Uri": "s3://example-model-store/other"}},
    {"engine": {"tritonVersion": "26.03"}},
    {"model": {"revision": "5f0b02c75b57c5855da9ae460ce51323ea669d8a"}},
]
NOT_BUILD_INPUTS = [
    {"autoscaling": {"maxReplicas": 9}},
    {"monitoring": {"kind": "PodMonitor"}},
    {"engine": {"kvCacheFreeGpuMemFraction": 0.8}},  # a runtime parameter of the server
    {"engine": {"buildJob": {"backoffLimit": 5}}},
]


def _name(**over: Any) -> str:
    _, docs = render(None, **over)
    return str(job_of(docs)["metadata"]["name"])


def test_the_name_changes_exactly_when_the_engine_would() -> None:
    """A Job's pod template is immutable: same inputs must give the same name (apply is a
    no-op), other inputs a new name (a new Job instead of a rejected update)."""
    base = _name()
    assert re.fullmatch(r"llama3-70b-build-[0-9a-f]{10}", base)
    assert _name() == base
    for over in BUILD_INPUTS:
        assert _name(**over) != base, over
    for over in NOT_BUILD_INPUTS:
        assert _name(**over) == base, over


def test_failure_policy_and_limits(crds: object) -> None:
    files, docs = render(crds, engine={"buildJob": {"ttlSecondsAfterFinished": 3600}})
    spec = job_of(docs)["spec"]
    # podFailurePolicy needs restartPolicy Never (API validation, not in the OpenAPI schema:
    # kubernetes.io/docs/concepts/workloads/controllers/job/#pod-failure-policy)
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (2, 21600)
    assert spec["ttlSecondsAfterFinished"] == 3600
    ignore, fail = spec["podFailurePolicy"]["rules"]
    assert ignore == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    # the FailJob exit code is the one the script's `die` uses
    die = re.search(r"die\(\) \{\n.*\n  exit (\d+)\n\}", files["build-engine.sh"])
    assert die is not None
    assert fail["action"] == "FailJob" and fail["onExitCodes"]["values"] == [int(die[1])]
    _, docs = render(crds)
    assert "ttlSecondsAfterFinished" not in job_of(docs)["spec"]  # kept: GitOps sees it in sync


# --- where it runs -----------------------------------------------------------------------------


@pytest.mark.parametrize("instance", ["p4d.24xlarge", "p5.48xlarge", "g6e.12xlarge"])
def test_it_lands_on_a_whole_node_of_the_serving_nodepool(instance: str, crds: object) -> None:
    over: dict[str, Any] = {"hardware": {"instanceType": instance, "tensorParallel": 4}}
    if instance != "p4d.24xlarge":
        over["quantization"] = "fp8"
    _, docs = render(crds, **over)
    pool = kind(docs, "NodePool")[0]
    pod = job_of(docs)["spec"]["template"]["spec"]
    assert selects(pod["nodeSelector"], {"karpenter.sh/nodepool": pool["metadata"]["name"]})
    for taint in pool["spec"]["template"]["spec"]["taints"]:
        assert any(tolerates(t, taint) for t in pod["tolerations"]), taint
    (build,) = pod["containers"]
    gpus = ec2.instance(instance).gpu_count  # type: ignore[union-attr]
    assert build["resources"]["limits"]["nvidia.com/gpu"] == str(gpus)
    image = kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert build["image"] == image  # the engine loads only in the TensorRT-LLM that built it
    annotations = job_of(docs)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["karpenter.sh/do-not-disrupt"] == "true"


def test_the_build_pod_is_invisible_to_the_serving_selectors(crds: object) -> None:
    _, docs = render(crds)
    labels = job_of(docs)["spec"]["template"]["metadata"]["labels"]
    serving = [d for d in docs if d["metadata"]["name"] == "llama3-70b"]
    for kind_name, path in [
        ("Service", ("spec", "selector")),
        ("PodDisruptionBudget", ("spec", "selector", "matchLabels")),
        ("NetworkPolicy", ("spec", "podSelector", "matchLabels")),
        ("Deployment", ("spec", "selector", "matchLabels")),
        ("ServiceMonitor", ("spec", "selector", "matchLabels")),
    ]:
        (node,) = kind(serving, kind_name)
        for key in path:
            node = node[key]
        assert not selects(node, labels), kind_name


def test_the_build_pod_admits_no_ingress(crds: object) -> None:
    """checkov CKV2_K8S_6: every pod is selected by a NetworkPolicy. The build serves nothing,
    so its own policy lists Ingress with no rule: nothing may connect to it."""
    _, docs = render(crds)
    labels = job_of(docs)["spec"]["template"]["metadata"]["labels"]
    selecting = [
        p
        for p in kind(docs, "NetworkPolicy")
        if selects(p["spec"]["podSelector"]["matchLabels"], labels)
    ]
    assert len(selecting) == 1
    assert selecting[0]["spec"]["policyTypes"] == ["Ingress"]
    assert "ingress" not in selecting[0]["spec"]
    _, docs = render(crds, network={"networkPolicy": False})
    assert not kind(docs, "NetworkPolicy")


def test_scratch_space_must_fit_the_local_nvme() -> None:
    with pytest.raises(SpecError) as err:
        render(
            None,
            hardware={"instanceType": "g6e.xlarge", "tensorParallel": 1},
            serving={"maxModelLen": 2048},
        )
    assert "scratch space" in err.value.diagnostics[0].message


# --- identity and secrets -------------------------------------------------------------------


def test_the_build_writes_with_its_own_role_and_serving_only_reads(crds: object) -> None:
    files, docs = render(crds)
    accounts = {d["metadata"]["name"]: d for d in kind(docs, "ServiceAccount")}
    pod = job_of(docs)["spec"]["template"]["spec"]
    build_sa = accounts[pod["serviceAccountName"]]  # the pod's ServiceAccount is rendered
    role = build_sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
    assert role.endswith("role/build-writer")
    serving = kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["serviceAccountName"]
    assert serving != pod["serviceAccountName"]
    assert files["serviceaccount-engine-build.yaml"].count("kind: ServiceAccount") == 1
    # without a build role the Job runs as the serving ServiceAccount (its role must write)
    data = merge(BASE, {})
    del data["engine"]["buildJob"]
    loaded = load_spec_text(yaml.safe_dump(data), "spec.yaml")
    result = pipeline.render_loaded(loaded, header_command="x", crds=crds)
    docs = [d for _, d in pipeline.yaml_documents(result.files)]
    assert len(kind(docs, "ServiceAccount")) == 1
    assert job_of(docs)["spec"]["template"]["spec"]["serviceAccountName"] == "llama3-70b"


def test_the_token_is_a_mounted_file_and_aws_cli_comes_from_its_image(crds: object) -> None:
    _, docs = render(crds, model={"loading": {"hfTokenSecret": {"name": "hf", "key": "tok"}}})
    pod = job_of(docs)["spec"]["template"]["spec"]
    (build,) = pod["containers"]
    env = {e["name"]: e for e in build["env"]}
    assert "HF_TOKEN" not in env and env["HF_TOKEN_PATH"]["value"].endswith("/token")
    (secret,) = [v["secret"] for v in pod["volumes"] if "secret" in v]
    assert secret["secretName"] == "hf" and secret["items"] == [{"key": "tok", "path": "token"}]
    (copy_cli,) = pod["initContainers"]
    assert copy_cli["image"].startswith("amazon/aws-cli:")
    target = copy_cli["command"][-1].split()[-1].rstrip("/")
    assert env["AWS_CLI"]["value"].startswith(target + "/")
    for c in [copy_cli, build]:
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def aws_cli_image(root: Path, version: str = "2.22.0") -> None:
    """The AWS CLI v2 layout the amazon/aws-cli image has under ``root`` (aws/aws-cli
    exe/assets/install, run by docker/Dockerfile): v2/<version>/dist/aws, bin/aws a relative
    link to ../dist/aws, v2/current an absolute link to the version directory, /usr/local/bin/aws
    a link to v2/current/bin/aws."""
    home = root / "usr/local/aws-cli/v2" / version
    (home / "dist").mkdir(parents=True)
    (home / "dist/aws").write_text(f'#!/bin/sh\necho aws-cli/{version} "$@"\n')
    (home / "dist/aws").chmod(0o755)
    (home / "bin").mkdir()
    (home / "bin/aws").symlink_to("../dist/aws")
    (home.parent / "current").symlink_to(home)  # absolute, as `ln -snf "$INSTALL_DIR"`


def test_the_engine_path_without_an_aws_identity_is_refused_like_vllm() -> None:
    """fetch-artifacts reads artifactsS3Uri: with IMDSv2 and a hop limit of 1 the node's
    instance-profile credentials do not reach it (the EC2NodeClass's metadataOptions), so the
    pods need IRSA or Pod Identity, as vLLM's S3 sync does."""
    data = merge(BASE, {})
    del data["serviceAccount"]
    with pytest.raises(SpecError) as info:
        pipeline.render_loaded(
            load_spec_text(yaml.safe_dump(data), "spec.yaml"), header_command="x"
        )
    (diag,) = info.value.diagnostics
    assert "no AWS identity" in diag.message and diag.hint and "podIdentity" in diag.hint
    data["serviceAccount"] = {"podIdentity": True}
    pipeline.render_loaded(load_spec_text(yaml.safe_dump(data), "spec.yaml"), header_command="x")


def cuda_minor_compatible(app: tuple[int, int], driver_cuda: tuple[int, int]) -> str:
    """How a CUDA application runs on a driver (docs.nvidia.com/deploy/cuda-compatibility/
    minor-version-compatibility.html): natively up to the driver's own CUDA release, under
    minor-version compatibility ("with limited feature-set") for a newer minor of the same
    major (13.x needs a driver >= 580), not at all for a newer major without the compat
    package."""
    if app <= driver_cuda:
        return "native"
    return "minor-version" if app[0] == driver_cuda[0] else "unsupported"


def test_triton_26_07_on_the_default_ami_is_said_to_rely_on_minor_version_compatibility() -> None:
    """Triton 26.07 is CUDA 13.1.0 (triton-inference-server/server docs/introduction/
    compatibility.md); the default AL2023 NVIDIA AMI's R580 driver is CUDA 13.0's."""
    assert cuda_minor_compatible((13, 1), (13, 0)) == "minor-version"
    loaded = load_spec_text(yaml.safe_dump(merge(BASE, {})), "spec.yaml")
    result = pipeline.render_loaded(loaded, header_command="x")
    (note,) = [n for n in result.notices if "CUDA" in n.message]
    assert (note.key_path, note.severity) == ("engine.tritonVersion", "note")
    assert "minor-version compatibility" in note.message
    assert "CUDA 13.1" in note.message and "driver 580 is CUDA 13.0's" in note.message
    bottlerocket = merge(
        BASE, {"cluster": {"kubernetesVersion": "1.35", "amiAlias": "bottlerocket@v1.53.0"}}
    )
    loaded = load_spec_text(yaml.safe_dump(bottlerocket), "spec.yaml")
    result = pipeline.render_loaded(loaded, header_command="x")
    assert not [n for n in result.notices if "CUDA" in n.message]


def test_the_copied_aws_cli_runs_without_the_image_it_came_from(
    tmp_path: Path, crds: object
) -> None:
    """The init container's command, run against that layout (paths moved under tmp_path),
    then the image's tree removed as the Triton image lacks it: AWS_CLI still runs. Copying
    /usr/local/aws-cli as it is left v2/current pointing into the removed tree."""
    _, docs = render(crds)
    pod = job_of(docs)["spec"]["template"]["spec"]
    (copy_cli,) = pod["initContainers"]
    (build,) = pod["containers"]
    aws_cli = {e["name"]: e for e in build["env"]}["AWS_CLI"]["value"]
    image, triton = tmp_path / "image", tmp_path / "triton"
    aws_cli_image(image)

    def moved(text: str) -> str:
        return text.replace("/usr/local/", f"{image}/usr/local/").replace(
            "/opt/llmdeploy/", f"{triton}/opt/llmdeploy/"
        )

    (triton / "opt/llmdeploy/aws-cli").mkdir(parents=True)  # the emptyDir
    shell, flag, script = copy_cli["command"]
    subprocess.run([shell, flag, moved(script)], check=True)
    old = tmp_path / "old"
    (old / "aws-cli").mkdir(parents=True)
    subprocess.run(["cp", "-a", f"{image}/usr/local/aws-cli/.", f"{old}/aws-cli/"], check=True)
    shutil.rmtree(image)
    done = subprocess.run([moved(aws_cli), "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "aws-cli/2.22.0 --version"
    assert not (old / "aws-cli/v2/current/bin/aws").exists()  # dangling: what it replaced


# --- the script as the Job runs it ------------------------------------------------------------

STUB = """#!/usr/bin/env bash
tool="$(basename "$0")"
printf '%s\\n' "$tool $*" >>"$STUB_LOG"
case "$tool" in
  python3) [[ "$*" == *importlib.metadata* ]] && echo "$STUB_TRTLLM" ;;
  nvidia-smi)
    if [[ "$*" == *--list-gpus* ]]; then
      for ((i = 0; i < STUB_GPUS; i++)); do echo "GPU $i"; done
    else echo "$STUB_CAP"; fi ;;
  aws) # `aws s3 cp [options] s3://... DEST` downloads the prepared build-info.json
    if [[ "$1 $2" == "s3 cp" && "${*: -2:1}" == s3://* && -n "${STUB_UPLOADED:-}" ]]; then
      cp "$STUB_UPLOADED" "${*: -1}"
    fi ;;
esac
exit 0
"""


def _run_build(tmp: Path, script: str, uploaded: str | None) -> tuple[int, list[str]]:
    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True)
    stub = bin_dir / "stub"
    stub.write_text(STUB)
    stub.chmod(0o755)
    for tool in ("python3", "nvidia-smi", "aws", "hf", "trtllm-build", "git"):
        (bin_dir / tool).symlink_to(stub)
    script = script.replace("/workspace/", f"{tmp}/workspace/")
    for root in ("/app/examples",):
        for rel in re.findall(r"""\[\[ -f "\$1"/'?([^' \]]+)'? \]\]""", script):
            (tmp / root.strip("/") / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / root.strip("/") / rel).touch()
    script = script.replace("/app/examples", f"{tmp}/app/examples")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp),
        "STUB_LOG": str(tmp / "calls"),
        "STUB_TRTLLM": re.search(r"^readonly EXPECTED_TRTLLM=(\S+)$", script, re.M)[1],  # type: ignore[index]
        "STUB_GPUS": "8",
        "STUB_CAP": re.search(r"^readonly COMPUTE_CAP=(\S+)$", script, re.M)[1],  # type: ignore[index]
        "HF_TOKEN_PATH": os.devnull,
    }
    if uploaded is not None:
        (tmp / "uploaded.json").write_text(uploaded + "\n")
        env["STUB_UPLOADED"] = str(tmp / "uploaded.json")
    (tmp / "build.sh").write_text(script)
    proc = subprocess.run(["bash", str(tmp / "build.sh")], env=env, capture_output=True, text=True)
    calls = (tmp / "calls").read_text().splitlines() if (tmp / "calls").exists() else []
    return proc.returncode, calls


def test_a_recreated_job_does_not_rebuild_what_s3_already_holds(tmp_path: Path) -> None:
    files, _ = render(None)
    script = files["build-engine.sh"]
    expected = re.search(r"""== '(\{"model".*\})' \]\]""", script)
    assert expected is not None
    code, calls = _run_build(tmp_path / "same", script, expected[1])
    assert code == 0
    assert not any(c.startswith(("trtllm-build", "hf ")) for c in calls), calls
    other = expected[1].replace('"max_batch_size": "64"', '"max_batch_size": "128"')
    _, calls = _run_build(tmp_path / "other", script, other)  # stops later: no tokenizer files
    assert any(c.startswith("trtllm-build") for c in calls), calls
    _, calls = _run_build(tmp_path / "none", script, None)
    assert any(c.startswith("trtllm-build") for c in calls), calls
