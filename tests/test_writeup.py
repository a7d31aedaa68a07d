"""The write-up's mistakes (shared/reference/kubernetes.md §6, vllm.md §5.1, trtllm.md §7) are
never reproduced, and its impossible configurations are caught by the sizing check."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from llmdeploy import pipeline
from llmdeploy.check.documents import parse_documents
from llmdeploy.errors import DoesNotFitError
from llmdeploy.spec import load

PRESETS = pipeline.preset_names()


def rendered(preset: str, crds: object) -> dict[str, str]:
    path = pipeline.preset_path(preset)
    assert path is not None
    loaded = load.load_spec_file(path)
    return dict(pipeline.render_loaded(loaded, header_command="t", crds=crds).files)


def docs_of(files: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, text in files.items():
        if name.endswith(".yaml") and name != "kustomization.yaml":
            for _, doc in parse_documents(text, name):
                out[doc["kind"]] = doc
    return out


@pytest.mark.parametrize("preset", PRESETS)
def test_karpenter_and_keda_mistakes_absent(preset: str, crds: object) -> None:
    docs = docs_of(rendered(preset, crds))
    pool, nodeclass, scaled = docs["NodePool"], docs["EC2NodeClass"], docs["ScaledObject"]
    keys = [r["key"] for r in pool["spec"]["template"]["spec"]["requirements"]]
    well_known_prefixes = (
        "karpenter.k8s.aws/",
        "karpenter.sh/",
        "kubernetes.io/",
        "node.kubernetes.io/",
        "topology.kubernetes.io/",
    )
    assert all(k.startswith(well_known_prefixes) for k in keys), keys
    assert "category" not in keys and "instance-family" not in keys
    assert "karpenter.k8s.aws/instance-family" in keys
    # AMI: a pinned AL2023/Bottlerocket alias as the only term, no redundant/AL2 amiFamily.
    terms = nodeclass["spec"]["amiSelectorTerms"]
    assert len(terms) == 1 and set(terms[0]) == {"alias"}
    assert terms[0]["alias"].split("@")[0] in {"al2023", "bottlerocket"}
    assert not terms[0]["alias"].endswith("@latest")
    assert "amiFamily" not in nodeclass["spec"]
    # Disruption: v1 field locations and values.
    disruption = pool["spec"]["disruption"]
    assert disruption["consolidationPolicy"] in {"WhenEmpty", "WhenEmptyOrUnderutilized"}
    assert "consolidateAfter" in disruption and "expireAfter" not in disruption
    assert "expireAfter" in pool["spec"]["template"]["spec"]
    # KEDA: no removed metricName, string threshold, HPA behavior for slow GPU pods.
    trigger = scaled["spec"]["triggers"][0]
    assert "metricName" not in trigger and "metricName" not in trigger["metadata"]
    assert isinstance(trigger["metadata"]["threshold"], str)
    assert "behavior" in scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]


@pytest.mark.parametrize("preset", [p for p in PRESETS if "vllm" in p])
def test_vllm_mistakes_absent(preset: str, crds: object) -> None:
    docs = docs_of(rendered(preset, crds))
    if "LeaderWorkerSet" in docs:  # the group's leader serves the API
        group = docs["LeaderWorkerSet"]["spec"]["leaderWorkerTemplate"]
        container = group["leaderTemplate"]["spec"]["containers"][0]
    else:
        container = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert container["command"] == ["vllm", "serve"]
    assert "--model" not in args  # `vllm serve` takes the model positionally
    assert not any(a in {"true", "false", "True", "False"} for a in args)
    assert not container["image"].endswith(":v0.6.2")
    assert "initialDelaySeconds" not in container["readinessProbe"]
    startup = container["startupProbe"]
    # Computed from the model, and far beyond the write-up's fixed 120-second delay.
    assert startup["failureThreshold"] * startup["periodSeconds"] >= 300


def test_trtllm_mistakes_absent(crds: object) -> None:
    files = rendered("llama3-70b-trtllm-int4awq-p4d", crds)
    script = files["build-engine.sh"]
    for bad in (
        "--max_output_len",
        "--use_custom_all_reduce",
        "--plugin_weight_only_quant_type",
        "ttrt_ckpt",
        "/app/TensorRT-LLM/examples",
    ):
        assert bad not in script
    assert "--qformat int4_awq" in script.replace("'", "")
    docs = docs_of(files)
    container = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["mpirun"]
    words = container["args"]
    assert words.count("/opt/tritonserver/bin/tritonserver") == 4
    prefixes = [w for w in words if "shm-region-prefix-name" in w]
    assert len(set(prefixes)) == 4
    assert "launch_triton_server.py" not in shlex.join(words)
    repo = docs["ConfigMap"]["data"]
    assert {
        "ensemble.config.pbtxt",
        "preprocessing.config.pbtxt",
        "tensorrt_llm.config.pbtxt",
        "postprocessing.config.pbtxt",
    } <= set(repo)


WRITEUP_G5 = """\
apiVersion: llmdeploy.dev/v1alpha1
name: llama3-70b
model:
  id: meta-llama/Meta-Llama-3-70B-Instruct
  architecture: llama-3-70b
hardware:
  instanceType: g5.12xlarge
  tensorParallel: 4
serving:
  gpuMemoryUtilization: 0.92
cluster:
  name: ecstaticloud-eks-cluster
  nodeRole: KarpenterNodeRole-EKS-Cluster
"""


def test_writeup_70b_on_g5_is_refused_with_a_suggestion_that_fits(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(WRITEUP_G5)
    loaded = load.load_spec_file(spec)
    with pytest.raises(DoesNotFitError) as info:
        pipeline.render_loaded(loaded, header_command="t")
    sizing: Any = info.value.sizing
    assert not sizing.fits
    assert sizing.suggestions and any(s.fits for s in sizing.suggestions)
    # --force renders anyway (and says so in the CLI).
    forced = pipeline.render_loaded(loaded, header_command="t", force=True)
    assert not forced.sizing.fits and forced.files
