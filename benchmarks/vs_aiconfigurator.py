#!/usr/bin/env python3
"""llmdeploy and NVIDIA's AIConfigurator, side by side on the same measured rows (issue 22).

    pip install -e '.[peer]'                     # AIConfigurator 0.12.0: an optional extra,
    python benchmarks/vs_aiconfigurator.py       # never a runtime dependency of llmdeploy
    python benchmarks/vs_aiconfigurator.py --rows --json OUT.json [DIR]

Every calibration case of DIR (default tests/data/perf, read with scripts/perf_calibration.py's
``load_cases``) is predicted by llmdeploy (``perf_calibration.predict``, the constants as
written) and asked of AIConfigurator's ``cli_estimate`` in its two single-replica modes:
``static`` (the batch starts together, prefills together and decodes together: a closed loop's
wave) and ``agg`` (in-flight batching in steady state at a fixed number of requests); "AIC
matched" is the mode whose assumption is the row's arrival pattern (static for a closed loop of
fixed lengths, agg for every other). A row is asked at its number of requests in flight: the
concurrency of a closed loop, the batch of an offline max-throughput run, and for open loops
(Poisson or all-at-once), which AIConfigurator has no mode for, the number measured in flight
(as the row gives it, else Little's law: requests/s x mean end-to-end latency), capped by the
engine's max_num_seqs and its KV cache. Rows it cannot express are listed with the reason.
The llmdeploy CV column is the cross-validation prediction stored in DIR/fit-residuals.json
(the fold that held the row out: its model geometry, or its whole source), where a row has
one. The table is the median |relative error| of each tool over the SAME rows, per metric,
per arrival pattern and per source; a second table compares llmdeploy's cross-validation
with AIConfigurator's matched mode on the rows that have both.

Without AIConfigurator installed the script says so in one line and exits 0. Figures are
printed, never asserted. docs/performance-model.md ("Side by side with AIConfigurator") shows
the table and what AIConfigurator models that llmdeploy does not.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.metadata
import json
import logging
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "perf"

# the metrics compared, in table order, with their labels; AIConfigurator's one TTFT and one
# TPOT figure (mean-field, no distribution) stand for both the p50 and the mean
METRICS: tuple[tuple[str, str], ...] = (
    ("thr", "throughput"),
    ("itl_p50", "ITL p50"),
    ("ttft_p50", "TTFT p50"),
    ("itl_mean", "ITL mean"),
    ("ttft_mean", "TTFT mean"),
)
AIC_METRIC = {
    "thr": "tokens/s",
    "itl_p50": "tpot",
    "itl_mean": "tpot",
    "ttft_p50": "ttft",
    "ttft_mean": "ttft",
}
ARRIVALS = ("closed-loop", "steady", "poisson", "burst", "offline")
TOOLS = ("llmdeploy", "llmdeploy CV", "AIC matched", "AIC static", "AIC agg")
AIC_MODES = ("static", "agg")
HELD_OUT = ("llmdeploy CV", "AIC matched")  # the goal: below AIConfigurator, held out
# AIConfigurator's mode whose assumption is the row's arrival pattern: a closed loop of fixed
# lengths moves in waves (static: the batch starts, prefills and decodes together); every
# other pattern is in-flight batching with requests at different stages (agg)
MATCHED_MODE = {"closed-loop": "static"}

# llmdeploy's GPU names (perf.inputs.hardware of p4d, p4de, p5, p5en, g6e, g6, p6-b200) ->
# AIConfigurator's system names (aiconfigurator_core/systems/*.yaml); the A10G (g5) has none
AIC_SYSTEM = {
    "NVIDIA H100 SXM5 80GB HBM3": "h100_sxm",
    "NVIDIA H200 SXM 141GB": "h200_sxm",
    "NVIDIA A100 SXM4 40GB": "a100_sxm",
    "NVIDIA A100 SXM4 80GB": "a100_sxm",
    "NVIDIA L40S": "l40s",
    "NVIDIA L4": "l4",
    "NVIDIA B200": "b200_sxm",
}
# llmdeploy's catalog names -> the Hugging Face configs AIConfigurator 0.12.0 bundles
# (aiconfigurator_core/model_configs), exactly the same geometry only
AIC_MODEL = {
    "llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
    "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
    "llama-3.1-405b": "meta-llama/Meta-Llama-3.1-405B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "mixtral-8x22b": "mistralai/Mixtral-8x22B-v0.1",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "deepseek-r1": "deepseek-ai/DeepSeek-R1",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    # the same geometry as Llama 3.1 70B (layers, widths, heads, vocabulary; RoPE scaling aside)
    "llama-3-70b": "meta-llama/Meta-Llama-3.1-70B",
    "llama-3.3-70b": "meta-llama/Meta-Llama-3.1-70B",
    # the GPU toolkit's geometry keys (../shared/gpu/models), where a sweep names them
    "m8b": "meta-llama/Meta-Llama-3.1-8B",
    "m70fp8": "meta-llama/Meta-Llama-3.1-70B",
    "q32b": "Qwen/Qwen3-32B",
    "mq30": "Qwen/Qwen3-30B-A3B",
    "mix": "mistralai/Mixtral-8x7B-v0.1",
    "goss": "openai/gpt-oss-20b",
    "goss120": "openai/gpt-oss-120b",
}
# engine family (perf_calibration) -> AIConfigurator backend
AIC_BACKEND = {"vllm": "vllm", "trtllm-trt": "trtllm", "trtllm-pytorch": "trtllm"}
# row metrics that give the number of requests in flight directly, in order of preference
IN_FLIGHT_KEYS = ("measured_in_flight", "in_flight", "mean_in_flight", "requests_in_flight")


class CaseLike(Protocol):
    """What this script reads of a perf_calibration.Case."""

    @property
    def id(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def model_key(self) -> str: ...
    @property
    def hw(self) -> Any: ...
    @property
    def model(self) -> Any: ...
    @property
    def dep(self) -> Any: ...
    @property
    def workload(self) -> Any: ...
    @property
    def targets(self) -> tuple[Any, ...]: ...


@dataclass(frozen=True)
class Question:
    """What AIConfigurator is asked for one row (``cli_estimate`` arguments)."""

    model: str  # a directory holding the model's config.json
    system: str
    backend: str
    version: str  # AIConfigurator's performance-database version
    tp: int
    isl: int
    osl: int
    batch: int  # requests in flight (running)
    ctx_tokens: int  # context-token budget per step (ISL, or the engine's max_num_batched_tokens)
    moe_tp: int | None = None  # MoE models: experts sharded over the TP group (no EP)
    gemm_quant: str | None = None
    kv_quant: str | None = None
    moe_quant: str | None = None
    prefix: int = 0  # prompt tokens already in the prefix cache, per request on average
    basis: str = ""  # where `batch` comes from

    def kwargs(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend_name": self.backend,
            "backend_version": self.version,
            "isl": self.isl,
            "osl": self.osl,
            "batch_size": self.batch,
            "ctx_tokens": self.ctx_tokens,
            "tp_size": self.tp,
        }
        if self.moe_tp is not None:
            out["moe_tp_size"], out["moe_ep_size"] = self.moe_tp, 1
        if self.prefix:
            out["prefix"] = self.prefix
        for key, value in (
            ("gemm_quant_mode", self.gemm_quant),
            ("kvcache_quant_mode", self.kv_quant),
            ("moe_quant_mode", self.moe_quant),
        ):
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass(frozen=True)
class RawRows:
    """The rows of DIR's YAML files as written (what a Case does not keep)."""

    rows: Mapping[str, Mapping[str, Any]]  # id -> row
    configs: Mapping[str, Mapping[str, Any]]  # model name -> the config.json a row's file gives


