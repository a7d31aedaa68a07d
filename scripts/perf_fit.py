#!/usr/bin/env python3
"""Fit the performance model's constants on the calibration cases (docs/performance-model.md).

Usage: python scripts/perf_fit.py [DIR] [--cv] [--write] [--workers N]
(DIR: calibration files, default tests/data/perf: copies of ../shared/perf).

Residuals: sqrt(weight) * ln(predicted / measured) per published metric, plus one prior term per
constant, (ln value - ln start) / sigma, with the starting values and their sources in
docs/performance-model.md, "Constants". Robust least squares (scipy, soft_l1, f_scale 0.25) in
log space, so that a few cases the model cannot represent do not steer it. ``--cv`` refits
with each group of cases held out (``folds``) and predicts the held-out cases; ``--write``
rewrites the generated blocks of engines/vllm/perf_constants.py,
engines/trtllm/perf_constants.py and perf/uncertainty.py (the CV residuals' errors when
``--cv``, else the in-sample ones) and tests/data/perf/fit-residuals.json. Needs numpy and
scipy (the ``dev`` extra); the product itself does not.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing as mp
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import perf_calibration as cal
import perf_residuals as res

from llmdeploy.perf.constants import ConstantsRow
from llmdeploy.perf.types import Constants

SRC = cal.REPO / "src" / "llmdeploy"
# the constants rows' names, in CONSTANT_ROWS order, and the file each is generated into
RANGES = ("vllm<0.12", "vllm>=0.12", "trtllm-trt", "trtllm-pytorch")
FILES = {
    SRC / "engines" / "vllm" / "perf_constants.py": RANGES[:2],
    SRC / "engines" / "trtllm" / "perf_constants.py": RANGES[2:],
}
UNCERTAINTY_FILE = SRC / "perf" / "uncertainty.py"


@dataclass(frozen=True)
class Param:
    name: str  # a Constants field
    scope: str  # "shared", "vllm" (both vLLM ranges) or a RANGES key
    start: float
    sigma: float  # prior width in ln units
    lo: float
    hi: float


_SIGMA = dict(mu_gemm=0.7, eta_kv=0.7, eta_experts=0.7, layer_overhead_us=1.0)
_SIGMA |= dict(moe_gemm_factor=0.7, w4_gemm_factor=0.7, w4_bw_factor=0.7, moe_dim_half=1.0)
_SIGMA |= dict(step_overhead_us=1.5, seq_overhead_us=1.5, ttft_overhead_ms=1.5)
_SIGMA |= dict(prefill_gpu_layer_us=1.5, eager_layer_us=1.5)
_SIGMA |= dict(eager_fp8_layer_us=1.5)
_SIGMA |= dict(request_overhead_ms=1.5, stream_token_us=1.0)
_BOUNDS = dict(mu_gemm=(0.1, 0.95), eta_kv=(0.15, 0.98), eta_experts=(0.05, 0.98))
_BOUNDS |= dict(moe_gemm_factor=(0.05, 1.0), w4_gemm_factor=(0.1, 1.0), w4_bw_factor=(0.1, 1.0))
_BOUNDS |= dict(moe_dim_half=(16.0, 65536.0))
_BOUNDS |= dict(layer_overhead_us=(0.5, 500.0), step_overhead_us=(5.0, 20000.0))
_BOUNDS |= dict(seq_overhead_us=(0.1, 500.0), ttft_overhead_ms=(0.1, 200.0))
_BOUNDS |= dict(prefill_gpu_layer_us=(0.1, 1000.0), eager_layer_us=(1.0, 5000.0))
_BOUNDS |= dict(eager_fp8_layer_us=(1.0, 5000.0))
_BOUNDS |= dict(request_overhead_ms=(0.01, 50.0), stream_token_us=(1.0, 500.0))
_KERNELS = dict(mu_gemm=0.6, eta_kv=0.6, eta_experts=0.8, layer_overhead_us=30.0)
_KERNELS |= dict(moe_gemm_factor=0.8, w4_gemm_factor=0.6, w4_bw_factor=0.7, moe_dim_half=1024.0)
# Kernel-level efficiencies are per engine family ("vllm" covers both vLLM ranges); host and
# frontend overheads are per version range. Starting values: docs/performance-model.md.
_PER_SCOPE: dict[str, dict[str, float]] = {
    "vllm": _KERNELS,
    "vllm<0.12": dict(
        step_overhead_us=1500.0, seq_overhead_us=20.0, ttft_overhead_ms=8.0, request_overhead_ms=2.0
    ),
    "vllm>=0.12": dict(
        step_overhead_us=2000.0,
        eager_layer_us=150.0,
        eager_fp8_layer_us=300.0,
        prefill_gpu_layer_us=30.0,
        seq_overhead_us=30.0,
        ttft_overhead_ms=8.0,
        request_overhead_ms=2.0,
        stream_token_us=60.0,
    ),
    "trtllm-trt": _KERNELS
    | dict(step_overhead_us=300.0, seq_overhead_us=5.0, ttft_overhead_ms=8.0)
    | dict(request_overhead_ms=1.0),
    "trtllm-pytorch": _KERNELS
    | dict(step_overhead_us=1000.0, seq_overhead_us=10.0, ttft_overhead_ms=8.0)
    | dict(request_overhead_ms=1.0),
}
PARAMS = [
    Param("eta_weights", "shared", 0.80, 0.5, 0.3, 0.98),
    Param("mu_attn", "shared", 0.50, 0.7, 0.1, 0.95),
    Param("fp8_gemm_factor", "shared", 0.80, 0.5, 0.3, 1.0),
    Param("gemm_knee", "shared", 4.0, 0.7, 1.2, 20.0),
    Param("ar_latency_nvlink_us", "shared", 10.0, 1.0, 1.0, 100.0),
    Param("link_efficiency", "shared", 0.70, 0.7, 0.1, 1.0),
] + [
    Param(name, scope, start, _SIGMA[name], *_BOUNDS[name])
    for scope, starts in _PER_SCOPE.items()
    for name, start in starts.items()
]


def applies(scope: str, key: str) -> bool:
    """Does a parameter of this scope apply to the constants of range ``key``?"""
    return scope in ("shared", key) or (scope == "vllm" and key.startswith("vllm"))


def range_key(case: cal.Case) -> str:
    found = case.constants
    for key, row in zip(RANGES, cal.CONSTANT_ROWS, strict=True):
        if row[3] is found:
            return key
    raise KeyError(case.id)


def constants_from(theta: Sequence[float]) -> dict[str, Constants]:
    """Each range's constants with the parameters ``theta`` (ln units) applied."""
    out: dict[str, Constants] = {}
    for key, (_, _, _, base) in zip(RANGES, cal.CONSTANT_ROWS, strict=True):
        upd = {
            p.name: math.exp(v) for p, v in zip(PARAMS, theta, strict=True) if applies(p.scope, key)
        }
        out[key] = dataclasses.replace(base, **upd)
    return out


