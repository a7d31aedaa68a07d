"""The Prometheus pipeline KEDA reads, per flavour, checked the way the controllers act on it
(docs/production.md §7, §8): the Prometheus must select the monitor, be allowed to discover
and scrape the targets, and be reachable by the KEDA operator, which must be able to read the
metric; when it cannot, KEDA must hold the fleet, and alerts must say so."""

from __future__ import annotations

import math
from typing import Any

import promql_parser
import pytest
import yaml

from cluster_model import admits, rbac_allows, selects
from llmdeploy import pipeline
from llmdeploy.check.bundled import bundled_registry
from llmdeploy.errors import SpecError
from llmdeploy.plan.prometheus import kps_fullname
from llmdeploy.spec import load

BASE: dict[str, Any] = {
    "apiVersion": "llmdeploy.dev/v1alpha1",
    "name": "chat",
    "namespace": "llm-serving",
    "model": {"id": "meta-llama/Llama-3.1-8B-Instruct", "architecture": "llama-3.1-8b"},
    "hardware": {"instanceType": "g6e.xlarge"},
    "cluster": {"name": "c", "nodeRole": "r"},
}
AMP = {
    "flavor": "amazon-managed",
    "workspaceId": "ws-12345678-abcd-ef01-2345-6789abcdef01",
    "region": "eu-west-1",
}


def render(**over: Any) -> pipeline.Rendered:
    text = yaml.safe_dump({**BASE, **over}, sort_keys=False)
    return pipeline.render_loaded(load.load_spec_text(text, "spec.yaml"), header_command="t")


def docs(result: pipeline.Rendered) -> list[dict[str, Any]]:
    return [d for _, d in pipeline.yaml_documents(result.files)]


def kind(result: pipeline.Rendered, name: str) -> list[dict[str, Any]]:
    return [d for d in docs(result) if d["kind"] == name]


def with_prometheus(flavor: dict[str, Any], **over: Any) -> pipeline.Rendered:
    """Rendered with that Prometheus and the pipeline alerts on (they are off by default)."""
    return render(monitoring={"prometheus": flavor, "alerts": True}, **over)


def trigger(result: pipeline.Rendered) -> dict[str, Any]:
    (scaled,) = kind(result, "ScaledObject")
    (t,) = scaled["spec"]["triggers"]
    return dict(t)


def server_pod(result: pipeline.Rendered) -> tuple[str, dict[str, str]]:
    (deployment,) = kind(result, "Deployment")
    return deployment["metadata"]["namespace"], deployment["spec"]["template"]["metadata"]["labels"]


# --- kube-prometheus-stack: the release label -----------------------------------------------


@pytest.mark.parametrize(
    ("release", "service"),
    [  # kube-prometheus-stack 88.5.3 _helpers.tpl kube-prometheus-stack.fullname + "-prometheus"
        ("kps", "kps-kube-prometheus-stack-prometheus"),
        ("prometheus", "prometheus-kube-prometheus-prometheus"),
        ("monitoring", "monitoring-kube-prometheus-prometheus"),
        ("kube-prometheus-stack", "kube-prometheus-stack-prometheus"),
    ],
)
def test_kube_prometheus_stack_service_name(release: str, service: str) -> None:
    assert f"{kps_fullname(release)}-prometheus" == service
    result = with_prometheus(
        {"flavor": "kube-prometheus-stack", "release": release, "namespace": "obs"}
    )
    assert trigger(result)["metadata"]["serverAddress"] == f"http://{service}.obs.svc:9090"


def test_kube_prometheus_stack_selects_the_monitor_and_the_rules_by_release() -> None:
    """The chart's Prometheus (serviceMonitorSelectorNilUsesHelmValues and
    ruleSelectorNilUsesHelmValues true) selects matchLabels {release: <release>}."""
    result = with_prometheus({"flavor": "kube-prometheus-stack", "release": "kps"})
    chart_selector = {"matchLabels": {"release": "kps"}}
    for name in ("ServiceMonitor", "PrometheusRule"):
        (obj,) = kind(result, name)
        assert selects(chart_selector, obj["metadata"]["labels"]), name
    assert not kind(result, "Role"), "its ClusterRole already covers every namespace"


def test_a_monitor_label_contradicting_the_release_is_a_located_error() -> None:
    with pytest.raises(SpecError) as info:
        render(monitoring={"labels": {"release": "other"}})
    (diag,) = info.value.diagnostics
    assert diag.source_line == "    release: other"
    assert diag.hint == "drop release from monitoring.labels"


