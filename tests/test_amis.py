"""AMI aliases against the cluster's Kubernetes version, modelled the way Karpenter resolves them.

Karpenter reads one SSM parameter per alias, variant and architecture, with the cluster's minor
in the path (aws/karpenter-provider-aws@v1.14.1 pkg/providers/amifamily/al2023.go resolvePath()
:73-80, bottlerocket.go :44-53); the parameter exists only if that AMI release was built for the
minor (catalog/data/eks_amis.csv, from the amazon-eks-ami CHANGELOG). The model: alias + minor ->
SSM path -> exists per the table; a spec whose alias does not exist is refused, located.
"""

from __future__ import annotations

import itertools

import pytest
import yaml

from llmdeploy import pipeline
from llmdeploy.catalog import amis
from llmdeploy.errors import Diagnostic, SpecError
from llmdeploy.spec import load
from node_specs import refused as refused_spec
from node_specs import render as render_spec
from node_specs import spec_text, warnings


def render(cluster_extra: str) -> pipeline.Rendered:
    return render_spec(spec_text(cluster=cluster_extra, version=None))


def refused(cluster_extra: str) -> list[Diagnostic]:
    return refused_spec(spec_text(cluster=cluster_extra, version=None))


def alias_of(result: pipeline.Rendered) -> str:
    (doc,) = [d for _, d in pipeline.yaml_documents(result.files) if d["kind"] == "EC2NodeClass"]
    (term,) = doc["spec"]["amiSelectorTerms"]
    alias: str = term["alias"]
    return alias


# --- the resolution model --------------------------------------------------------------------


def test_ssm_paths_are_the_ones_karpenter_reads() -> None:
    # al2023.go:73-80: /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<variant>/
    # amazon-eks-node-al2023-<arch>-<variant>-<k8s>-<version>/image_id, "recommended" for latest.
    assert amis.ssm_parameter("al2023", "v20260114", "1.35", "amd64") == (
        "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/"
        "amazon-eks-node-al2023-x86_64-nvidia-1.35-v20260114/image_id"
    )
    assert amis.ssm_parameter("al2023", "latest", "1.36", "arm64") == (
        "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/nvidia/recommended/image_id"
    )
    # bottlerocket.go:46-53: the leading v is stripped; the nvidia variant has its own path.
    assert amis.ssm_parameter("bottlerocket", "v1.53.0", "1.35", "amd64") == (
        "/aws/service/bottlerocket/aws-k8s-1.35-nvidia/x86_64/1.53.0/image_id"
    )


def _releases_before(version: str) -> list[str]:
    return [t for t in amis.al2023_releases() if t < version]


@pytest.mark.parametrize("key", sorted(amis.ranges()), ids="-".join)
def test_each_minor_exists_from_its_first_release_and_not_before(key: tuple[str, ...]) -> None:
    row = amis.ranges()[key]
    arch = "amd64" if row.arch == "x86_64" else "arm64"
    alias = f"{row.family}@"
    if row.first is not None:
        assert amis.resolve(alias + row.first, row.kubernetes, arch).status == "exists"
    assert amis.resolve(alias + row.last, row.kubernetes, arch).status == "exists"
    if row.family != "al2023":
        return
    before = _releases_before(row.first or "") or ["v20241016"]  # the last without NVIDIA AMIs
    if row.absent_through is None:  # the release just before the first one has no AMI
        assert amis.resolve(alias + before[-1], row.kubernetes, arch).status == "absent"
    else:  # undocumented releases between: not established, never claimed to exist
        window = [t for t in before if t > row.absent_through]
        assert window, row
        assert {amis.resolve(alias + t, row.kubernetes, arch).status for t in window} == {
            "unverified"
        }
        assert amis.resolve(alias + row.absent_through, row.kubernetes, arch).status == "absent"
    after = [t for t in amis.al2023_releases() if t > row.last]
    if row.ended:
        assert amis.resolve(alias + after[0], row.kubernetes, arch).status == "absent"


