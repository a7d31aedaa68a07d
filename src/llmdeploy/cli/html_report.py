"""``llmdeploy report SPEC -o report.html``: one self-contained page with pictures.

- TTFT and ITL p50/p99 against the concurrency per replica (the performance model, ``perf.api``),
  with the SLO's targets as lines and the model's median held-out error as a band round p99;
- ``plan``'s candidates as fleet $/h against p99 ITL, the cheapest-per-latency front marked
  (the candidates no other one beats on both);
- the per-GPU memory breakdown of the sizing (weights, activation, non-torch, CUDA graphs,
  KV cache, CUDA context), against the GPU's usable memory.

Hand-written SVG inside one HTML file: no plotting dependency, no script, nothing fetched.
Only the ``report`` command imports this module, so no other command's start-up pays for it.
Nothing here prints; the CLI writes what :func:`page` returns.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmdeploy.perf.assess import Performance
    from llmdeploy.perf.search import SearchResult
    from llmdeploy.sizing.types import Sizing
    from llmdeploy.spec.load import LoadedSpec

# series colours (the screenshot test looks for them)
TTFT_P50, TTFT_P99 = "#1f77b4", "#d62728"
ITL_P50, ITL_P99 = "#2ca02c", "#9467bd"
SLO_LINE = "#ff7f0e"
FRONT, OTHER = "#e377c2", "#7f7f7f"
MEMORY = (
    ("weights", "#8c564b"),
    ("activation peak", "#bcbd22"),
    ("non-torch", "#17becf"),
    ("CUDA graphs", "#aec7e8"),
    ("KV cache", "#98df8a"),
    ("CUDA context", "#c5b0d5"),
)
W, H, PAD = 560, 300, 52


@dataclass(frozen=True)
class CurvePoint:
    concurrency: int
    ttft_p50_ms: float
    ttft_p99_ms: float
    itl_p50_ms: float
    itl_p99_ms: float


@dataclass(frozen=True)
class CostPoint:
    label: str
    itl_p99_ms: float
    usd_per_hour: float
    meets: bool


def concurrency_points(peak: int) -> tuple[int, ...]:
    """Powers of two from 1 up to twice the per-replica load (at least 8), and the load."""
    top = max(8, 2 * peak)
    out = {1 << k for k in range(int(math.log2(top)) + 1)}
    out.add(peak)
    return tuple(sorted(c for c in out if c <= top))


def curve(sizing: Sizing, loaded: LoadedSpec, peak: int) -> tuple[CurvePoint, ...]:
    """The model's latencies of one replica at each concurrency of :func:`concurrency_points`."""
    from llmdeploy.engines import registry
    from llmdeploy.perf import api, inputs
    from llmdeploy.perf.types import Workload

    run = registry.get(sizing.engine).engine_run(sizing, loaded.spec)
    if run is None or sizing.instance is None:
        return ()
    req = sizing.request
    hw, geo = inputs.hardware(sizing.instance), inputs.geometry(req.architecture)
    out = []
    for c in concurrency_points(peak):
        load = Workload(req.slo_input_tokens, req.slo_output_tokens, concurrency=c)
        e = api.estimate(hw, geo, run.deployment, load, run.constants)
        out.append(CurvePoint(c, e.ttft_p50_ms, e.ttft_p99_ms, e.itl_p50_ms, e.itl_p99_ms))
    return tuple(out)


def cost_points(result: SearchResult) -> tuple[CostPoint, ...]:
    out = []
    for c in result.candidates:
        e = c.performance.estimate
        if e is None or not math.isfinite(c.fleet_usd_per_hour):
            continue
        values = dict(c.changes)
        inst = c.sizing.instance
        where = inst.name if inst else "?"
        tp = values["hardware.tensorParallel"]
        label = f"{values['engine.type']} {where} TP{tp} {values['quantization']}"
        out.append(CostPoint(label, e.itl_p99_ms, c.fleet_usd_per_hour, c.meets))
    return tuple(out)


def front(points: Sequence[CostPoint]) -> tuple[CostPoint, ...]:
    """The cheapest-per-latency front: the points no other point beats on both cost and
    latency (lower or equal on both, lower on one), by latency."""
    kept = [
        p
        for p in points
        if not any(
            q.usd_per_hour <= p.usd_per_hour
            and q.itl_p99_ms <= p.itl_p99_ms
            and (q.usd_per_hour < p.usd_per_hour or q.itl_p99_ms < p.itl_p99_ms)
            for q in points
        )
    ]
    return tuple(sorted(kept, key=lambda p: (p.itl_p99_ms, p.usd_per_hour)))


# --- SVG ---------------------------------------------------------------------------------------


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    step = 10.0 ** math.floor(math.log10(value))
    for m in (1, 2, 2.5, 5, 10):
        if value <= m * step:
            return m * step
    return 10 * step


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


