"""The KEDA ScaledObject: the signal's threshold, the HPA behavior and the fallback while the
metric cannot be read (docs/production.md §8)."""

from __future__ import annotations

import math

from llmdeploy.errors import Notice
from llmdeploy.plan.group import LWS_API_VERSION, LWS_KIND
from llmdeploy.plan.prometheus import PrometheusPlan, signal_window_seconds
from llmdeploy.plan.types import GroupPlan, ScalerPlan
from llmdeploy.spec.sections import Spec

# KEDA fallback behavior: while the metric cannot be read keep the current count, or the
# fallback replicas if higher (kedacore/keda@v2.20.2 pkg/fallback/fallback.go doFallback).
FALLBACK_BEHAVIOR = "currentReplicasIfHigher"
# How often the HPA asks KEDA's metrics server for the metric (kube-controller-manager
# --horizontal-pod-autoscaler-sync-period, 15 s by default). Each of those reads and each of
# KEDA's own polls counts a failure toward the fallback (kedacore/keda@v2.20.2
# pkg/scaling/scale_handler.go: processMetricsWithFallback from GetScaledObjectMetrics and
# getScalerState; pkg/fallback/fallback.go IncrementFailure).
HPA_SYNC_SECONDS = 15
# The fallback threshold when fallback.replicas is minReplicas (a floor the HPA keeps anyway).
DEFAULT_FALLBACK_FAILURES = 3


def fallback_failures(spec: Spec, cold_start_seconds: int) -> tuple[int, tuple[Notice, ...]]:
    """KEDA's fallback.failureThreshold, and a warning when it would fire during a cold start.

    A fresh deploy has no queue series until its first replica serves (an empty result, a
    failed read with ignoreNullValues "false"), for up to one replica's cold start. When the
    fallback raises the fleet above minReplicas, the threshold covers the reads KEDA makes in
    that time, so a first deploy does not start ``fallback.replicas`` replicas; while reads fail
    before it, the HPA keeps the current count (it cannot compute a recommendation)."""
    a = spec.autoscaling
    reads = math.ceil(cold_start_seconds / a.polling_interval) + math.ceil(
        cold_start_seconds / HPA_SYNC_SECONDS
    )
    raises = (a.fallback.replicas or a.min_replicas) > a.min_replicas
    chosen = a.fallback.failure_threshold
    if chosen is None:
        return (reads if raises else DEFAULT_FALLBACK_FAILURES), ()
    if raises and chosen < reads:
        return chosen, (
            Notice(
                "autoscaling.fallback.failureThreshold",
                f"a fresh deploy has no queue metric for up to {cold_start_seconds} s (one "
                f"replica's cold start), about {reads} failed reads: after {chosen} KEDA "
                f"applies the fallback and starts {a.fallback.replicas} replicas before the "
                "first one serves",
                hint=f"leave failureThreshold out (it is then {reads}), or set "
                "fallback.replicas to minReplicas",
            ),
        )
    return chosen, ()


def scaler_plan(
    spec: Spec,
    query: str,
    prom: PrometheusPlan,
    cold_start_seconds: int,
    group: GroupPlan | None = None,
) -> tuple[ScalerPlan, tuple[Notice, ...]]:
    """KEDA's ScaledObject: the Deployment, or the LeaderWorkerSet through its scale
    subresource, whose replicas are whole groups (its HPA selector picks the leaders:
    ``+kubebuilder:subresource:scale:...selectorpath=.status.hpaPodSelector``)."""
    a = spec.autoscaling
    api_version, kind = ("apps/v1", "Deployment") if group is None else (LWS_API_VERSION, LWS_KIND)
    failures, notices = fallback_failures(spec, cold_start_seconds)
    return ScalerPlan(
        min_replicas=a.min_replicas,
        max_replicas=a.max_replicas,
        polling_interval=a.polling_interval,
        cooldown_period=a.cooldown_period,
        server_address=prom.address,
        query=query,
        threshold=str(a.queue_threshold),
        # Only the 0 <-> 1 step uses it (active iff value > activationThreshold,
        # prometheus_scaler.go GetMetricsAndActivity); minReplicas >= 1, written out anyway.
        activation_threshold="0",
        # With the default (true) an empty result reads as 0 with no error, so a broken scrape
        # scales the fleet in and the fallback never applies (prometheus_scaler.go
        # ExecutePromQuery); "false" makes it a failed read that counts toward the fallback,
        # whose threshold outlasts a cold start (fallback_failures).
        ignore_null_values="false",
        fallback_failures=failures,
        fallback_replicas=a.fallback.replicas or a.min_replicas,
        fallback_behavior=FALLBACK_BEHAVIOR,
        # A burst must last the stabilization window before the HPA adds a replica (it takes
        # the lowest recommendation of the window, kubernetes/kubernetes
        # pkg/controller/podautoscaler/horizontal.go stabilizeRecommendationWithBehaviors).
        # the signal window plus one HPA sync by default: a single scrape, however high,
        # raises the recommendation for less than the window, and never for all of it
        scale_up_window=(
            a.scale_up_stabilization
            if a.scale_up_stabilization is not None
            else signal_window_seconds(spec) + HPA_SYNC_SECONDS
        ),
        # A GPU replica takes minutes to become ready: add at most 2 replicas (1 group of
        # several nodes) per 2 minutes, and remove one per 5 minutes after the stabilization
        # window, so a short lull does not drop capacity that takes long to get back.
        scale_up_pods=2 if group is None else 1,
        scale_up_period=120,
        scale_down_window=a.scale_down_stabilization,
        scale_down_pods=1,
        scale_down_period=300,
        aws_region=prom.aws_region,
        auth_ref=prom.trigger_auth.name if prom.trigger_auth else None,
        target_api_version=api_version,
        target_kind=kind,
    ), notices
