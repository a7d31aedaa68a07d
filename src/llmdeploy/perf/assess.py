"""The performance stage's result: the sized configuration at the spec's SLO load, a verdict
against the SLO's latency targets, the replicas the latency needs and what they cost
(docs/performance-model.md, "What `size` reports").

How the load point is chosen. ``slo.concurrentRequests`` is the peak across all replicas.
The replicas needed are the larger of the memory-driven count (sizing: how many replicas' KV
caches hold the peak) and the latency-driven count (the peak divided by the highest
concurrency per replica whose p99 TTFT and p99 ITL meet the SLO, each tightened by the
model's calibration error: ``slo / (1 + margin)``). The deployment reaches at most
``autoscaling.maxReplicas`` (``minReplicas`` without autoscaling), and the estimate shown is
one replica's at its share of the peak with as many replicas as needed and reachable.

The verdict misses when the point estimate at that load is above a target; it is "within
the error" when the estimate meets the target but the target tightened by the margin does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmdeploy.perf import api, inputs, workloads
from llmdeploy.perf.types import PerfEstimate
from llmdeploy.perf.uncertainty import UNCERTAINTY, Uncertainty, uncertainty_for

if TYPE_CHECKING:
    from llmdeploy.perf.constants import EngineRun
    from llmdeploy.sizing.types import Sizing
    from llmdeploy.spec.sections import Spec

__all__ = ["Cost", "Performance", "Target", "assess", "fleet_nodes", "gpu_share", "planning_margin"]

# Without autoscaling the deployment runs minReplicas; quick mode (no spec) has no ceiling.
_NO_CEILING = 1_000_000
_MAX_EXTRA_REPLICAS = 4


def planning_margin(metric: str, u: Uncertainty = UNCERTAINTY) -> float:
    """The margin an SLO is planned with: the median absolute error of the metric on rows the
    constants were not fitted on (``Uncertainty.basis``). The 90th percentile is reported
    beside it; planning with it would triple every TTFT target."""
    return {"ttft": u.ttft_median, "itl": u.itl_median, "throughput": u.throughput_median}[metric]


@dataclass(frozen=True)
class Target:
    """One latency target of the SLO against the estimate."""

    metric: str  # "ttft" | "itl"
    slo_ms: float
    predicted_p99_ms: float
    margin: float  # planning margin (relative)
    dominant_term: str  # what the time is mostly spent on

    @property
    def planned_ms(self) -> float:
        """The target the plan aims at: the SLO tightened by the calibration error."""
        return self.slo_ms / (1.0 + self.margin)

    @property
    def met(self) -> bool:
        return self.predicted_p99_ms <= self.slo_ms

    @property
    def within_margin(self) -> bool:
        return self.predicted_p99_ms <= self.planned_ms


@dataclass(frozen=True)
class Cost:
    """What the replicas at the SLO's peak cost, and a million output tokens from them."""

    # one replica: its nodes' price x the share of their GPUs it takes (pods request their GPUs
    # and Karpenter packs replicas onto a node)
    usd_per_hour: float
    # the fleet at the peak: whole nodes (a node is paid for even when its other GPUs idle)
    fleet_usd_per_hour: float
    nodes: int
    usd_per_1m_output_tokens: float | None  # the fleet's price over its tokens; None: none
    as_of: str | None  # date of the price list