# --- kube-prometheus: RBAC and the NetworkPolicy in front of Prometheus ----------------------

# kube-prometheus v0.18.0 manifests/prometheus-networkPolicy.yaml, as shipped: Prometheus
# pods admit only prometheus, prometheus-adapter and grafana pods of their own namespace.
KUBE_PROMETHEUS_PODS = {
    "app.kubernetes.io/component": "prometheus",
    "app.kubernetes.io/instance": "k8s",
    "app.kubernetes.io/name": "prometheus",
    "app.kubernetes.io/part-of": "kube-prometheus",
}
SHIPPED_POLICY = {
    "kind": "NetworkPolicy",
    "metadata": {"name": "prometheus-k8s", "namespace": "monitoring"},
    "spec": {
        "podSelector": {"matchLabels": KUBE_PROMETHEUS_PODS},
        "policyTypes": ["Egress", "Ingress"],
        "ingress": [
            {
                "from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": name}}}],
                "ports": [{"port": 9090, "protocol": "TCP"}],
            }
            for name in ("prometheus", "prometheus-adapter", "grafana")
        ],
    },
}
KEDA_OPERATOR = ("keda", {"app": "keda-operator", "name": "keda-operator"})


def test_kube_prometheus_can_discover_scrape_and_be_queried() -> None:
    result = with_prometheus({"flavor": "kube-prometheus"})
    rendered = docs(result)
    prometheus_sa = ("monitoring", "prometheus-k8s")
    # discovery: Prometheus lists and watches the Service's EndpointSlices (v0.17+), Endpoints
    # (v0.16 and older), Services and Pods of the serving namespace
    for group, resource in (
        ("discovery.k8s.io", "endpointslices"),
        ("", "endpoints"),
        ("", "services"),
        ("", "pods"),
    ):
        for verb in ("get", "list", "watch"):
            assert rbac_allows(rendered, prometheus_sa, "llm-serving", group, resource, verb)
    assert not rbac_allows(rendered, prometheus_sa, "llm-serving", "", "secrets", "get")
    # the KEDA operator reaches Prometheus: refused by the shipped policy alone, admitted with
    # the rendered one (policies add up)
    prometheus = ("monitoring", KUBE_PROMETHEUS_PODS)
    assert not admits([SHIPPED_POLICY], prometheus, KEDA_OPERATOR, 9090)
    policies = [SHIPPED_POLICY, *kind(result, "NetworkPolicy")]
    assert admits(policies, prometheus, KEDA_OPERATOR, 9090)
    assert not admits(policies, prometheus, ("keda", {"app": "other"}), 9090)
    assert not admits(policies, prometheus, KEDA_OPERATOR, 8080)
    # Prometheus scrapes the server; Grafana in the same namespace does not reach it
    ours = [p for p in policies if p["metadata"]["namespace"] == "llm-serving"]
    assert admits(ours, server_pod(result), prometheus, 8000)
    assert not admits(
        ours, server_pod(result), ("monitoring", {"app.kubernetes.io/name": "grafana"}), 8000
    )
    assert (
        trigger(result)["metadata"]["serverAddress"] == "http://prometheus-k8s.monitoring.svc:9090"
    )


def test_without_a_scaled_object_no_access_for_keda_is_rendered() -> None:
    result = with_prometheus({"flavor": "kube-prometheus"}, autoscaling={"enabled": False})
    assert [p["metadata"]["namespace"] for p in kind(result, "NetworkPolicy")] == ["llm-serving"]


# --- Amazon Managed Service for Prometheus: SigV4 through pod identity -----------------------


def keda_signs_with_sigv4(t: dict[str, Any], auth: dict[str, Any] | None) -> bool:
    """kedacore/keda@v2.20.2 NewPrometheusScaler: with no authModes (auth "disabled") it asks
    aws.NewSigV4RoundTripper, which signs only when GetAwsAuthorization finds AWS credentials,
    here from podIdentity provider aws (pkg/scalers/aws/aws_common.go), in the trigger's
    awsRegion. There is no `sigv4` authMode (pkg/scalers/authentication/authentication_types.go)."""
    meta = t["metadata"]
    if meta.get("authModes"):
        return False
    identity = (auth or {}).get("spec", {}).get("podIdentity", {})
    return identity.get("provider") == "aws" and bool(meta.get("awsRegion"))


