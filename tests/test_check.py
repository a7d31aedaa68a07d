"""The check stage against the real validators: kubernetes-validate's strict schemas, CRD
files (the official ones in ../shared/crds when present, else the bundled schemas written back as
CRD files; see conftest.crd_dir), jsonschema and cel-expr-python.
"""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from llmdeploy.check.documents import (
    CheckInputError,
    CrdRegistry,
    DocResult,
    check_documents,
    check_paths,
    parse_documents,
)

LABELS = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "llama3-8b"}


def manifest(text: str) -> dict[str, Any]:
    """One YAML document, parsed the way check_paths parses files."""
    docs = parse_documents(textwrap.dedent(text), "<test>")
    assert len(docs) == 1
    doc: dict[str, Any] = docs[0][1]
    return doc


DEPLOYMENT = manifest("""
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: llama3-8b
      namespace: llm
      labels: {app.kubernetes.io/name: vllm, app.kubernetes.io/instance: llama3-8b}
    spec:
      replicas: 1
      selector:
        matchLabels: {app.kubernetes.io/name: vllm, app.kubernetes.io/instance: llama3-8b}
      template:
        metadata:
          labels: {app.kubernetes.io/name: vllm, app.kubernetes.io/instance: llama3-8b}
        spec:
          containers:
            - name: vllm
              image: vllm/vllm-openai:v0.6.3
              args: ["--model", "meta-llama/Meta-Llama-3-8B-Instruct", "--port", "8000"]
              ports: [{name: http, containerPort: 8000}]
              env: [{name: VLLM_NO_USAGE_STATS, value: "1"}]
              resources:
                limits: {nvidia.com/gpu: 1, memory: 30Gi}
                requests: {cpu: "4", memory: 30Gi}
          tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    """)

NODEPOOL = manifest("""
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: gpu-g5}
    spec:
      weight: 10
      template:
        metadata:
          labels: {llmdeploy.io/pool: gpu-g5}
        spec:
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: gpu-g5}
          requirements:
            - {key: karpenter.k8s.aws/instance-family, operator: In, values: [g5]}
            - {key: karpenter.k8s.aws/instance-gpu-count, operator: Gte, values: ["1"]}
            - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
            - {key: kubernetes.io/arch, operator: In, values: [amd64]}
          taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
          expireAfter: 720h
          terminationGracePeriod: 1h
      disruption:
        consolidationPolicy: WhenEmpty
        consolidateAfter: 10m
        budgets: [{nodes: "1", reasons: [Empty, Drifted]}]
      limits:
        nvidia.com/gpu: 8
    """)

EC2NODECLASS = manifest("""
    apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata: {name: gpu-g5}
    spec:
      role: KarpenterNodeRole-demo
      amiSelectorTerms: [{alias: al2023@v20240807}]
      subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
      securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
      instanceStorePolicy: RAID0
      blockDeviceMappings:
        - deviceName: /dev/xvda
          rootVolume: true
          ebs: {volumeSize: 200Gi, volumeType: gp3, iops: 3000, throughput: 250, encrypted: true}
      metadataOptions: {httpEndpoint: enabled, httpPutResponseHopLimit: 1, httpTokens: required}
      kubelet:
        maxPods: 110
        evictionHard: {memory.available: 5%}
        evictionSoft: {memory.available: 10%}
        evictionSoftGracePeriod: {memory.available: 1m}
        imageGCHighThresholdPercent: 85
        imageGCLowThresholdPercent: 80
      tags: {team: ml}
    """)

SCALEDOBJECT = manifest("""
    apiVersion: keda.sh/v1alpha1
    kind: ScaledObject
    metadata: {name: llama3-8b, namespace: llm}
    spec:
      scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llama3-8b}
      minReplicaCount: 1
      maxReplicaCount: 4
      advanced:
        horizontalPodAutoscalerConfig:
          behavior:
            scaleDown:
              stabilizationWindowSeconds: 600
              policies: [{type: Pods, value: 1, periodSeconds: 300}]
      triggers:
        - type: prometheus
          name: waiting-requests
          metricType: AverageValue
          metadata:
            serverAddress: http://prometheus.monitoring:9090
            query: sum(vllm:num_requests_waiting{model_name="llama3-8b"})
            threshold: "5"
    """)