# ---- evaluation (forked workers share the cases) --------------------------------------------
_CASES: list[cal.Case] = []


def _predict(job: tuple[int, Constants]) -> dict[str, float]:
    return cal.predict(_CASES[job[0]], job[1])


class Evaluator:
    def __init__(self, cases: list[cal.Case], workers: int) -> None:
        global _CASES
        _CASES = cases
        self.cases = cases
        self.keys = [range_key(c) for c in cases]
        self.pool = mp.get_context("fork").Pool(workers) if workers > 1 else None

    def predict(self, consts: dict[str, Constants], subset: list[int]) -> list[dict[str, float]]:
        jobs = [(i, consts[self.keys[i]]) for i in subset]
        if self.pool is None:
            return [_predict(j) for j in jobs]
        return list(self.pool.map(_predict, jobs, chunksize=1))

    def rows(self, theta: Sequence[float], subset: list[int]) -> list[res.Row]:
        preds = self.predict(constants_from(theta), subset)
        return res.residual_rows([self.cases[i] for i in subset], preds)


def data_residuals(case: cal.Case, pred: dict[str, float]) -> list[float]:
    out = []
    for t in case.targets:
        p = pred[t.metric]
        r = math.log(max(p, 1e-9) / t.value) if math.isfinite(p) else 5.0
        out.append(math.sqrt(t.weight) * max(-5.0, min(5.0, r)))
    return out