@dataclass(frozen=True)
class Performance:
    """What the model says about the sized configuration at the spec's load."""

    estimate: PerfEstimate | None  # None: the configuration is not modelled (``unsupported``)
    unsupported: str | None
    engine_label: str  # which constants: engine family and version range
    concurrency_per_replica: int  # the load point of ``estimate``
    replicas_at_peak: int  # replicas the load point assumes
    replicas_for_memory: int | None
    replicas_for_latency: int | None  # None: no latency target; 0 never happens
    max_concurrency_meeting_slo: int | None  # None: no latency target
    replicas_reachable: int
    reachable_field: str  # the spec field that bounds the replicas
    targets: tuple[Target, ...]
    on_demand: Cost | None
    spot: Cost | None
    queue_threshold: int | None  # waiting requests per replica at which p99 TTFT crosses the SLO
    uncertainty: Uncertainty
    spec_queue_threshold: int | None = None  # the spec's own waitingRequestsPerReplica
    arrival: str = "steady"  # the arrival pattern every figure assumes (perf.workloads)
    # poisson: the load point's request rate per replica, and the highest rate meeting the SLO
    requests_per_s_per_replica: float | None = None
    max_rate_meeting_slo: float | None = None

    @property
    def replicas_needed(self) -> int | None:
        """The larger of the memory- and latency-driven counts (None: latency unreachable)."""
        if self.max_concurrency_meeting_slo == 0:
            return None
        counts = [c for c in (self.replicas_for_memory, self.replicas_for_latency) if c]
        return max(counts) if counts else None

    @property
    def has_targets(self) -> bool:
        return bool(self.targets)

    @property
    def meets_slo(self) -> bool | None:
        """None: no latency target (or not modelled); else every target met at the load."""
        if not self.targets or self.estimate is None:
            return None
        return all(t.met for t in self.targets)

    def misses(self) -> tuple[str, ...]:
        """One reason per missed target, naming the term that dominates it."""
        out = []
        for t in self.targets:
            if not t.met:
                name = "TTFT" if t.metric == "ttft" else "ITL"
                out.append(
                    f"p99 {name} {t.predicted_p99_ms:.0f} ms > slo.{t.metric}Ms {t.slo_ms:.0f} "
                    f"at {self.concurrency_per_replica} concurrent requests per replica "
                    f"(dominant: {t.dominant_term})"
                )
        return tuple(out)

    def warnings(self) -> tuple[str, ...]:
        """Targets met by the estimate but not with the calibration margin, and a latency
        need beyond the replicas the deployment can reach."""
        return tuple(message for _, message in self.located_warnings())

    def located_warnings(self) -> tuple[tuple[str, str], ...]:
        """:meth:`warnings`, each with the spec field it is about (dotted camelCase)."""
        out = []
        for t in self.targets:
            if t.met and not t.within_margin:
                name = "TTFT" if t.metric == "ttft" else "ITL"
                out.append(
                    (
                        f"slo.{t.metric}Ms",
                        f"p99 {name} {t.predicted_p99_ms:.0f} ms meets slo.{t.metric}Ms "
                        f"{t.slo_ms:.0f} but not with the model's {t.margin:.0%} calibration error "
                        f"(plans for {t.planned_ms:.0f} ms)",
                    )
                )
        needed = self.replicas_needed
        if needed is not None and needed > self.replicas_reachable:
            out.append(
                (
                    self.reachable_field or "slo.concurrentRequests",
                    f"the SLO needs {needed} replicas at its peak (planned with the error margin); "
                    f"the deployment reaches {self.replicas_reachable} ({self.reachable_field}"
                    + (
                        "; autoscaling is off)"
                        if self.reachable_field.endswith("minReplicas")
                        else ")"
                    ),
                )
            )
        return tuple(out)


def gpu_share(sizing: Sizing) -> float:
    """Share of its nodes' GPUs one replica takes (1.0: whole nodes)."""
    assert sizing.instance is not None
    per_node = sizing.tp * sizing.data_parallel * sizing.pp / sizing.nodes
    return min(1.0, per_node / sizing.instance.gpu_count)


def fleet_nodes(sizing: Sizing, replicas: int) -> int:
    """Nodes ``replicas`` replicas occupy, packed as Karpenter packs their pods."""
    if sizing.nodes > 1:
        return replicas * sizing.nodes
    share = gpu_share(sizing)
    per_node = max(1, round(1 / share)) if share > 0 else 1
    return math.ceil(replicas / per_node)


def _cost(
    price: float | None, sizing: Sizing, as_of: str | None, tok_s: float, replicas: int
) -> Cost | None:
    if price is None:
        return None
    nodes = fleet_nodes(sizing, replicas)
    fleet = price * nodes
    per_m = fleet / (tok_s * replicas * 3600.0) * 1e6 if tok_s > 0 else None
    return Cost(
        usd_per_hour=price * sizing.nodes * gpu_share(sizing),
        fleet_usd_per_hour=fleet,
        nodes=nodes,
        usd_per_1m_output_tokens=per_m,
        as_of=as_of,
    )