def test_amazon_managed_prometheus_is_queried_with_sigv4() -> None:
    result = with_prometheus({**AMP, "roleArn": "arn:aws:iam::111122223333:role/keda-amp"})
    t = trigger(result)
    (auth,) = kind(result, "TriggerAuthentication")
    assert t["authenticationRef"] == {
        "name": auth["metadata"]["name"],
        "kind": "TriggerAuthentication",
    }
    assert auth["metadata"]["namespace"] == "llm-serving"  # beside the ScaledObject
    assert keda_signs_with_sigv4(t, auth)
    assert auth["spec"]["podIdentity"]["roleArn"] == "arn:aws:iam::111122223333:role/keda-amp"
    workspace = AMP["workspaceId"]
    assert t["metadata"]["serverAddress"] == (
        f"https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/{workspace}"
    )
    assert not kind(result, "PrometheusRule")
    rules = yaml.safe_load(dict(result.files)["prometheus-rules.yml"])
    assert [r["alert"] for r in rules["groups"][0]["rules"]]
    assert any("aps:QueryMetrics" in n.message for n in result.notices)


def test_the_other_flavours_do_not_sign() -> None:
    result = with_prometheus({"flavor": "kube-prometheus"})
    assert not keda_signs_with_sigv4(trigger(result), None)


# --- custom: no RBAC, scrape from the pods named -----------------------------------------------


def test_custom_prometheus_admits_only_the_scraper_pods() -> None:
    result = with_prometheus(
        {
            "flavor": "custom",
            "address": "http://vmselect.obs.svc:8481/select/0/prometheus",
            "namespace": "obs",
            "scraperLabels": {"app": "vmagent"},
        }
    )
    policies = kind(result, "NetworkPolicy")
    assert admits(policies, server_pod(result), ("obs", {"app": "vmagent"}), 8000)
    assert not admits(policies, server_pod(result), ("obs", {"app": "grafana"}), 8000)
    assert not kind(result, "Role")


def test_namespace_wide_scraping_is_a_warning() -> None:
    result = with_prometheus({"flavor": "custom", "address": "http://p.obs.svc:9090"})
    warnings = [n for n in result.notices if n.severity == "warning"]
    assert warnings and "every pod in namespace 'monitoring'" in warnings[0].message


# --- KEDA: fallback when the metric cannot be read ---------------------------------------------


def keda_desired_replicas(
    scaled: dict[str, Any], value: float | None, failures: int, current: int
) -> int:
    """One polling cycle of KEDA + the HPA for this trigger: prometheus_scaler.go
    ExecutePromQuery (an empty result is 0 with ignoreNullValues "true", the default, else an
    error), fallback.go GetMetricsWithFallback/doFallback (after more than failureThreshold
    consecutive errors: static, currentReplicas, or max/min with fallback.replicas), and the HPA
    for AverageValue (ceil(value / threshold)), clamped to [min, max]."""
    spec = scaled["spec"]
    (t,) = spec["triggers"]
    meta = t["metadata"]
    lo, hi = spec["minReplicaCount"], spec["maxReplicaCount"]
    threshold = float(meta["threshold"])
    if value is None and meta.get("ignoreNullValues", "true") == "true":
        value = 0.0
    if value is not None:
        return min(hi, max(lo, math.ceil(value / threshold)))
    fallback = spec.get("fallback")
    if fallback is None or failures <= fallback["failureThreshold"]:
        return current  # the HPA cannot read the metric and keeps the scale
    behavior = fallback.get("behavior", "static")
    replicas = {
        "static": fallback["replicas"],
        "currentReplicas": current,
        "currentReplicasIfHigher": max(current, fallback["replicas"]),
        "currentReplicasIfLower": min(current, fallback["replicas"]),
    }[behavior]
    return min(hi, max(lo, replicas))


def test_a_lost_scrape_holds_the_fleet_instead_of_scaling_it_in() -> None:
    result = render(autoscaling={"minReplicas": 2, "maxReplicas": 8})
    (scaled,) = kind(result, "ScaledObject")
    assert keda_desired_replicas(scaled, 45.0, 0, 2) == 5  # working: ceil(45 / 10)
    for failures in range(10):  # the series is gone (monitor not selected, RBAC, policy)
        assert keda_desired_replicas(scaled, None, failures, 6) == 6
    # the same ScaledObject with KEDA's defaults (no fallback, ignoreNullValues true) scales in
    default = yaml.safe_load(yaml.safe_dump(scaled))
    default["spec"].pop("fallback")
    default["spec"]["triggers"][0]["metadata"].pop("ignoreNullValues")
    assert keda_desired_replicas(default, None, 5, 6) == 2


