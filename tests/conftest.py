"""Shared fixtures: the CRD schemas, and the --update-golden switch.

Tests validate custom kinds against the CRD schemas bundled in the package, so they pass in a
clone with nothing beside it. When the official CRDs are beside the repository (``../shared/crds``;
``LLMDEPLOY_SHARED`` or ``LLMDEPLOY_TEST_CRDS`` override), tests also check the bundle against
them (tests/test_crd_bundle.py) and the ``crd_dir`` fixture is that directory.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import settings

# CI explores the same examples on every run (a red build is always reproducible); local runs
# keep hypothesis' random exploration and its example database.
settings.register_profile("ci", derandomize=True, deadline=None, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "golden"


def shared_dir() -> Path:
    """../shared beside the repository (CI lays a copy there); LLMDEPLOY_SHARED overrides."""
    return Path(os.environ.get("LLMDEPLOY_SHARED", REPO.parent / "shared"))


def crds_dir() -> Path:
    return Path(os.environ.get("LLMDEPLOY_TEST_CRDS", shared_dir() / "crds"))


@functools.cache
def load_script(relative: str) -> ModuleType:
    """A script of the repository (``scripts/gen_docs.py``, ``benchmarks/bench.py``) as a module:
    neither folder is a package."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(f"llmdeploy_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="Rewrite tests/golden/**/expected from the current output.",
    )


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def official_crds() -> Path | None:
    """The official CRD directory, when it is there."""
    path = crds_dir()
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def crd_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of CRDs for ``--crd-dir``: the official ones when present, else the bundled
    schemas written back as CustomResourceDefinition documents."""
    return official_crds() or write_bundle_as_crds(tmp_path_factory.mktemp("bundled-crds"))


@pytest.fixture(scope="session")
def crds() -> object:
    """The bundled CRD schemas: what ``render`` and ``validate`` use by default."""
    from llmdeploy.check.bundled import bundled_registry

    return bundled_registry()


@pytest.fixture(scope="session")
def raw_crds() -> object:
    """The official CRD files as a registry; skips when they are not beside the repository."""
    path = official_crds()
    if path is None:
        pytest.skip(f"official CRDs not found at {crds_dir()} (optional cross-check)")
    from llmdeploy.check.crd import CrdRegistry

    return CrdRegistry.from_dirs([path])


def write_bundle_as_crds(folder: Path) -> Path:
    """One minimal CRD file per bundled kind (JSON is YAML), for tests that exercise --crd-dir."""
    from llmdeploy.check import bundled

    for entry in bundled.manifest()["kinds"]:
        schemas: dict[str, Any] = bundled._kind_file(entry["file"])["versions"]
        plural = entry["file"].removesuffix(".json").partition("_")[2]
        doc = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{entry['group']}"},
            "spec": {
                "group": entry["group"],
                "names": {"kind": entry["kind"], "plural": plural},
                "scope": entry["scope"],
                "versions": [
                    {"name": v, "served": True, "storage": True, "schema": {"openAPIV3Schema": s}}
                    for v, s in schemas.items()
                ],
            },
        }
        (folder / entry["source"]["file"]).write_text(json.dumps(doc), encoding="utf-8")
    return folder


def unvalidated_kinds(report: Any, crds: Any) -> list[str]:
    """Kinds of a check report that were not validated, apart from PrometheusRule while no CRD
    for it is available: no official PrometheusRule CRD is bundled or in ../shared/crds yet
    (the alert rules' PromQL is parsed in tests/test_prometheus.py instead)."""
    missing_rule_crd = (
        crds is None or crds.lookup("monitoring.coreos.com", "v1", "PrometheusRule") is None
    )
    return [
        r.kind
        for r in report.not_validated
        if not (r.kind == "PrometheusRule" and missing_rule_crd)
    ]


# Fixtures whose value depends on ../shared being beside the repository.
SHARED_FIXTURES = frozenset({"crd_dir", "raw_crds", "official"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``shared`` every test that reads ../shared through a fixture (tests that read it
    directly carry the mark themselves): .ci/run runs the whole suite once in a fresh clone,
    with nothing beside it, and then only these with ../shared there."""
    for item in items:
        if SHARED_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.shared)