def test_the_table_is_consistent_with_its_release_list() -> None:
    tags = amis.al2023_releases()
    assert list(tags) == sorted(tags) and len(set(tags)) == len(tags)
    for row in amis.ranges().values():
        assert row.source
        if row.family == "al2023":
            assert row.first in tags and row.last in tags, row
    # every minor the table knows has both families' GPU rows for x86_64
    minors = amis.kubernetes_versions()
    for family, minor in itertools.product(("al2023", "bottlerocket"), minors):
        assert (family, "x86_64", minor) in amis.ranges()


def test_an_alias_that_names_no_release_is_absent_with_its_neighbours() -> None:
    found = amis.resolve("al2023@v20251109", "1.34")
    assert found.status == "absent"
    assert "v20251108" in found.reason and "v20251112" in found.reason


@pytest.mark.parametrize("minor", amis.kubernetes_versions())
def test_the_default_alias_exists_for_every_known_minor(minor: str) -> None:
    for arch in ("amd64", "arm64"):
        assert amis.resolve(amis.default_alias(minor, arch), minor, arch).status == "exists"


def test_without_a_version_the_default_exists_on_every_minor_still_receiving_amis() -> None:
    current = [r.kubernetes for r in amis.ranges().values() if r.family == "al2023" and not r.ended]
    default = amis.default_alias(None)
    assert {amis.resolve(default, k).status for k in current} == {"exists"}
    assert {"1.35", "1.36"} <= set(current)


def test_the_old_default_alias_has_no_ami_on_current_clusters() -> None:
    # the case: al2023@v20251108 lists Kubernetes 1.28-1.34 only
    assert amis.minors_for("al2023@v20251108") == ("1.29", "1.30", "1.31", "1.32", "1.33", "1.34")
    for minor in ("1.35", "1.36"):
        assert amis.resolve("al2023@v20251108", minor).status == "absent"


# --- the spec --------------------------------------------------------------------------------


def test_a_pinned_alias_older_than_the_minor_is_a_located_error_with_the_releases() -> None:
    (d,) = refused('  kubernetesVersion: "1.35"\n  amiAlias: al2023@v20251108\n')
    assert (d.file, d.line, d.column) == ("spec.yaml", 15, 13)
    assert "al2023@v20251108 has no NVIDIA AMI for Kubernetes 1.35" in d.message
    assert "amazon-eks-node-al2023-x86_64-nvidia-1.35-v20251108" in d.message
    assert d.hint is not None
    assert "al2023@v20260114 (the first)" in d.hint and "al2023@v20260714" in d.hint


def test_an_alias_after_the_minors_last_ami_is_refused() -> None:
    (d,) = refused('  kubernetesVersion: "1.29"\n  amiAlias: al2023@v20260714\n')
    assert "ended with v20260318" in d.message


def test_a_bottlerocket_alias_before_the_minors_first_release_is_refused() -> None:
    (d,) = refused('  kubernetesVersion: "1.35"\n  amiAlias: bottlerocket@v1.52.0\n')
    assert "older than the first bottlerocket release for Kubernetes 1.35 (v1.53.0)" in d.message


@pytest.mark.parametrize("minor", amis.kubernetes_versions())
def test_the_rendered_default_alias_resolves_for_the_clusters_version(minor: str) -> None:
    result = render(f'  kubernetesVersion: "{minor}"\n')
    assert amis.resolve(alias_of(result), minor).status == "exists"
    assert not warnings(result)


def test_latest_is_allowed_with_a_located_warning() -> None:
    result = render('  kubernetesVersion: "1.36"\n  amiAlias: al2023@latest\n')
    assert alias_of(result) == "al2023@latest"
    (w,) = warnings(result)
    assert (w.severity, w.line) == ("warning", 15)
    assert "Drifted" in w.message and w.hint == "pin a release, e.g. al2023@v20260714"


def test_an_unverifiable_alias_renders_with_a_warning() -> None:
    result = render('  kubernetesVersion: "1.36"\n  amiAlias: al2023@v20260529\n')
    (w,) = warnings(result)
    assert "cannot tell" in w.message and "not established" in w.message


def test_a_pinned_alias_without_the_version_warns_with_the_minors_it_exists_for() -> None:
    result = render("  amiAlias: al2023@v20251108\n")
    (w,) = warnings(result)
    assert "Kubernetes 1.29 to 1.34" in w.message
    assert (w.line, w.column) == (14, 13)  # at cluster.amiAlias
    assert w.hint == 'set `cluster.kubernetesVersion` (e.g. "1.35")'