def test_fallback_replicas_is_a_floor() -> None:
    result = render(
        autoscaling={"minReplicas": 1, "fallback": {"replicas": 3, "failureThreshold": 5}}
    )
    (scaled,) = kind(result, "ScaledObject")
    assert scaled["spec"]["fallback"]["failureThreshold"] == 5
    assert keda_desired_replicas(scaled, None, 6, 1) == 3
    assert keda_desired_replicas(scaled, None, 5, 1) == 1  # not yet: more than 5 failures
    assert trigger(result)["metadata"]["activationThreshold"] == "0"


def failed_reads(scaled: dict[str, Any], seconds: int) -> int:
    """Failures KEDA counts while the query fails for ``seconds``: one per poll and one per
    HPA read of the metric, every 15 s (kedacore/keda@v2.20.2 pkg/scaling/scale_handler.go:
    getScalerState and GetScaledObjectMetrics both go through processMetricsWithFallback)."""
    return seconds // scaled["spec"]["pollingInterval"] + seconds // 15


def test_a_cold_start_does_not_buy_the_fallback_fleet() -> None:
    """minReplicas 1, fallback.replicas 4: a fresh deploy has no series until its first replica
    serves, up to its cold start (the Deployment's progress deadline); the fallback must not
    apply before, or KEDA starts 4 replicas for a model nobody has queried yet."""
    result = render(autoscaling={"minReplicas": 1, "maxReplicas": 8, "fallback": {"replicas": 4}})
    (scaled,) = kind(result, "ScaledObject")
    (deployment,) = kind(result, "Deployment")
    cold = deployment["spec"]["progressDeadlineSeconds"]
    failures = failed_reads(scaled, cold)
    assert keda_desired_replicas(scaled, None, failures, 1) == 1
    assert scaled["spec"]["fallback"]["failureThreshold"] == failures  # and no more
    assert keda_desired_replicas(scaled, None, failures + 1, 1) == 4  # a broken pipeline
    # the empty result stays a failed read, so it is not taken for an idle model
    assert trigger(result)["metadata"]["ignoreNullValues"] == "false"
    # KEDA's threshold of 3 would have started the fallback fleet 45 s into the deploy
    old = yaml.safe_load(yaml.safe_dump(scaled))
    old["spec"]["fallback"]["failureThreshold"] = 3
    assert keda_desired_replicas(old, None, failed_reads(old, 30), 1) == 4


def test_a_fallback_at_min_replicas_keeps_kedas_threshold() -> None:
    (scaled,) = kind(render(autoscaling={"minReplicas": 2}), "ScaledObject")
    assert scaled["spec"]["fallback"] == {
        "failureThreshold": 3,
        "replicas": 2,
        "behavior": "currentReplicasIfHigher",
    }


def test_a_threshold_shorter_than_a_cold_start_is_a_located_warning() -> None:
    text = yaml.safe_dump(
        {**BASE, "autoscaling": {"fallback": {"replicas": 3, "failureThreshold": 5}}},
        sort_keys=False,
    )
    result = pipeline.render_loaded(load.load_spec_text(text, "spec.yaml"), header_command="t")
    (warning,) = [w for w in result.warnings if "fresh deploy" in w.message]
    line = text.splitlines().index("    failureThreshold: 5") + 1
    assert (warning.severity, warning.line, warning.column) == ("warning", line, 23)  # the value
    assert "after 5 KEDA applies the fallback and starts 3 replicas" in warning.message
    assert warning.hint is not None and "leave failureThreshold out" in warning.hint


# --- KEDA + HPA: a smoothed signal and a scale-up stabilization ----------------------------------

Series = dict[str, list[tuple[float, float]]]  # pod -> (time, value) samples, one per scrape


