"""Command line. The only module that prints or exits.

Heavy modules (pydantic models, Jinja, validators, rich) are imported inside the commands
that need them, so ``llmdeploy --version`` and ``--help`` stay fast.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional

import typer

from llmdeploy import __version__
from llmdeploy.errors import (
    Diagnostic,
    DoesNotFitError,
    DriftError,
    ExitCode,
    LlmdeployError,
    MissesSloError,
    SpecError,
    UsageError,
    ValidationFailedError,
    worst_exit_code,
)

if TYPE_CHECKING:
    from llmdeploy.check.crd import CrdRegistry
    from llmdeploy.check.documents import CheckReport
    from llmdeploy.cli.plan_report import SpecPlan
    from llmdeploy.spec.load import LoadedSpec

EPILOG = (
    "\b\n"  # click: do not rewrap this paragraph
    "Examples:\n"
    "  llmdeploy render --preset llama3-8b-vllm-g5 -o -  # stream for kubectl apply -f -\n"
    "  llmdeploy render spec.yaml -o deploy/ --crd-dir crds/  # one file per resource\n"
    "  llmdeploy render --check spec.yaml -o deploy/  # CI drift check\n"
    "  llmdeploy size spec.yaml  # does it fit, and does it meet the SLO?\n"
    "  llmdeploy size --model llama-3-70b --instance g5.12xlarge --tp 4\n"
    "  llmdeploy plan --preset llama3-70b-vllm-p4d --family p4d  # cheapest that meets it\n\n"
    "Exit codes: 0 ok, 1 internal error, 2 usage, 3 invalid spec, 4 does not fit, "
    "5 validation failed, 6 drift, 7 I/O, 8 misses the SLO (docs/exit-codes.md)."
)

app = typer.Typer(
    name="llmdeploy",
    help="One YAML spec to validated Karpenter + vLLM/TensorRT-LLM + KEDA manifests for EKS.",
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
presets_app = typer.Typer(help="List and show built-in presets.", no_args_is_help=False)
app.add_typer(presets_app, name="presets")

_STATE = {"debug": False}

CrdDirs = Annotated[
    Optional[list[Path]],  # noqa: UP045 - typer needs Optional at runtime on 3.10
    typer.Option(
        "--crd-dir",
        help="Directory of CustomResourceDefinition YAMLs to validate custom kinds against, "
        "instead of the bundled CRD schemas (repeatable; env LLMDEPLOY_CRD_DIR, ':'-separated).",
    ),
]
KubeVersion = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--kube-version", help="Kubernetes version for built-in schemas (e.g. 1.34.0)."),
]


FORMATS = ("text", "json", "markdown")
FormatOption = Annotated[
    str,
    typer.Option(
        "--format",
        help="text (default), json, or markdown (a pull-request comment).",
        show_default=False,
    ),
]


def _format(value: str, as_json: bool = False) -> str:
    if value not in FORMATS:
        raise UsageError(f"--format {value!r}: expected one of {', '.join(FORMATS)}")
    if as_json and value == "markdown":
        raise UsageError("--json and --format markdown: give one")
    return "json" if as_json else value


def _err(text: str = "") -> None:
    sys.stderr.write(text + "\n")


def _snippet(d: Diagnostic, width: int) -> None:
    """The source line under a diagnostic, with a caret at its column."""
    if d.source_line is not None and d.line is not None:
        _err(f" {d.line:>{width}} | {d.source_line}")
        col = max(1, d.column or 1)
        prefix = "".join(ch if ch == "\t" else " " for ch in d.source_line[: col - 1])
        _err(f" {' ' * width} | {prefix}^")


def _print_diagnostic(d: Diagnostic) -> None:
    """rustc's layout: the located message, its source line, then `= note:` lines (each with
    its own location and source line) and the `= hint:`; one gutter width for all of them."""
    _err(f"{d.location()}: {d.severity}: {d.message}")
    width = max(len(str(x.line or "")) for x in (d, *d.notes))
    _snippet(d, width)
    for note in d.notes:
        where = f"{note.location()}: " if note.line is not None else ""
        _err(f" {' ' * width} = note: {where}{note.message}")
        _snippet(note, width)
    if d.hint:
        _err(f" {' ' * width} = hint: {d.hint}")


def _print_warnings(warnings: Sequence[Diagnostic]) -> None:
    for d in warnings:
        _print_diagnostic(d)


def _fail(exc: LlmdeployError) -> NoReturn:
    if isinstance(exc, SpecError):
        for d in exc.diagnostics:
            _print_diagnostic(d)
        n = sum(d.severity == "error" for d in exc.diagnostics) or len(exc.diagnostics)
        _err(f"{n} error{'s' if n != 1 else ''} in spec")
    elif isinstance(exc, DoesNotFitError):
        _err(f"error: {exc.message}")
        for s in getattr(exc.sizing, "suggestions", ()):
            _err(f"  suggestion: {_suggestion_text(s)}")
        _err("  (use --force to render anyway; `llmdeploy size` shows the full breakdown)")
    elif isinstance(exc, MissesSloError):
        _err(f"error: {exc.message}")
        _err(
            "  (use --force to render anyway; `llmdeploy size` shows the estimate and "
            "`llmdeploy plan` searches for configurations that meet it)"
        )
    elif isinstance(exc, ValidationFailedError):
        _err(f"error: {exc.message}")
        if exc.report is not None:
            _print_report(exc.report, only_problems=True)
    elif isinstance(exc, DriftError):
        sys.stdout.write(exc.diff)
        _err(f"error: {exc.message}")
    else:
        _err(f"error: {exc.message}")
    raise typer.Exit(int(exc.exit_code))


def _suggestion_text(s: Any) -> str:
    verdict = "fits" if s.fits else "still does not fit"
    return (
        f"{s.change}: {verdict}, {s.kv_cache_gib_per_gpu:.2f} GiB KV cache per GPU, "
        f"{s.slo_requests_per_replica} of the SLO's requests per replica"
    )


def _run(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except LlmdeployError as exc:
        if _STATE["debug"]:
            raise
        _fail(exc)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _version_cb(value: bool) -> None:
    if value:
        sys.stdout.write(f"llmdeploy {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def main_callback(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version_cb, is_eager=True, help="Print the version."),
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    _STATE["debug"] = debug


# --- helpers ----------------------------------------------------------------------------------


def _crd_registry(dirs: list[Path] | None) -> CrdRegistry:
    """The CRDs in --crd-dir (or LLMDEPLOY_CRD_DIR), else the schemas bundled in the package."""
    all_dirs = list(dirs or [])
    env = os.environ.get("LLMDEPLOY_CRD_DIR")
    if not all_dirs and env:
        all_dirs = [Path(p) for p in env.split(os.pathsep) if p]
    if not all_dirs:
        from llmdeploy.check.bundled import bundled_registry

        return bundled_registry()
    for d in all_dirs:
        if not d.is_dir():
            raise UsageError(f"--crd-dir {d}: not a directory")
    from llmdeploy.check.crd import CrdRegistry

    return CrdRegistry.from_dirs(all_dirs)


def _load_specs(specs: list[Path], preset: str | None) -> list[LoadedSpec]:
    from llmdeploy import pipeline
    from llmdeploy.spec import load

    if preset is not None:
        if specs:
            raise UsageError("give either spec files or --preset, not both")
        path = pipeline.preset_path(preset)
        if path is None:
            raise pipeline.unknown_preset(preset)
        loaded = load.load_spec_file(path)
        return [dataclasses.replace(loaded, label=f"preset {preset}")]
    if not specs:
        raise UsageError("give a spec file (or a directory of specs), or --preset NAME")
    files: list[Path] = []
    for p in specs:
        if p.is_dir():
            found = sorted([*p.glob("*.yaml"), *p.glob("*.yml")])
            if not found:
                raise UsageError(f"{p}: no *.yaml specs in this directory")
            files.extend(found)
        else:
            files.append(p)
    loaded_all: list[LoadedSpec] = []
    errors: list[Diagnostic] = []
    for f in files:
        try:
            loaded_all.append(load.load_spec_file(f))
        except SpecError as exc:
            errors.extend(exc.diagnostics)
    if errors:
        raise SpecError(errors)
    seen: dict[tuple[str, str], str] = {}
    for ls in loaded_all:
        key = (ls.spec.namespace, ls.spec.name)
        if key in seen:
            raise UsageError(
                f"{ls.label}: name {key[1]!r} in namespace {key[0]!r} is already "
                f"used by {seen[key]}"
            )
        seen[key] = ls.label
    return loaded_all


def _print_report(report: Any, only_problems: bool = False) -> None:
    for r in report.results:
        if only_problems and r.status == "valid":
            continue
        where = f"{r.source}[{r.doc_index}] {r.kind}/{r.name}"
        if r.status == "invalid":
            for m in r.messages:
                _err(f"{where}: invalid: {m}")
        elif r.status == "not-validated":
            reason = "; ".join(r.messages) or "no schema available"
            _err(f"{where}: NOT validated: {reason}")
        for note in getattr(r, "notes", ()):
            _err(f"{where}: note: {note}")


def _crd_notes(reports: list[CheckReport], crds: CrdRegistry) -> None:
    """Which CRD set validated the custom kinds; which kinds it had no CRD for."""
    used = {r.crd for report in reports for r in report.results if r.crd}
    if used:
        origins = [o for o in crds.origins if o in used]
        versions = f" ({', '.join(origins)})" if crds.bundled else ""
        _err(f"note: custom kinds validated with {crds.label}{versions}")
    missing = sorted({r.kind for report in reports for r in report.not_validated})
    if missing:
        hint = "give --crd-dir" if crds.bundled else "--crd-dir replaces the bundled schemas"
        _err(
            f"warning: custom kinds not validated (no CRD for them in {crds.where}; {hint}): "
            f"{', '.join(missing)}"
        )


# --- render -----------------------------------------------------------------------------------


@app.command()
def render(
    specs: Annotated[
        Optional[list[Path]],  # noqa: UP045
        typer.Argument(help="Spec files or directories of specs.", show_default=False),
    ] = None,
    preset: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--preset", "-p", help="Render a built-in preset (see `presets`)."),
    ] = None,
    output: Annotated[
        str, typer.Option("--output", "-o", help="Output directory, or '-' for stdout.")
    ] = "-",
    check: Annotated[
        bool, typer.Option("--check", help="Do not write: exit 6 with a diff if -o DIR differs.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Render even if the sizing check says it cannot start or the SLO is missed.",
        ),
    ] = False,
    crd_dir: CrdDirs = None,
    kube_version: KubeVersion = None,
    output_format: FormatOption = "text",
) -> None:
    """Render manifests (validated) for one spec, a preset, or a fleet of specs."""
    _run(_render, specs or [], preset, output, check, force, crd_dir, kube_version, output_format)


def _render(
    specs: list[Path],
    preset: str | None,
    output: str,
    check: bool,
    force: bool,
    crd_dir: list[Path] | None,
    kube_version: str | None,
    output_format: str = "text",
) -> None:
    from llmdeploy import pipeline, render, write

    if check and output == "-":
        raise UsageError("--check needs -o DIR")
    if _format(output_format) != "text" and not check:
        raise UsageError(f"--format {output_format} is a format of `render --check` only")
    loaded = _load_specs(specs, preset)
    crds = _crd_registry(crd_dir)
    from llmdeploy.cli.regenerate import canonical

    source_words = [f"--preset {preset}"] if preset else [shlex.quote(str(s)) for s in specs]
    command = "llmdeploy render " + " ".join(source_words) + f" -o {shlex.quote(output)}"
    if force:
        command += " --force"
    # the headers: the same bytes however the paths were spelt and wherever it ran (item 1)
    canon = canonical(specs, preset, output, force=force)
    if preset is None:
        loaded = [
            dataclasses.replace(ls, header_name=canon.name(ls.path)) if ls.path else ls
            for ls in loaded
        ]
    fleet = len(loaded) > 1 or any(p.is_dir() for p in specs)
    if fleet:
        by_name: dict[str, str] = {}
        for ls in loaded:
            other = by_name.setdefault(ls.spec.name, ls.label)
            if other != ls.label:
                raise UsageError(
                    f"{ls.label}: name {ls.spec.name!r} is also used by {other}; in a fleet each "
                    "spec renders into a subdirectory named after it, so names must be unique"
                )
    with _Progress() if fleet else contextlib.nullcontext() as progress:
        results = pipeline.render_many(
            loaded,
            header_command=canon.command,
            crds=crds,
            kube_version=kube_version,
            force=force,
            progress=progress.task("render") if progress is not None else None,
        )
    if force and not any(_forced(res) for res in results):
        # --force changed nothing: the header is the command without it, as --check runs it
        canon = canonical(specs, preset, output)
        results = pipeline.render_many(
            loaded, header_command=canon.command, crds=crds, kube_version=kube_version
        )
    files: dict[str, str] = {}
    executable: set[str] = set()
    for res in results:
        prefix = f"{res.loaded.spec.name}/" if fleet else ""
        for name, text in res.files:
            files[prefix + name] = text
        executable.update(prefix + name for name in res.executables)
    if fleet:
        head = render.header("a fleet of specs", canon.command)
        subdirs = [f"{res.loaded.spec.name}" for res in results]
        files["kustomization.yaml"] = head + render.render_template(
            "k8s/kustomization.yaml.j2", files=subdirs
        )
    for res in results:
        _print_warnings(res.warnings)
        if not res.sizing.fits:
            _err(
                f"warning: {res.loaded.label}: rendered with --force although it does not fit: "
                + "; ".join(res.sizing.reasons)
            )
        perf = res.performance
        if perf is not None and perf.meets_slo is False:
            _err(
                f"warning: {res.loaded.label}: rendered with --force although the performance "
                "model says it misses the SLO: " + "; ".join(perf.misses())
            )
    _crd_notes([res.report for res in results], crds)
    if output == "-":
        skipped = []
        out = []
        for name, text in files.items():
            if not name.endswith(".yaml") or name.endswith("kustomization.yaml"):
                if not name.endswith("kustomization.yaml"):
                    skipped.append(name)
                continue
            out.append(f"---\n# Source: {name}\n{text}")
        sys.stdout.write("".join(out))
        for name in skipped:
            _err(f"note: {name} is not a Kubernetes manifest; use -o DIR to write it")
        return
    root = Path(output)
    if check:
        diff = write.diff_tree(root, files, executable)
        if output_format != "text":
            _check_report(output_format, root, files, executable, command, diff)
            if diff:
                raise typer.Exit(int(ExitCode.DRIFT))
            return
        if diff:
            raise DriftError(f"{root} differs from what the spec renders; run: {command}", diff)
        _err(f"{root}: up to date ({len(files)} files)")
        return
    removed = write.write_tree(root, files, executable)
    _err(
        f"wrote {len(files)} files to {root}"
        + (f"; removed {len(removed)} stale: {', '.join(removed)}" if removed else "")
    )


def _forced(res: Any) -> bool:
    """Whether a spec rendered only because of --force (it does not fit or misses the SLO)."""
    perf = res.performance
    return not res.sizing.fits or (perf is not None and perf.meets_slo is False)


def _check_report(
    output_format: str,
    root: Path,
    files: dict[str, str],
    executable: set[str],
    command: str,
    diff: str,
) -> None:
    """``render --check --format json|markdown`` on stdout (the exit code says the same)."""
    import json

    from llmdeploy import write
    from llmdeploy.cli import markdown_report

    doc = {
        "directory": str(root),
        "up_to_date": not diff,
        "files": len(files),
        "drifted": write.drifted(root, files, executable),
        "command": command,
        "diff": diff,
    }
    if output_format == "json":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(markdown_report.check(doc))


# --- size -------------------------------------------------------------------------------------


@app.command()
def size(
    specs: Annotated[
        Optional[list[Path]],  # noqa: UP045
        typer.Argument(
            help="Spec files or directories of specs (or use --model for quick mode).",
            show_default=False,
        ),
    ] = None,
    preset: Annotated[Optional[str], typer.Option("--preset", "-p")] = None,  # noqa: UP045
    model: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="Quick mode: catalog architecture name or path to a config.json."),
    ] = None,
    instance: Annotated[Optional[str], typer.Option(help="EC2 instance type.")] = None,  # noqa: UP045
    gpu: Annotated[Optional[str], typer.Option(help="GPU key, e.g. h100, a10g.")] = None,  # noqa: UP045
    gpu_memory_gib: Annotated[
        Optional[float], typer.Option(help="GPU memory (GiB, as torch reports it).")  # noqa: UP045
    ] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    dp: Annotated[int, typer.Option(help="Data-parallel ranks (GPUs = TP x DP).")] = 1,
    expert_parallel: Annotated[
        bool, typer.Option("--expert-parallel", help="MoE: whole experts per GPU.")
    ] = False,
    quantization: Annotated[str, typer.Option(help="none|fp8|int8|int4-awq|int4-gptq")] = "none",
    kv_cache_dtype: Annotated[str, typer.Option(help="auto|fp8")] = "auto",
    max_model_len: Annotated[Optional[int], typer.Option()] = None,  # noqa: UP045
    gpu_memory_utilization: Annotated[Optional[float], typer.Option()] = None,  # noqa: UP045
    engine: Annotated[str, typer.Option(help="vllm|trtllm")] = "vllm",
    engine_version: Annotated[Optional[str], typer.Option()] = None,  # noqa: UP045
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    nodes: Annotated[int, typer.Option(help="Nodes per replica (one pipeline stage each).")] = 1,
    pp: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="Pipeline-parallel degree (default: --nodes)."),
    ] = None,
    concurrency: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(min=1, help="Quick mode: concurrent requests at peak (default 16)."),
    ] = None,
    input_tokens: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(min=1, help="Quick mode: prompt length (default 512)."),
    ] = None,
    output_tokens: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(min=1, help="Quick mode: completion length (default 256)."),
    ] = None,
    ttft_ms: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(min=1, help="Quick mode: p99 time-to-first-token target."),
    ] = None,
    itl_ms: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(min=1, help="Quick mode: p99 inter-token latency target."),
    ] = None,
    arrival: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help="Quick mode: closed-loop|steady|poisson (default: poisson with "
            "--requests-per-second, else steady)."
        ),
    ] = None,
    requests_per_second: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option(min=0.001, help="Quick mode: peak request rate of an open (Poisson) loop."),
    ] = None,
    output_format: FormatOption = "text",
) -> None:
    """Size GPU memory and model performance: weights, KV cache, concurrency, latency and
    throughput at the SLO load, cost, verdicts and suggestions.

    Exit 0 when it fits and meets the SLO, 4 when it does not fit, 8 when it misses the SLO;
    for several specs, one row each and the worst of their exit codes.
    """
    _run(
        _size,
        specs or [],
        preset,
        model,
        instance,
        gpu,
        gpu_memory_gib,
        (tp, dp, expert_parallel),
        quantization,
        kv_cache_dtype,
        max_model_len,
        gpu_memory_utilization,
        engine,
        engine_version,
        (output_format, as_json),
        nodes,
        pp,
        (concurrency, input_tokens, output_tokens, ttft_ms, itl_ms, arrival, requests_per_second),
    )


def _size(
    specs: list[Path],
    preset: str | None,
    model: str | None,
    instance: str | None,
    gpu: str | None,
    gpu_memory_gib: float | None,
    parallel: tuple[int, int, bool],
    quantization: str,
    kv_cache_dtype: str,
    max_model_len: int | None,
    gpu_memory_utilization: float | None,
    engine: str,
    engine_version: str | None,
    fmt: tuple[str, bool],
    nodes: int,
    pp: int | None,
    load: tuple[
        int | None, int | None, int | None, int | None, int | None, str | None, float | None
    ],
) -> None:
    import dataclasses

    from llmdeploy import pipeline
    from llmdeploy.cli import perf_report, size_report
    from llmdeploy.sizing.requests import request_from_options
    from llmdeploy.sizing.suggest import size as size_with_suggestions

    output_format = _format(*fmt)
    if model is not None:
        if specs or preset is not None:
            raise UsageError("quick mode (--model) takes no spec file or preset")
        if sum(x is not None for x in (instance, gpu, gpu_memory_gib)) != 1:
            raise UsageError("quick mode needs exactly one of --instance, --gpu, --gpu-memory-gib")
        req = request_from_options(
            model,
            instance=instance,
            gpu=gpu,
            gpu_memory_gib=gpu_memory_gib,
            tp=parallel[0],
            dp=parallel[1],
            expert_parallel=parallel[2],
            quantization=quantization,
            kv_cache_dtype=kv_cache_dtype,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            engine=engine,
            engine_version=engine_version,
            pp=pp,
            nodes=nodes,
            base_dir=Path.cwd(),
        )
        concurrency, n_in, n_out, ttft_ms, itl_ms, arrival, rps = load
        pattern = arrival or ("poisson" if rps is not None else "steady")
        if pattern not in ("closed-loop", "steady", "poisson"):
            raise UsageError(f"--arrival {arrival!r}: expected closed-loop, steady or poisson")
        if pattern == "poisson" and rps is None:
            raise UsageError("--arrival poisson needs --requests-per-second")
        if pattern != "poisson" and rps is not None:
            raise UsageError(f"--requests-per-second is for --arrival poisson, not {pattern}")
        req = dataclasses.replace(
            req,
            slo_concurrent_requests=concurrency or req.slo_concurrent_requests,
            slo_input_tokens=n_in or req.slo_input_tokens,
            slo_output_tokens=n_out or req.slo_output_tokens,
            slo_arrival=pattern,
            slo_requests_per_s=rps,
        )
        result = size_with_suggestions(req)
        # the batch limit is decided from the sized KV cache, as for a spec
        from llmdeploy.engines import registry
        from llmdeploy.sizing.batching import with_raised_limit

        cap = registry.get(engine).max_sequences_cap
        result, batching = with_raised_limit(result, size_with_suggestions, cap=cap)
        # and the token budget from the SLO's targets (docs/performance-model.md)
        from llmdeploy.perf.token_budget import decide_for_request

        result, decided = decide_for_request(result, ttft_ms, itl_ms)
        budget = decided.why if decided is not None else None
        perf = pipeline.performance_of(None, result, ttft_ms=ttft_ms, itl_ms=itl_ms)
    else:
        if any(x is not None for x in load):
            raise UsageError(
                "--concurrency, --input-tokens, --output-tokens, --ttft-ms, --itl-ms, --arrival "
                "and --requests-per-second are quick-mode options; a spec sets them in its "
                "`slo` section"
            )
        if _is_fleet(specs):
            if output_format == "markdown":
                raise UsageError("--format markdown takes one spec (a fleet: --format json)")
            _size_fleet(_load_specs(specs, preset), output_format == "json")
            return
        loaded = _load_specs(specs, preset)[0]
        sized = pipeline.size_loaded(loaded, performance=True)
        _print_warnings(sized.warnings)
        result, perf = sized.sizing, sized.performance
        batching, budget = sized.batching, sized.token_budget
    if output_format == "json":
        import json

        doc = size_report.document(result, perf)
        if batching is not None:
            doc["batch_limit_decided"] = batching
        if budget is not None:
            doc["token_budget_decided"] = budget
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif output_format == "markdown":
        from llmdeploy.cli import markdown_report

        label = model if model is not None else loaded.label
        sys.stdout.write(markdown_report.size(label, size_report.document(result, perf)))
    else:
        from rich.console import Console

        console = Console(soft_wrap=False)
        console.print(size_report.table(result))
        if batching is not None:
            console.print(f"batch limit (decided): {batching}")
        if budget is not None:
            console.print(f"token budget (decided): {budget}")
        if perf is not None:
            console.print(perf_report.table(perf))
    code = size_report.exit_code(result, perf)
    if code:
        raise typer.Exit(code)


def _size_fleet(loaded_all: list[LoadedSpec], as_json: bool) -> None:
    """``size DIR``: every spec sized (its warnings and errors printed as they come), one row
    each, the worst exit code."""
    from llmdeploy import pipeline
    from llmdeploy.cli import size_report

    rows: list[tuple[str, str, Any, int]] = []  # (file, spec name, Sized or the error, exit code)
    with _Progress() as progress:
        step = progress.task("size")
        for i, ls in enumerate(loaded_all):
            if step is not None:
                step(i, len(loaded_all))
            try:
                sized = pipeline.size_loaded(ls, performance=True)
            except LlmdeployError as exc:
                if isinstance(exc, SpecError):
                    _print_warnings(exc.diagnostics)
                else:
                    _err(f"error: {ls.label}: {exc.message}")
                rows.append((ls.label, ls.spec.name, exc, int(exc.exit_code)))
                continue
            _print_warnings(sized.warnings)
            code = size_report.exit_code(sized.sizing, sized.performance)
            rows.append((ls.label, ls.spec.name, sized, code))
    if as_json:
        import json

        sys.stdout.write(json.dumps(size_report.fleet_json(rows), indent=2) + "\n")
    else:
        from rich.console import Console

        Console(soft_wrap=False).print(size_report.fleet_table(rows))
    code = worst_exit_code(c for *_, c in rows)
    if code:
        raise typer.Exit(code)


# --- plan -------------------------------------------------------------------------------------


@app.command()
def plan(
    specs: Annotated[
        Optional[list[Path]],  # noqa: UP045
        typer.Argument(
            help="Spec files (or directories of specs) whose model and SLO to plan for.",
            show_default=False,
        ),
    ] = None,
    preset: Annotated[Optional[str], typer.Option("--preset", "-p")] = None,  # noqa: UP045
    engine: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--engine", help="Engines to try (repeat; default: the spec's)."),
    ] = None,
    family: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--family", help="Instance families to try (repeat; default: all)."),
    ] = None,
    top: Annotated[int, typer.Option(min=1, max=100, help="Configurations to show.")] = 10,
    rank_by: Annotated[
        str,
        typer.Option(
            "--rank-by",
            help="usd-per-hour (the fleet's $/h at the SLO load), usd-per-1m-tokens, ttft or itl.",
        ),
    ] = "usd-per-hour",
    write: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--write", help="Write the best configuration as a spec to this file."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    output_format: FormatOption = "text",
) -> None:
    """Search instance type x TP x quantization (with the model's pre-quantized releases) x KV
    dtype x engine for configurations that fit and meet the spec's SLO with the replicas
    autoscaling.maxReplicas and cluster.gpuLimit allow, cheapest fleet ($/h) first.

    Exit 0 when one meets the SLO, 8 when none does, 4 when none fits; for several specs, one
    row each and the worst of their exit codes.
    """
    _run(_plan, specs or [], preset, engine, family, top, rank_by, write, (output_format, as_json))


def _is_fleet(specs: Sequence[Path]) -> bool:
    return len(specs) > 1 or any(p.is_dir() for p in specs)


class _Progress:
    """A rich progress bar on stderr while long work runs, only on a terminal: nothing when
    stderr is piped or redirected, under CI (``CI`` set, as GitHub Actions, GitLab CI and most
    others set it) or with ``TERM=dumb``."""

    def __init__(self) -> None:
        self._bar: Any = None
        if not sys.stderr.isatty() or os.environ.get("CI"):
            return  # rich is not even imported
        from rich.console import Console

        console = Console(stderr=True)
        if console.is_terminal and not console.is_dumb_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), console=console, transient=True)  # fmt: skip

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def task(self, description: str) -> Any:
        """A callback ``(done, total)`` for one task; None off a terminal."""
        if self._bar is None:
            return None
        task = self._bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            self._bar.update(task, completed=done, total=total)

        return update


def _plan(
    specs: list[Path],
    preset: str | None,
    engines: list[str] | None,
    families: list[str] | None,
    top: int,
    rank_by: str,
    write: Path | None,
    fmt: tuple[str, bool],
) -> None:
    from llmdeploy.cli import plan_report
    from llmdeploy.perf.search import SearchResult, search
    from llmdeploy.spec.edit import with_changes

    output_format = _format(*fmt)
    if write is not None and (str(write) == "-" or write.is_dir()):
        raise UsageError(f"--write {write}: give a file to write the spec to")
    fleet = _is_fleet(specs)
    if fleet and write is not None:
        raise UsageError("--write takes one spec: plan the folder, then --write each spec")
    loaded_all = _load_specs(specs, preset)
    plans: list[plan_report.SpecPlan] = []
    with _Progress() as progress:
        for ls in loaded_all:
            base_dir = ls.path.parent if ls.path is not None else None
            step = progress.task(f"plan {ls.label}")
            try:
                found = search(ls.spec, base_dir, engines, families, top, rank_by, step)
            except LlmdeployError as exc:
                if not fleet:
                    raise
                plans.append(plan_report.SpecPlan(ls.label, ls.spec.name, ls.spec.model.id, exc,
                                                  exc.exit_code))  # fmt: skip
                continue
            code = plan_report.exit_code(found)
            sp = plan_report.SpecPlan(ls.label, ls.spec.name, ls.spec.model.id, found, code)
            plans.append(sp)
    if fleet:
        if output_format == "markdown":
            raise UsageError("--format markdown takes one spec (a fleet: --format json)")
        _plan_fleet(plans, top, output_format == "json")
        return
    loaded, result, code = loaded_all[0], plans[0].outcome, plans[0].exit_code
    assert isinstance(result, SearchResult)
    if output_format == "json":
        import json

        sys.stdout.write(json.dumps(plan_report.to_json(result, top), indent=2) + "\n")
    elif output_format == "markdown":
        from llmdeploy.cli import markdown_report

        doc = plan_report.to_json(result, top)
        sys.stdout.write(markdown_report.plan(loaded.label, doc, None))
    else:
        from rich.console import Console

        Console(soft_wrap=False).print(plan_report.table(result, top, loaded.spec.model.id))
    if code == ExitCode.DOES_NOT_FIT:
        _err("error: no configuration fits")
        raise typer.Exit(code)
    if code == ExitCode.MISSES_SLO:
        _err("error: no configuration meets the SLO; the table shows the best that fit")
        raise typer.Exit(code)
    if write is not None:
        best = result.candidates[0]
        changes, replace, drop = plan_report.winner_edits(loaded.spec, best)
        text = with_changes(loaded.text, changes, replace, drop)
        _atomic_write(write, plan_report.with_rationale(text, loaded.spec, best, rank_by))
        _err(f"wrote the best configuration to {write}")
        if "model.id" in changes:
            _err(
                f"note: model.id is now {changes['model.id']}"
                + (
                    "; model.revision was dropped (it pinned the old checkpoint): pin the new "
                    "repo's commit you validated"
                    if loaded.spec.model.revision
                    else ""
                )
            )


def _plan_fleet(plans: list[SpecPlan], top: int, as_json: bool) -> None:
    from llmdeploy.cli import plan_report

    if as_json:
        import json

        doc = plan_report.fleet_json(plans, top)
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        from rich.console import Console

        Console(soft_wrap=False).print(plan_report.fleet_table(plans))
    for sp in plans:
        if isinstance(sp.outcome, LlmdeployError):
            _err(f"error: {sp.label}: {sp.outcome.message}")
    code = worst_exit_code(sp.exit_code for sp in plans)
    if code:
        raise typer.Exit(code)


# --- report -----------------------------------------------------------------------------------


@app.command()
def report(
    spec: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Argument(help="Spec file to report on.", show_default=False),
    ] = None,
    preset: Annotated[Optional[str], typer.Option("--preset", "-p")] = None,  # noqa: UP045
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path(
        "report.html"
    ),
    top: Annotated[int, typer.Option(min=1, max=100, help="plan candidates to plot.")] = 20,
) -> None:
    """Write one self-contained HTML page with pictures: TTFT and ITL against concurrency with
    the SLO, plan's candidates as cost against latency with the cheapest-per-latency front, and
    the per-GPU memory breakdown."""
    _run(_report, spec, preset, output, top)


def _report(spec: Path | None, preset: str | None, output: Path, top: int) -> None:
    from llmdeploy import pipeline
    from llmdeploy.cli import html_report
    from llmdeploy.perf.search import search

    if str(output) == "-" or output.is_dir():
        raise UsageError(f"-o {output}: give an HTML file to write")
    loaded = _load_specs([spec] if spec is not None else [], preset)[0]
    sized = pipeline.size_loaded(loaded, performance=True)
    _print_warnings(sized.warnings)
    perf = sized.performance
    points: tuple[html_report.CurvePoint, ...] = ()
    if perf is not None and perf.estimate is not None:
        points = html_report.curve(sized.sizing, loaded, perf.concurrency_per_replica)
    base_dir = loaded.path.parent if loaded.path is not None else None
    costs = html_report.cost_points(search(loaded.spec, base_dir, None, None, top))
    _atomic_write(output, html_report.page(loaded, sized.sizing, perf, points, costs))
    _err(f"wrote {output}")


# --- validate ---------------------------------------------------------------------------------


@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Manifest files or directories.")],
    crd_dir: CrdDirs = None,
    kube_version: KubeVersion = None,
) -> None:
    """Validate manifests: built-in kinds strictly, custom kinds against the bundled CRD schemas
    (or --crd-dir)."""
    _run(_validate, paths, crd_dir, kube_version)


def _validate(paths: list[Path], crd_dir: list[Path] | None, kube_version: str | None) -> None:
    from llmdeploy.check import documents as check

    crds = _crd_registry(crd_dir)
    report = check.check_paths(
        paths, crds=crds, kube_version=kube_version or check.DEFAULT_KUBE_VERSION
    )
    _print_report(report)
    _crd_notes([report], crds)
    valid = sum(1 for r in report.results if r.status == "valid")
    invalid = sum(1 for r in report.results if r.status == "invalid")
    skipped = len(report.not_validated)
    sys.stdout.write(f"{valid} valid, {invalid} invalid, {skipped} not validated\n")
    if not report.ok:
        raise ValidationFailedError(f"{invalid} invalid document(s)", None)  # already printed


# --- presets, schema, init --------------------------------------------------------------------


@presets_app.callback(invoke_without_command=True)
def presets_default(ctx: typer.Context) -> None:
    """List the built-in presets (also: `presets list`, `presets show NAME`)."""
    if ctx.invoked_subcommand is None:
        _run(_presets_list)


@presets_app.command("list")
def presets_list() -> None:
    """List the built-in presets."""
    _run(_presets_list)


def _presets_list() -> None:
    from llmdeploy import presets
    from llmdeploy.cli import preset_report

    sys.stdout.write(preset_report.listing(presets.catalog()))


@presets_app.command("show")
def presets_show(
    name: str,
    spec: Annotated[bool, typer.Option("--spec", help="Print the preset's spec file.")] = False,
) -> None:
    """Print a preset's rationale and sizing (or, with --spec, its spec)."""
    _run(_presets_show, name, spec)


def _presets_show(name: str, spec: bool) -> None:
    from llmdeploy import presets

    found = presets.summary(name)
    if spec:
        sys.stdout.write(found.path.read_text(encoding="utf-8"))
        return
    from rich.console import Console

    from llmdeploy.cli import preset_report, size_report

    sys.stdout.write(preset_report.show(found) + "\n")
    Console(soft_wrap=False).print(size_report.table(found.sizing))
    _err(f"spec: llmdeploy presets show {name} --spec, or llmdeploy init --preset {name}")


@app.command()
def models(
    filter_text: Annotated[
        str,
        typer.Argument(
            metavar="[FILTER]",
            help="Show the models whose name, Hugging Face id, pre-quantized release or "
            "model type contains this (case-insensitive).",
            show_default=False,
        ),
    ] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the model catalog: the names `model.architecture` takes, the Hugging Face ids
    they are known by, and their pre-quantized releases (which `plan` searches)."""
    _run(_models, filter_text, as_json)


def _models(filter_text: str, as_json: bool) -> None:
    from llmdeploy.catalog import models as catalog
    from llmdeploy.cli import model_report

    found = catalog.catalog(filter_text)
    if not found:
        close = catalog.closest(filter_text, cutoff=0.6)
        hint = f" (did you mean {close!r}?)" if close else ""
        raise UsageError(f"no catalog model matches {filter_text!r}{hint}")
    if as_json:
        import json

        sys.stdout.write(json.dumps(model_report.to_json(found), indent=2) + "\n")
        return
    from rich.console import Console

    Console(soft_wrap=False).print(model_report.table(found))


@app.command()
def schema(
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="Write to a file.")  # noqa: UP045
    ] = None,
) -> None:
    """Print the spec's JSON Schema."""
    _run(_schema, output)


def schema_text() -> str:
    import json

    from llmdeploy.spec.sections import json_schema

    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def _schema(output: Path | None) -> None:
    text = schema_text()
    if output is None:
        sys.stdout.write(text)
    else:
        _atomic_write(output, text)


def _atomic_write(dest: Path, text: str) -> None:
    from llmdeploy.errors import OutputError

    tmp = dest.with_name(f".{dest.name}.llmdeploy-tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, dest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write {dest}: {exc.strerror}") from None


@app.command()
def init(
    preset: Annotated[
        str, typer.Option("--preset", "-p", help="Preset to start from.")
    ] = "llama3-8b-vllm-g5",
    output: Annotated[
        str, typer.Option("--output", "-o", help="File to write, or '-'.")
    ] = "llmdeploy.yaml",
    overwrite: Annotated[bool, typer.Option("--overwrite")] = False,
) -> None:
    """Write a commented starter spec (with a schema comment for editor autocompletion)."""
    _run(_init, preset, output, overwrite)


SCHEMA_URL_COMMENT = "# yaml-language-server: $schema={url}\n"


def _init(preset: str, output: str, overwrite: bool) -> None:
    from llmdeploy import pipeline

    path = pipeline.preset_path(preset)
    if path is None:
        raise pipeline.unknown_preset(preset)
    from llmdeploy.spec.starter import starter_spec

    text = starter_spec(path.read_text(encoding="utf-8"), preset)
    if output == "-":
        sys.stdout.write(text)
        return
    dest = Path(output)
    if dest.exists() and not overwrite:
        raise UsageError(f"{dest} exists; use --overwrite")
    _atomic_write(dest, text)
    _err(f"wrote {dest} (from preset {preset}); next: llmdeploy size {dest}")


def app_for(args: list[str]) -> typer.Typer:
    """The app with only the command the first argument names (``llmdeploy size ...``): typer
    builds the parameters of every registered command before it runs one (about 15 ms of a
    cold quick ``size``). Anything else (no command, an option first, a name that is not a
    command) gets the whole app, so help, suggestions and errors are typer's own;
    ``tests/test_cli.py`` checks each command's help and errors are the same either way."""
    if not args or args[0].startswith("-"):
        return app
    name = args[0]
    commands = [
        c
        for c in app.registered_commands
        if c.callback is not None
        and (c.name or typer.main.get_command_name(c.callback.__name__)) == name
    ]
    groups = [g for g in app.registered_groups if g.name == name]
    if not (commands or groups):
        return app
    only = copy.copy(app)
    only.registered_commands, only.registered_groups = commands, groups
    return only


def main() -> None:
    try:
        app_for(sys.argv[1:])()
    except SystemExit:
        raise
    except Exception:  # pragma: no cover - last resort: a bug
        if _STATE["debug"]:
            raise
        import traceback

        _err("internal error (a bug in llmdeploy): please report it with --debug output")
        _err(traceback.format_exc().splitlines()[-1])
        sys.exit(int(ExitCode.INTERNAL))