class _Axes:
    def __init__(self, x_max: float, y_max: float, x_log: bool = False) -> None:
        self.x_max, self.y_max, self.x_log = x_max, _nice_max(y_max), x_log

    def x(self, v: float) -> float:
        span = W - 2 * PAD
        if self.x_log:
            return PAD + span * math.log2(max(v, 1)) / max(1e-9, math.log2(max(self.x_max, 2)))
        return PAD + span * v / (self.x_max or 1)

    def y(self, v: float) -> float:
        return H - PAD - (H - 2 * PAD) * v / self.y_max

    def frame(self, x_label: str, y_label: str, x_ticks: Sequence[float]) -> list[str]:
        out = [
            f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#333"/>',
            f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>',
            f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle">{_esc(x_label)}</text>',
            f'<text x="14" y="{H / 2}" text-anchor="middle" '
            f'transform="rotate(-90 14 {H / 2})">{_esc(y_label)}</text>',
        ]
        for t in x_ticks:
            out.append(
                f'<text x="{self.x(t):.1f}" y="{H - PAD + 16}" text-anchor="middle">{t:g}</text>'
            )
        for k in range(5):
            v = self.y_max * k / 4
            out.append(
                f'<text x="{PAD - 6}" y="{self.y(v) + 4:.1f}" text-anchor="end">{v:g}</text>'
                f'<line x1="{PAD}" y1="{self.y(v):.1f}" x2="{W - PAD}" y2="{self.y(v):.1f}" '
                'stroke="#eee"/>'
            )
        return out


def _svg(title: str, body: list[str], legend: Sequence[tuple[str, str]]) -> str:
    keys = "".join(
        f'<rect x="{W - PAD - 150}" y="{PAD + 16 * i}" width="12" height="8" fill="{colour}"/>'
        f'<text x="{W - PAD - 134}" y="{PAD + 8 + 16 * i}">{_esc(name)}</text>'
        for i, (name, colour) in enumerate(legend)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" role="img"><title>{_esc(title)}</title>'
        f"<style>text{{font:11px sans-serif;fill:#333}}</style>{''.join(body)}{keys}</svg>"
    )


def _polyline(axes: _Axes, xs: Sequence[float], ys: Sequence[float], colour: str) -> str:
    points = " ".join(f"{axes.x(x):.1f},{axes.y(y):.1f}" for x, y in zip(xs, ys, strict=True))
    return f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="3"/>'


def latency_chart(
    points: Sequence[CurvePoint], metric: str, slo_ms: float | None, error: float
) -> str:
    """p50 and p99 of ``metric`` (ttft | itl) against concurrency, the SLO line and a band of
    +-``error`` (the model's median held-out error) round p99."""
    name = "TTFT" if metric == "ttft" else "ITL"
    p50 = [float(getattr(p, f"{metric}_p50_ms")) for p in points]
    p99 = [float(getattr(p, f"{metric}_p99_ms")) for p in points]
    xs = [float(p.concurrency) for p in points]
    top = max([*p99, slo_ms or 0.0]) * (1 + error)
    axes = _Axes(max(xs), top, x_log=True)
    c50, c99 = (TTFT_P50, TTFT_P99) if metric == "ttft" else (ITL_P50, ITL_P99)
    upper = [f"{axes.x(x):.1f},{axes.y(y * (1 + error)):.1f}" for x, y in zip(xs, p99, strict=True)]
    lower = [
        f"{axes.x(x):.1f},{axes.y(y * (1 - error)):.1f}"
        for x, y in reversed(list(zip(xs, p99, strict=True)))
    ]
    body = axes.frame("concurrent requests per replica", f"{name} (ms)", xs)
    body.append(f'<polygon points="{" ".join(upper + lower)}" fill="{c99}" fill-opacity="0.15"/>')
    body.append(_polyline(axes, xs, p50, c50))
    body.append(_polyline(axes, xs, p99, c99))
    legend = [(f"{name} p50", c50), (f"{name} p99 (band: +-{error:.0%})", c99)]
    if slo_ms:
        y = axes.y(slo_ms)
        body.append(
            f'<line x1="{PAD}" y1="{y:.1f}" x2="{W - PAD}" y2="{y:.1f}" stroke="{SLO_LINE}" '
            'stroke-width="2" stroke-dasharray="6 4"/>'
        )
        legend.append((f"SLO {slo_ms:g} ms", SLO_LINE))
    return _svg(f"{name} p50 and p99 against concurrency", body, legend)