OTHER_VALID = [
    manifest("""
        apiVersion: monitoring.coreos.com/v1
        kind: ServiceMonitor
        metadata: {name: llama3-8b, namespace: llm}
        spec:
          selector: {matchLabels: {app.kubernetes.io/instance: llama3-8b}}
          endpoints: [{port: http, path: /metrics, interval: 15s}]
        """),
    manifest("""
        apiVersion: monitoring.coreos.com/v1
        kind: PodMonitor
        metadata: {name: llama3-8b, namespace: llm}
        spec:
          selector: {matchLabels: {app.kubernetes.io/instance: llama3-8b}}
          podMetricsEndpoints: [{port: http, path: /metrics}]
        """),
    manifest("""
        apiVersion: keda.sh/v1alpha1
        kind: TriggerAuthentication
        metadata: {name: amp, namespace: llm}
        spec: {podIdentity: {provider: aws}}
        """),
    manifest("""
        apiVersion: leaderworkerset.x-k8s.io/v1
        kind: LeaderWorkerSet
        metadata: {name: llama3-70b, namespace: llm}
        spec:
          replicas: 1
          leaderWorkerTemplate:
            size: 2
            workerTemplate:
              metadata: {labels: {app.kubernetes.io/name: vllm}}
              spec:
                containers: [{name: vllm, image: vllm/vllm-openai:v0.6.3}]
        """),
    manifest("""
        apiVersion: policy/v1
        kind: PodDisruptionBudget
        metadata: {name: llama3-8b, namespace: llm}
        spec:
          maxUnavailable: 1
          selector: {matchLabels: {app.kubernetes.io/instance: llama3-8b}}
        """),
    manifest("""
        apiVersion: networking.k8s.io/v1
        kind: NetworkPolicy
        metadata: {name: llama3-8b, namespace: llm}
        spec:
          podSelector: {matchLabels: {app.kubernetes.io/instance: llama3-8b}}
          policyTypes: [Ingress]
          ingress:
            - from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: gw}}}]
              ports: [{port: 8000, protocol: TCP}]
        """),
    manifest("""
        apiVersion: v1
        kind: Service
        metadata: {name: llama3-8b, namespace: llm}
        spec:
          selector: {app.kubernetes.io/instance: llama3-8b}
          ports: [{name: http, port: 80, targetPort: http}]
        """),
    manifest("""
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: llama3-8b-config, namespace: llm}
        data: {chat-template.jinja: "{{ messages }}"}
        """),
    manifest("""
        apiVersion: v1
        kind: ServiceAccount
        metadata: {name: llama3-8b, namespace: llm}
        """),
]


@pytest.fixture(scope="module")
def registry(crd_dir: Path) -> CrdRegistry:
    return CrdRegistry.from_dirs([crd_dir])


def check_one(doc: dict[str, Any], registry: CrdRegistry | None) -> DocResult:
    report = check_documents([("test.yaml", doc)], crds=registry)
    assert len(report.results) == 1
    return report.results[0]


def edited(doc: dict[str, Any], edit: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    copied = copy.deepcopy(doc)
    edit(copied)
    return copied


def assert_invalid(result: DocResult, expected: str) -> None:
    assert result.status == "invalid", result
    assert any(expected in m for m in result.messages), result.messages


# --- built-in kinds --------------------------------------------------------------------------


def test_valid_deployment_passes_strict(registry: CrdRegistry) -> None:
    result = check_one(DEPLOYMENT, registry)
    assert result.status == "valid", result.messages
    assert result.validator == "kubernetes-validate 1.34.0 strict"
    kubernetes_validate.validate(copy.deepcopy(DEPLOYMENT), "1.34.0", strict=True)  # agrees


def test_unknown_field_in_deployment_fails_like_kubernetes_validate() -> None:
    doc = edited(
        DEPLOYMENT, lambda d: d["spec"]["template"]["spec"]["containers"][0].update(gpus=1)
    )
    result = check_one(doc, None)
    assert result.messages == ('unknown field "spec.template.spec.containers[0].gpus"',)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, "1.34.0", strict=True)


