"""The CRD schemas bundled in the package (``src/llmdeploy/check/crd_schemas/``).

Always: the bundle is complete (every custom kind a golden renders is in it), consistent with its
manifest, carries its licence and notice, and kept what validation needs. When the official CRDs
are beside the repository (``../shared/crds``): ``scripts/bundle_crds.py --check`` finds no drift,
and every preset, and mutations of every custom document in it, get the same verdict and the same
messages from the bundled schemas as from the raw CRD files.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import load_script
from llmdeploy import pipeline
from llmdeploy.check import bundled
from llmdeploy.check.crd import CrdRegistry
from llmdeploy.check.documents import DocResult, check_documents, parse_documents
from llmdeploy.spec import load

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / "src" / "llmdeploy" / "check" / "crd_schemas"
GOLDEN = Path(__file__).resolve().parent / "golden"

# What the brief for the bundle names: what llmdeploy renders, or is about to.
EXPECTED_KINDS = {
    ("karpenter.k8s.aws", "v1", "EC2NodeClass"),
    ("karpenter.sh", "v1", "NodePool"),
    ("karpenter.sh", "v1", "NodeClaim"),
    ("keda.sh", "v1alpha1", "ScaledObject"),
    ("keda.sh", "v1alpha1", "TriggerAuthentication"),
    ("keda.sh", "v1alpha1", "ClusterTriggerAuthentication"),
    ("monitoring.coreos.com", "v1", "ServiceMonitor"),
    ("monitoring.coreos.com", "v1", "PodMonitor"),
    ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"),
}


def script() -> ModuleType:
    return load_script("scripts/bundle_crds.py")


def committed_files() -> dict[str, str]:
    return {
        p.name: p.read_text(encoding="utf-8")
        for p in FOLDER.iterdir()
        if p.is_file() and p.name != "LICENSE"
    }


def schema_nodes(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema node (not property names, not data under enum/default)."""
    if not isinstance(node, dict):
        return
    yield node
    for sub in node.get("properties", {}).values():
        yield from schema_nodes(sub)
    for key in ("items", "additionalProperties", "not"):
        yield from schema_nodes(node.get(key))
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(key, []):
            yield from schema_nodes(sub)


# --- always ------------------------------------------------------------------------------------


def test_the_bundle_holds_the_kinds_llmdeploy_targets() -> None:
    registry = bundled.bundled_registry()
    found = {(c.group, c.version, c.kind) for c in registry._versions.values()}
    assert found == EXPECTED_KINDS
    assert registry.bundled and registry.where == "the bundled CRD schemas"
    assert registry.origins == (
        "Karpenter v1.14.1",
        "KEDA v2.20.2",
        "prometheus-operator v0.93.0",
        "LWS v0.10.0",
    )


# Rendered but not bundled yet: there is no official PrometheusRule CRD in ../shared/crds to
# bundle from (prometheus-operator's own example/prometheus-operator-crd/ file is the source to
# add); until then the CLI reports PrometheusRule as "not validated".
NOT_BUNDLED_YET = {("monitoring.coreos.com", "PrometheusRule")}


def test_every_custom_kind_in_the_goldens_is_bundled() -> None:
    registry = bundled.bundled_registry()
    seen: set[tuple[str, str]] = set()
    for path in sorted(GOLDEN.rglob("*.yaml")):
        if "expected" not in path.parts and path.parent.parent.name != "presets":
            continue
        for _, doc in parse_documents(path.read_text(encoding="utf-8"), str(path)):
            group, _, version = str(doc.get("apiVersion", "")).rpartition("/")
            if "." in group and not group.endswith(".k8s.io"):
                if (group, doc["kind"]) in NOT_BUNDLED_YET:
                    continue
                assert registry.lookup(group, version, doc["kind"]), (path, doc["kind"])
                seen.add((group, doc["kind"]))
    assert {"NodePool", "EC2NodeClass", "ScaledObject", "ServiceMonitor"} <= {k for _, k in seen}


def test_manifest_matches_the_files_and_records_provenance() -> None:
    manifest = bundled.manifest()
    listed = {entry["file"] for entry in manifest["kinds"]}
    on_disk = {p.name for p in FOLDER.glob("*.json")} - {"manifest.json"}
    assert listed == on_disk
    for entry in manifest["kinds"]:
        text = (FOLDER / entry["file"]).read_text(encoding="utf-8")
        assert hashlib.sha256(text.encode()).hexdigest() == entry["sha256"], entry["file"]
        data = json.loads(text)
        assert (data["group"], data["kind"], data["scope"]) == (
            entry["group"],
            entry["kind"],
            entry["scope"],
        )
        assert sorted(data["versions"]) == entry["versions"]
        source = entry["source"]
        assert source["license"] == "Apache-2.0"
        assert source["repo"].startswith("github.com/") and len(source["commit"]) == 40
        assert source["path"].endswith(source["file"]) and len(source["sha256"]) == 64
        assert entry["project"].endswith(source["tag"])


