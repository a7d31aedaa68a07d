#!/usr/bin/env python3
"""Benchmark the llmdeploy command line: one command, one table.

Every measurement runs ``llmdeploy`` in a fresh process, as a user does. Each run is the only
child of a small wrapper process (``python -c``) that times it and reports its own
``RUSAGE_CHILDREN``, so the peak RSS is that one child's and not the largest of all of them.

Figures are printed, never asserted: the script exits 0 whether or not the goals are met (it
exits 2 only for bad options). See benchmarks/README.md and docs/performance.md.
"""

from __future__ import annotations

import argparse
import compileall
import copy
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PRESETS_DIR = REPO / "presets"
SHARED_CRDS = REPO.parent / "shared" / "crds"

PRESET = "llama3-70b-vllm-p4d"
FALLBACK_PRESET = "llama3-70b-trtllm-int4awq-p4d"
QUICK_SIZE_ARGS = ["--model", "llama-3-70b", "--instance", "p4d.24xlarge", "--tp", "4"]
# What a render imports from its dependencies (the floor under its start-up). Python's
# jsonschema and kubernetes-validate's package are imported only to explain a rejected document.
RUNTIME_IMPORTS = (
    "typer",
    "pydantic",
    "jinja2",
    "yaml",
    "jsonschema_rs",
    "cel_expr_python.cel",
)

FLEET_GOAL_SPECS = 200
GOAL_RENDER_X_KUSTOMIZE = 4.0  # a cold one-spec render, validation included (issue 25)
MOONSHOT_RENDER_X_KUSTOMIZE = 2.0
GOAL_QUICK_SIZE_CPU_S = 0.250  # CPU of a cold quick-mode `size`
GOAL_FLEET_X_KUSTOMIZE = 1.0  # `render DIR` of the fleet faster than kustomize of its output
GOAL_PLAN_S = 3.0  # `plan` of a preset (AIConfigurator's default search takes about a minute)
PLAN_ARGS = ["plan", "--preset", PRESET]

# Commands whose imports are measured with `python -X importtime` (``{out}``: a fresh output
# directory, ``{rendered}``: the one the render case wrote), and what each must not import
# (issue 25: each command imports only what it uses).
VALIDATORS = ("jsonschema", "jsonschema_rs", "kubernetes_validate", "celpy", "cel_expr_python")
IMPORT_CASES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("--version",), ("pydantic", "llmdeploy.spec", "llmdeploy.perf", *VALIDATORS)),
    (("size", *QUICK_SIZE_ARGS, "--json"), ("pydantic", "ruamel", "llmdeploy.spec", *VALIDATORS)),
    (("size", "--preset", PRESET), ("jinja2", *VALIDATORS)),
    (("render", "--preset", PRESET, "-o", "{out}"), ("ruamel", "jsonschema", "celpy")),
    (
        ("validate", "{rendered}"),
        ("llmdeploy.perf", "llmdeploy.sizing", "llmdeploy.plan", "jinja2"),
    ),
    ((*PLAN_ARGS,), ("jinja2", *VALIDATORS)),
)

# Fleet variations: (catalog architecture, Hugging Face id) x (instance type, TP degrees).
FLEET_MODELS: tuple[tuple[str, str], ...] = (
    ("llama-3-8b", "meta-llama/Meta-Llama-3-8B-Instruct"),
    ("llama-3-70b", "meta-llama/Meta-Llama-3-70B-Instruct"),
    ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"),
    ("llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct"),
    ("llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct"),
    ("qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct"),
    ("qwen2.5-14b", "Qwen/Qwen2.5-14B-Instruct"),
    ("qwen2.5-32b", "Qwen/Qwen2.5-32B-Instruct"),
    ("qwen2.5-72b", "Qwen/Qwen2.5-72B-Instruct"),
    ("mistral-7b-v0.3", "mistralai/Mistral-7B-Instruct-v0.3"),
    ("qwen3-8b", "Qwen/Qwen3-8B"),
    ("qwen3-32b", "Qwen/Qwen3-32B"),
)
FLEET_HARDWARE: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("p4d.24xlarge", (2, 4, 8)),
    ("p4de.24xlarge", (1, 2, 4, 8)),
    ("p5.48xlarge", (1, 2, 4, 8)),
    ("g6e.12xlarge", (1, 2, 4)),
    ("g6e.48xlarge", (4, 8)),
    ("g5.12xlarge", (1, 2, 4)),
    ("g5.48xlarge", (4, 8)),
)
PROFILE_FLEET = 20  # specs in the profiled fleet render (cProfile roughly doubles the time)
# At most this many distinct (preset, model, instance, TP) specs; the fleet repeats them renamed.
FLEET_MAX_DISTINCT = 48

