"""A replica on several nodes: what the controllers do with the LeaderWorkerSet, the Service,
the ScaledObject, the EFA requests and the NodePool llmdeploy renders, modelled from their
source (cited at each test) and checked on the rendered manifests.

- LeaderWorkerSet (kubernetes-sigs/lws@v0.10.0): ``size`` pods per group, labels
  ``leaderworkerset.sigs.k8s.io/{name,group-index,worker-index}`` (0 on the leader), env
  ``LWS_LEADER_ADDRESS``/``LWS_WORKER_INDEX``, a scale subresource on ``.spec.replicas``;
- Karpenter: ``vpc.amazonaws.com/efa`` capacity = the instance's maximum EFA interfaces;
- vLLM: ``--nnodes``/``--node-rank``/``--master-addr``/``--headless`` with the mp executor,
  ``world_size = TP x PP`` divisible by ``nnodes``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from llmdeploy import pipeline
from llmdeploy.catalog import ec2 as catalog
from llmdeploy.errors import SpecError
from llmdeploy.spec import load

PRESET = "llama31-405b-vllm-2xp5"
LWS_LABEL = "leaderworkerset.sigs.k8s.io"
SHARED_LWS_CRD = (
    Path(__file__).resolve().parents[2] / "shared" / "crds" / "lws"
) / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"


def preset_data() -> dict[str, Any]:
    path = pipeline.preset_path(PRESET)
    assert path is not None
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def render(data: dict[str, Any], crds: object = None) -> pipeline.Rendered:
    loaded = load.load_spec_text(yaml.safe_dump(data, sort_keys=False), "spec.yaml")
    return pipeline.render_loaded(loaded, header_command="t", crds=crds)


def docs(result: pipeline.Rendered) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for _, d in pipeline.yaml_documents(result.files)}


def templates(lws: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    group = lws["spec"]["leaderWorkerTemplate"]
    return group["leaderTemplate"], group["workerTemplate"]


def live_labels(lws: dict[str, Any], template: dict[str, Any], worker: int) -> dict[str, str]:
    """A running pod's labels: its template's and those the LWS controller adds."""
    return {
        **template["metadata"]["labels"],
        f"{LWS_LABEL}/name": lws["metadata"]["name"],
        f"{LWS_LABEL}/group-index": "0",
        f"{LWS_LABEL}/worker-index": str(worker),
    }


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def option(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.fixture(scope="module")
def out(crds: object) -> dict[str, dict[str, Any]]:
    return docs(render(preset_data(), crds))


# --- the group --------------------------------------------------------------------------------


def lws_recreates_group(policy: str, pods: list[tuple[str, int]], index: int) -> bool:
    """Whether the LWS pod controller deletes the group's leader (recreating every pod) when it
    reconciles pod ``index`` of a group of (phase, restart count) pods
    (kubernetes-sigs/lws@v0.10.0 pkg/controllers/pod_controller.go handleRestartPolicy,
    pendingPodsInGroup; pkg/utils/pod/pod_utils.go ContainerRestarted: init or main container
    restart count above 0 while Running or Pending)."""
    if policy not in ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart"):
        return False
    phase, restarts = pods[index]
    if not (phase in ("Running", "Pending") and restarts > 0):
        return False
    pending = any(p == "Pending" for p, _ in pods)
    return not (pending and policy == "RecreateGroupAfterStart")


def test_a_restart_during_the_start_does_not_recreate_the_group(
    out: dict[str, dict[str, Any]],
) -> None:
    """Worker 1's init container restarted while the group starts (its node came late, its
    sync failed once): RecreateGroupOnPodRestart deletes every pod and every node syncs again;
    the rendered policy waits until no pod is Pending. After the start, a restart still
    recreates the group (the leader's process group cannot take a worker back). The sync
    retries inside its container (test_workload.py), so its restart count stays 0 and the
    group is not recreated when that pod starts either."""
    policy = out["LeaderWorkerSet"]["spec"]["leaderWorkerTemplate"]["restartPolicy"]
    starting = [("Running", 0), ("Pending", 1)]
    assert lws_recreates_group("RecreateGroupOnPodRestart", starting, 1)
    assert not lws_recreates_group(policy, starting, 1)
    assert lws_recreates_group(policy, [("Running", 0), ("Running", 1)], 1)
    assert not lws_recreates_group(policy, [("Running", 0), ("Running", 0)], 1)


def test_the_bundled_lws_crd_knows_the_restart_policy() -> None:
    """RecreateGroupAfterStart is a restartPolicy value from LWS v0.9 (an annotation before);
    the bundled CRD is v0.10.0's."""
    import json

    from llmdeploy.check import bundled

    (entry,) = [k for k in bundled.manifest()["kinds"] if k["kind"] == "LeaderWorkerSet"]
    assert entry["source"]["tag"] == "v0.10.0"
    folder = Path(bundled.__file__).parent / bundled.FOLDER
    schema = json.loads((folder / entry["file"]).read_text(encoding="utf-8"))["versions"]["v1"]
    policy = schema["properties"]["spec"]["properties"]["leaderWorkerTemplate"]["properties"][
        "restartPolicy"
    ]
    assert "RecreateGroupAfterStart" in policy["enum"]


def test_one_group_per_replica_one_pod_per_node(out: dict[str, dict[str, Any]]) -> None:
    assert "Deployment" not in out
    lws = out["LeaderWorkerSet"]
    spec = lws["spec"]
    assert spec["leaderWorkerTemplate"]["size"] == preset_data()["hardware"]["nodesPerReplica"]
    inst = catalog.instance(preset_data()["hardware"]["instanceType"])
    assert inst is not None
    for template in templates(lws):
        (server,) = template["spec"]["containers"]
        assert server["resources"]["limits"]["nvidia.com/gpu"] == str(inst.gpu_count)
    # a worker pod that starts while its leader is pending, or a restarted one, never joins the
    # leader's process group: LeaderReady would wait for a leader that only becomes Ready once
    # every worker has joined, and a restart after the start has to recreate the whole group
    assert spec["startupPolicy"] == "LeaderCreated"
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupAfterStart"
    assert spec["rolloutStrategy"]["rollingUpdateConfiguration"] == {
        "maxUnavailable": 1,
        "maxSurge": 0,
    }
    # the Shared policy's headless Service would be named like the LWS, i.e. like our Service,
    # and LWS reuses an existing Service of that name (controller_utils.go)
    assert spec["networkConfig"]["subdomainPolicy"] == "UniquePerReplica"
    assert out["Service"]["metadata"]["name"] == lws["metadata"]["name"]
    assert "replicas" not in spec  # KEDA's HPA owns it


def test_tp_times_pp_is_every_gpu_of_the_group(out: dict[str, dict[str, Any]]) -> None:
    """vLLM: world_size = TP x PP must be divisible by nnodes (multiproc_executor.py
    ``nnodes_within_dp``); llmdeploy puts one pipeline stage on each node."""
    lws = out["LeaderWorkerSet"]
    size = lws["spec"]["leaderWorkerTemplate"]["size"]
    for template in templates(lws):
        (server,) = template["spec"]["containers"]
        args = server["args"]
        tp, pp = (
            int(option(args, "--tensor-parallel-size")),
            int(option(args, "--pipeline-parallel-size")),
        )
        gpus = int(server["resources"]["limits"]["nvidia.com/gpu"])
        assert tp * pp == gpus * size and pp == size
        assert int(option(args, "--nnodes")) == size
        assert option(args, "--distributed-executor-backend") == "mp"
        assert option(args, "--master-addr") == "$(LWS_LEADER_ADDRESS)"


def test_leader_serves_workers_are_headless(out: dict[str, dict[str, Any]]) -> None:
    leader, worker = (t["spec"] for t in templates(out["LeaderWorkerSet"]))
    (lead,), (work,) = leader["containers"], worker["containers"]
    assert option(lead["args"], "--node-rank") == "0" and "--headless" not in lead["args"]
    assert (
        option(work["args"], "--node-rank") == "$(LWS_WORKER_INDEX)"
        and "--headless" in work["args"]
    )
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert lead[probe]["httpGet"]["path"] == "/health"
        assert probe not in work
    assert lead["ports"] and "ports" not in work
    # the worker starts its server only once the leader's store listens on the master port
    wait = worker["initContainers"][-1]
    port = option(work["args"], "--master-port")
    assert wait["name"] == "wait-for-leader" and f"/{port}" in wait["command"][-1]
    assert "LWS_LEADER_ADDRESS" in wait["command"][-1]


def test_service_and_monitors_see_only_leaders(out: dict[str, dict[str, Any]]) -> None:
    lws = out["LeaderWorkerSet"]
    leader, worker = templates(lws)
    selector = out["Service"]["spec"]["selector"]
    assert selects(selector, live_labels(lws, leader, 0))
    assert not selects(selector, live_labels(lws, worker, 1))
    monitor = out["ServiceMonitor"]["spec"]["selector"]["matchLabels"]
    assert selects(monitor, out["Service"]["metadata"]["labels"])


def test_keda_scales_whole_groups_through_the_scale_subresource(
    out: dict[str, dict[str, Any]],
) -> None:
    ref = out["ScaledObject"]["spec"]["scaleTargetRef"]
    lws = out["LeaderWorkerSet"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == (
        lws["apiVersion"],
        "LeaderWorkerSet",
        lws["metadata"]["name"],
    )
    (up,) = out["ScaledObject"]["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"][
        "scaleUp"
    ]["policies"]
    assert up["value"] == 1  # one group (several nodes) at a time


@pytest.mark.shared
@pytest.mark.skipif(not SHARED_LWS_CRD.is_file(), reason="official LWS CRD not beside the repo")
def test_the_lws_crd_scales_replicas_and_selects_leaders() -> None:
    crd = yaml.safe_load(SHARED_LWS_CRD.read_text(encoding="utf-8"))
    (version,) = crd["spec"]["versions"]
    scale = version["subresources"]["scale"]
    assert scale["specReplicasPath"] == ".spec.replicas"
    assert scale["labelSelectorPath"] == ".status.hpaPodSelector"


def test_pdb_and_network_policy_cover_the_whole_group(out: dict[str, dict[str, Any]]) -> None:
    lws = out["LeaderWorkerSet"]
    leader, worker = templates(lws)
    pdb = out["PodDisruptionBudget"]["spec"]
    assert pdb["maxUnavailable"] == 1
    for labels in (live_labels(lws, leader, 0), live_labels(lws, worker, 1)):
        assert selects(pdb["selector"]["matchLabels"], labels)
    peers = [
        rule
        for rule in out["NetworkPolicy"]["spec"]["ingress"]
        if any("podSelector" in peer and "namespaceSelector" not in peer for peer in rule["from"])
    ]
    (rule,) = peers
    assert "ports" not in rule  # the store, NCCL and Ray use ports of their own choosing
    assert selects(rule["from"][0]["podSelector"]["matchLabels"], live_labels(lws, worker, 1))


# --- EFA and the nodes --------------------------------------------------------------------------


def test_efa_on_leader_and_worker_is_every_interface(out: dict[str, dict[str, Any]]) -> None:
    inst = catalog.instance(preset_data()["hardware"]["instanceType"])
    assert inst is not None and inst.efa_interfaces == 32
    for template in templates(out["LeaderWorkerSet"]):
        (server,) = template["spec"]["containers"]
        for side in ("requests", "limits"):
            assert server["resources"][side]["vpc.amazonaws.com/efa"] == "32"
        assert not any(k.startswith("hugepages") for k in server["resources"]["limits"])
        env = {e["name"]: e.get("value") for e in server["env"]}
        assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_FORK_SAFE"] == "1"
        assert env["FI_EFA_USE_DEVICE_RDMA"] == "1" and env["NCCL_DEBUG"] == "INFO"
        assert server["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_nodes_of_a_group_stay_in_one_zone(out: dict[str, dict[str, Any]]) -> None:
    reqs = {
        r["key"]: r["values"] for r in out["NodePool"]["spec"]["template"]["spec"]["requirements"]
    }
    assert reqs["topology.kubernetes.io/zone"] == [preset_data()["cluster"]["placement"]["zone"]]
    assert reqs["node.kubernetes.io/instance-type"] == ["p5.48xlarge"]
    for template in templates(out["LeaderWorkerSet"]):
        assert "topologySpreadConstraints" not in template["spec"]
    nodeclass = out["EC2NodeClass"]["spec"]
    assert "associatePublicIPAddress" not in nodeclass  # multi-EFA launches fail with it


def test_subnets_and_placement_group(crds: object) -> None:
    data = preset_data()
    data["cluster"]["placement"] |= {"subnetIds": ["subnet-0abc"], "placementGroup": "llm-p5"}
    nodeclass = docs(render(data, crds))["EC2NodeClass"]["spec"]
    assert nodeclass["subnetSelectorTerms"] == [{"id": "subnet-0abc"}]
    assert nodeclass["placementGroupSelector"] == {"name": "llm-p5"}


# --- what is refused, and what warns ------------------------------------------------------------


def errors_of(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as exc:
        render(data)
    return [d.message for d in exc.value.diagnostics if d.severity == "error"]


def test_a_group_needs_a_zone() -> None:
    data = preset_data()
    del data["cluster"]["placement"]
    (message,) = errors_of(data)
    assert "needs `cluster.placement.zone`" in message


def test_gpu_limit_must_hold_one_group() -> None:
    data = preset_data()
    data["cluster"]["gpuLimit"] = 8
    (message,) = errors_of(data)
    assert "below one replica's 16 GPUs" in message


def test_trtllm_is_refused_with_the_reason() -> None:
    data = preset_data()
    data["engine"] = {"type": "trtllm"}
    data["model"]["loading"] = {"mode": "huggingface"}
    messages = errors_of(data)
    assert any("`hardware.nodesPerReplica` does not apply to engine trtllm" in m for m in messages)
    assert any("kubectl exec" in m for m in messages)


def test_mp_before_its_first_release_is_refused_at_the_version() -> None:
    data = preset_data()
    data["engine"] = {"type": "vllm", "version": "0.11.0", "distributedExecutorBackend": "mp"}
    (message,) = errors_of(data)
    assert "--nnodes is not supported by vLLM 0.11.0" in message


def test_ray_below_the_first_nnodes_release(crds: object) -> None:
    data = preset_data()
    data["engine"] = {"type": "vllm", "version": "0.10.0"}
    result = render(data, crds)
    out = docs(result)
    leader, worker = (t["spec"] for t in templates(out["LeaderWorkerSet"]))
    (lead,), (work,) = leader["containers"], worker["containers"]
    assert lead["command"] == ["bash", "/etc/llmdeploy/ray-leader.sh"]
    assert lead["args"][:2] == ["vllm", "serve"]
    assert option(lead["args"], "--distributed-executor-backend") == "ray"
    assert "--nnodes" not in lead["args"]
    assert work["command"] == ["bash", "/etc/llmdeploy/ray-worker.sh"] and not work.get("args")
    scripts = out["ConfigMap"]["data"]
    assert "ray start --head --port=6379" in scripts["ray-leader.sh"]
    assert '--address="${LWS_LEADER_ADDRESS}:6379" --block' in scripts["ray-worker.sh"]


def test_warnings_for_the_default_image_and_an_instance_without_efa() -> None:
    data = preset_data()
    assert not any("aws-ofi-nccl" in w.message for w in render(data).warnings)  # its own image
    del data["engine"]["image"]  # vllm/vllm-openai: no libfabric, no aws-ofi-nccl
    assert any("aws-ofi-nccl" in w.message for w in render(data).warnings)
    data["model"] = {"id": "meta-llama/Meta-Llama-3-70B-Instruct", "architecture": "llama-3-70b"}
    data["hardware"] = {"instanceType": "p3.16xlarge", "tensorParallel": 8, "nodesPerReplica": 2}
    data["serving"] = {"maxModelLen": 4096, "gpuMemoryUtilization": 0.85}
    result = render(data)
    assert any("p3.16xlarge has no EFA" in w.message for w in result.warnings)
    text = "".join(t for _, t in result.files)
    assert "vpc.amazonaws.com/efa" not in text and "FI_PROVIDER" not in text
    data["hardware"]["efa"] = True
    (message,) = errors_of(data)
    assert "no EFA interfaces" in message


def test_auto_chooses_the_fewest_nodes() -> None:
    data = preset_data()
    data["hardware"]["nodesPerReplica"] = "auto"
    result = render(data)
    assert result.sizing.nodes == 2 and "LeaderWorkerSet" in docs(result)
    data["quantization"] = "fp8"  # fits one p5: a Deployment, as without nodesPerReplica
    result = render(data)
    assert result.sizing.nodes == 1 and "Deployment" in docs(result)
    assert "LeaderWorkerSet" not in docs(result)


def test_a_model_that_fits_one_node_renders_as_before(crds: object) -> None:
    """Every preset that fits one node is a Deployment with no group, EFA or pipeline flags."""
    for name in pipeline.preset_names():
        if name == PRESET:
            continue
        path = pipeline.preset_path(name)
        assert path is not None
        result = pipeline.render_loaded(load.load_spec_file(path), header_command="t", crds=crds)
        found = docs(result)
        assert "Deployment" in found and "LeaderWorkerSet" not in found, name
        text = "".join(t for _, t in result.files)
        assert "vpc.amazonaws.com/efa" not in text and "--nnodes" not in text, name