def test_licence_and_notice_travel_with_the_schemas() -> None:
    licence = (FOLDER / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    notice = (FOLDER / "NOTICE").read_text(encoding="utf-8")
    assert "descriptions" in notice and "removed" in notice  # Apache-2.0 §4(b): changes stated
    assert "Copyright Amazon.com, Inc. or its affiliates" in notice  # Karpenter's NOTICE, §4(d)
    for entry in bundled.manifest()["kinds"]:
        assert entry["project"] in notice and entry["source"]["commit"] in notice


def test_bundled_schemas_keep_validation_and_drop_descriptions() -> None:
    keywords: dict[str, int] = {}
    for entry in bundled.manifest()["kinds"]:
        for schema in bundled._kind_file(entry["file"])["versions"].values():
            for node in schema_nodes(schema):
                for key in node:
                    keywords[key] = keywords.get(key, 0) + 1
    assert "description" not in keywords
    # Counted on the official CRDs at the pinned tags (the drift test compares them in full).
    for key in ("x-kubernetes-validations", "default", "x-kubernetes-int-or-string", "enum"):
        assert keywords.get(key, 0) > 10, key
    assert keywords["required"] > 100 and keywords["x-kubernetes-list-map-keys"] > 10
    lws = (FOLDER / "leaderworkerset.x-k8s.io_leaderworkersets.json").stat().st_size
    assert lws < 200_000  # 1,317,260 bytes upstream


def test_strip_keeps_properties_named_like_keywords() -> None:
    schema = {
        "type": "object",
        "description": "dropped",
        "properties": {
            "description": {"type": "string", "description": "dropped too"},
            "type": {"type": "string", "enum": ["a"], "default": "a"},
        },
        "items": {"description": "x", "type": "string"},
        "anyOf": [{"description": "y", "type": "integer"}],
        "x-kubernetes-validations": [{"rule": "self.type == 'a'", "message": "m"}],
    }
    assert script().strip_schema(schema) == {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "type": {"type": "string", "enum": ["a"], "default": "a"},
        },
        "items": {"type": "string"},
        "anyOf": [{"type": "integer"}],
        "x-kubernetes-validations": [{"rule": "self.type == 'a'", "message": "m"}],
    }


def test_drift_names_changed_missing_and_extra_files(tmp_path: Path) -> None:
    module = script()
    files = committed_files()
    shutil.copytree(FOLDER, tmp_path / "b")
    assert module.drift(files, tmp_path / "b") == []
    (tmp_path / "b" / "karpenter.sh_nodepools.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "b" / "NOTICE").unlink()
    (tmp_path / "b" / "stale.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "b" / "LICENSE").unlink()
    assert module.drift(files, tmp_path / "b") == [
        "NOTICE: missing",
        "karpenter.sh_nodepools.json: differs",
        "stale.json: not generated",
        "LICENSE: missing (the Apache-2.0 text)",
    ]


def test_schemas_are_read_only_for_the_kinds_validated() -> None:
    registry = bundled.bundled_registry.__wrapped__()  # a fresh one: nothing read yet
    preset = pipeline.preset_path("llama3-8b-vllm-g5")
    assert preset is not None
    rendered = pipeline.render_loaded(
        load.load_spec_file(preset), header_command="t", crds=registry
    )
    kinds = {doc["kind"] for _, doc in pipeline.yaml_documents(rendered.files)}
    read = {c.kind for c in registry._versions.values() if "schema" in vars(c)}
    assert read == kinds & {k for _, _, k in EXPECTED_KINDS}
    assert "LeaderWorkerSet" not in read and "NodePool" in read


# --- with the official CRDs beside the repository ------------------------------------------------


@pytest.fixture(scope="module")
def official(raw_crds: CrdRegistry) -> Path:
    assert raw_crds.sources
    return raw_crds.sources[0]


def test_bundle_matches_the_official_crds(official: Path) -> None:
    assert script().main(["--check", "--source", str(official)]) == 0


def test_check_mode_fails_on_drift(official: Path, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    shutil.copytree(FOLDER, out)
    text = (out / "keda.sh_scaledobjects.json").read_text(encoding="utf-8")
    (out / "keda.sh_scaledobjects.json").write_text(text.replace('"enum"', '"x"', 1), "utf-8")
    module = script()
    assert module.main(["--check", "--source", str(official), "--out", str(out)]) == 1
    assert module.main(["--source", str(official), "--out", str(out)]) == 0
    assert module.main(["--check", "--source", str(official), "--out", str(out)]) == 0


def _verdict(result: DocResult) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    return result.status, result.messages, result.notes


def _mutations(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The document, with an unknown field, without each spec key, and with each spec scalar
    replaced by a value of another type."""
    yield doc
    spec = doc.get("spec", {})
    unknown = copy.deepcopy(doc)
    unknown["spec"]["bogus"] = 1
    yield unknown
    for key in spec:
        without = copy.deepcopy(doc)
        del without["spec"][key]
        yield without
    for key, value in spec.items():
        wrong = copy.deepcopy(doc)
        wrong["spec"][key] = [] if isinstance(value, (str, int, float, bool)) else "x"
        yield wrong


@pytest.mark.parametrize("preset", pipeline.preset_names())
def test_bundled_and_official_crds_give_the_same_verdicts(
    preset: str, raw_crds: CrdRegistry, crds: CrdRegistry
) -> None:
    path = pipeline.preset_path(preset)
    assert path is not None
    rendered = pipeline.render_loaded(load.load_spec_file(path), header_command="t", crds=crds)
    custom = [
        (name, doc)
        for name, doc in pipeline.yaml_documents(rendered.files)
        if crds.versions_of(doc["apiVersion"].rpartition("/")[0], doc["kind"])
    ]
    assert len(custom) >= 4
    compared = 0
    for name, doc in custom:
        for variant in _mutations(doc):
            with_bundle = check_documents([(name, variant)], crds=crds).results[0]
            with_raw = check_documents([(name, variant)], crds=raw_crds).results[0]
            assert _verdict(with_bundle) == _verdict(with_raw), (name, variant)
            compared += with_bundle.status == "invalid"
    assert compared >= 10  # the mutations did reach the schemas