# Runs one command as the wrapper's only child; prints wall time, CPU time and peak RSS as JSON.
WRAPPER = r"""
import json, resource, subprocess, sys, time
cmd = json.loads(sys.argv[1])
t0 = time.perf_counter()
try:
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
except OSError as exc:
    print(json.dumps({"wall": 0.0, "cpu": 0.0, "rss": 0, "rc": 127, "stderr": str(exc)}))
    sys.exit(0)
wall = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
rss = ru.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
err = p.stderr.decode("utf-8", "replace")[-4000:]
print(json.dumps({"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": rss,
                  "rc": p.returncode, "stderr": err}))
"""


@dataclass(frozen=True)
class Sample:
    wall: float  # seconds
    cpu: float  # user + system seconds of the child
    rss: int  # peak resident set size of the child, bytes
    rc: int
    stderr: str


@dataclass
class Row:
    label: str
    samples: list[Sample] = field(default_factory=list)
    note: str = ""
    error: str = ""  # set when a run failed or the row was skipped

    @property
    def ok(self) -> bool:
        return bool(self.samples) and not self.error

    @property
    def walls(self) -> list[float]:
        return [s.wall for s in self.samples]

    @property
    def median(self) -> float:
        return statistics.median(self.walls)


def iqr(values: Sequence[float]) -> float | None:
    """Interquartile range, or None for fewer than 4 values (too few for quartiles)."""
    if len(values) < 4:
        return None
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q3 - q1


def fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


# --- running ---------------------------------------------------------------------------------


def llmdeploy_command() -> list[str]:
    """The console script next to the running interpreter, else ``python -m llmdeploy``."""
    script = Path(sys.executable).parent / "llmdeploy"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "llmdeploy"]


def measure(cmd: Sequence[str], env: dict[str, str] | None = None) -> Sample:
    """Run ``cmd`` as the only child of a fresh wrapper process and return its figures."""
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", WRAPPER, json.dumps(list(cmd))],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark wrapper failed: {proc.stderr.strip()[-500:]}")
    d = json.loads(proc.stdout)
    return Sample(float(d["wall"]), float(d["cpu"]), int(d["rss"]), int(d["rc"]), d["stderr"])


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"


def run_row(
    label: str,
    make_cmd: Callable[[int], list[str]],
    runs: int,
    warmup: int,
    *,
    ok_codes: tuple[int, ...] = (0,),
    env: dict[str, str] | None = None,
    note: str = "",
) -> Row:
    """Time ``make_cmd(i)`` ``runs`` times after ``warmup`` untimed runs (negative ``i``)."""
    row = Row(label, note=note)
    print(f"  {label} ...", file=sys.stderr, flush=True)
    for i in range(-warmup, runs):
        sample = measure(make_cmd(i), env)
        if sample.rc not in ok_codes:
            row.error = f"exit {sample.rc}: {last_line(sample.stderr)}"
            return row
        if i >= 0:
            row.samples.append(sample)
    return row


@dataclass
class Pairs:
    """A render row and a kustomize row measured in alternation, and the ratio of each pair."""

    render: Row
    kustomize: Row
    ratios: list[float] = field(default_factory=list)


def run_pairs(
    label: str,
    make_render: Callable[[int], list[str]],
    kubectl: str | None,
    out_dir: Callable[[int], Path],
    runs: int,
    warmup: int,
    *,
    env: dict[str, str] | None = None,
    kustomize: Callable[[str, Path], list[str]] | None = None,
) -> Pairs:
    """Render, then ``kubectl kustomize`` the directory it wrote (``kustomize(kubectl, dir)``:
    the command that builds it, one ``kubectl kustomize DIR`` by default), ``runs`` times in
    turn: both commands of a pair see the same machine load, so their ratio is steadier than
    the ratio of two separately measured medians."""
    pairs = Pairs(Row(label), Row(f"kubectl kustomize (after {label})"))
    print(f"  {label} / kubectl kustomize, alternated ...", file=sys.stderr, flush=True)
    for i in range(-warmup, runs):
        rendered = measure(make_render(i), env)
        if rendered.rc != 0:
            pairs.render.error = f"exit {rendered.rc}: {last_line(rendered.stderr)}"
            return pairs
        build = kustomize or (lambda kc, where: [kc, "kustomize", str(where)])
        kustomized = measure(build(kubectl, out_dir(i))) if kubectl else None
        if kustomized is not None and kustomized.rc != 0:
            pairs.kustomize.error = f"exit {kustomized.rc}: {last_line(kustomized.stderr)}"
            kustomized = None
        if i < 0:
            continue
        pairs.render.samples.append(rendered)
        if kustomized is not None:
            pairs.kustomize.samples.append(kustomized)
            pairs.ratios.append(rendered.wall / kustomized.wall)
    return pairs