def evaluate(expr: Any, series: Series, t: float) -> list[float]:
    """The instant vector of the queries llmdeploy renders, at time ``t``, from scraped samples:
    an instant selector reads each series' latest sample within the 5-minute lookback; a range
    selector the samples in (t - range, t] (left-open since Prometheus 3.0); avg_over_time
    their mean (prometheus/prometheus@v3.0.0 promql/functions.go funcAvgOverTime); sum adds the
    series up (no series: an empty result)."""
    if isinstance(expr, promql_parser.AggregateExpr):
        assert str(expr.op) == "sum", expr.op
        values = evaluate(expr.expr, series, t)
        return [sum(values)] if values else []
    if isinstance(expr, promql_parser.Call):
        assert expr.func.name == "avg_over_time", expr.func.name
        (matrix,) = expr.args
        width = matrix.range.total_seconds()
        out = []
        for samples in series.values():
            inside = [v for at, v in samples if t - width < at <= t]
            if inside:
                out.append(sum(inside) / len(inside))
        return out
    assert isinstance(expr, promql_parser.VectorSelector), type(expr)
    latest = [[v for at, v in samples if t - 300 < at <= t] for samples in series.values()]
    return [values[-1] for values in latest if values]


def first_scale_out(scaled: dict[str, Any], series: Series, until: float) -> float | None:
    """When the HPA first raises the replicas above minReplicaCount, syncing every 15 s: the
    recommendation ceil(value / threshold) for AverageValue, clamped to [min, max], then the
    lowest recommendation of the scale-up stabilization window (kubernetes/kubernetes
    pkg/controller/podautoscaler/horizontal.go stabilizeRecommendationWithBehaviors)."""
    spec = scaled["spec"]
    meta = spec["triggers"][0]["metadata"]
    query, threshold = promql_parser.parse(meta["query"]), float(meta["threshold"])
    lo, hi = spec["minReplicaCount"], spec["maxReplicaCount"]
    window = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"][
        "stabilizationWindowSeconds"
    ]
    recommendations: list[tuple[float, int]] = []
    t = 0.0
    while t <= until:
        (value,) = evaluate(query, series, t) or [0.0]
        desired = min(hi, max(lo, math.ceil(value / threshold)))
        recommendations.append((t, desired))
        if min([desired] + [r for at, r in recommendations if at > t - window]) > lo:
            return t
        t += 15
    return None


def scrapes(values: dict[float, float], every: float, until: float) -> list[tuple[float, float]]:
    """One pod's gauge scraped every ``every`` seconds: ``values`` at those times, else 0."""
    return [(k * every, values.get(k * every, 0.0)) for k in range(int(until / every) + 1)]


def instant_signal(scaled: dict[str, Any]) -> dict[str, Any]:
    """The same ScaledObject as rendered before: the gauge's last sample and no stabilization."""
    old = yaml.safe_load(yaml.safe_dump(scaled))
    meta = old["spec"]["triggers"][0]["metadata"]
    query = promql_parser.parse(meta["query"])
    selector = query.expr.args[0].vector_selector
    meta["query"] = f"sum({selector})"
    old["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"][
        "stabilizationWindowSeconds"
    ] = 0
    return old


@pytest.mark.parametrize(("interval", "window"), [("15s", 60), ("30s", 120), ("10s", 60)])
def test_the_queue_signal_is_averaged_over_four_scrapes(interval: str, window: int) -> None:
    result = render(monitoring={"interval": interval})
    (scaled,) = kind(result, "ScaledObject")
    query = promql_parser.parse(trigger(result)["metadata"]["query"])
    assert str(query.op) == "sum" and query.expr.func.name == "avg_over_time"
    assert query.expr.args[0].range.total_seconds() == window
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == window + 15


@pytest.mark.parametrize("height", [2.0, 8.0, 1000.0])
def test_one_scrape_of_queue_does_not_add_a_node(height: float) -> None:
    """Threshold 1 (what the model derives for a tight TTFT): one scrape of ``height`` waiting
    requests scaled the fleet out with the instant gauge; averaged over the window and held
    for the stabilization window, no single scrape does, however high."""
    result = render(autoscaling={"waitingRequestsPerReplica": 1, "maxReplicas": 8})
    (scaled,) = kind(result, "ScaledObject")
    burst = {"pod-a": scrapes({300.0: height}, 15, 900)}
    assert first_scale_out(instant_signal(scaled), burst, 900) == 300
    assert first_scale_out(scaled, burst, 900) is None


