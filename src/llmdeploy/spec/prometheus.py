"""The ``monitoring.prometheus`` section: which Prometheus scrapes the server and answers KEDA.

One model per flavour, selected by ``flavor`` (a discriminated union, like the engine
section). What each flavour needs rendered (monitor labels, RBAC, NetworkPolicies, KEDA
authentication, the query address) is decided in :mod:`llmdeploy.plan.prometheus`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from llmdeploy.spec.fields import (
    SpecModel,
    check_dns_label,
    check_labels,
    check_no_credentials,
    fresh,
)

# Where a Prometheus address's credentials belong instead (check_no_credentials).
PROMETHEUS_AUTH_HINT = (
    "keep credentials out of the URL: KEDA reads them from a TriggerAuthentication (authModes "
    "basic or bearer with a Secret; for Amazon Managed Prometheus, AWS SigV4 with podIdentity "
    "provider aws), https://keda.sh/docs/2.20/scalers/prometheus/"
)


class _InNamespace(SpecModel):
    namespace: str = Field(
        "monitoring",
        description="Namespace Prometheus (or the agent that scrapes for it) runs in.",
    )

    @field_validator("namespace")
    @classmethod
    def _dns(cls, v: str) -> str:
        return check_dns_label(v)


class _Scraped(_InNamespace):
    scraper_labels: dict[str, str] = Field(
        default_factory=fresh(dict),
        description=(
            "Pod labels of the Prometheus or agent that scrapes the server, for the "
            "NetworkPolicy; empty: any pod in `namespace`."
        ),
    )

    @field_validator("scraper_labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        return check_labels(v)


class KubePrometheus(_InNamespace):
    """prometheus-operator/kube-prometheus (the jsonnet manifests): Prometheus `k8s` selects
    every ServiceMonitor and PrometheusRule, but may only list endpoints in the namespaces it
    ships Roles for, and its NetworkPolicy admits only its own namespace."""

    flavor: Literal["kube-prometheus"]
    instance: str = Field(
        "k8s",
        description=(
            "Name of the Prometheus object (service and ServiceAccount `prometheus-<instance>`)."
        ),
    )

    @field_validator("instance")
    @classmethod
    def _instance(cls, v: str) -> str:
        return check_dns_label(v)


class KubePrometheusStack(_InNamespace):
    """prometheus-community/kube-prometheus-stack (Helm): with the chart's defaults its
    Prometheus selects only monitors and rules labelled `release: <release>`."""

    flavor: Literal["kube-prometheus-stack"] = "kube-prometheus-stack"
    release: str = Field(
        "kube-prometheus-stack",
        description="Helm release name of the chart (the `release` label its Prometheus selects).",
        min_length=1,
        max_length=53,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    )


class AmazonManaged(_Scraped):
    """Amazon Managed Service for Prometheus: KEDA queries the workspace with SigV4-signed
    requests (a TriggerAuthentication with AWS pod identity); metrics reach it through a
    collector or a Prometheus agent that remote-writes."""

    flavor: Literal["amazon-managed"]
    workspace_id: str = Field(
        ..., description="AMP workspace ID (ws-...).", pattern=r"^ws-[0-9a-zA-Z-]{1,64}$"
    )
    region: str = Field(
        ..., description="AWS region of the workspace.", pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]$"
    )
    role_arn: str | None = Field(
        None,
        description=(
            "IAM role KEDA assumes to query the workspace (needs aps:QueryMetrics); default: "
            "the keda-operator's own IRSA or Pod Identity role."
        ),
        pattern=r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]+$",
    )


class CustomPrometheus(_Scraped):
    """Any other Prometheus: you give the query address and who scrapes; llmdeploy renders
    no RBAC or policy for it."""

    flavor: Literal["custom"]
    address: str = Field(
        ..., description="Base URL KEDA queries (no /api/v1/query).", pattern=r"^https?://[^\s]+$"
    )

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        return check_no_credentials(v, "the Prometheus address", PROMETHEUS_AUTH_HINT)


Prometheus = Annotated[
    KubePrometheus | KubePrometheusStack | AmazonManaged | CustomPrometheus,
    Field(discriminator="flavor"),
]