def fit(
    ev: Evaluator,
    train: list[int],
    *,
    start: Any = None,
    max_nfev: int = 60,
    only: frozenset[str] = frozenset(),
) -> Any:
    """Robust least squares over the constants the training cases depend on (scipy TRF)."""
    import numpy as np
    from scipy.optimize import least_squares

    theta0 = np.array([math.log(p.start) for p in PARAMS])
    lo, hi = (np.array([math.log(getattr(p, b)) for p in PARAMS]) for b in ("lo", "hi"))
    sig = np.array([p.sigma for p in PARAMS])
    used = {ev.keys[i] for i in train}  # parameters no training case uses keep their start
    free = [j for j, p in enumerate(PARAMS) if any(applies(p.scope, k) for k in used)]
    if only:
        # a restricted fit: the named constants move, the others keep their start values
        free = [j for j in free if PARAMS[j].name in only]
        theta0 = np.asarray(start).copy() if start is not None else theta0
    spans, pos = [], 0
    for i in train:
        spans.append((pos, pos + len(ev.cases[i].targets)))
        pos += len(ev.cases[i].targets)

    def full(x: Any) -> Any:
        th = theta0.copy()
        th[free] = x
        return th

    def resid(th: Any, subset: list[int]) -> list[list[float]]:
        preds = ev.predict(constants_from(th), [train[k] for k in subset])
        return [data_residuals(ev.cases[train[k]], p) for k, p in zip(subset, preds, strict=True)]

    def priors(th: Any) -> list[float]:
        return [(float(th[j]) - math.log(PARAMS[j].start)) / PARAMS[j].sigma for j in free]

    def fun(x: Any) -> Any:
        th = full(x)
        return np.array([v for r in resid(th, list(range(len(train)))) for v in r] + priors(th))

    def jac(x: Any) -> Any:
        # forward differences of 0.1 in ln units (the simulated objective has small steps);
        # each column re-predicts only the cases the parameter applies to
        f0 = fun(x)
        jm = np.zeros((len(f0), len(x)))
        for col, j in enumerate(free):
            rows = [k for k in range(len(train)) if applies(PARAMS[j].scope, ev.keys[train[k]])]
            xp = x.copy()
            h = 0.1 if x[col] + 0.1 <= hi[j] else -0.1
            xp[col] += h
            th = full(xp)
            fcol = f0.copy()
            for k, r in zip(rows, resid(th, rows), strict=True):
                fcol[spans[k][0] : spans[k][1]] = r
            fcol[pos:] = priors(th)
            jm[:, col] = (fcol - f0) / h
        return jm

    t0 = time.time()
    x = (theta0 if start is None else np.asarray(start))[free].copy()
    nfev, cost = 0, math.inf
    # restarts: noise in the simulated objective makes the trust region collapse early ("xtol"
    # after a rejected step); restarting from the best point resets it
    while nfev < max_nfev:
        r = least_squares(
            fun,
            x,
            jac=jac,
            bounds=(lo[free], hi[free]),
            loss="soft_l1",
            f_scale=0.25,
            x_scale=sig[free],
            max_nfev=8,
            xtol=1e-4,
            ftol=1e-4,
        )
        nfev += r.nfev
        improved = r.cost < cost * (1 - 0.003)
        if r.cost < cost:
            x, cost = r.x, r.cost
        print(f"  fit round: cost {r.cost:.4f} after {nfev} evaluations ({time.time() - t0:.0f} s)")
        if not improved:
            break
    return full(x)


def folds(cases: list[cal.Case]) -> dict[str, list[int]]:
    """Held-out groups: each data source and each model geometry."""

    def pick(pred: Callable[[cal.Case], bool]) -> list[int]:
        return [i for i, c in enumerate(cases) if pred(c)]

    return {
        "H200 file (vLLM 0.24, all rows)": pick(lambda c: c.source == "h200-vllm-0.24.0"),
        "source TRT-LLM 0.17 offline tables": pick(lambda c: c.source == "trt017"),
        "source TRT-LLM 0.14 online tables": pick(lambda c: c.source == "trt014"),
        "source gpustack (vLLM, trtllm-serve)": pick(lambda c: c.source == "gpustack"),
        "model Llama-3.1-8B (all sources)": pick(lambda c: c.model_key == "llama-3.1-8b"),
        "model Llama-3.1-70B": pick(lambda c: c.model_key == "llama-3.1-70b"),
        "model Llama-3.2-1B": pick(lambda c: c.model_key == "llama-3.2-1b"),
        "model Qwen3-32B": pick(lambda c: c.model_key == "qwen3-32b"),
        "model Mixtral (8x7B, 8x22B)": pick(lambda c: c.model_key.startswith("mixtral")),
        "model gpt-oss-120b": pick(lambda c: c.model_key == "gpt-oss-120b"),
        # the H200 arrival-pattern runs (scripts/gpu_ingest.py), one geometry at a time
        "H200 arrivals: Qwen3-32B": pick(lambda c: c.id.startswith("h200-vllm0240-q32b-")),
        "H200 arrivals: Qwen2.5-7B AWQ": pick(lambda c: c.id.startswith("h200-vllm0240-qawq-")),
        "H200 arrivals: Llama-3-70B FP8": pick(lambda c: c.id.startswith("h200-vllm0240-m70fp8-")),
        "H200 arrivals: Qwen3-30B-A3B": pick(lambda c: c.id.startswith("h200-vllm0240-mq30-")),
        # the second lease (2026-12-02): geometries and lengths the first never had
        "H200 arrivals: Mixtral-8x7B": pick(lambda c: c.id.startswith("h200-vllm0240-mix-")),
        "H200 arrivals: Llama-3.1-8B FP8 KV 32k": pick(
            lambda c: c.id.startswith("h200-vllm0240-m8bk-")
        ),
        "H200 arrivals: gpt-oss-20b": pick(lambda c: c.id.startswith("h200-vllm0240-goss-")),
        # the third lease (2026-12-02): two more geometries, and small batches of the 1B (its
        # first-file rows stay in the "H200 file" fold)
        "H200 arrivals: Llama-3.1-8B AWQ": pick(lambda c: c.id.startswith("h200-vllm0240-l8awq-")),
        "H200 arrivals: Qwen2.5-14B": pick(lambda c: c.id.startswith("h200-vllm0240-q14b-")),
        "H200 arrivals: Llama-3.2-1B small batches": pick(
            lambda c: c.id.startswith("h200-vllm0240-m1b-512-")
        ),
        # the fourth lease (2026-12-02): a sliding-window family, and a 120B MoE with a
        # 1024-token step (the 8B AWQ's repeat runs join its fold above)
        "H200 arrivals: Gemma-3-12B": pick(lambda c: c.id.startswith("h200-vllm0240-g12b-")),
        "H200 arrivals: gpt-oss-120b": pick(lambda c: c.id.startswith("h200-vllm0240-goss120-")),
    }