@dataclass
class Row:
    """One (case, metric) with what each tool predicted."""

    id: str
    source: str
    arrival: str
    metric: str
    measured: float
    predicted: dict[str, float] = field(default_factory=dict)  # tool -> value

    def error(self, tool: str) -> float | None:
        p = self.predicted.get(tool)
        return None if p is None else p / self.measured - 1.0


def load_raw(directory: Path) -> RawRows:
    rows: dict[str, Mapping[str, Any]] = {}
    configs: dict[str, Mapping[str, Any]] = {}
    for path in sorted(directory.glob("*.yaml")):
        doc = YAML(typ="safe").load(path.read_text())
        if isinstance(doc, list):
            items = doc
        elif isinstance(doc, dict) and "serving" in doc:
            items = list(doc["serving"])
            configs.update(doc.get("config_json") or {})
        elif isinstance(doc, dict) and "arrivals" in doc:  # scripts/gpu_ingest.py's format
            items = list(doc["arrivals"])
            for start in doc.get("startup") or []:
                name = str(start["model"]).split()[0].lower()  # as perf_calibration names it
                if start.get("config"):
                    configs[name] = json.loads((directory / str(start["config"])).read_text())
        else:
            continue
        rows.update({str(r["id"]): r for r in items if isinstance(r, dict) and "id" in r})
    return RawRows(rows, configs)