def cost_chart(points: Sequence[CostPoint]) -> str:
    best = front(points)
    axes = _Axes(_nice_max(max(p.itl_p99_ms for p in points)), max(p.usd_per_hour for p in points))
    ticks = [axes.x_max * k / 4 for k in range(5)]
    body = axes.frame("p99 ITL (ms)", "fleet $/h at the SLO peak", ticks)
    on_front = {id(p) for p in best}
    for p in points:
        colour = FRONT if id(p) in on_front else OTHER
        body.append(
            f'<circle cx="{axes.x(p.itl_p99_ms):.1f}" cy="{axes.y(p.usd_per_hour):.1f}" r="6" '
            f'fill="{colour}"><title>{_esc(p.label)}: ${p.usd_per_hour:.2f}/h, '
            f"{p.itl_p99_ms:.1f} ms{'' if p.meets else ' (misses the SLO)'}</title></circle>"
        )
    if len(best) > 1:
        steps = []
        for a, b in itertools.pairwise(best):
            steps.append(f"{axes.x(a.itl_p99_ms):.1f},{axes.y(a.usd_per_hour):.1f}")
            steps.append(f"{axes.x(b.itl_p99_ms):.1f},{axes.y(a.usd_per_hour):.1f}")
        steps.append(f"{axes.x(best[-1].itl_p99_ms):.1f},{axes.y(best[-1].usd_per_hour):.1f}")
        body.append(
            f'<polyline points="{" ".join(steps)}" fill="none" stroke="{FRONT}" stroke-width="2"/>'
        )
    legend = [("cheapest-per-latency front", FRONT), ("other candidates", OTHER)]
    return _svg("plan: cost against latency", body, legend)


def memory_parts(s: Sizing) -> tuple[tuple[str, float, str], ...]:
    values = (
        s.weights_gib_per_gpu,
        s.activation_gib,
        s.non_torch_gib,
        s.cudagraph_gib,
        max(0.0, s.kv_cache_gib_per_gpu),
        s.context_gib,
    )
    return tuple((name, v, colour) for (name, colour), v in zip(MEMORY, values, strict=True))


def memory_chart(s: Sizing) -> str:
    parts = memory_parts(s)
    total = s.gpu_total_gib
    axes = _Axes(1, max(total, sum(v for _, v, _ in parts)))
    body = axes.frame("one GPU", "GiB", ())
    y0 = 0.0
    for _name, v, colour in parts:
        top, bottom = axes.y(y0 + v), axes.y(y0)
        body.append(
            f'<rect x="{PAD + 40}" y="{top:.1f}" width="160" height="{bottom - top:.1f}" '
            f'fill="{colour}"><title>{_esc(_name)}: {v:.2f} GiB</title></rect>'
        )
        y0 += v
    y = axes.y(total)
    body.append(
        f'<line x1="{PAD}" y1="{y:.1f}" x2="{PAD + 240}" y2="{y:.1f}" stroke="#333" '
        'stroke-dasharray="4 3"/>'
        f'<text x="{PAD + 244}" y="{y + 4:.1f}">usable {total:.2f} GiB</text>'
    )
    legend = [(f"{name} {v:.2f} GiB", colour) for name, v, colour in parts]
    return _svg("per-GPU memory", body, legend)


def page(
    loaded: LoadedSpec,
    sizing: Sizing,
    perf: Performance | None,
    points: Sequence[CurvePoint],
    costs: Sequence[CostPoint],
) -> str:
    spec = loaded.spec
    inst = sizing.instance
    fits = "FITS" if sizing.fits else "DOES NOT FIT"
    verdict = ""
    figures = []
    if perf is not None and perf.estimate is not None and points:
        u = perf.uncertainty
        met = perf.meets_slo
        verdict = {True: ", MEETS THE SLO", False: ", MISSES THE SLO", None: ""}[met]
        figures.append(
            ("Time to first token", latency_chart(points, "ttft", spec.slo.ttft_ms, u.ttft_median))
        )
        figures.append(
            ("Inter-token latency", latency_chart(points, "itl", spec.slo.itl_ms, u.itl_median))
        )
    if costs:
        figures.append(("plan: cost against latency", cost_chart(costs)))
    figures.append(("Per-GPU memory", memory_chart(sizing)))
    where = inst.name if inst else "?"
    head = (
        f"{_esc(spec.name)}: {_esc(spec.model.id)} on {_esc(where)}, TP {sizing.tp}, "
        f"{_esc(sizing.engine)} {_esc(sizing.engine_version)}: {fits}{verdict}"
    )
    sections = "".join(f"<section><h2>{_esc(title)}</h2>{svg}</section>" for title, svg in figures)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>llmdeploy report: {_esc(spec.name)}</title>"
        "<style>body{font:14px sans-serif;margin:24px;color:#222}"
        "section{margin:16px 0}h1{font-size:18px}h2{font-size:15px}</style></head><body>"
        f"<h1>{head}</h1>"
        f"<p>Generated by llmdeploy from {_esc(loaded.label)}. Latencies are the performance "
        "model's (docs/performance-model.md); the band is its median error on held-out runs.</p>"
        f"{sections}</body></html>\n"
    )