# ---- generated blocks ------------------------------------------------------------------------
def _value(v: object) -> str:
    return repr(float(f"{v:.4g}")) if isinstance(v, float) else repr(v)


def constants_block(rows: Sequence[tuple[str, ConstantsRow]]) -> str:
    """The text between ``# BEGIN FITTED CONSTANTS`` and ``# END`` of one engine's file."""
    out = ["CONSTANTS: tuple[ConstantsRow, ...] = ("]
    for key, (fam, lo, hi, c) in rows:
        out += [f"    (  # {key}", f"        {fam!r}, {lo!r}, {hi!r},", "        Constants("]
        out += [
            f"            {f.name}={_value(getattr(c, f.name))}," for f in dataclasses.fields(c)
        ]
        out += ["        ),", "    ),"]
    return "\n".join([*out, ")"])


def uncertainty_block(unc: dict[str, float], basis: str) -> str:
    lines = ["UNCERTAINTY = Uncertainty("] + [f"    {k}={v:.3f}," for k, v in unc.items()]
    return "\n".join([*lines, f"    basis={basis!r},", ")"])


def replace_block(text: str, marker: str, block: str) -> str:
    pattern = re.compile(rf"(# BEGIN {marker}\n).*?(\n# END {marker})", re.S)
    if not pattern.search(text):
        raise SystemExit(f"markers '# BEGIN/END {marker}' not found")
    return pattern.sub(lambda m: m.group(1) + block + m.group(2), text)


def dump(summary: res.Summary) -> str:
    """JSON with every innermost object (a residual row, a headline) on one line."""
    text = json.dumps(summary, indent=1)
    return re.sub(r"\{[^{}\[\]]*\}", lambda m: re.sub(r"\s*\n\s*", " ", m.group(0)), text) + "\n"


