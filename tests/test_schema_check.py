"""jsonschema-rs (the verdict, ``llmdeploy.check.crd.SchemaCheck``) against Python's jsonschema
(the validator before issue 25, which still lists a rejected document's errors): the same verdict
on every document of every golden render and on seeded mutations of each (a field removed, a
value of the wrong type, an unknown field, a value out of its enum or bounds), under the bundled
CRD schemas and kubernetes-validate's strict schemas."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

from llmdeploy import pipeline
from llmdeploy.check import bundled, documents
from llmdeploy.check.crd import SchemaCheck, _apply_defaults, _to_jsonschema
from llmdeploy.spec import load

GOLDEN = Path(__file__).resolve().parent / "golden"
MUTATIONS = 12
VERSION = "1.34.0"  # the goldens' cluster.kubernetesVersion


# Presets whose renders add kinds the goldens lack (a LeaderWorkerSet; Prometheus' Role).
PRESETS = ("llama31-405b-vllm-2xp5", "llama3-70b-vllm-p4d")
NO_SCHEMA = {"PrometheusRule"}  # no official CRD bundled yet (tests/conftest.unvalidated_kinds)


def golden_documents() -> list[dict[str, Any]]:
    texts = [p.read_text(encoding="utf-8") for p in sorted(GOLDEN.glob("**/expected/*.yaml"))]
    for preset in PRESETS:
        path = pipeline.preset_path(preset)
        assert path is not None
        rendered = pipeline.render_loaded(load.load_spec_file(path), header_command="t")
        texts += [text for name, text in rendered.files if name.endswith(".yaml")]
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for text in texts:
        for doc in yaml.safe_load_all(text):
            if not isinstance(doc, dict) or doc.get("kind") in (None, "Kustomization", *NO_SCHEMA):
                continue
            key = json.dumps(doc, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append(doc)
    return out


DOCS = golden_documents()


def paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*at, index))


def mutated(doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """``doc`` with one change at a random place."""
    out = copy.deepcopy(doc)
    # outside metadata where the document has more (a CRD's schema leaves ObjectMeta to the API
    # server, so a change to a label or an Argo CD sync-wave annotation tells nothing apart)
    places = [p for p in paths(out) if len(p) > 1]
    where = rng.choice([p for p in places if p[0] != "metadata"] or places)
    parent: Any = out
    for part in where[:-1]:
        parent = parent[part]
    last, value = where[-1], parent[where[-1]]
    change = rng.randrange(6)
    if change == 0 and isinstance(parent, dict):
        del parent[last]  # a required field, sometimes
    elif change == 1 and isinstance(value, dict):
        value["llmdeployUnknownField"] = 1  # closed objects refuse it
    elif change == 2:
        parent[last] = {str: 7, int: "7", bool: "yes", float: "x", dict: [], list: {}}.get(
            type(value)
        )
    elif change == 3 and isinstance(value, str):
        parent[last] = value + "-Not_An_Enum_Value"
    elif change == 4 and isinstance(value, int) and not isinstance(value, bool):
        parent[last] = rng.choice([-1, 0, 2**40, value + 1])
    else:
        parent[last] = None
    return out


def python_validator(doc: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """(Python validator, SchemaCheck, the data both see) for ``doc``'s kind."""
    group, _, version = str(doc["apiVersion"]).rpartition("/")
    crd = bundled.bundled_registry().lookup(group, version, str(doc["kind"]))
    if crd is not None:
        converted = _to_jsonschema(crd.schema, root=True)
        data = copy.deepcopy(doc)
        _apply_defaults(data, crd.schema, root=True)
        return jsonschema.Draft7Validator(converted), SchemaCheck(converted, draft7=True), data
    check = documents._builtin_validator(VERSION, str(doc["apiVersion"]), str(doc["kind"]))
    _, defs = documents._definitions(VERSION)
    registry = Resource.from_contents(defs) @ Registry()
    return jsonschema.Draft202012Validator(check.schema, registry=registry), check, doc


def test_the_goldens_cover_the_kinds_llmdeploy_renders() -> None:
    kinds = {str(d["kind"]) for d in DOCS}
    assert {"Deployment", "Service", "NodePool", "EC2NodeClass", "ScaledObject"} <= kinds
    assert {"ServiceMonitor", "LeaderWorkerSet", "Job", "ConfigMap", "NetworkPolicy"} <= kinds
    assert {"Role", "RoleBinding", "PodDisruptionBudget", "TriggerAuthentication"} <= kinds


@pytest.mark.parametrize("kind", sorted({str(d["kind"]) for d in DOCS}))
def test_both_validators_give_the_same_verdict(kind: str) -> None:
    rng = random.Random(kind)
    rejected = 0
    for doc in (d for d in DOCS if d["kind"] == kind):
        python, fast, data = python_validator(doc)
        for case in [data, *(mutated(data, rng) for _ in range(MUTATIONS))]:
            verdict = not any(True for _ in python.iter_errors(case))
            assert fast.is_valid(case) == verdict, (kind, case)
            assert (fast.iter_errors(case) == []) == verdict
            rejected += not verdict
    assert rejected, f"no mutation of a {kind} was rejected: the test proves nothing"


def test_a_rejected_document_keeps_its_messages() -> None:
    deployment = next(d for d in DOCS if d["kind"] == "Deployment")
    bad = copy.deepcopy(deployment)
    bad["spec"]["replicas"] = "two"
    bad["spec"]["llmdeployUnknownField"] = 1
    check = documents._builtin_validator(VERSION, "apps/v1", "Deployment")
    from llmdeploy.check.crd import schema_error_messages

    assert schema_error_messages(check.iter_errors(bad)) == [
        "spec.replicas: 'two' is not of type 'integer', 'null'",
        'unknown field "spec.llmdeployUnknownField"',
    ]
