"""Glue: spec → size → plan → render → check, all in memory; the write stage and the CLI take it
from here. Besides reading the spec's own files (a local ``config.json``) and the presets,
nothing here touches the disk.

The engine named by ``engine.type`` is looked up once, in the registry; the stages it feeds never
branch on its name.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmdeploy.errors import (
    DoesNotFitError,
    ExitCode,
    LlmdeployError,
    Notice,
    SpecError,
    SpecFieldError,
    UnsupportedFlagError,
    ValidationFailedError,
)
from llmdeploy.spec.load import LoadedSpec

if TYPE_CHECKING:
    from llmdeploy.check.crd import CrdRegistry
    from llmdeploy.check.documents import CheckReport
    from llmdeploy.plan.types import Plan
    from llmdeploy.sizing.types import Sizing
    from llmdeploy.spec.sections import Spec


@dataclass(frozen=True)
class Rendered:
    loaded: LoadedSpec
    sizing: Sizing
    files: tuple[tuple[str, str], ...]
    report: CheckReport
    notices: tuple[Notice, ...] = ()  # warnings and assumptions about spec fields


def yaml_documents(files: Sequence[tuple[str, str]]) -> list[tuple[str, Any]]:
    """Parse rendered YAML files back the way the cluster reads them (every document of every
    *.yaml except kustomization.yaml)."""
    from llmdeploy.check.documents import parse_documents

    docs: list[tuple[str, Any]] = []
    for name, text in files:
        if not name.endswith(".yaml") or name.endswith("kustomization.yaml"):
            continue
        docs.extend((name, doc) for _, doc in parse_documents(text, name))
    return docs


def render_loaded(
    loaded: LoadedSpec,
    *,
    header_command: str,
    crds: CrdRegistry | None = None,
    kube_version: str | None = None,
    force: bool = False,
) -> Rendered:
    from llmdeploy import render
    from llmdeploy.check import documents as check
    from llmdeploy.engines import registry
    from llmdeploy.sizing.requests import size_spec

    spec = loaded.spec
    base_dir = loaded.path.parent if loaded.path is not None else None
    with _located(loaded, "model.architecture"):
        sizing = size_spec(spec, base_dir, suggest=False)
        if not sizing.fits:  # the suggestions explain what would fit
            sizing = size_spec(spec, base_dir)
    if not sizing.fits and not force:
        raise DoesNotFitError(
            f"{loaded.label}: this configuration cannot start: " + "; ".join(sizing.reasons),
            sizing,
        )
    if sizing.instance is None:
        raise DoesNotFitError(f"{loaded.label}: no instance type fits", sizing)
    with _located(loaded, registry.get(spec.engine.type).version_field):
        the_plan = make_plan(spec, sizing, header_command)
    files = render.render_plan(the_plan, loaded.label)
    report = check.check_documents(
        yaml_documents(files),
        crds=crds,
        kube_version=kube_version or check.DEFAULT_KUBE_VERSION,
    )
    if not report.ok:
        raise ValidationFailedError(
            f"{loaded.label}: rendered manifests failed validation (a bug in llmdeploy; "
            "please report it)",
            report,
        )
    notices = sizing.notices + the_plan.notices
    return Rendered(loaded=loaded, sizing=sizing, files=files, report=report, notices=notices)


def size_loaded(loaded: LoadedSpec) -> Sizing:
    """``llmdeploy size SPEC``: the sizing with its suggestions, spec errors located."""
    from llmdeploy.sizing.requests import size_spec

    base_dir = loaded.path.parent if loaded.path is not None else None
    with _located(loaded, "model.architecture"):
        return size_spec(loaded.spec, base_dir)


def make_plan(spec: Spec, sizing: Sizing, header_command: str) -> Plan:
    """The plan: the engine's part (through the registry), completed by the shared stage."""
    from llmdeploy.engines import registry
    from llmdeploy.plan.assemble import assemble

    assert sizing.instance is not None
    parts = registry.get(spec.engine.type).plan(spec, sizing.instance, sizing, header_command)
    return assemble(spec, sizing.instance, parts, header_command)


# A fleet of at least this many specs is rendered by worker processes (one per core).
PARALLEL_MIN_SPECS = 8
_JOB: dict[str, Any] = {}


def _render_job(loaded: LoadedSpec) -> Rendered | LlmdeployError:
    try:
        return render_loaded(loaded, **_JOB)
    except LlmdeployError as exc:  # returned, not raised: the parent reports the first one
        return exc


def render_many(
    specs: Sequence[LoadedSpec],
    *,
    header_command: str,
    crds: CrdRegistry | None = None,
    kube_version: str | None = None,
    force: bool = False,
) -> list[Rendered]:
    """Render several specs, in input order. Large fleets use forked worker processes, which
    inherit the loaded modules and the CRD registry; the output is the same as in one process."""
    job: dict[str, Any] = dict(
        header_command=header_command, crds=crds, kube_version=kube_version, force=force
    )
    workers = min(os.cpu_count() or 1, len(specs))
    if len(specs) < PARALLEL_MIN_SPECS or workers < 2 or "fork" not in mp.get_all_start_methods():
        return [render_loaded(ls, **job) for ls in specs]
    _JOB.clear()
    _JOB.update(job)
    with mp.get_context("fork").Pool(workers) as pool:
        outcomes = pool.map(_render_job, specs, chunksize=max(1, len(specs) // (4 * workers)))
    for outcome in outcomes:
        if isinstance(outcome, LlmdeployError):
            raise outcome
    return [o for o in outcomes if isinstance(o, Rendered)]


@contextlib.contextmanager
def _located(loaded: LoadedSpec, key_path: str) -> Iterator[None]:
    """Give errors raised by later stages a FILE:LINE:COL in the spec."""
    try:
        yield
    except UnsupportedFlagError as exc:
        raise SpecError([loaded.diagnostic(key_path, exc.message)]) from None
    except SpecFieldError as exc:
        raise SpecError([loaded.diagnostic(exc.key_path, exc.message, exc.hint)]) from None
    except SpecError as exc:
        diags = [
            d if d.line is not None else loaded.diagnostic(key_path, d.message, d.hint)
            for d in exc.diagnostics
        ]
        raise type(exc)(diags) from None
    except LlmdeployError as exc:
        if exc.exit_code != ExitCode.SPEC:
            raise
        raise SpecError([loaded.diagnostic(key_path, exc.message)]) from None


def preset_dir() -> Path:
    here = Path(__file__).resolve().parent
    packaged = here / "presets"
    if packaged.is_dir():
        return packaged
    return here.parents[1] / "presets"


def preset_names() -> list[str]:
    return sorted(p.stem for p in preset_dir().glob("*.yaml"))


def preset_path(name: str) -> Path | None:
    path = preset_dir() / f"{name}.yaml"
    return path if path.is_file() and "/" not in name and "\\" not in name else None
