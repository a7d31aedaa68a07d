"""The Prometheus pipeline KEDA reads: what each flavour of Prometheus needs so that it scrapes
the server and KEDA can query it, and the alerts that say when that pipeline is broken.

Each flavour's facts come from its published manifests (docs/production.md §7):

- kube-prometheus v0.18.0 (`manifests/`): Prometheus `k8s` in `monitoring` selects every
  ServiceMonitor and PrometheusRule (`serviceMonitorSelector: {}`, `ruleSelector: {}`), but its
  ServiceAccount `prometheus-k8s` gets Roles only in default, kube-system and monitoring
  (`prometheus-roleSpecificNamespaces.yaml`), and its NetworkPolicy admits only Prometheus,
  prometheus-adapter and Grafana pods of its own namespace (`prometheus-networkPolicy.yaml`).
- kube-prometheus-stack 88.5.3: with `*SelectorNilUsesHelmValues: true` (the default) its
  Prometheus selects monitors and rules labelled `release: <release>`
  (`templates/prometheus/prometheus.yaml`); its ClusterRole covers every namespace; its
  NetworkPolicy is off by default; its Service is `<fullname>-prometheus` selecting
  `app.kubernetes.io/name: prometheus` + `operator.prometheus.io/name: <fullname>-prometheus`
  (`templates/prometheus/service.yaml`, `_helpers.tpl`).
- Amazon Managed Service for Prometheus: KEDA signs queries with SigV4 when the trigger has no
  `authModes` and AWS pod identity (kedacore/keda@v2.20.2 `pkg/scalers/prometheus_scaler.go`
  NewPrometheusScaler, `pkg/scalers/aws/aws_sigv4.go`); there is no `sigv4` authMode.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from llmdeploy.errors import Notice
from llmdeploy.plan.names import pool_name
from llmdeploy.plan.types import KV, QueryAccessPlan, RbacPlan, TriggerAuthPlan
from llmdeploy.spec.prometheus import (
    AmazonManaged,
    CustomPrometheus,
    KubePrometheus,
    KubePrometheusStack,
)
from llmdeploy.spec.sections import Spec

PROMETHEUS_PORT = 9090
# The KEDA operator runs the scalers, so it is the pod that queries Prometheus; both its Helm
# chart (kedacore/charts keda/templates/manager/deployment.yaml) and its kustomize manifests
# (kedacore/keda@v2.20.2 config/manager/manager.yaml) label that pod `app: keda-operator`.
KEDA_OPERATOR_LABELS = (KV("app", "keda-operator"),)
KPS_CHART = "kube-prometheus-stack"
_DURATION = re.compile(r"^(\d+)(ms|s|m)$")


def interval_seconds(interval: str) -> float:
    """Seconds of a Prometheus duration as the spec writes `monitoring.interval` (15s, 500ms,
    1m)."""
    match = _DURATION.fullmatch(interval)
    assert match is not None  # the spec's pattern
    value, unit = int(match[1]), match[2]
    return value / 1000 if unit == "ms" else value * (60 if unit == "m" else 1)


def signal_window_seconds(spec: Spec) -> int:
    """The range the scaling signal is averaged (or its rate taken) over: four scrape
    intervals, at least a minute, so one scrape's burst moves the average by at most a
    quarter, and the range always holds samples (Prometheus's avg_over_time and rate() read
    the samples inside it; rate() needs two)."""
    return max(60, math.ceil(4 * interval_seconds(spec.monitoring.interval)))


@dataclass(frozen=True)
class PrometheusPlan:
    address: str  # base URL KEDA queries
    monitor_labels: tuple[KV, ...]  # what the Prometheus selects monitors and rules by
    scraper_namespace: str
    scraper_labels: tuple[KV, ...]  # empty: any pod of the namespace
    rbac: RbacPlan | None
    query_access: QueryAccessPlan | None
    trigger_auth: TriggerAuthPlan | None
    aws_region: str | None
    operator_rules: bool  # alerts as a PrometheusRule (else a Prometheus rules file)
    notices: tuple[Notice, ...]


def kps_fullname(release: str) -> str:
    """`kube-prometheus-stack.fullname` of the chart's _helpers.tpl without overrides: the
    release if it contains the chart name, else `<release>-kube-prometheus-stack`, cut to 26
    characters and one trailing '-' trimmed (Helm's trunc and trimSuffix)."""
    name = release if KPS_CHART in release else f"{release}-{KPS_CHART}"
    name = name[:26]
    return name[:-1] if name.endswith("-") else name


def prometheus_plan(spec: Spec) -> PrometheusPlan:
    p = spec.monitoring.prometheus
    if isinstance(p, KubePrometheus):
        return _kube_prometheus(spec, p)
    if isinstance(p, KubePrometheusStack):
        return _kube_prometheus_stack(spec, p)
    if isinstance(p, AmazonManaged):
        return _amazon_managed(spec, p)
    return _custom(spec, p)


def _address(spec: Spec, default: str) -> str:
    return spec.autoscaling.prometheus_address or default


def _kube_prometheus(spec: Spec, p: KubePrometheus) -> PrometheusPlan:
    # The Prometheus pods as kube-prometheus labels them (its Service and NetworkPolicy select
    # these, manifests/prometheus-service.yaml).
    pods = (
        KV("app.kubernetes.io/component", "prometheus"),
        KV("app.kubernetes.io/instance", p.instance),
        KV("app.kubernetes.io/name", "prometheus"),
        KV("app.kubernetes.io/part-of", "kube-prometheus"),
    )
    name = f"{pool_name(spec)}-prometheus"
    access = QueryAccessPlan(
        name=name,
        namespace=p.namespace,
        prometheus_labels=pods,
        keda_namespace=spec.autoscaling.keda_namespace,
        keda_labels=KEDA_OPERATOR_LABELS,
        port=PROMETHEUS_PORT,
    )
    notice = Notice(
        "monitoring.prometheus",
        f"kube-prometheus: Prometheus {p.instance!r} in {p.namespace!r} gets a Role to discover "
        f"targets in {spec.namespace!r}, and a NetworkPolicy in {p.namespace!r} lets the KEDA "
        f"operator (namespace {spec.autoscaling.keda_namespace!r}, app=keda-operator) query it",
        severity="note",
    )
    return PrometheusPlan(
        address=_address(spec, f"http://prometheus-{p.instance}.{p.namespace}.svc:9090"),
        monitor_labels=(),
        scraper_namespace=p.namespace,
        scraper_labels=pods,
        rbac=RbacPlan(
            name=name,
            subject_name=f"prometheus-{p.instance}",
            subject_namespace=p.namespace,
        ),
        query_access=access,
        trigger_auth=None,
        aws_region=None,
        operator_rules=True,
        notices=(notice,),
    )


def _kube_prometheus_stack(spec: Spec, p: KubePrometheusStack) -> PrometheusPlan:
    crname = f"{kps_fullname(p.release)}-prometheus"
    unset = "prometheus" not in spec.monitoring.model_fields_set
    notice = Notice(
        "monitoring.prometheus",
        ("monitoring.prometheus is not set, so the default: " if unset else "")
        + f"kube-prometheus-stack release {p.release!r} in {p.namespace!r}: monitors and rules "
        f"labelled release={p.release} (the chart's default selectors), KEDA queries "
        f"{crname}; no NetworkPolicy is rendered for KEDA (the chart's is off by default)",
        severity="note",
        hint=(
            "set monitoring.prometheus to the Prometheus you run"
            if unset
            else "if you enabled prometheus.networkPolicy, admit the keda-operator pods on 9090"
        ),
    )
    return PrometheusPlan(
        address=_address(spec, f"http://{crname}.{p.namespace}.svc:9090"),
        monitor_labels=(KV("release", p.release),),
        scraper_namespace=p.namespace,
        scraper_labels=(
            KV("app.kubernetes.io/name", "prometheus"),
            KV("operator.prometheus.io/name", crname),
        ),
        rbac=None,
        query_access=None,
        trigger_auth=None,
        aws_region=None,
        operator_rules=True,
        notices=(notice,),
    )


def _amazon_managed(spec: Spec, p: AmazonManaged) -> PrometheusPlan:
    url = f"https://aps-workspaces.{p.region}.amazonaws.com/workspaces/{p.workspace_id}"
    who = p.role_arn or "the keda-operator's IRSA or Pod Identity role"
    notices = [
        Notice(
            "monitoring.prometheus",
            f"Amazon Managed Service for Prometheus {p.workspace_id} ({p.region}): KEDA signs "
            f"its queries with {who}, which needs aps:QueryMetrics; metrics must reach the "
            "workspace through a collector or a Prometheus agent that remote-writes",
            severity="note",
            hint="upload prometheus-rules.yml with aws amp create-rule-groups-namespace",
        )
    ]
    if not p.scraper_labels and spec.network.network_policy:
        notices.append(_namespace_wide(spec, p.namespace))
    return PrometheusPlan(
        address=_address(spec, url),
        monitor_labels=(),
        scraper_namespace=p.namespace,
        scraper_labels=tuple(KV(k, v) for k, v in sorted(p.scraper_labels.items())),
        rbac=None,
        query_access=None,
        trigger_auth=TriggerAuthPlan(name=f"{spec.name}-amp", role_arn=p.role_arn),
        aws_region=p.region,
        operator_rules=False,
        notices=tuple(notices),
    )


def _custom(spec: Spec, p: CustomPrometheus) -> PrometheusPlan:
    notices = [
        Notice(
            "monitoring.prometheus",
            f"custom Prometheus: KEDA queries {_address(spec, p.address)}; RBAC for it in "
            f"{spec.namespace!r} and a way for the KEDA operator to reach it are yours to provide",
            severity="note",
        )
    ]
    if not p.scraper_labels and spec.network.network_policy:
        notices.append(_namespace_wide(spec, p.namespace))
    return PrometheusPlan(
        address=_address(spec, p.address),
        monitor_labels=(),
        scraper_namespace=p.namespace,
        scraper_labels=tuple(KV(k, v) for k, v in sorted(p.scraper_labels.items())),
        rbac=None,
        query_access=None,
        trigger_auth=None,
        aws_region=None,
        operator_rules=spec.monitoring.kind != "none",
        notices=tuple(notices),
    )


def _namespace_wide(spec: Spec, namespace: str) -> Notice:
    return Notice(
        "monitoring.prometheus",
        f"every pod in namespace {namespace!r} may reach the inference port (vLLM serves "
        "/metrics on it): the scraper's pod labels are not known",
        hint="set monitoring.prometheus.scraperLabels to the scraping pods' labels",
    )