def test_every_schema_error_is_reported_not_only_the_first() -> None:
    def two_mistakes(d: dict[str, Any]) -> None:
        d["spec"]["replicas"] = "one"
        d["spec"]["template"]["spec"]["nodeSelectr"] = {"a": "b"}

    result = check_one(edited(DEPLOYMENT, two_mistakes), None)
    assert len(result.messages) == 2, result.messages
    assert_invalid(result, "spec.replicas: 'one' is not of type 'integer'")
    assert_invalid(result, 'unknown field "spec.template.spec.nodeSelectr"')


def test_api_version_not_served_by_kubernetes_is_invalid() -> None:
    doc = edited(OTHER_VALID[4], lambda d: d.update(apiVersion="policy/v1beta1"))
    assert_invalid(check_one(doc, None), "policy/v1beta1 PodDisruptionBudget is not served")


def test_kube_version_is_pinned_and_checked() -> None:
    report = check_documents([("d.yaml", DEPLOYMENT)], crds=None, kube_version="v1.30.2")
    assert report.results[0].validator == "kubernetes-validate 1.30.0 strict"
    for bad in ("1.9", "1.38", "latest"):
        with pytest.raises(CheckInputError, match="not supported"):
            check_documents([("d.yaml", DEPLOYMENT)], crds=None, kube_version=bad)


# --- custom kinds against the official CRDs --------------------------------------------------


VALIDATORS = {
    "NodePool": "CRD karpenter.sh_nodepools.yaml",
    "EC2NodeClass": "CRD karpenter.k8s.aws_ec2nodeclasses.yaml",
    "ScaledObject": "CRD keda.sh_scaledobjects.yaml",
    "TriggerAuthentication": "CRD keda.sh_triggerauthentications.yaml",
    "ServiceMonitor": "CRD monitoring.coreos.com_servicemonitors.yaml",
    "PodMonitor": "CRD monitoring.coreos.com_podmonitors.yaml",
    "LeaderWorkerSet": "CRD leaderworkerset.x-k8s.io_leaderworkersets.yaml",
}


@pytest.mark.parametrize(
    "doc",
    [NODEPOOL, EC2NODECLASS, SCALEDOBJECT, *OTHER_VALID],
    ids=lambda d: str(d["kind"]),
)
def test_valid_manifests_pass(doc: dict[str, Any], registry: CrdRegistry) -> None:
    result = check_one(doc, registry)
    assert result.status == "valid", result.messages
    assert result.skipped_cel_rules == 0, result.notes
    expected = VALIDATORS.get(doc["kind"], "kubernetes-validate 1.34.0 strict")
    assert result.validator == expected


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[last] = value

    return edit


BLOG_MISTAKES = [
    pytest.param(
        SCALEDOBJECT,
        _set("spec.triggers.0.metadata.threshold", 5),
        "spec.triggers[0].metadata.threshold: 5 is not of type 'string'",
        id="unquoted-threshold",
    ),
    pytest.param(
        SCALEDOBJECT,
        _set("spec.triggers.0.metricName", "vllm_waiting"),
        'unknown field "spec.triggers[0].metricName"',
        id="metricName-beside-type",
    ),
    pytest.param(
        SCALEDOBJECT,
        _set("spec.minReplicaCount", 9),
        "minReplicaCount must be less than or equal to maxReplicaCount",
        id="keda-cel-min-above-max",
    ),
    pytest.param(
        NODEPOOL,
        _set("spec.disruption.consolidationPolicy", "WhenUnderutilized"),
        "'WhenUnderutilized' is not one of",
        id="v1beta1-consolidation-policy",
    ),
    pytest.param(
        NODEPOOL,
        _set("spec.disruption.expireAfter", "720h"),
        'unknown field "spec.disruption.expireAfter"',
        id="expireAfter-under-disruption",
    ),
    pytest.param(
        NODEPOOL,
        _set("spec.template.spec.requirements.0.key", "karpenter.k8s.aws/instance-foo"),
        'spec.template.spec.requirements[0].key: label domain "karpenter.k8s.aws" is restricted',
        id="restricted-label-domain",
    ),
    pytest.param(
        NODEPOOL,
        _set("spec.template.spec.requirements.1.values", ["many"]),
        "must have a single positive integer value (rule evaluation error",
        id="gte-non-integer",
    ),
    pytest.param(
        NODEPOOL,
        _set("apiVersion", "karpenter.sh/v1beta1"),
        "karpenter.sh/v1beta1 NodePool is not served (the CRD serves karpenter.sh/v1)",
        id="v1beta1-nodepool",
    ),
    pytest.param(
        EC2NODECLASS,
        _set("spec.instanceProfile", "KarpenterNodeInstanceProfile"),
        "spec: must specify exactly one of ['role', 'instanceProfile']",
        id="role-and-instanceProfile",
    ),
    pytest.param(
        EC2NODECLASS,
        lambda d: d["spec"].update(
            amiFamily="Bottlerocket", amiSelectorTerms=[{"alias": "al2023@latest"}]
        ),
        "amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",
        id="bottlerocket-family-with-al2023-alias",
    ),
    pytest.param(
        EC2NODECLASS,
        _set("spec.amiSelectorTerms", [{"alias": "al2023@latest"}, {"id": "ami-0123"}]),
        "'alias' is mutually exclusive",
        id="alias-not-alone",
    ),
    pytest.param(
        EC2NODECLASS,
        lambda d: d["spec"]["kubelet"].pop("evictionSoftGracePeriod"),
        "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
        id="evictionSoft-without-grace-period",
    ),
    pytest.param(
        EC2NODECLASS,
        _set("spec.userdata", "#!/bin/bash"),
        'unknown field "spec.userdata"',
        id="userdata-lowercase",
    ),
]