def test_a_sustained_queue_scales_out_within_the_two_windows() -> None:
    result = render(autoscaling={"waitingRequestsPerReplica": 1, "maxReplicas": 8})
    (scaled,) = kind(result, "ScaledObject")
    load = {"pod-a": scrapes({t: 3.0 for t in range(300, 1201, 15)}, 15, 1200)}
    at = first_scale_out(scaled, load, 1200)
    assert at is not None and at - 300 <= 60 + 75  # the averaging window + the stabilization


def test_scale_up_stabilization_can_be_set() -> None:
    result = render(autoscaling={"scaleUpStabilization": 0})
    (scaled,) = kind(result, "ScaledObject")
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 0


# --- alerts --------------------------------------------------------------------------------


def rule_groups(result: pipeline.Rendered) -> list[dict[str, Any]]:
    rules = kind(result, "PrometheusRule")
    if rules:
        return list(rules[0]["spec"]["groups"])
    return list(yaml.safe_load(dict(result.files)["prometheus-rules.yml"])["groups"])


@pytest.mark.parametrize(
    "prometheus",
    [{"flavor": "kube-prometheus"}, {"flavor": "kube-prometheus-stack"}, AMP],
)
def test_alerts_parse_and_watch_the_series_keda_reads(prometheus: dict[str, Any]) -> None:
    result = with_prometheus(prometheus)
    query = trigger(result)["metadata"]["query"]
    promql_parser.parse(query)
    (group,) = rule_groups(result)
    names = set()
    for rule in group["rules"]:
        promql_parser.parse(rule["expr"])  # a real PromQL parser: raises on a syntax error
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["for"].endswith("m")
        names.add(rule["alert"])
    exprs = {r["alert"]: r["expr"] for r in group["rules"]}
    assert exprs["ModelServerScalingMetricAbsent"] == f"absent({query})"
    assert exprs["ModelServerQueueHigh"].startswith(query + " > ")
    assert "vllm:kv_cache_usage_perc{" in exprs["ModelServerKVCacheFull"]
    # The absence alert waits out a fresh replica's startup budget before it fires.
    (deployment,) = kind(result, "Deployment")
    probe = deployment["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    budget = probe["periodSeconds"] * probe["failureThreshold"]
    absent = next(r for r in group["rules"] if r["alert"] == "ModelServerScalingMetricAbsent")
    assert int(absent["for"][:-1]) * 60 >= budget


def test_alerts_are_off_by_default_so_a_default_render_is_fully_validated() -> None:
    """No official PrometheusRule CRD is bundled (tests/test_crd_bundle.py): a default render
    writes no object llmdeploy cannot validate."""
    text = yaml.safe_dump(BASE, sort_keys=False)
    result = pipeline.render_loaded(
        load.load_spec_text(text, "spec.yaml"), header_command="t", crds=bundled_registry()
    )
    assert not kind(result, "PrometheusRule") and "prometheus-rules.yml" not in dict(result.files)
    assert not result.report.not_validated


# --- vLLM's API key --------------------------------------------------------------------------


def vllm_requires_key(path: str, version: tuple[int, int]) -> bool:
    """vLLM's authentication middleware guards only some path prefixes: "/v1" up to 0.21
    (vllm/entrypoints/openai/server_utils.py@v0.19.0 AuthenticationMiddleware), then
    GUARDED_PREFIX ("/v1", "/v2", "/inference") (0.22-0.24; "/cohere" added by 0.29)."""
    prefixes = ("/v1",) if version < (0, 22) else ("/v1", "/v2", "/inference", "/cohere")
    return path.startswith(prefixes)


def test_api_key_comes_from_the_secret_and_leaves_probes_and_metrics_open() -> None:
    result = render(
        engine={"type": "vllm", "version": "0.19.0", "apiKeySecret": {"name": "chat-key"}}
    )
    (deployment,) = kind(result, "Deployment")
    server = deployment["spec"]["template"]["spec"]["containers"][0]
    (env,) = [e for e in server["env"] if e["name"] == "VLLM_API_KEY"]
    assert env == {
        "name": "VLLM_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "chat-key", "key": "api-key"}},
    }
    assert "--api-key" not in server["args"]
    probes = [
        server[p]["httpGet"]["path"] for p in ("startupProbe", "readinessProbe", "livenessProbe")
    ]
    (monitor,) = kind(result, "ServiceMonitor")
    paths = probes + [e["path"] for e in monitor["spec"]["endpoints"]]
    for path in paths:
        assert not vllm_requires_key(path, (0, 19)), path
    assert vllm_requires_key("/v1/chat/completions", (0, 19))