def write(theta: Sequence[float], unc: dict[str, float], basis: str, summary: res.Summary) -> None:
    consts = constants_from(theta)
    for path, keys in FILES.items():
        rows = [
            (key, (*row[:3], consts[key]))
            for key, row in zip(RANGES, cal.CONSTANT_ROWS, strict=True)
            if key in keys
        ]
        path.write_text(replace_block(path.read_text(), "FITTED CONSTANTS", constants_block(rows)))
    text = UNCERTAINTY_FILE.read_text()
    UNCERTAINTY_FILE.write_text(
        replace_block(text, "FITTED UNCERTAINTY", uncertainty_block(unc, basis))
    )
    res.RESIDUALS.write_text(dump(summary))
    print(f"wrote the generated blocks and {res.relative(res.RESIDUALS)}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("perf_dir", nargs="?", type=Path, default=cal.DATA)
    ap.add_argument("--write", action="store_true", help="rewrite the generated blocks")
    ap.add_argument("--cv", action="store_true", help="leave-one-group-out cross-validation")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--folds", help="comma-separated substrings: only the CV folds whose name has one"
    )
    ap.add_argument("--cv-nfev", type=int, default=15, help="evaluations per CV refit")
    ap.add_argument(
        "--from-params",
        type=Path,
        help="skip the full fit: start from the parameters of a fit-residuals.json-format file",
    )
    ap.add_argument(
        "--start-from",
        type=Path,
        help="run the full fit from the parameters of a fit-residuals.json-format file (an "
        "earlier fit) instead of the starting values",
    )
    ap.add_argument(
        "--cv-start",
        type=Path,
        help="start every CV refit from the parameters of a fit-residuals.json-format file (the "
        "full fit's own start: each refit repeats the full fit's procedure without its fold) "
        "instead of from the fit on all cases, where a refit the noisy objective stalls keeps "
        "the parameters the fold itself moved",
    )
    ap.add_argument(
        "--free",
        default="",
        help="comma-separated constant names: with --start-from, fit only these and keep the "
        "others at the start file's values (a new mechanism's constant beside fitted ones)",
    )
    args = ap.parse_args(argv)
    only = frozenset(n for n in args.free.split(",") if n)
    unknown = only - {p.name for p in PARAMS}
    if unknown:
        ap.error(f"--free: no such constant: {', '.join(sorted(unknown))}")
    if only and not args.start_from:
        ap.error("--free needs --start-from (the values the other constants keep)")
    cases = cal.load_cases(args.perf_dir)
    ev = Evaluator(cases, args.workers)
    everything = list(range(len(cases)))

    def stored_theta(path: Path) -> list[float]:
        stored = {
            (q["name"], q["scope"]): q["fitted"] for q in json.loads(path.read_text())["parameters"]
        }
        return [math.log(stored.get((p.name, p.scope), p.start)) for p in PARAMS]

    if args.from_params:
        theta = stored_theta(args.from_params)
    elif args.start_from:
        theta = fit(ev, everything, start=stored_theta(args.start_from), only=only)
    else:
        theta = fit(ev, everything)
    print("\n".join(res.table(ev.rows(theta, everything))))
    print("\nconstant               scope            start     fitted")
    for p, v in zip(PARAMS, theta, strict=True):
        print(f"{p.name:22s} {p.scope:14s} {p.start:9.4g}  {math.exp(v):9.4g}")
    # the summary is of the constants as written (rounded to 4 digits), what the product ships
    theta = [math.log(float(f"{math.exp(v):.4g}")) for v in theta]
    rows = ev.rows(theta, everything)
    summary: res.Summary = {
        "generated_by": "python scripts/perf_fit.py"
        + (" --cv" if args.cv else "")
        + (f" --folds {args.folds!r} --cv-nfev {args.cv_nfev}" if args.cv and args.folds else "")
        + (f" --start-from {args.start_from}" if args.start_from else "")
        + (f" --free {args.free}" if only else "")
        + (f" --from-params {args.from_params}" if args.from_params else "")
        + (f" --cv-start {args.cv_start}" if args.cv and args.cv_start else "")
        + " --write",
        "parameters": [
            {**dataclasses.asdict(p), "fitted": float(f"{math.exp(v):.4g}")}
            for p, v in zip(PARAMS, theta, strict=True)
        ],
        "in_sample": {"headline": res.headline(rows), "rows": rows},
    }
    print("\n" + res.SUMMARY_HEAD + "\n" + res.summary_line("in-sample", res.headline(rows)))
    basis_rows = rows
    if args.cv:
        cv_rows: list[res.Row] = []
        per_fold: dict[str, res.Summary] = {}
        chosen = folds(cases)
        if args.folds:
            keep = [k.strip() for k in args.folds.split(",")]
            chosen = {n: h for n, h in chosen.items() if any(k in n for k in keep)}
        for name, held in chosen.items():
            train = [i for i in everything if i not in set(held)]
            start = stored_theta(args.cv_start) if args.cv_start else theta
            th = fit(ev, train, start=start, max_nfev=args.cv_nfev)
            fold_rows = [{**r, "fold": name} for r in ev.rows(th, held)]
            cv_rows += fold_rows
            per_fold[name] = res.headline(fold_rows)
            print(res.summary_line(f"held out: {name}"[:44], per_fold[name]), flush=True)
        summary["cv"] = {"folds": per_fold, "pooled": res.headline(cv_rows), "rows": cv_rows}
        print(res.summary_line("all held-out cases pooled", summary["cv"]["pooled"]))
        basis_rows = cv_rows
    unc = res.uncertainty(basis_rows)
    summary["uncertainty"] = unc
    if args.write:
        basis = "leave-one-group-out CV residuals" if args.cv else "in-sample residuals"
        write(theta, unc, f"{basis} (scripts/perf_fit.py{' --cv' if args.cv else ''})", summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