def _reachable(spec: Spec | None) -> tuple[int, str]:
    if spec is None:
        return _NO_CEILING, ""
    a = spec.autoscaling
    if a.enabled:
        return a.max_replicas, "autoscaling.maxReplicas"
    return a.min_replicas, "autoscaling.minReplicas"


def assess(
    sizing: Sizing,
    run: EngineRun | None,
    spec: Spec | None,
    ttft_ms: float | None = None,
    itl_ms: float | None = None,
    *,
    threshold: bool = True,
) -> Performance:
    """The performance of ``sizing`` at its SLO load (``run``: how its engine runs a replica,
    None when the engine has no fitted constants). Targets come from ``spec.slo`` (or the
    arguments in quick mode). ``threshold=False`` skips the autoscaling threshold (one more
    search over the load), which ``plan`` does not need."""
    req = sizing.request
    if spec is not None:
        ttft_ms, itl_ms = spec.slo.ttft_ms, spec.slo.itl_ms
    reachable, reachable_field = _reachable(spec)
    why = inputs.unsupported(sizing)
    if why is None and run is None:
        why = f"no performance constants fitted for {sizing.engine}"
    if why is not None or run is None:
        return Performance(
            None, why, "", 0, 0, sizing.replicas_for_slo, None, None, reachable, reachable_field,
            (), None, None, None, UNCERTAINTY,
        )  # fmt: skip
    assert sizing.instance is not None  # unsupported() said so
    hw, geo, dep, c = inputs.hardware(sizing.instance), inputs.geometry(req.architecture), \
        run.deployment, run.constants  # fmt: skip
    n_in, n_out, peak = req.slo_input_tokens, req.slo_output_tokens, req.slo_concurrent_requests
    arrival: workloads.Arrival = req.slo_arrival  # type: ignore[assignment]
    rate = req.slo_requests_per_s if arrival == "poisson" else None
    unc = uncertainty_for(c.engine, sizing.instance.gpu.arch, arrival)
    m_ttft, m_itl = planning_margin("ttft", unc), planning_margin("itl", unc)

    def meeting(ttft: float | None, itl: float | None) -> int:
        return api.max_concurrency_meeting(
            hw, geo, dep, n_in, n_out, ttft, itl, c, margins=(m_ttft, m_itl), cap=peak,
            arrival=arrival,
        )  # fmt: skip

    def rate_meeting(ttft: float | None, itl: float | None) -> float:
        assert rate is not None
        return api.max_rate_meeting(
            hw, geo, dep, n_in, n_out, ttft, itl, c, margins=(m_ttft, m_itl), cap=rate
        )

    max_rate: float | None = None
    if rate is not None:
        # an open loop: the load is a rate; replicas split it (KV capacity shows up in the
        # simulation as preemption and saturation, so there is no separate memory count)
        max_rate = rate_meeting(ttft_ms, itl_ms) if (ttft_ms or itl_ms) else None
        for_latency = math.ceil(rate / max_rate - 1e-9) if max_rate else None
        for_memory = None
        max_c = None if max_rate is None else (1 if max_rate > 0 else 0)
    else:
        max_c = meeting(ttft_ms, itl_ms) if (ttft_ms or itl_ms) else None
        for_latency = math.ceil(peak / max_c) if max_c else None
        for_memory = sizing.replicas_for_slo
    counts = [n for n in (for_memory, for_latency) if n]
    needed = max(counts) if counts else 1
    at_peak = max(1, min(needed, reachable))

    def at_load(replicas: int) -> PerfEstimate:
        if rate is not None:
            load = workloads.workload(arrival, n_in, n_out, requests_per_s=rate / replicas)
        else:
            load = workloads.workload(arrival, n_in, n_out, concurrency=math.ceil(peak / replicas))
        return api.estimate(hw, geo, dep, load, c)

    def planned(e: PerfEstimate) -> bool:
        return (not ttft_ms or e.ttft_p99_ms <= ttft_ms / (1 + m_ttft)) and (
            not itl_ms or e.itl_p99_ms <= itl_ms / (1 + m_itl)
        )

    est = at_load(at_peak)
    # p99 TTFT of a closed loop is not exactly monotone in the load (clients fall into step
    # with the engine's iterations), so the search's answer is checked at the load it gives:
    # a few more replicas until the estimate there meets the tightened targets too.
    extra = 0
    while max_c and not planned(est) and at_peak < reachable and extra < _MAX_EXTRA_REPLICAS:
        at_peak, extra = at_peak + 1, extra + 1
        est = at_load(at_peak)
    per_replica = math.ceil(peak / at_peak)
    if rate is not None:
        # what a replica holds at its share of the rate (Little's law on the estimate)
        e2e_s = (est.ttft_mean_ms + est.itl_mean_ms * max(0.0, n_out - 1)) / 1000.0
        per_replica = max(1, round(rate / at_peak * e2e_s)) if math.isfinite(e2e_s) else 0
        if max_rate and (extra or not planned(est)):
            max_rate = rate / at_peak if planned(est) else rate / at_peak * 0.98
            for_latency = math.ceil(rate / max_rate - 1e-9) if max_rate else None
    elif max_c and (extra or not planned(est)) and per_replica <= max_c:
        # the load the search said meets the targets did not at this replica count: report
        # the concurrency verified here (and the replicas it takes), not the search's answer
        max_c = per_replica if planned(est) else per_replica - 1
        for_latency = math.ceil(peak / max_c) if max_c else None
    targets = []
    if ttft_ms:
        targets.append(Target("ttft", ttft_ms, est.ttft_p99_ms, m_ttft, est.ttft_dominant_term))
    if itl_ms:
        targets.append(Target("itl", itl_ms, est.itl_p99_ms, m_itl, est.dominant_term))
    queue: int | None = None
    if rate is not None and ttft_ms and threshold and (spec is None or spec.autoscaling.enabled):
        # the requests waiting (not yet decoding) at the highest rate meeting the TTFT target
        r_ttft = max_rate if not itl_ms else rate_meeting(ttft_ms, None)
        if r_ttft:
            at = api.estimate(
                hw, geo, dep, workloads.workload(arrival, n_in, n_out, requests_per_s=r_ttft), c
            )
            e2e_s = (at.ttft_mean_ms + at.itl_mean_ms * max(0.0, n_out - 1)) / 1000.0
            queue = max(1, round(r_ttft * e2e_s - at.mean_batch))
    elif ttft_ms and threshold and (spec is None or spec.autoscaling.enabled):
        # The queue depth at which p99 TTFT would cross the (tightened) target: the clients
        # beyond the batch the replica decodes at the highest concurrency that still meets it.
        c_ttft = max_c if not itl_ms else meeting(ttft_ms, None)
        if c_ttft:
            load = workloads.workload(arrival, n_in, n_out, concurrency=c_ttft)
            at = api.estimate(hw, geo, dep, load, c)
            queue = max(1, round(c_ttft - at.mean_batch))
    inst = sizing.instance
    tok_s = est.output_tokens_per_s
    return Performance(
        estimate=est,
        unsupported=None,
        engine_label=run.label,
        concurrency_per_replica=per_replica,
        replicas_at_peak=at_peak,
        replicas_for_memory=for_memory,
        replicas_for_latency=for_latency,
        max_concurrency_meeting_slo=max_c,
        replicas_reachable=reachable,
        reachable_field=reachable_field,
        targets=tuple(targets),
        on_demand=_cost(inst.price_usd_hr, sizing, inst.price_as_of, tok_s, at_peak),
        spot=_cost(inst.spot_price_usd_hr, sizing, inst.spot_price_as_of, tok_s, at_peak),
        queue_threshold=queue,
        uncertainty=unc,
        spec_queue_threshold=spec.autoscaling.waiting_requests_per_replica if spec else None,
        arrival=arrival,
        requests_per_s_per_replica=None if rate is None else rate / at_peak,
        max_rate_meeting_slo=max_rate,
    )