@pytest.mark.parametrize(("doc", "edit", "expected"), BLOG_MISTAKES)
def test_blog_mistakes_are_caught(
    doc: dict[str, Any],
    edit: Callable[[dict[str, Any]], object],
    expected: str,
    registry: CrdRegistry,
) -> None:
    assert check_one(doc, registry).status == "valid"
    assert_invalid(check_one(edited(doc, edit), registry), expected)


def test_namespace_on_cluster_scoped_custom_resource_is_an_error(registry: CrdRegistry) -> None:
    doc = edited(NODEPOOL, lambda d: d["metadata"].update(namespace="llm"))
    assert_invalid(check_one(doc, registry), "NodePool is cluster-scoped")


def test_custom_resource_metadata_is_checked_as_object_meta(registry: CrdRegistry) -> None:
    doc = edited(SCALEDOBJECT, lambda d: d.update(metadata={"nmae": "x", "labels": {"a": 1}}))
    result = check_one(doc, registry)
    assert_invalid(result, 'unknown field "metadata.nmae"')
    assert_invalid(result, "metadata.labels.a: 1 is not of type")
    assert_invalid(result, "metadata.name: Required value")


def test_kind_without_crd_is_not_validated(registry: CrdRegistry) -> None:
    unknown = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    report = check_documents([("w.yaml", unknown), ("np.yaml", NODEPOOL)], crds=registry)
    assert [r.status for r in report.results] == ["not-validated", "valid"]
    assert report.ok
    assert report.not_validated == (report.results[0],)
    assert "no CRD for example.com/v1 Widget" in report.results[0].messages[0]
    assert report.results[0].validator == "none"
    (finding,) = report.findings
    assert (finding.path, finding.severity, finding.kind) == ("w.yaml", "warning", "Widget")


def test_custom_kinds_without_crd_dir_are_not_validated() -> None:
    for doc in (NODEPOOL, SCALEDOBJECT):
        result = check_one(doc, None)
        assert result.status == "not-validated"
        assert "--crd-dir" in result.messages[0]
    # ...but what does not need a schema is still checked
    bad = edited(SCALEDOBJECT, lambda d: d["metadata"].update(labels={"tier": "gpu!"}))
    assert_invalid(check_one(bad, None), "value 'gpu!' must be empty or")


# --- names and labels (kubernetes-validate checks neither) -------------------------------------


@pytest.mark.parametrize(
    ("doc", "name", "expected"),
    [
        (DEPLOYMENT, "l" * 64, "must be a DNS-1123 label"),
        (DEPLOYMENT, "Llama3", "must be a DNS-1123 label"),
        (NODEPOOL, "g" * 64, "karpenter.sh/nodepool node label"),
        (OTHER_VALID[6], "8b-llama", "must be a DNS-1035 label"),  # Service
        (OTHER_VALID[7], "config_", "must be a DNS-1123 subdomain"),  # ConfigMap
    ],
)
def test_bad_names_are_errors(
    doc: dict[str, Any], name: str, expected: str, registry: CrdRegistry
) -> None:
    assert_invalid(check_one(edited(doc, _set("metadata.name", name)), registry), expected)