def arrival(case: CaseLike, raw: Mapping[str, Any]) -> str:
    """The arrival pattern of a row: closed-loop (fixed lengths, clients together: waves),
    steady (staggered clients, or lengths that vary: no waves), poisson (open loop at a rate),
    burst (every request at t=0) or offline (trtllm-bench max throughput)."""
    wl = case.workload
    if raw.get("arrival") in ARRIVALS:  # the row says (scripts/gpu_ingest.py)
        return str(raw["arrival"])
    if str(raw.get("scenario", "")) == "offline_max_throughput":
        return "offline"
    if wl.request_rate is not None:
        return "burst" if math.isinf(wl.request_rate) else "poisson"
    if wl.output_spread > 0 or wl.length_cv > 0:
        return "steady"
    return "closed-loop"


def _first(metrics: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = metrics.get(key)
        if value is not None and math.isfinite(float(value)) and float(value) > 0:
            return float(value)
    return None


def in_flight(metrics: Mapping[str, Any], output_tokens: float) -> float | None:
    """Mean requests in flight of a measured run: a figure the row gives, else Little's law,
    requests/s x mean end-to-end latency (requests/s from the output tokens/s when the row has
    no request rate; the latency from TTFT + (OSL - 1) x TPOT when it has no end-to-end)."""
    direct = _first(metrics, *IN_FLIGHT_KEYS)
    if direct is not None:
        return direct
    thr = _first(metrics, "output_tok_s", "output_tok_s_total")
    rps = thr / output_tokens if thr is not None else _first(metrics, "requests_s")
    e2e = _first(metrics, "e2e_mean_ms", "e2e_ms_mean")
    if e2e is None:
        ttft = _first(metrics, "ttft_mean_ms", "ttft_ms_mean")
        tpot = _first(metrics, "tpot_ms_mean", "tpot_mean_ms", "itl_mean_ms", "itl_ms_mean")
        if ttft is not None and tpot is not None:
            e2e = ttft + (output_tokens - 1.0) * tpot
    if rps is None or e2e is None:
        return None
    return rps * e2e / 1000.0


def _quant(case: CaseLike) -> tuple[str, str, str | None]:
    """(GEMM, KV, MoE) quantization modes of AIConfigurator for the row's precision."""
    dep, m = case.dep, case.model
    kv = "fp8" if dep.kv_bytes <= 1.0 else "bfloat16"
    if dep.gemm_dtype == "fp8":
        gemm = "fp8"
    elif dep.gemm_dtype == "int8":  # W8A8 on INT8 tensor cores: AIConfigurator's SmoothQuant
        gemm = "sq"
    elif dep.gemm_dtype == "w4a16" or dep.weight_bytes_dense < 1.0:  # AWQ, GPTQ: weight-only
        gemm = "int4_wo"
    else:
        gemm = "bfloat16"
    moe = None
    if m.num_experts:
        if dep.weight_bytes_expert < 1.0:  # MXFP4 experts (gpt-oss)
            moe = "w4a16_mxfp4"
        else:
            moe = "fp8" if dep.gemm_dtype == "fp8" else "bfloat16"
    return gemm, kv, moe


def question(
    case: CaseLike,
    raw: Mapping[str, Any],
    models: Mapping[str, str],
    versions: Mapping[tuple[str, str], str],
    *,
    ctx: str = "isl",
) -> Question | Skip:
    """The AIConfigurator question for one case, or why it has none. ``models``: catalog
    model name -> a directory holding its config.json (the sweep file's own, else the one
    AIConfigurator bundles); ``versions``: (system, backend) -> the database version
    AIConfigurator has for it; ``ctx``: the context-token budget per step, ``isl`` (what
    ``cli_estimate`` assumes by default, and about what its generator renders: vLLM
    ``max-num-batched-tokens`` = batch + ISL + 1500) or ``engine`` (the row's own
    ``max_num_batched_tokens``)."""
    system = AIC_SYSTEM.get(case.hw.name)
    if system is None:
        return Skip(f"GPU {case.hw.name}: no AIConfigurator system")
    backend = AIC_BACKEND.get(case.family)
    if backend is None:
        return Skip(f"engine {case.family}: no AIConfigurator backend")
    version = versions.get((system, backend))
    if version is None:
        return Skip(f"no AIConfigurator database for {system} {backend}")
    model = models.get(case.model_key)
    if model is None:
        return Skip(f"model {case.model_key}: no config.json in the row's file or AIConfigurator")
    wl, dep = case.workload, case.dep
    kind = arrival(case, raw)
    if wl.concurrency is not None:
        n = float(wl.concurrency)
        basis = f"{kind} concurrency {wl.concurrency}"
    else:
        # a figure for requests in flight sits beside the metrics (gpu_ingest.py) or in them
        figures = {**(raw.get("metrics") or {}), **{k: raw[k] for k in IN_FLIGHT_KEYS if k in raw}}
        n_or_none = in_flight(figures, float(wl.output_tokens))
        if n_or_none is None:
            return Skip(f"{kind} open loop: the row gives no figure for requests in flight")
        n = n_or_none
        how = "measured" if _first(figures, *IN_FLIGHT_KEYS) else "Little's law on the measured run"
        basis = f"{kind}: {n:.1f} in flight ({how})"
    # the engine runs at most max_num_seqs, and no more than its KV cache holds at full length
    # (the rest of the requests in flight wait in its queue)
    kv_seqs = int(dep.kv_capacity_tokens // (wl.input_tokens + wl.output_tokens))
    batch = max(1, min(round(n), int(dep.max_num_seqs), kv_seqs))
    if batch < n - 0.5:
        limit = (
            f"max_num_seqs {dep.max_num_seqs}"
            if batch == dep.max_num_seqs
            else (f"the {kv_seqs} sequences its KV cache holds")
        )
        basis += f", running batch capped at {limit}"
    # prompts the harness re-sent whole (prefix-cache hits): AIConfigurator takes a cached
    # prefix per request, so it gets the mean
    cached = len(getattr(wl, "cached_requests", None) or ())
    prefix = 0
    if cached and wl.num_requests:
        prefix = min(round(wl.input_tokens * cached / wl.num_requests), round(wl.input_tokens) - 1)
        basis += f", prefix {prefix} tokens ({cached} of {wl.num_requests} prompts cached)"
    gemm, kv, moe = _quant(case)
    return Question(
        model=model,
        system=system,
        backend=backend,
        version=version,
        tp=int(dep.tp),
        isl=round(wl.input_tokens),
        osl=max(2, round(wl.output_tokens)),
        batch=batch,
        ctx_tokens=int(dep.max_num_batched_tokens) if ctx == "engine" else round(wl.input_tokens),
        moe_tp=int(dep.tp) if case.model.num_experts else None,
        gemm_quant=gemm,
        kv_quant=kv,
        moe_quant=moe,
        prefix=prefix,
        basis=basis,
    )


def median_abs(errors: Iterable[float]) -> float | None:
    values = [abs(e) for e in errors]
    return statistics.median(values) if values else None


def table(
    rows: Sequence[Row], tools: Sequence[str] = TOOLS, required: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Median |relative error| per (metric, group) where a group is every row, one arrival
    pattern or one source. The ``required`` tools (default: every tool but ``llmdeploy CV``)
    are compared on the rows that all of them predicted (the SAME rows); the CV column covers
    those of them that have a CV prediction and gives its own count."""
    primary = [t for t in tools if t != "llmdeploy CV"] if required is None else list(required)
    out: list[dict[str, Any]] = []
    for metric, label in METRICS:
        mrows = [r for r in rows if r.metric == metric and all(t in r.predicted for t in primary)]
        if not mrows:
            continue
        groups: list[tuple[str, list[Row]]] = [("all", mrows)]
        groups += [(a, [r for r in mrows if r.arrival == a]) for a in ARRIVALS]
        groups += [
            (s, [r for r in mrows if r.source == s]) for s in sorted({r.source for r in mrows})
        ]
        # issue 22's yardstick: our own H200 arrival-pattern runs, one pattern at a time
        ours = [r for r in mrows if r.source.startswith(ARRIVAL_RUNS)]
        groups += [(f"H200 arrivals, {a}", [r for r in ours if r.arrival == a]) for a in ARRIVALS]
        for group, grows in groups:
            if not grows:
                continue
            entry: dict[str, Any] = {"metric": label, "group": group, "rows": len(grows)}
            for tool in tools:
                errs = [e for r in grows if (e := r.error(tool)) is not None]
                entry[tool] = median_abs(errs)
                if tool == "llmdeploy CV":
                    entry["cv_rows"] = len(errs)
            out.append(entry)
    return out


# the arrival-pattern files measured by llmdeploy's developers (scripts/gpu_ingest.py)
ARRIVAL_RUNS = "h200-vllm-0.24.0-arrivals"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def format_table(entries: Sequence[Mapping[str, Any]], tools: Sequence[str] = TOOLS) -> str:
    head = ["metric", "rows of", "rows", *tools]
    lines = [head]
    for e in entries:
        cells = [e["metric"], e["group"], str(e["rows"])]
        for tool in tools:
            cell = _pct(e[tool])
            if tool == "llmdeploy CV" and e[tool] is not None and e["cv_rows"] != e["rows"]:
                cell += f" ({e['cv_rows']})"
            cells.append(cell)
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |"
        for line in lines
    ]
    text.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(text)


def cv_predictions(directory: Path) -> dict[tuple[str, str], float]:
    """(case id, metric) -> the cross-validation prediction of fit-residuals.json
    (``perf_fit.py --cv``): the fold that held the row out, which the file names (a model
    geometry or a whole source). Where a row was held out twice, the geometry's fold is taken
    (leave-one-model-out, the issue's yardstick)."""
    path = directory / "fit-residuals.json"
    if not path.is_file():
        return {}
    return cv_from(json.loads(path.read_text())["cv"]["rows"])


# fit-residuals.json's folds that hold out one model geometry (scripts/perf_fit.py, folds())
GEOMETRY_FOLDS = ("model ", "H200 arrivals: ")


def cv_from(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    by_model: set[tuple[str, str]] = set()
    for r in rows:
        key = (str(r["id"]), str(r["metric"]))
        model_fold = str(r.get("fold", "")).startswith(GEOMETRY_FOLDS)
        if model_fold or key not in by_model:
            out[key] = float(r["predicted"])
        if model_fold:
            by_model.add(key)
    return out


def rows_of(
    case: CaseLike,
    kind: str,
    ours: Mapping[str, float],
    cv: Mapping[tuple[str, str], float],
    aic: Mapping[str, Mapping[str, float]],
) -> list[Row]:
    """One Row per compared target of a case; ``aic``: mode -> AIConfigurator's figures."""
    out = []
    names = {m for m, _ in METRICS}
    for t in case.targets:
        if t.metric not in names:
            continue
        row = Row(case.id, case.source, kind, t.metric, float(t.value))
        row.predicted["llmdeploy"] = float(ours[t.metric])
        if (case.id, t.metric) in cv:
            row.predicted["llmdeploy CV"] = cv[(case.id, t.metric)]
        for mode, figures in aic.items():
            value = figures.get(AIC_METRIC[t.metric])
            if value is not None and math.isfinite(value) and value > 0:
                row.predicted[f"AIC {mode}"] = value
        matched = row.predicted.get(f"AIC {MATCHED_MODE.get(kind, 'agg')}")
        if matched is not None:
            row.predicted["AIC matched"] = matched
        out.append(row)
    return out


# ---- the side that needs AIConfigurator (not imported by the tests) ----


def _aic_api() -> Any | None:
    try:
        return importlib.import_module("aiconfigurator.cli.api")
    except ImportError:
        return None


def _quiet_aic() -> None:
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    for name in ("aiconfigurator", "aiconfigurator_core", ""):
        logging.getLogger(name).setLevel(logging.ERROR)


def _db_versions(systems: Iterable[str], backends: Iterable[str]) -> dict[tuple[str, str], str]:
    db = importlib.import_module("aiconfigurator.sdk.perf_database")
    out = {}
    for system in systems:
        for backend in backends:
            try:
                version = db.get_latest_database_version(system=system, backend=backend)
            except Exception:  # a missing database is an answer
                version = None
            if version:
                out[(system, backend)] = str(version)
    return out


def ask(api: Any, q: Question, mode: str) -> dict[str, float]:
    r = api.cli_estimate(q.model, q.system, mode=mode, **q.kwargs())
    return {
        "ttft": float(r.ttft),
        "tpot": float(r.tpot),
        "tokens/s": float(r.tokens_per_second),
    }


WATCHED = ("src", "scripts", "benchmarks/vs_aiconfigurator.py", "tests/data/perf")


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", *WATCHED],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    # "uncommitted" counts what the predictions depend on: the model, the scripts, the rows
    return out.stdout.strip() + (" (uncommitted changes)" if dirty.stdout.strip() else "")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def run(
    directory: Path, progress: Callable[[str], None], ctx: str = "isl"
) -> tuple[list[Row], list[dict[str, Any]], dict[tuple[str, str], str]]:
    sys.path.insert(0, str(REPO / "scripts"))
    cal = importlib.import_module("perf_calibration")
    api = _aic_api()
    assert api is not None
    _quiet_aic()
    raw = load_raw(directory)
    cases = cal.load_cases(directory)
    cv = cv_predictions(directory)
    versions = _db_versions(sorted(set(AIC_SYSTEM.values())), sorted(set(AIC_BACKEND.values())))
    rows: list[Row] = []
    asked: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="llmdeploy-vs-aic-") as tmp:
        models, labels = _model_dirs(Path(tmp), raw.configs)
        for case in cases:
            row_raw = raw.rows.get(case.id, {})
            kind = arrival(case, row_raw)
            q = question(case, row_raw, models, versions, ctx=ctx)
            record: dict[str, Any] = {
                "id": case.id,
                "source": case.source,
                "arrival": kind,
                "engine": f"{case.family} {case.version}",
            }
            aic: dict[str, dict[str, float]] = {}
            if isinstance(q, Skip):
                record["skipped"] = q.reason
            else:
                record["question"] = {**asdict(q), "model": labels[q.model]}
                refused: dict[str, str] = {}
                for mode in AIC_MODES:
                    try:
                        aic[mode] = ask(api, q, mode)
                    except Exception as exc:  # AIConfigurator's refusal is data
                        refused[mode] = f"{type(exc).__name__}: {_message(exc, tmp)}"
                if refused:
                    record["aic_errors"] = refusals(refused)
                if not aic:
                    record["skipped"] = "AIConfigurator: " + "; ".join(record["aic_errors"])
            progress(f"{case.id}: {record.get('skipped', 'asked')}")
            rows += rows_of(case, kind, cal.predict(case), cv, aic)
            record["aic"] = aic
            asked.append(record)
    return rows, asked, versions


def refusals(by_mode: Mapping[str, str]) -> list[str]:
    """'static: E', 'agg: F', or 'static and agg: E' when both modes refused alike."""
    if len(by_mode) > 1 and len(set(by_mode.values())) == 1:
        return [f"{' and '.join(by_mode)}: {next(iter(by_mode.values()))}"]
    return [f"{mode}: {text}" for mode, text in by_mode.items()]


def _message(exc: Exception, tmp: str) -> str:
    """The first line of an AIConfigurator error without this machine's paths."""
    text = (str(exc).splitlines() or [""])[0].replace(tmp + "/", "")
    return re.sub(r"\S*site-packages/", "", text)


def _model_dirs(
    tmp: Path, sweep_configs: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, str], dict[str, str]]:
    """(catalog name -> directory with a config.json, directory -> label): a sweep file's own
    config.json first, else the one AIConfigurator bundles (passed as a local directory, so
    that it never tries a download for a bundled config outside its default list)."""
    models: dict[str, str] = {}
    labels: dict[str, str] = {}
    for name, config in sweep_configs.items():
        folder = tmp / f"row-{name}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        models[name], labels[str(folder)] = str(folder), f"{name} (config.json of the row's file)"
    core = importlib.import_module("aiconfigurator_core")
    bundled = Path(str(core.__file__)).parent / "model_configs"
    for name, hf_id in AIC_MODEL.items():
        stem = hf_id.replace("/", "--")
        if name in models or not (bundled / f"{stem}_config.json").is_file():
            continue
        folder = tmp / f"aic-{name}"
        folder.mkdir()
        shutil.copyfile(bundled / f"{stem}_config.json", folder / "config.json")
        if (bundled / f"{stem}_hf_quant_config.json").is_file():
            shutil.copyfile(
                bundled / f"{stem}_hf_quant_config.json", folder / "hf_quant_config.json"
            )
        models[name], labels[str(folder)] = str(folder), f"{hf_id} (AIConfigurator's config)"
    return models, labels


def _version_lines(asked: Sequence[Mapping[str, Any]]) -> list[str]:
    pairs: dict[str, set[str]] = {}
    for a in asked:
        if "question" in a:
            q = a["question"]
            key = f"  {a['source']}: {a['engine']}"
            pairs.setdefault(key, set()).add(f"{q['system']} {q['backend']} {q['version']}")
    return [f"{k} -> {', '.join(sorted(v))}" for k, v in sorted(pairs.items())]


def _row_lines(rows: Sequence[Row]) -> list[str]:
    lines = ["", "Per row (relative error: predicted / measured - 1):"]
    for r in rows:
        errs = "  ".join(f"{t} {_signed(r.error(t))}" for t in TOOLS)
        lines.append(f"  {r.id} {r.metric} [{r.arrival}] measured {r.measured:g}: {errs}")
    return lines


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}%"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DATA, help="calibration rows")
    parser.add_argument("--rows", action="store_true", help="also print every row's errors")
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write rows and table")
    parser.add_argument("--progress", action="store_true", help="one line per case on stderr")
    parser.add_argument(
        "--ctx-tokens",
        choices=("isl", "engine"),
        default="isl",
        help="AIConfigurator's context tokens per step: ISL (its default) or the engine's "
        "max_num_batched_tokens",
    )
    args = parser.parse_args(argv)
    if _aic_api() is None:
        print("vs_aiconfigurator: AIConfigurator is not installed (pip install -e '.[peer]')")
        return 0

    def progress(line: str) -> None:
        if args.progress:
            print(line, file=sys.stderr)

    rows, asked, versions = run(args.directory, progress, args.ctx_tokens)
    entries = table(rows)
    held_out = table(rows, HELD_OUT, required=HELD_OUT)
    skipped = [a for a in asked if "skipped" in a]
    partial = [a for a in asked if "aic_errors" in a and "skipped" not in a]
    dbs = ", ".join(f"{s} {b} {v}" for (s, b), v in sorted(versions.items()))
    try:
        data = args.directory.resolve().relative_to(REPO)
    except ValueError:
        data = args.directory
    now = datetime.datetime.now(datetime.timezone.utc)
    out = [
        f"llmdeploy vs AIConfigurator, {now:%Y-%m-%d %H:%M} UTC",
        f"llmdeploy {_version('llmdeploy')} (commit {_git_commit()}); aiconfigurator "
        f"{_version('aiconfigurator')}, aiconfigurator-core {_version('aiconfigurator-core')}",
        f"AIConfigurator databases: {dbs}; context tokens per step: {args.ctx_tokens}",
        f"rows: {data}, {len(asked)} cases, {len(asked) - len(skipped)} asked of "
        f"AIConfigurator, {len(skipped)} skipped",
        "",
        "Engine versions measured -> AIConfigurator database asked:",
        *_version_lines(asked),
        "",
        "Median |relative error| on the same rows (predicted / measured - 1):",
        format_table(entries),
        "",
        "Held out: llmdeploy's cross-validation against AIConfigurator's matched mode, on the "
        "rows that have both (neither tool fitted on them):",
        format_table(held_out, HELD_OUT),
    ]
    if skipped:
        out += ["", "Skipped (AIConfigurator cannot express the row):"]
        out += [f"  {a['id']}: {a['skipped']}" for a in skipped]
    if partial:
        out += ["", "Asked, one mode refused (the row is left out of every tool's median):"]
        out += [f"  {a['id']}: {'; '.join(a['aic_errors'])}" for a in partial]
    if args.rows:
        out += _row_lines(rows)
    print("\n".join(out))
    if args.json:
        doc = {
            "table": entries,
            "held_out": held_out,
            "cases": asked,
            "rows": [asdict(r) for r in rows],
        }
        args.json.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
