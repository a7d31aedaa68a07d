"""Glue: spec → checks → size → plan → render → check, all in memory; the write stage and the
CLI take it from here. It reads (the presets, and through the stages a spec's local
``config.json`` and the packaged data) and never writes a file.

The engine named by ``engine.type`` is looked up once, in the registry; the stages it feeds never
branch on its name.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmdeploy.errors import (
    Diagnostic,
    DoesNotFitError,
    LlmdeployError,
    MissesSloError,
    Notice,
    SpecError,
    UsageError,
    ValidationFailedError,
)

if TYPE_CHECKING:
    # Quick-mode `size` (no spec) needs only performance_of: the spec models and the YAML
    # loaders are imported by the functions that read a spec.
    from llmdeploy.check.crd import CrdRegistry
    from llmdeploy.check.documents import CheckReport
    from llmdeploy.perf.assess import Performance
    from llmdeploy.plan.types import Plan
    from llmdeploy.sizing.types import Sizing
    from llmdeploy.spec.load import LoadedSpec
    from llmdeploy.spec.sections import Spec


@dataclass(frozen=True)
class Rendered:
    loaded: LoadedSpec
    sizing: Sizing
    files: tuple[tuple[str, str], ...]
    report: CheckReport
    warnings: tuple[Diagnostic, ...] = ()  # every warning and note, located; the CLI prints them
    notices: tuple[Notice, ...] = ()  # the later stages' part of them, as they reported it
    executables: frozenset[str] = frozenset()  # files the plan marks executable (ExtraFile)
    performance: Performance | None = None  # the perf stage's verdict, when the SLO has targets


def yaml_documents(files: Sequence[tuple[str, str]]) -> list[tuple[str, Any]]:
    """Parse rendered YAML files back the way the cluster reads them (every document of every
    *.yaml except kustomization.yaml)."""
    from llmdeploy.check.documents import rendered_documents

    return rendered_documents(files)


@dataclass(frozen=True)
class Sized:
    loaded: LoadedSpec
    sizing: Sizing
    warnings: tuple[Diagnostic, ...]  # the checks' and the sizing's, located; the CLI prints them
    # the performance model at the SLO load; None when it was not asked for or the
    # configuration does not fit (a model of a replica that cannot start means nothing)
    performance: Performance | None = None
    # the spec as planned: the loaded one with the batch limits it leaves out decided
    spec: Spec | None = None
    batching: str | None = None  # what was decided (None: the spec set the limits)
    token_budget: str | None = None  # the token budget decided (None: the spec's or the default)


def performance_of(
    spec: Spec | None,
    sizing: Sizing,
    *,
    ttft_ms: float | None = None,
    itl_ms: float | None = None,
    threshold: bool = True,
) -> Performance | None:
    """The perf stage: the sized configuration at the spec's SLO load (None: it does not fit).
    ``spec=None`` is quick mode (``size --model``): estimates at the request's load, against
    the latency targets given here (the spec's ``slo`` otherwise). ``threshold=False`` skips
    the model's autoscaling threshold."""
    from llmdeploy.engines import registry
    from llmdeploy.perf.assess import assess

    if not sizing.fits:
        return None
    run = registry.get(sizing.engine).engine_run(sizing, spec)
    return assess(sizing, run, spec, ttft_ms, itl_ms, threshold=threshold)


def _perf_warnings(loaded: LoadedSpec, perf: Performance | None) -> tuple[Diagnostic, ...]:
    """The perf stage's warnings, each located at the field it is about,
    and a note when the spec's latency targets could not be checked."""
    if perf is None:
        return ()
    slo = loaded.spec.slo
    if perf.unsupported is not None and (slo.ttft_ms or slo.itl_ms):
        at = "slo.ttftMs" if slo.ttft_ms else "slo.itlMs"
        message = (
            "latency targets not checked: the performance model does not cover this "
            f"configuration: {perf.unsupported}"
        )
        return (loaded.diagnostic(at, message, None, "note"),)

    return tuple(loaded.diagnostic(at, w, None, "warning") for at, w in perf.located_warnings())


def size_loaded(
    loaded: LoadedSpec, *, suggest: bool = True, performance: bool = False, threshold: bool = True
) -> Sized:
    """The one validation path of every command that reads a spec (``size``, ``render``): the
    checks that need no sizing (:func:`llmdeploy.spec.checks.check_spec`), then the sizing,
    every error located in the spec. ``suggest=False`` computes suggestions only when the
    configuration does not fit (``render`` needs them only to explain a refusal).
    ``performance=True`` adds the perf stage's result (``threshold=False``: without the
    model's autoscaling threshold)."""
    from llmdeploy.engines import registry
    from llmdeploy.perf.token_budget import decide_for_spec
    from llmdeploy.sizing.requests import size_spec
    from llmdeploy.spec.checks import check_spec, located

    warnings = check_spec(loaded)
    base_dir = loaded.path.parent if loaded.path is not None else None
    spec = loaded.spec
    with located(loaded, "model.architecture"):
        sizing = size_spec(spec, base_dir, suggest=suggest)
        if not sizing.fits and not suggest:  # the suggestions explain what would fit
            sizing = size_spec(spec, base_dir)
        # batch limits the spec leaves out are decided from the sized KV cache, and the
        # spec is sized once more with them (they move the activation and CUDA-graph memory)
        decided, why = registry.get(spec.engine.type).decide_batching(spec, sizing)
        if why is not None:
            spec = decided
            sizing = size_spec(spec, base_dir, suggest=suggest)
        # then the token budget, from the SLO through the performance model (each candidate
        # sized on its own: the budget moves the activation peak and so the KV cache)
        spec, sizing, budget = decide_for_spec(spec, sizing, base_dir, suggest=suggest)
    nodes = _node_checks(loaded, sizing)
    perf = performance_of(spec, sizing, threshold=threshold) if performance else None
    return Sized(
        loaded=loaded,
        sizing=sizing,
        warnings=warnings + nodes + _at(loaded, sizing.notices),
        performance=perf,
        spec=spec,
        batching=why,
        token_budget=budget.why if budget is not None else None,
    )


def _with_queue_threshold(spec: Spec, perf: Performance | None) -> Spec:
    """The spec with ``autoscaling.waitingRequestsPerReplica`` filled in from the model when
    the spec leaves it out (docs/performance-model.md, "Autoscaling threshold")."""
    a = spec.autoscaling
    if a.waiting_requests_per_replica is not None or perf is None or perf.queue_threshold is None:
        return spec
    update = {"waiting_requests_per_replica": perf.queue_threshold}
    return spec.model_copy(update={"autoscaling": a.model_copy(update=update)})


def _node_checks(loaded: LoadedSpec, sizing: Sizing) -> tuple[Diagnostic, ...]:
    """What Karpenter will do with the nodes of the sized spec (``plan.node_checks``): raises
    SpecError with every error, located; returns the warnings, located."""
    from llmdeploy.plan.node_checks import node_findings

    found = sorted(
        (loaded.locate(d) for d in node_findings(loaded.spec, sizing.instance, sizing.nodes)),
        key=lambda d: (d.line or 0, d.column or 0),
    )
    if any(d.severity == "error" for d in found):
        raise SpecError(found)
    return tuple(found)


def _at(loaded: LoadedSpec, notices: Sequence[Notice]) -> tuple[Diagnostic, ...]:
    """Later stages' warnings and assumptions, located at their spec field."""
    return tuple(loaded.diagnostic(n.key_path, n.message, n.hint, n.severity) for n in notices)


def render_loaded(
    loaded: LoadedSpec,
    *,
    header_command: str,
    crds: CrdRegistry | None = None,
    kube_version: str | None = None,
    force: bool = False,
) -> Rendered:
    from llmdeploy import render
    from llmdeploy.check import ahead
    from llmdeploy.check.documents import DEFAULT_KUBE_VERSION
    from llmdeploy.engines import registry
    from llmdeploy.spec.checks import located

    spec = loaded.spec
    # built-in kinds are checked against the cluster's own Kubernetes version; a validator
    # forked at start-up builds what it needs for it while this process renders
    cluster_version = spec.cluster.kubernetes_version
    kube_version = kube_version or (
        f"{cluster_version}.0" if cluster_version else DEFAULT_KUBE_VERSION
    )
    ahead.prepare(kube_version)
    # the model runs only when its answer changes the output: a latency target to check, or
    # the autoscaling threshold to derive from it
    slo = spec.slo
    # the model's queue threshold only when it is rendered: the spec leaves the field out
    sized = size_loaded(
        loaded,
        suggest=False,
        performance=bool(slo.ttft_ms or slo.itl_ms),
        threshold=spec.autoscaling.waiting_requests_per_replica is None,
    )
    sizing, perf = sized.sizing, sized.performance
    spec = sized.spec or spec
    if not sizing.fits and not force:
        raise DoesNotFitError(
            f"{loaded.label}: this configuration cannot start: " + "; ".join(sizing.reasons),
            sizing,
        )
    if sizing.instance is None:
        raise DoesNotFitError(f"{loaded.label}: no instance type fits", sizing)
    if perf is not None and perf.meets_slo is False and not force:
        raise MissesSloError(
            f"{loaded.label}: the performance model says this configuration misses the SLO: "
            + "; ".join(perf.misses()),
            sizing,
            perf,
        )
    spec = _with_queue_threshold(spec, perf)
    with located(loaded, registry.get(spec.engine.type).version_field):
        the_plan = make_plan(spec, sizing, header_command)
    files = render.render_plan(the_plan, loaded.header_name or loaded.label)
    report = ahead.check_files(files, crds=crds, kube_version=kube_version)
    if not report.ok:
        raise ValidationFailedError(
            f"{loaded.label}: rendered manifests failed validation (a bug in llmdeploy; "
            "please report it)",
            report,
        )
    return Rendered(
        loaded=loaded,
        sizing=sizing,
        performance=perf,
        files=files,
        report=report,
        warnings=sized.warnings + _perf_warnings(loaded, perf) + _at(loaded, the_plan.notices),
        notices=sizing.notices + the_plan.notices,
        executables=frozenset(e.filename for e in the_plan.extra_files if e.executable),
    )


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


def one_namespace_each(specs: Sequence[LoadedSpec]) -> list[LoadedSpec]:
    """A fleet renders each Namespace once: by the first spec (in input order) that renders
    the namespace it deploys into; the later ones in that namespace leave it out (two copies
    of one object make `kustomize build` of the fleet fail: "already registered id")."""
    seen: set[str] = set()
    out: list[LoadedSpec] = []
    for ls in specs:
        ops = ls.spec.gitops
        if ops.namespace and ls.spec.namespace in seen:
            gitops = ops.model_copy(update={"namespace": False})
            ls = dataclasses.replace(ls, spec=ls.spec.model_copy(update={"gitops": gitops}))
        elif ops.namespace:
            seen.add(ls.spec.namespace)
        out.append(ls)
    return out


def render_many(
    specs: Sequence[LoadedSpec],
    *,
    header_command: str,
    crds: CrdRegistry | None = None,
    kube_version: str | None = None,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[Rendered]:
    """Render several specs, in input order. Large fleets use forked worker processes, which
    inherit the loaded modules and the CRD registry; the output is the same as in one process.
    ``progress(done, total)`` is called as specs are rendered."""
    job: dict[str, Any] = dict(
        header_command=header_command, crds=crds, kube_version=kube_version, force=force
    )
    report = progress or (lambda done, total: None)
    specs = one_namespace_each(specs)
    workers = min(os.cpu_count() or 1, len(specs))
    parallel = len(specs) >= PARALLEL_MIN_SPECS and workers >= 2
    if parallel:
        import multiprocessing as mp  # fleets only: ~8 ms of imports

        parallel = "fork" in mp.get_all_start_methods()
    if parallel:
        from llmdeploy.check import ahead

        ahead.stop()  # the workers validate: the validator forked at start-up is not needed
    if not parallel:
        out = []
        for i, ls in enumerate(specs):
            out.append(render_loaded(ls, **job))
            report(i + 1, len(specs))
        return out
    _JOB.clear()
    _JOB.update(job)
    outcomes = []
    with mp.get_context("fork").Pool(workers) as pool:
        chunk = max(1, len(specs) // (4 * workers))
        for outcome in pool.imap(_render_job, specs, chunksize=chunk):
            outcomes.append(outcome)
            report(len(outcomes), len(specs))
    for outcome in outcomes:
        if isinstance(outcome, LlmdeployError):
            raise outcome
    return [o for o in outcomes if isinstance(o, Rendered)]


def preset_dir() -> Path:
    here = Path(__file__).resolve().parent
    packaged = here / "presets"
    if packaged.is_dir():
        return packaged
    return here.parents[1] / "presets"


def preset_names() -> list[str]:
    return sorted(p.stem for p in preset_dir().glob("*.yaml"))


def unknown_preset(name: str) -> UsageError:
    """The error for a name that is no preset: the closest preset's name, and all of them."""
    import difflib

    names = preset_names()
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UsageError(f"unknown preset {name!r}{hint}; available: {', '.join(names)}")


def preset_path(name: str) -> Path | None:
    path = preset_dir() / f"{name}.yaml"
    return path if path.is_file() and "/" not in name and "\\" not in name else None