def env_without_crd_dir() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LLMDEPLOY_CRD_DIR", None)
    return env


# --- fleet of specs --------------------------------------------------------------------------


def load_preset(name: str) -> dict[str, Any]:
    import yaml  # PyYAML, an llmdeploy dependency

    data = yaml.safe_load((PRESETS_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"preset {name}: not a mapping")
    return data


def variations(base: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The preset with model, instance type and TP varied (name is set later)."""
    for hw_index in range(len(FLEET_HARDWARE)):
        for model_index, (arch, hf_id) in enumerate(FLEET_MODELS):
            # Walk the hardware list diagonally so the first picks cover many combinations.
            instance, tps = FLEET_HARDWARE[(hw_index + model_index) % len(FLEET_HARDWARE)]
            for tp in tps:
                spec = copy.deepcopy(base)
                spec["model"]["architecture"] = arch
                spec["model"]["id"] = hf_id
                spec["hardware"] = {"instanceType": instance, "tensorParallel": tp}
                yield spec


def fits(spec: dict[str, Any]) -> bool:
    """The spec validates, the sizing check says it can start and the performance model does
    not say it misses its SLO (what `render` requires)."""
    from llmdeploy import pipeline
    from llmdeploy.sizing.requests import size_spec
    from llmdeploy.spec.sections import Spec

    try:
        model = Spec.model_validate(spec)
        sizing = size_spec(model, None)
    except Exception:
        return False
    if not sizing.fits or sizing.instance is None:
        return False
    perf = pipeline.performance_of(model, sizing)
    return perf is None or perf.meets_slo is not False


def renders(preset: str) -> str:
    """Render a preset in this process; return '' if it renders, else the reason."""
    from llmdeploy import pipeline
    from llmdeploy.spec import load

    path = pipeline.preset_path(preset)
    if path is None:
        return "no such preset"
    try:
        pipeline.render_loaded(load.load_spec_file(path), header_command="bench probe")
    except Exception as exc:
        message = getattr(exc, "message", None) or str(exc)
        return f"{type(exc).__name__}: {last_line(str(message))}"
    return ""


def write_fleet(dest: Path, count: int, presets: Sequence[str]) -> int:
    """Write ``count`` valid specs to ``dest`` and return how many distinct combinations."""
    import yaml

    distinct: list[dict[str, Any]] = []
    per_preset = max(1, FLEET_MAX_DISTINCT // max(1, len(presets)))
    for preset in presets:
        taken = 0
        for spec in variations(load_preset(preset)):
            if taken >= per_preset or len(distinct) >= count:
                break
            if fits(spec):
                distinct.append(spec)
                taken += 1
    if not distinct:
        raise RuntimeError("no fleet variation fits; check FLEET_MODELS/FLEET_HARDWARE")
    dest.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        spec = copy.deepcopy(distinct[i % len(distinct)])
        spec["name"] = f"{spec['name'][:30]}-{i:03d}"
        text = yaml.safe_dump(spec, sort_keys=False)
        (dest / f"{i:03d}-{spec['name']}.yaml").write_text(text, encoding="utf-8")
    return len(distinct)


def fleet_kustomize(kubectl: str, out: Path) -> list[str]:
    """``kubectl kustomize`` of every folder ``render DIR`` wrote into ``out``, one after the
    other, as a GitOps controller builds one application per folder: one command to time."""
    loop = 'for d in "$1"/*/; do "$0" kustomize "$d" >/dev/null || exit 1; done'
    return ["sh", "-c", loop, kubectl, str(out)]


# --- kubectl and the machine -----------------------------------------------------------------


def find_kubectl(install: bool) -> tuple[str | None, str]:
    """Path to kubectl, or None and why not. Installs Debian's kubernetes-client if asked."""
    path = shutil.which("kubectl")
    if path is not None:
        return path, ""
    if not install:
        return None, "kubectl not found; rerun with --install-kubectl (Debian kubernetes-client)"
    apt = shutil.which("apt-get")
    if apt is None:
        return None, "kubectl not found and apt-get is not available"
    print("  installing kubernetes-client with apt-get ...", file=sys.stderr, flush=True)
    install_cmd = [apt, "-q", "install", "-y", "kubernetes-client"]
    if subprocess.run(install_cmd, capture_output=True, check=False).returncode != 0:
        # Stale or missing package lists: update them once and try again.
        subprocess.run([apt, "-q", "update"], capture_output=True, check=False)
        subprocess.run(install_cmd, capture_output=True, check=False)
    path = shutil.which("kubectl")
    return (path, "") if path else (None, "apt-get install -y kubernetes-client failed")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "? GiB"


def tool_version(cmd: Sequence[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return "; ".join(line.strip() for line in (out.stdout or out.stderr).splitlines()[:2])


def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def compile_bytecode(package_dir: Path) -> str:
    """Compile the package's bytecode before timing, as pip does when it installs a wheel.

    An editable install leaves it to the first run, and an environment with
    ``PYTHONDONTWRITEBYTECODE`` set (this project's CI machine has it) never writes it, so every
    timed run would compile each llmdeploy module from source (about 70-90 ms of a quick
    ``size`` here): a cost no installed copy pays."""
    before = sum(1 for _ in package_dir.rglob("__pycache__/*.pyc"))
    ok = compileall.compile_dir(package_dir, quiet=1)
    after = sum(1 for _ in package_dir.rglob("__pycache__/*.pyc"))
    state = "compiled" if ok else "compiled with errors"
    return (
        f"bytecode: {state} in {package_dir} before timing, as a wheel install does "
        f"({after - before} .pyc files written; PYTHONDONTWRITEBYTECODE="
        f"{os.environ.get('PYTHONDONTWRITEBYTECODE', 'unset')})"
    )


def llmdeploy_package_dir() -> Path:
    spec = importlib.util.find_spec("llmdeploy")
    assert spec is not None and spec.origin is not None, "llmdeploy is not importable"
    return Path(spec.origin).parent


def machine_lines(kubectl: str | None) -> list[str]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    deps = ", ".join(
        f"{n} {package_version(n)}" for n in ("typer", "pydantic", "ruamel.yaml", "jinja2")
    )
    return [
        f"CPU: {cpu_model()}; {os.cpu_count()} logical cores ({usable} usable); "
        f"memory {memory_gib()}",
        f"Python: {platform.python_implementation()} {platform.python_version()} "
        f"({sys.executable})",
        f"OS: {platform.platform()}; load average {load} (1/5/15 min) at start",
        f"llmdeploy {package_version('llmdeploy')}; {deps}",
        f"kubectl: {tool_version([kubectl, 'version', '--client']) if kubectl else 'not found'}",
    ]


# --- report ----------------------------------------------------------------------------------


def table(rows: Sequence[Row]) -> list[str]:
    out = [
        "| measurement | runs | median s | min s | max s | IQR s | CPU s (median) | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if not r.ok:
            out.append(f"| {r.label} | 0 | - | - | - | - | - | - |")
            continue
        w = r.walls
        cpu = statistics.median(s.cpu for s in r.samples)
        rss = max(s.rss for s in r.samples) / 2**20
        out.append(
            f"| {r.label} | {len(w)} | {fmt_s(r.median)} | {fmt_s(min(w))} | {fmt_s(max(w))} "
            f"| {fmt_s(iqr(w))} | {fmt_s(cpu)} | {rss:.0f} |"
        )
    return out


def notes(rows: Sequence[Row]) -> list[str]:
    out = []
    for r in rows:
        if r.error:
            out.append(f"- {r.label}: NOT MEASURED: {r.error}")
        if r.note:
            out.append(f"- {r.label}: {r.note}")
    return out


def verdict(met: bool | None) -> str:
    return {True: "MET", False: "NOT MET", None: "NOT MEASURED"}[met]


def ratio_figure(pair: Pairs) -> tuple[float | None, str]:
    """The median of a pair's per-run ratios and how it reads, or None and why not."""
    if not pair.ratios:
        return None, "needs kubectl and a successful render"
    ratio = statistics.median(pair.ratios)
    r, k = pair.render, pair.kustomize
    return ratio, (
        f"{ratio:.1f} x (median of {len(pair.ratios)} alternated pairs; medians "
        f"{r.median:.3f} s and {k.median:.3f} s)"
    )


def goals(
    pairs: Sequence[Pairs],
    quick_size: Row,
    fleet: Pairs,
    fleet_n: int,
    floor: Row,
    plan: Row,
) -> list[str]:
    """One line per goal of issue 25, with the figure it is judged on: printed, never asserted."""
    out = []
    for pair in pairs:
        ratio, fig = ratio_figure(pair)
        met = None if ratio is None else ratio <= GOAL_RENDER_X_KUSTOMIZE
        text = verdict(met)
        if ratio is not None and ratio <= MOONSHOT_RENDER_X_KUSTOMIZE:
            text += " (the moonshot too)"
        out.append(
            f"- cold render of one spec ({pair.render.label}) <= "
            f"{GOAL_RENDER_X_KUSTOMIZE:.0f} x kubectl kustomize (moonshot "
            f"{MOONSHOT_RENDER_X_KUSTOMIZE:.0f} x): {fig}: {text}"
        )
    if floor.ok and pairs and pairs[0].ratios:
        share = floor.median / pairs[0].kustomize.median
        out.append(
            f"  - importing the runtime dependencies alone takes {share:.1f} x kubectl kustomize"
            f" ({floor.median:.3f} s)"
        )
    if quick_size.ok:
        cpu = statistics.median(s.cpu for s in quick_size.samples)
        met = cpu < GOAL_QUICK_SIZE_CPU_S
        fig = f"{cpu * 1000:.0f} ms CPU (median; wall {quick_size.median * 1000:.0f} ms)"
    else:
        met, fig = None, "not measured"
    out.append(
        f"- cold quick-mode size < {GOAL_QUICK_SIZE_CPU_S * 1000:.0f} ms CPU: {fig}: {verdict(met)}"
    )
    ratio, fig = ratio_figure(fleet)
    met = None if ratio is None else ratio < GOAL_FLEET_X_KUSTOMIZE
    scope = "" if fleet_n == FLEET_GOAL_SPECS else f" (judged on {fleet_n} specs, not 200)"
    out.append(
        f"- render DIR of {FLEET_GOAL_SPECS} specs faster than kubectl kustomize of what it "
        f"writes: {fig}: {verdict(met)}{scope}"
    )
    if plan.ok:
        met, fig = plan.median < GOAL_PLAN_S, f"{plan.median:.2f} s"
    else:
        met, fig = None, "not measured"
    out.append(f"- {plan.label} < {GOAL_PLAN_S:.0f} s: {fig}: {verdict(met)}")
    return out


# --- imports per command ----------------------------------------------------------------------


def importtime(args: Sequence[str]) -> str:
    """``python -X importtime -m llmdeploy ARGS``: its import tree (stderr)."""
    cmd = [sys.executable, "-X", "importtime", "-m", "llmdeploy", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env_without_crd_dir())
    return done.stderr


def import_rows(tmp: Path) -> list[str]:
    """One row per command of IMPORT_CASES: its import time and what it imported that it must
    not (a name counts with its submodules)."""
    out = [
        "| command | import ms (self time summed) | modules | must not import | imported anyway |",
        "|---|---:|---:|---|---|",
    ]
    rendered = tmp / "imports-render"
    for args, forbidden in IMPORT_CASES:
        words = [
            w.replace("{out}", str(rendered)).replace("{rendered}", str(rendered)) for w in args
        ]
        label = " ".join(w.replace("{out}", "DIR").replace("{rendered}", "DIR") for w in args)
        names: list[str] = []
        total_us = 0
        for line in importtime(words).splitlines():
            if line.startswith("import time:") and "self [us]" not in line:
                self_us, _, name = line[len("import time:") :].split("|", 2)
                names.append(name.strip())
                total_us += int(self_us)
        found = sorted({f for f in forbidden for n in names if n == f or n.startswith(f + ".")})
        banned = ", ".join(forbidden) or "-"
        out.append(
            f"| llmdeploy {label} | {total_us / 1000:.0f} | {len(names)} | {banned} "
            f"| {', '.join(found) or 'none'} |"
        )
    return out


# --- profiling (--profile) -------------------------------------------------------------------

# (label, file suffix, function): cumulative time of these pipeline steps under cProfile.
STAGES: tuple[tuple[str, str, str], ...] = (
    ("all imports", "<frozen importlib._bootstrap>", "_find_and_load"),
    ("typer: parameter TypeAdapters", "typer/_coercion.py", "build_runtime_param"),
    ("load spec (libyaml or ruamel + pydantic)", "llmdeploy/spec/load.py", "load_spec_file"),
    ("size (spec)", "llmdeploy/sizing/requests.py", "size_spec"),
    ("size: suggestions", "llmdeploy/sizing/suggest.py", "size"),
    ("size: JSON output", "llmdeploy/cli/size_report.py", "to_json"),
    ("size: rich table output", "rich/console.py", "print"),
    ("plan", "llmdeploy/pipeline.py", "make_plan"),
    ("render (Jinja)", "llmdeploy/render.py", "render_plan"),
    ("render: Jinja compiles a template from source", "jinja2/environment.py", "_generate"),
    ("parse rendered YAML back", "llmdeploy/check/documents.py", "parse_documents"),
    ("validate documents", "llmdeploy/check/documents.py", "check_documents"),
    ("read CRD files (--crd-dir)", "llmdeploy/check/crd.py", "from_dirs"),
    ("CEL: compile rules", "llmdeploy/check/cel.py", "compile_rule"),
    ("CEL: evaluate rules", "llmdeploy/check/cel.py", "evaluate"),
    ("write files", "llmdeploy/write.py", "write_tree"),
)


@dataclass
class ImportNode:
    name: str
    self_us: int
    cum_us: int
    children: list[ImportNode] = field(default_factory=list)


def parse_importtime(text: str) -> list[ImportNode]:
    """Roots of the ``-X importtime`` tree (lines come children first, indented by depth)."""
    pending: dict[int, list[ImportNode]] = {}
    for line in text.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = line[len("import time:") :].split("|", 2)
        name = name[1:]  # one space follows the bar; the rest is two spaces per level
        depth = (len(name) - len(name.lstrip(" "))) // 2
        node = ImportNode(name.strip(), int(self_us), int(cum_us), pending.pop(depth + 1, []))
        pending.setdefault(depth, []).append(node)
    return pending.get(0, [])


def import_owners(roots: Sequence[ImportNode]) -> dict[str, tuple[int, str]]:
    """Self import time grouped by owner: each third-party top-level package, each llmdeploy
    module, and standard-library modules under the nearest non-stdlib importer.
    Returns {owner: (microseconds, first importer)}."""
    stdlib = set(getattr(sys, "stdlib_module_names", ()))
    totals: dict[str, tuple[int, str]] = {}

    def owner_of(name: str, inherited: str) -> str:
        top = name.split(".", 1)[0]
        if top == "llmdeploy":
            return name
        if top in stdlib or (top.startswith("_") and top[1:] in stdlib):
            return inherited or "stdlib (interpreter start-up)"
        return top

    def visit(node: ImportNode, inherited: str) -> None:
        owner = owner_of(node.name, inherited)
        spent, first_by = totals.get(owner, (0, ""))
        if not first_by and owner != inherited:
            first_by = inherited or "-"
        totals[owner] = (spent + node.self_us, first_by)
        for child in node.children:
            visit(child, owner)

    for root in roots:
        visit(root, "")
    return totals


def profile_command(label: str, args: Sequence[str], prof: Path, top: int = 8) -> list[str]:
    """``-X importtime`` owners and cProfile pipeline steps for ``llmdeploy ARGS``."""
    import pstats

    base = [sys.executable, "-X", "importtime", "-m", "llmdeploy", *args]
    done = subprocess.run(
        base, capture_output=True, text=True, env=env_without_crd_dir(), check=False
    )
    owners = import_owners(parse_importtime(done.stderr))
    total_us = sum(us for us, _ in owners.values())
    out = [f"### `llmdeploy {label}`", ""]
    out.append(
        f"Import time {total_us / 1000:.0f} ms in all (`-X importtime`, self time "
        "grouped by owner; standard-library modules count for the package that "
        "imported them):"
    )
    out.append("")
    out.append("| owner | ms | first imported by |")
    out.append("|---|---:|---|")
    ranked = sorted(owners.items(), key=lambda kv: -kv[1][0])
    for owner, (us, by) in ranked[:top]:
        out.append(f"| {owner} | {us / 1000:.0f} | {by} |")
    subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "llmdeploy", *args],
        capture_output=True,
        env=env_without_crd_dir(),
        check=False,
    )
    if not prof.is_file():
        return [*out, "", "(cProfile produced no output)", ""]
    stats: Any = pstats.Stats(str(prof))
    total = float(stats.total_tt)
    cum: dict[str, float] = {}
    for (filename, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():
        for stage, suffix, name in STAGES:
            if func == name and filename.endswith(suffix):
                cum[stage] = max(cum.get(stage, 0.0), float(ct))
    out += [
        "",
        f"cProfile, {total:.2f} s in all under the profiler (steps overlap: an import "
        "done inside a step counts in both):",
        "",
        "| step | s | share |",
        "|---|---:|---:|",
    ]
    for stage, _, _ in STAGES:
        if stage in cum:
            out.append(f"| {stage} | {cum[stage]:.3f} | {cum[stage] / total:.0%} |")
    return [*out, ""]


def profiles(tmp: Path, preset: str, crd_dir: Path, presets: Sequence[str]) -> list[str]:
    print("profiling ...", file=sys.stderr, flush=True)
    cases: list[tuple[str, list[str]]] = [
        ("--version", ["--version"]),
        ("size (quick mode, --json)", ["size", *QUICK_SIZE_ARGS, "--json"]),
        (f"size --preset {PRESET}", ["size", "--preset", PRESET]),
        (f"render --preset {preset}", ["render", "--preset", preset, "-o", str(tmp / "p1")]),
    ]
    if crd_dir.is_dir():
        args = ["render", "--preset", preset, "-o", str(tmp / "p2"), "--crd-dir", str(crd_dir)]
        cases.append((f"render --preset {preset} --crd-dir CRDS", args))
    if presets:
        fleet = tmp / "fleet-profile"
        write_fleet(fleet, PROFILE_FLEET, presets)
        cases.append(
            (f"render of {PROFILE_FLEET} specs", ["render", str(fleet), "-o", str(tmp / "p3")])
        )
    out: list[str] = []
    for i, (label, args) in enumerate(cases):
        print(f"  {label} ...", file=sys.stderr, flush=True)
        out += profile_command(label, args, tmp / f"profile-{i}.out")
    return out


# --- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=None, help="timed runs per row (default 7; 3 quick)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="fewer runs, no warm-up, a fleet of 20 specs (the 200 goal is estimated)",
    )
    p.add_argument(
        "--fleet",
        type=int,
        default=None,
        help=f"specs in the fleet row (default {FLEET_GOAL_SPECS}; 20 with --quick)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="untimed runs before each row (default 1; 0 with --quick)",
    )
    p.add_argument(
        "--install-kubectl",
        action="store_true",
        help="apt-get install -y kubernetes-client if kubectl is missing",
    )
    p.add_argument(
        "--crd-dir",
        type=Path,
        default=SHARED_CRDS,
        help="CRD directory for the validated render row (default ../shared/crds)",
    )
    p.add_argument("--json", type=Path, default=None, help="also write every sample here")
    p.add_argument(
        "--profile",
        action="store_true",
        help="also profile each command once (-X importtime, cProfile) and print the findings",
    )
    args = p.parse_args(argv)
    args.runs = args.runs if args.runs is not None else (3 if args.quick else 7)
    args.fleet = args.fleet if args.fleet is not None else (20 if args.quick else FLEET_GOAL_SPECS)
    args.warmup = args.warmup if args.warmup is not None else (0 if args.quick else 1)
    if args.runs < 1 or args.fleet < 1 or args.warmup < 0:
        p.error("--runs and --fleet must be >= 1, --warmup >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    kubectl, kubectl_note = find_kubectl(args.install_kubectl)
    print("llmdeploy benchmark")
    print()
    for line in [*machine_lines(kubectl), compile_bytecode(llmdeploy_package_dir())]:
        print(f"- {line}")
    print()
    sys.stdout.flush()

    cli = llmdeploy_command()
    runs, warm = args.runs, args.warmup
    plain_env = env_without_crd_dir()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="llmdeploy-bench-") as tmp_name:
        tmp = Path(tmp_name)

        def out_dir(tag: str) -> Callable[[int], Path]:
            return lambda i: tmp / f"{tag}-{i + 1000}"  # a fresh, absent directory per run

        print("probing which presets render (in this process) ...", file=sys.stderr, flush=True)
        all_presets = sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))
        reasons = {name: renders(name) for name in all_presets}
        good = [n for n in all_presets if not reasons[n]]
        preset = PRESET if not reasons.get(PRESET, "missing") else FALLBACK_PRESET
        fallback_note = (
            f"{PRESET} does not render here ({reasons.get(PRESET)}); timed {FALLBACK_PRESET}"
            if preset != PRESET
            else ""
        )

        print("measuring ...", file=sys.stderr, flush=True)
        rows.append(run_row("llmdeploy --version", lambda i: [*cli, "--version"], runs, warm))
        quick_size = run_row(
            f"size {' '.join(QUICK_SIZE_ARGS)} --json",
            lambda i: [*cli, "size", *QUICK_SIZE_ARGS, "--json"],
            runs,
            warm,
            ok_codes=(0, 4),
        )
        rows.append(quick_size)
        rows.append(
            run_row(
                f"size --preset {PRESET}",
                lambda i: [*cli, "size", "--preset", PRESET],
                runs,
                warm,
                ok_codes=(0, 4),
            )
        )

        floor = run_row(
            "runtime dependencies imported, no llmdeploy code",
            lambda i: [sys.executable, "-c", f"import {', '.join(RUNTIME_IMPORTS)}"],
            runs,
            warm,
            note="python -c 'import " + ", ".join(RUNTIME_IMPORTS) + "': the floor under any "
            "render in this interpreter",
        )
        rows.append(floor)

        render_args = ["render", "--preset", preset, "-o"]
        renders_1: list[Row] = []
        pairs: list[Pairs] = []
        crd_args = ["--crd-dir", str(args.crd_dir)] if args.crd_dir.is_dir() else None
        for tag, extra, label, note in (
            ("render", [], f"render --preset {preset} -o DIR", fallback_note),
            ("render-crd", crd_args, f"render --preset {preset} -o DIR --crd-dir CRDS", ""),
        ):
            if extra is None:
                missing = Pairs(Row(label, error=f"no CRD directory at {args.crd_dir}"), Row(""))
                renders_1.append(missing.render)
                pairs.append(missing)
                continue
            out = out_dir(tag)
            pair = run_pairs(
                label,
                lambda i, out=out, extra=extra: [*cli, *render_args, str(out(i)), *extra],
                kubectl,
                out,
                runs,
                warm,
                env=plain_env,
            )
            pair.render.note = note or (f"CRDS = {args.crd_dir}" if extra else "")
            renders_1.append(pair.render)
            pairs.append(pair)
        rows.extend(renders_1)

        kustomize_label = "kubectl kustomize (rendered 70B dir)"
        if kubectl is None:
            kustomize = Row(kustomize_label, error=kubectl_note)
        elif not pairs or not pairs[0].kustomize.ok:
            kustomize = Row(kustomize_label, error="the render row failed: nothing to kustomize")
        else:
            kustomize = pairs[0].kustomize
            kustomize.label = kustomize_label
            kustomize.note = "each run right after a render row's run, on the directory it wrote"
        rows.append(kustomize)

        fleet_dir = tmp / "fleet"
        fleet_label = f"render DIR of {args.fleet} specs -o DIR"
        try:
            if not good:
                raise RuntimeError("no preset renders")
            distinct = write_fleet(fleet_dir, args.fleet, good)
        except Exception as exc:
            fleet = Pairs(Row(fleet_label, error=f"cannot generate the fleet: {exc}"), Row(""))
        else:
            fleet_out = out_dir("fleet-out")
            fleet = run_pairs(
                fleet_label,
                lambda i: [*cli, "render", str(fleet_dir), "-o", str(fleet_out(i))],
                kubectl,
                fleet_out,
                runs,
                warm,
                env=plain_env,
                kustomize=fleet_kustomize,
            )
            fleet.render.note = (
                f"{distinct} distinct model/instance/TP combinations from presets "
                f"{', '.join(good)}, latency targets included; no --crd-dir"
            )
            fleet.kustomize.label = f"kubectl kustomize of the {args.fleet} folders it wrote"
            fleet.kustomize.note = (
                "kubectl kustomize of each folder the fleet render wrote, one after the other, "
                "right after each fleet run"
            )
        rows.append(fleet.render)
        if fleet.kustomize.label:
            rows.append(fleet.kustomize)

        plan = run_row(
            " ".join(PLAN_ARGS),
            lambda i: [*cli, *PLAN_ARGS],
            runs,
            warm,
            ok_codes=(0, 4, 8),
            env=plain_env,
        )
        rows.append(plan)

        print("## Results")
        print()
        print("\n".join(table(rows)))
        print()
        print("Notes:")
        print()
        skipped = [f"- preset skipped: {n}: {reasons[n]}" for n in all_presets if reasons[n]]
        print("\n".join(notes(rows) + skipped))
        print()
        print("## Goals")
        print()
        print("\n".join(goals(pairs, quick_size, fleet, args.fleet, floor, plan)))
        print()
        print("## Imports per command")
        print()
        print("`python -X importtime -m llmdeploy ...`, one run each:")
        print()
        print("\n".join(import_rows(tmp)))
        sys.stdout.flush()
        if args.json is not None:
            dump = {
                r.label: {"error": r.error, "note": r.note, "samples": [vars(x) for x in r.samples]}
                for r in rows
            }
            args.json.write_text(json.dumps(dump, indent=2) + "\n", encoding="utf-8")
        if args.profile:
            print()
            print("## Profile")
            print()
            print("\n".join(profiles(tmp, preset, args.crd_dir, good)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
