"""Alerts for the scaling pipeline: the metric KEDA reads is missing, the queue is above what
the fleet at `maxReplicas` absorbs, a replica's KV cache is full. Their PromQL is built from
the engine's own queries (EngineParts), so it names the series that version exports;
tests/test_alerts.py parses every expression with a PromQL parser."""

from __future__ import annotations

import math

from llmdeploy.plan.pod import startup_window_seconds
from llmdeploy.plan.types import KV, AlertRule, AlertsPlan, WorkloadPlan
from llmdeploy.spec.sections import Spec

# vllm:kv_cache_usage_perc (and Triton's KV block fraction) is a fraction: 1 means every block
# is in use, and new requests wait or running ones are preempted.
KV_FULL = 0.95


def _minutes(seconds: int) -> str:
    return f"{max(1, math.ceil(seconds / 60))}m"


def alerts_plan(
    spec: Spec,
    workload: WorkloadPlan,
    scaler_query: str,
    kv_usage_query: str | None,
    labels: tuple[KV, ...],
) -> AlertsPlan | None:
    if not spec.monitoring.alerts:
        return None
    a = spec.autoscaling
    where = f"{spec.namespace}/{spec.name}"
    queue_limit = a.queue_threshold * a.max_replicas
    rules = [
        AlertRule(
            name="ModelServerScalingMetricAbsent",
            expr=f"absent({scaler_query})",
            # A fresh deployment has no series until its first replica serves: wait as long as
            # the startupProbe allows before calling the pipeline broken.
            for_=_minutes(startup_window_seconds(workload) + 300),
            severity="critical",
            summary=f"{where}: the metric KEDA scales on is missing",
            description=(
                "Prometheus has no queue series for this model: the monitor is not selected, "
                "its targets cannot be discovered or scraped, or no replica is serving. KEDA "
                "holds the replica count (fallback) and does not scale."
            ),
        ),
        AlertRule(
            name="ModelServerQueueHigh",
            expr=f"{scaler_query} > {queue_limit}",
            for_="15m",
            severity="warning",
            summary=f"{where}: more requests wait than {a.max_replicas} replicas absorb",
            description=(
                f"More than {queue_limit} requests have waited for 15 minutes "
                f"({a.queue_threshold} per replica at maxReplicas "
                f"{a.max_replicas}): raise autoscaling.maxReplicas or the capacity per replica."
            ),
        ),
    ]
    if kv_usage_query is not None:
        rules.append(
            AlertRule(
                name="ModelServerKVCacheFull",
                expr=f"{kv_usage_query} > {KV_FULL}",
                for_="10m",
                severity="warning",
                summary=f"{where}: a replica's KV cache is full",
                description=(
                    "A replica has used more than 95% of its KV-cache blocks for 10 minutes: "
                    "requests queue or are preempted. Scale out, shorten maxModelLen, or use "
                    "kvCacheDtype fp8."
                ),
            )
        )
    group = f"llmdeploy.{spec.namespace}.{spec.name}"
    return AlertsPlan(group=group, labels=labels, rules=tuple(rules))