def test_an_alias_with_no_ami_for_any_known_minor_is_refused_without_the_version() -> None:
    (d,) = refused("  amiAlias: al2023@v20240920\n")  # not a release, and before every row
    assert "no NVIDIA AMI for any Kubernetes version" in d.message
    assert (d.line, d.column) == (14, 13)  # at cluster.amiAlias
    assert d.hint is not None and d.hint.startswith("pin a release that exists, e.g. al2023@")
    assert amis.minors_for(d.hint.rpartition(" ")[2], "amd64")  # the example has AMIs


def test_an_unquoted_version_is_refused_with_the_quoted_spelling() -> None:
    with pytest.raises(SpecError) as info:
        load.load_spec_text(spec_text(cluster="  kubernetesVersion: 1.30\n", version=None), "x")
    (d,) = info.value.diagnostics
    assert d.line == 14 and 'quote the version ("1.30")' in d.message


def test_an_unknown_version_is_refused_at_its_line() -> None:
    (d,) = refused('  kubernetesVersion: "1.28"\n')
    assert d.line == 14 and "1.29 to 1.36" in d.message


def test_bottlerocket_puts_the_data_volume_on_xvdb() -> None:
    # Bottlerocket keeps the OS on /dev/xvda and images, logs and pods' ephemeral storage on its
    # data volume /dev/xvdb (bottlerocket.go DefaultBlockDeviceMappings :183-200).
    result = render('  kubernetesVersion: "1.35"\n  amiAlias: bottlerocket@v1.53.0\n')
    (doc,) = [d for _, d in pipeline.yaml_documents(result.files) if d["kind"] == "EC2NodeClass"]
    devices = {m["deviceName"]: m for m in doc["spec"]["blockDeviceMappings"]}
    assert devices["/dev/xvda"]["ebs"]["volumeSize"] == "4Gi"
    assert "rootVolume" not in devices["/dev/xvda"]
    assert devices["/dev/xvdb"]["rootVolume"] is True
    assert devices["/dev/xvdb"]["ebs"]["volumeSize"] == "200Gi"


def device_plugin_chart_schedules(labels: dict[str, str]) -> bool:
    """The stock NVIDIA device-plugin chart's DaemonSet node affinity: any of three terms
    (NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/values.yaml):
    pci-10de.present "true" (node-feature-discovery), cpu-model.vendor_id NVIDIA, or
    nvidia.com/gpu.present "true"."""
    return (
        labels.get("feature.node.kubernetes.io/pci-10de.present") == "true"
        or labels.get("feature.node.kubernetes.io/cpu-model.vendor_id") == "NVIDIA"
        or labels.get("nvidia.com/gpu.present") == "true"
    )


@pytest.mark.parametrize(
    ("alias", "chart"), [("al2023@v20260114", True), ("bottlerocket@v1.53.0", False)]
)
def test_only_al2023_nodes_invite_the_device_plugin_chart(alias: str, chart: bool) -> None:
    """AL2023 NVIDIA AMIs need a device plugin: the label lets the stock chart run there without
    node-feature-discovery. Bottlerocket's NVIDIA variants run their own
    (bottlerocket.dev api/settings/kubelet-device-plugins): the chart would be a second one."""
    result = render(f'  kubernetesVersion: "1.35"\n  amiAlias: {alias}\n')
    (pool,) = [d for _, d in pipeline.yaml_documents(result.files) if d["kind"] == "NodePool"]
    labels = pool["spec"]["template"]["metadata"]["labels"]
    assert device_plugin_chart_schedules(labels) is chart


@pytest.mark.parametrize("name", pipeline.preset_names())
def test_every_preset_names_a_version_and_an_alias_that_exists_for_it(name: str) -> None:
    path = pipeline.preset_path(name)
    assert path is not None
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    minor = data["cluster"]["kubernetesVersion"]
    result = pipeline.render_loaded(load.load_spec_file(path), header_command="test")
    assert amis.resolve(alias_of(result), minor).status == "exists"