def test_long_configmap_name_is_a_valid_subdomain() -> None:
    doc = edited(OTHER_VALID[7], _set("metadata.name", "a" * 100 + ".b"))
    assert check_one(doc, None).status == "valid"


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"app.kubernetes.io/version": "v0.6.3+cu124"}, "value 'v0.6.3+cu124' must be empty or"),
        ({"app.kubernetes.io/version": "x" * 64}, "must be empty or at most 63 characters"),
        ({"bad key": "x"}, "key 'bad key': name part"),
        ({"Example.com/tier": "gpu"}, "prefix must be a DNS-1123 subdomain"),
        ({"/tier": "gpu"}, "prefix must be a DNS-1123 subdomain"),
    ],
)
def test_bad_labels_are_errors(labels: dict[str, str], expected: str) -> None:
    result = check_one(edited(DEPLOYMENT, _set("metadata.labels", labels)), None)
    assert_invalid(result, expected)


def test_labels_in_pod_template_and_selector_are_checked() -> None:
    def bad_selector(d: dict[str, Any]) -> None:
        d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] = "-x"
        d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/instance"] = "-x"

    result = check_one(edited(DEPLOYMENT, bad_selector), None)
    assert_invalid(result, "spec.selector.matchLabels['app.kubernetes.io/instance']")
    assert_invalid(result, "spec.template.metadata.labels['app.kubernetes.io/instance']")


def test_empty_label_value_is_valid() -> None:
    doc = edited(DEPLOYMENT, lambda d: d["metadata"]["labels"].update({"example.com/flag": ""}))
    assert check_one(doc, None).status == "valid"


# --- files --------------------------------------------------------------------------------------


def test_check_paths_reads_streams_and_skips_kustomization(
    tmp_path: Path, registry: CrdRegistry
) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [manifests.yaml]\n")
    (tmp_path / "manifests.yaml").write_text(
        textwrap.dedent("""\
        # Source: configmap.yaml
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: ok, annotations: {generated: 2024-01-01}}
        data: {mode: "0755", enabled: "yes"}
        ---
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: unquoted}
        data: {enabled: yes}
        """)
    )
    report = check_paths([tmp_path], crds=registry)
    assert [(r.source, r.doc_index, r.status) for r in report.results] == [
        (str(tmp_path / "manifests.yaml"), 0, "valid"),
        (str(tmp_path / "manifests.yaml"), 2, "invalid"),
    ]
    # YAML 1.1, as in the cluster: an unquoted yes is a boolean, not the string "yes"
    assert_invalid(report.results[1], "data.enabled: True is not of type 'string'")
    assert not report.ok
    assert [f.severity for f in report.findings] == ["error"]


def test_bad_inputs_raise_check_input_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: [ConfigMap\n")
    with pytest.raises(CheckInputError, match=r"broken\.yaml: invalid YAML"):
        check_paths([broken], crds=None)
    duplicate = tmp_path / "dup.yaml"
    duplicate.write_text("kind: ConfigMap\nkind: Secret\n")
    with pytest.raises(CheckInputError, match="duplicate key"):
        check_paths([duplicate], crds=None)
    with pytest.raises(CheckInputError, match="no such file"):
        check_paths([tmp_path / "missing.yaml"], crds=None)
    with pytest.raises(CheckInputError, match="CRD directory not found"):
        CrdRegistry.from_dirs([tmp_path / "no-crds"])
    bad_crd = tmp_path / "crds" / "bad.yaml"
    bad_crd.parent.mkdir()
    bad_crd.write_text("kind: CustomResourceDefinition\nspec: [\n")
    with pytest.raises(CheckInputError, match=r"bad\.yaml"):
        CrdRegistry.from_dirs([bad_crd.parent])


def test_documents_are_numbered_per_source() -> None:
    cm = OTHER_VALID[7]
    not_a_map: Any = ["not", "a", "map"]
    report = check_documents([("a", cm), ("b", cm), ("a", cm), ("a", not_a_map)], crds=None)
    assert [(r.source, r.doc_index) for r in report.results] == [
        ("a", 0),
        ("b", 0),
        ("a", 1),
        ("a", 2),
    ]
    assert_invalid(report.results[3], "document is not a mapping")


# --- structural-schema and CEL emulation, on a CRD written for the purpose ---------------------

WIDGET_CRD = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-crd}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {kind: Widget, plural: widgets}
  versions:
    - name: v1alpha1
      served: false
      storage: false
      schema: {openAPIV3Schema: {type: object}}
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            apiVersion: {type: string}
            kind: {type: string}
            metadata: {type: object}
            spec:
              type: object
              required: [size, mode]
              x-kubernetes-validations:
                - rule: self.size <= 10
                  message: size must be at most 10
                - rule: self.size >= oldSelf.size
                  message: size may not shrink
                - rule: "!has(self.quantity) || isQuantity(self.quantity)"
                  message: quantity must be a quantity
                - rule: self.mode.lowerAscii().split('-')[0] in ['fast', 'slow']
                  message: mode must start with fast- or slow-
                - rule: "!has(self.owner) || self.owner.find('^[^@]+') != ''"
                  message: owner needs a user part
              properties:
                size: {type: integer}
                mode: {type: string, default: fast-lane}
                port: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}
                ratio: {type: number, nullable: true}
                quantity: {type: string}
                owner: {type: string}
                extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
                closed: {type: object}
                tags: {type: object, additionalProperties: {type: string}}
                zones:
                  type: array
                  items: {type: string}
                  x-kubernetes-list-type: set
                ports:
                  type: array
                  x-kubernetes-list-type: map
                  x-kubernetes-list-map-keys: [name]
                  items:
                    type: object
                    required: [name]
                    properties: {name: {type: string}, port: {type: integer}}
