"""What a first GitOps sync needs (issue 23 item 9): the Namespace, Argo CD sync waves, the
tracking label, and the docs' Argo CD Application and Flux Kustomization checked against what
llmdeploy renders.

Sources: Argo CD `argocd.argoproj.io/sync-wave` (argo-cd docs user-guide/sync-waves.md; a lower
wave is applied first); resource tracking by the `app.kubernetes.io/instance` label, set to
the Application's name (argo-cd release-2.9 user-guide/resource_tracking.md), by the
`argocd.argoproj.io/tracking-id` annotation by default from 3.0 (release-3.3, same page).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from llmdeploy import pipeline
from llmdeploy.cli.commands import app
from llmdeploy.plan.assemble import SYNC_WAVE, SYNC_WAVES
from llmdeploy.spec.load import load_spec_file, load_spec_text

REPO = Path(__file__).resolve().parents[1]
PRESET = REPO / "presets" / "llama3-70b-vllm-p4d.yaml"


def rendered(text: str) -> list[tuple[str, dict[str, Any]]]:
    result = pipeline.render_loaded(load_spec_text(text, "spec.yaml"), header_command="t")
    return list(pipeline.yaml_documents(result.files))


def test_the_namespace_comes_first_with_only_the_shared_labels() -> None:
    docs = rendered(PRESET.read_text())
    name, first = docs[0]
    assert name == "namespace.yaml"
    assert first["kind"] == "Namespace" and first["apiVersion"] == "v1"
    assert first["metadata"]["name"] == "llm-serving"
    assert "namespace" not in first["metadata"]
    assert first["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "llmdeploy",
        "app.kubernetes.io/managed-by": "llmdeploy",
    }
    result = pipeline.render_loaded(load_spec_file(PRESET), header_command="t")
    kustomization = yaml.safe_load(dict(result.files)["kustomization.yaml"])
    assert kustomization["resources"][0] == "namespace.yaml"


def test_kinds_that_need_crds_carry_their_sync_wave() -> None:
    waves = {"Namespace": "-2", "EC2NodeClass": "-1", "NodePool": "-1", "ScaledObject": "1"}
    waves |= {"ServiceMonitor": "-1", "PodMonitor": "-1", "PrometheusRule": "-1"}
    waves |= {"TriggerAuthentication": "-1"}
    assert waves == SYNC_WAVES
    seen = set()
    for _, doc in rendered(PRESET.read_text()):
        kind = doc["kind"]
        annotations = doc["metadata"].get("annotations", {})
        if kind in SYNC_WAVES:
            assert annotations[SYNC_WAVE] == SYNC_WAVES[kind], kind
            seen.add(kind)
        else:  # the workload and everything built in: Argo CD's default wave 0
            assert SYNC_WAVE not in annotations, kind
    assert {"Namespace", "EC2NodeClass", "NodePool", "ScaledObject", "ServiceMonitor"} <= seen


def test_both_can_be_turned_off() -> None:
    text = PRESET.read_text() + "gitops:\n  namespace: false\n  syncWaves: false\n"
    docs = rendered(text)
    assert [d["kind"] for _, d in docs if d["kind"] == "Namespace"] == []
    assert all(SYNC_WAVE not in d["metadata"].get("annotations", {}) for _, d in docs)


def test_a_fleet_renders_each_namespace_once(tmp_path: Path) -> None:
    """Two specs in one namespace: one Namespace object in the fleet (two would make
    `kustomize build` of the fleet's kustomization fail on a duplicate id)."""
    fleet = tmp_path / "specs"
    fleet.mkdir()
    text = PRESET.read_text()
    (fleet / "a.yaml").write_text(text)
    (fleet / "b.yaml").write_text(text.replace("name: llama3-70b\n", "name: llama3-70b-b\n", 1))
    out = tmp_path / "deploy"
    result = CliRunner().invoke(app, ["render", str(fleet), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    namespaces = sorted(p.relative_to(out).as_posix() for p in out.rglob("namespace.yaml"))
    assert namespaces == ["llama3-70b/namespace.yaml"]
    ids = []
    for path in out.rglob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") not in (None, "Kustomization"):
                ids.append((doc["kind"], doc["metadata"].get("namespace"), doc["metadata"]["name"]))
    assert len(ids) == len(set(ids))


# --- the docs' Argo CD Application and Flux Kustomization --------------------------------------


def _docs_file(page: str, name: str) -> dict[str, Any]:
    text = (REPO / "docs" / page).read_text()
    found = re.search(rf"```yaml\n# file: {re.escape(name)}\n(.*?)```", text, re.S)
    assert found, (page, name)
    loaded: dict[str, Any] = yaml.safe_load(found[1])
    return loaded


def _user_guide_spec() -> str:
    """The user guide's llama3-70b.yaml as it ends up (its first version does not fit)."""
    text = (REPO / "docs" / "user-guide.md").read_text()
    found = re.findall(r"```yaml\n# file: llama3-70b.yaml\n(.*?)```", text, re.S)
    assert found
    return str(found[-1])


def test_the_argocd_application_tracks_what_llmdeploy_renders() -> None:
    application = _docs_file("gitops.md", "argocd-application.yaml")
    assert application["apiVersion"] == "argoproj.io/v1alpha1"
    assert application["kind"] == "Application"
    spec_text = _user_guide_spec()
    spec = load_spec_text(spec_text, "llama3-70b.yaml").spec
    docs = rendered(spec_text)
    # label tracking (Argo CD 2.x): the Application's name is the instance label of every
    # object it applies, so no object is relabelled or claimed by another Application
    instance = {d["metadata"]["labels"].get("app.kubernetes.io/instance") for _, d in docs}
    assert instance - {None} == {application["metadata"]["name"]} == {spec.name}
    assert application["spec"]["destination"]["namespace"] == spec.namespace
    assert application["spec"]["source"]["path"] == f"deploy/{spec.name}"
    assert application["spec"]["syncPolicy"]["automated"]["prune"] is True
    # the only objects outside the destination namespace are the ones the docs name
    elsewhere = {
        d["metadata"].get("namespace") for _, d in docs if d["metadata"].get("namespace")
    } - {spec.namespace}
    assert elsewhere <= {"monitoring"}


def test_the_flux_kustomization_keeps_every_object_in_its_namespace() -> None:
    flux = _docs_file("gitops.md", "flux-kustomization.yaml")
    assert flux["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    assert flux["kind"] == "Kustomization"
    spec = load_spec_text(_user_guide_spec(), "llama3-70b.yaml").spec
    assert flux["spec"]["path"] == f"./deploy/{spec.name}"
    assert flux["spec"]["prune"] is True
    assert "targetNamespace" not in flux["spec"]  # would move the monitoring objects


def test_the_hub_token_secret_the_docs_create_is_the_one_the_pod_reads() -> None:
    """The docs' `kubectl create secret` makes the Secret (name, key, namespace) that a spec with
    the default `model.loading.hfTokenSecret` mounts."""
    text = (REPO / "docs" / "gitops.md").read_text()
    command = re.search(
        r"\$ kubectl -n (\S+) create secret generic (\S+) --from-literal=(\w+)=", text
    )
    assert command
    namespace, name, key = command.groups()
    spec = (
        "apiVersion: llmdeploy.dev/v1alpha1\nname: m\nmodel:\n"
        "  id: meta-llama/Llama-3.1-8B-Instruct\n  architecture: llama-3.1-8b\n"
        "hardware:\n  instanceType: g6e.2xlarge\n"
        "cluster:\n  name: e\n  nodeRole: R\n"
    )
    docs = dict(rendered(spec))
    pod = docs["deployment.yaml"]["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == name
    assert [item["key"] for item in volume["secret"]["items"]] == [key]
    assert docs["deployment.yaml"]["metadata"]["namespace"] == namespace
