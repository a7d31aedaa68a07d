"""Shared fixtures: where the official CRDs are, and the --update-golden switch."""

from __future__ import annotations

import os
from pathlib import Path

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


@pytest.fixture(scope="session")
def crd_dir() -> Path:
    path = crds_dir()
    if not path.is_dir():
        pytest.fail(f"official CRDs not found at {path} (set LLMDEPLOY_TEST_CRDS)")
    return path


@pytest.fixture(scope="session")
def crds(crd_dir: Path) -> object:
    from llmdeploy.check.documents import CrdRegistry

    return CrdRegistry.from_dirs([crd_dir])