"""


@pytest.fixture(scope="module")
def widgets(tmp_path_factory: pytest.TempPathFactory) -> CrdRegistry:
    folder = tmp_path_factory.mktemp("crds") / "nested"
    folder.mkdir()
    (folder / "widgets.yaml").write_text(WIDGET_CRD)
    return CrdRegistry.from_dirs([folder.parent])


def widget(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 1, **spec},
    }


def test_synthetic_crd_valid_widget(widgets: CrdRegistry) -> None:
    ok = widget(
        port="http",
        ratio=None,
        quantity="1Gi",
        owner="me@example.com",
        extra={"anything": {"goes": [1]}},
        tags={"a": "b"},
        zones=["a", "b"],
        ports=[{"name": "http", "port": 80}, {"name": "grpc", "port": 81}],
    )
    result = check_one(ok, widgets)
    assert result.status == "valid", result.messages
    assert result.validator == "CRD widgets.yaml"
    # isQuantity (Kubernetes' quantity library) is not declared here: counted and explained,
    # never silently passed;
    # the oldSelf transition rule does not apply on create and is not counted.
    assert result.skipped_cel_rules == 1
    assert "isQuantity" in result.notes[0]
    assert check_one(widget(port=8000), widgets).status == "valid"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"size": 11}, "spec: size must be at most 10"),
        ({"mode": "Medium-lane"}, "spec: mode must start with fast- or slow-"),
        ({"owner": "@example.com"}, "spec: owner needs a user part"),
        ({"port": True}, "spec.port: True is not valid under any of the given schemas"),
        ({"closed": {"x": 1}}, 'unknown field "spec.closed.x"'),
        ({"tags": {"a": 1}}, "spec.tags.a: 1 is not of type 'string'"),
        ({"zones": ["a", "a"]}, "spec.zones: ['a', 'a'] has non-unique elements"),
        ({"ports": [{"name": "x"}, {"name": "x", "port": 2}]}, "spec.ports[1]: duplicate entry"),
        ({"size": None}, "'size' is a required property"),  # null is pruned, then required
    ],
)
def test_synthetic_crd_rejects(spec: dict[str, Any], expected: str, widgets: CrdRegistry) -> None:
    assert_invalid(check_one(widget(**spec), widgets), expected)


def test_synthetic_crd_scope_and_versions(widgets: CrdRegistry) -> None:
    namespaced = edited(widget(), lambda d: d["metadata"].update(namespace="llm"))
    assert_invalid(check_one(namespaced, widgets), "Widget is cluster-scoped")
    old = edited(widget(), lambda d: d.update(apiVersion="example.com/v1alpha1"))
    assert_invalid(check_one(old, widgets), "is not served (the CRD serves example.com/v1)")
    assert len(widgets) == 1  # the ConfigMap beside the CRD and the unserved version are ignored
