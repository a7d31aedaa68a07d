"""Numbers the docs quote about what llmdeploy computes, checked against what it computes.

Console examples check their own printed output (tests/test_docs.py); this file holds the
numbers of prose and tables: each test renders or sizes what the page talks about and asserts
the page says it, in the page's own words. docs/CONTRIBUTING.md ("Numbers in the docs") says
which numbers belong here and which are cited facts or dated measurements instead.
"""

from __future__ import annotations

import math
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from conftest import load_script
from llmdeploy import pipeline
from llmdeploy.catalog import ec2
from llmdeploy.errors import SpecError
from llmdeploy.sizing import calculator, gpu_memory, requests
from llmdeploy.spec.load import load_spec_file
from llmdeploy.spec.sections import Startup
from test_size import KV_BAR, WEIGHTS_BAR

REPO = Path(__file__).resolve().parents[1]
TIMES = "\N{MULTIPLICATION SIGN}"  # as the docs write "3 x 10 s"
REPORT = load_script("scripts/calibration_report.py")


def page(name: str) -> str:
    """A page with its line breaks and runs of blanks as single spaces (prose wraps anywhere)."""
    return " ".join((REPO / name).read_text(encoding="utf-8").split())


def says(name: str, *phrases: str) -> None:
    text = page(name)
    missing = [p for p in phrases if " ".join(p.split()) not in text]
    assert not missing, f"{name} does not say: {missing}"


@cache
def rendered(preset: str) -> pipeline.Rendered:
    path = pipeline.preset_path(preset)
    assert path is not None, preset
    return pipeline.render_loaded(load_spec_file(path), header_command="t")


def server(preset: str) -> dict[str, Any]:
    docs = dict(pipeline.yaml_documents(rendered(preset).files))
    container: dict[str, Any] = docs["deployment.yaml"]["spec"]["template"]["spec"]["containers"][0]
    return container


def window(probe: dict[str, Any]) -> int:
    return int(probe["periodSeconds"]) * int(probe["failureThreshold"])


def gib(quantity: str) -> int:
    assert quantity.endswith("Gi"), quantity
    return int(quantity[:-2])


# --- README.md -----------------------------------------------------------------------------


def test_readme_quotes_the_calibration_bars_the_tests_enforce() -> None:
    says(
        "README.md",
        f"weights are off by more than {WEIGHTS_BAR:.0%}".replace("%", " %"),
        f"KV cache by more than {KV_BAR:.0%}".replace("%", " %"),
    )
    says(
        "docs/sizing.md",
        f"weights within {WEIGHTS_BAR:.0%}, KV GiB within {KV_BAR:.0%}".replace("%", " %"),
    )


# --- docs/sizing.md ------------------------------------------------------------------------

_GPU_ROWS = {  # the table's GPU column -> catalog key
    "H100 80GB": "h100",
    "H200 141GB": "h200",
    "A100 80GB": "a100_80",
    "L40S": "l40s",
    "L4": "l4",
    "T4": "t4",
    "A100 40GB": "a100_40",
    "A10G": "a10g",
}


def test_sizing_usable_memory_table_is_what_the_code_uses() -> None:
    text = (REPO / "docs" / "sizing.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| ([^|]+?) \| (\d+\.\d+) \|", text, re.M))
    assert set(_GPU_ROWS) <= set(rows), rows
    for name, key in _GPU_ROWS.items():
        gpu = gpu_memory.gpu_by_key(key)
        assert gpu is not None
        found = gpu_memory.gpu_memory(gpu)
        assert found is not None
        assert float(rows[name]) == found.total_gib, name
    ratios = {k: r for k in gpu_memory.MEASURED_TOTAL_GIB if (r := gpu_memory._ratio(k))}
    lowest = min(ratios, key=ratios.__getitem__)
    assert lowest == "t4"
    says("docs/sizing.md", f"the lowest ratio measured on any GPU, {ratios[lowest]:.4f} (the T4's)")
    says("docs/sizing.md", f"The CUDA context ({gpu_memory.CUDA_CONTEXT_GIB} GiB;")


def test_sizing_scout_rope_cache_example() -> None:
    case = next(c for c in REPORT.load_cases(REPORT.DEFAULT_PATH) if "llama4-scout" in c["id"])
    sizing = calculator.compute(REPORT.request_for_case(case))
    parts = dict(sizing.weights_breakdown_gib)
    total = sizing.weights_gib_per_gpu
    rope, vision = parts["rope_cache"], parts["vision"]
    text = total - rope - vision
    positions = sizing.request.architecture.max_position_embeddings
    says(
        "docs/sizing.md",
        f"({positions:,} positions) holds {rope:.1f} GiB per GPU, which explains its "
        f"{case['weights_gib']:.2f} GiB at TP {case['tp']} (text {text:.2f} + vision "
        f"{vision:.2f} + rope {rope:.2f} = {total:.2f})",
    )


def test_sizing_out_of_sample_activation_peaks() -> None:
    def activation(model: str) -> float:
        req = requests.request_from_options(model, gpu="h100", gpu_memory_utilization=0.95)
        return calculator.compute(req).activation_gib

    says(
        "docs/sizing.md",
        f"gives {activation('granite-3.1-8b'):.2f} GiB for Granite-3.1-8B and "
        f"{activation('qwen3-30b-a3b'):.2f} GiB for Qwen3-30B-A3B",
    )


# --- docs/production.md --------------------------------------------------------------------


def test_production_startup_worked_example_is_the_rendered_budget() -> None:
    """The table recomputes the budget of docs/production.md §1 from the sized checkpoint and
    the spec's startup defaults; the rendered probe must allow exactly that."""
    preset = "llama3-70b-vllm-p4d"
    sizing = rendered(preset).sizing
    st = Startup()
    size = sizing.checkpoint_gib
    gbit = size * 2**30 * 8 / 1e9
    download, read = gbit / st.download_gbps, gbit / st.disk_read_gbps
    estimate = download + read + st.warmup_seconds
    scaled = estimate * st.safety_factor
    budget = math.ceil(scaled / 60) * 60
    probe = server(preset)["startupProbe"]
    assert window(probe) == budget
    says(
        "docs/production.md",
        f"the sizing stage counts the checkpoint as stored, {size:.2f} GiB",
        f"| size | {size:.2f} GiB {TIMES} 2^30 {TIMES} 8 / 10^9 = {gbit:.1f} Gbit | |",
        f"| download | {gbit:.1f} / {st.download_gbps} Gbit/s | {download:.1f} |",
        f"| read | {gbit:.1f} / {st.disk_read_gbps} Gbit/s | {read:.1f} |",
        f"| warm-up | | {st.warmup_seconds} |",
        f"| estimate | | {estimate:.1f} |",
        f"| {TIMES} {st.safety_factor}, rounded up to the minute | {scaled:.1f} → "
        f"| **{budget} s** ({budget // 60} min) |",
        f"failureThreshold: {probe['failureThreshold']}",
        f"`downloadGbps: {st.download_gbps}`, `diskReadGbps: {st.disk_read_gbps}`, "
        f"`warmupSeconds: {st.warmup_seconds}`, `safetyFactor: {st.safety_factor}`",
    )
    for other in ("docs/compare-writeup.md", "docs/production.md"):
        says(other, f"{budget // 60} minutes for")


def test_production_other_presets_startup_budgets() -> None:
    trt, small = "llama3-70b-trtllm-int4awq-p4d", "llama3-8b-vllm-g5"
    trt_sizing = rendered(trt).sizing
    engine_gib = trt_sizing.weights_gib_per_gpu * trt_sizing.tp
    says(
        "docs/production.md",
        f"`{trt}` ({engine_gib:.1f} GiB INT4-AWQ engine, already on local disk when Triton "
        f"starts) {window(server(trt)['startupProbe'])} s",
        f"`{small}` ({rendered(small).sizing.checkpoint_gib:.1f} GiB, synced from S3 by an init "
        f"container) {window(server(small)['startupProbe'])} s",
    )


def test_production_probe_table_is_the_rendered_probes() -> None:
    vllm = server("llama3-70b-vllm-p4d")
    ready, live = vllm["readinessProbe"], vllm["livenessProbe"]
    says(
        "docs/production.md",
        f"{ready['failureThreshold']} {TIMES} {ready['periodSeconds']} s, timeout "
        f"{ready['timeoutSeconds']} s",
        f"{live['failureThreshold']} {TIMES} {live['periodSeconds']} s = {window(live) // 60} min, "
        f"timeout {live['timeoutSeconds']} s",
        f"readiness reacts within {window(ready)} s",
        f"(each with a {live['timeoutSeconds']} s timeout)",
    )
    sleep = vllm["lifecycle"]["preStop"]["sleep"]["seconds"]
    says("docs/production.md", f"a `preStop` sleep of {sleep} s")


def test_production_pod_resources_are_the_rendered_requests() -> None:
    for preset, sized_on in (("llama3-70b-vllm-p4d", "p4d.24xlarge"), ("llama3-8b-vllm-g5", None)):
        requests_ = server(preset)["resources"]["requests"]
        instance = rendered(preset).sizing.instance
        assert instance is not None
        if sized_on is not None:
            assert instance.name == sized_on
        cpu, memory = requests_["cpu"], gib(requests_["memory"])
        says("docs/production.md", f"**{cpu} CPU and {memory} Gi**")
        says("docs/compare-writeup.md", f"{cpu} CPU, {memory}Gi") if sized_on else None
        alloc = instance.allocatable
        assert alloc is not None
        milli, mib = f"{alloc.cpu_millicores:,} m", f"{alloc.memory_mib:,} MiB"
        says("docs/production.md", f"{instance.name} ({milli}" if not sized_on else milli, mib)
    p4d = server("llama3-70b-vllm-p4d")
    ephemeral = gib(p4d["resources"]["requests"]["ephemeral-storage"])
    gpus = p4d["resources"]["requests"]["nvidia.com/gpu"]
    says("docs/compare-writeup.md", f"{ephemeral}Gi ephemeral storage, {gpus} GPUs")


def test_production_shm_sizes_are_the_rendered_volume() -> None:
    docs = dict(pipeline.yaml_documents(rendered("llama3-70b-vllm-p4d").files))
    volumes = docs["deployment.yaml"]["spec"]["template"]["spec"]["volumes"]
    shm = next(v for v in volumes if v["name"] == "dshm")["emptyDir"]["sizeLimit"]
    says("docs/production.md", f"{gib(shm)} GiB at TP4")
    says("docs/compare-writeup.md", f"{shm} (2 GiB per GPU)")


def test_production_checkpoint_bytes_and_caches() -> None:
    arch = rendered("llama3-70b-vllm-p4d").sizing.request.architecture
    says(
        "docs/production.md",
        f"{arch.total_params:,} parameters {TIMES} 2 B = {arch.total_params * 2:,} B",
        f"({arch.total_params * 2 / 2**30:.1f} GiB;",
    )


# --- docs/user-guide.md and docs/compare-writeup.md ----------------------------------------


def test_user_guide_explains_the_sizing_it_prints() -> None:
    g5 = calculator.compute(
        requests.request_from_options("llama-3-70b", instance="g5.12xlarge", tp=4)
    )
    p4d = rendered("llama3-70b-vllm-p4d").sizing
    says(
        "docs/user-guide.md",
        f"split four ways that is {g5.weights_gib_per_gpu:.2f} GiB per GPU, and an A10G has "
        f"about {g5.gpu_total_gib:.0f} GiB",
        f"after {p4d.weights_gib_per_gpu:.2f} GiB of weights each GPU keeps "
        f"{p4d.kv_cache_gib_per_gpu:.2f} GiB for the KV cache, {p4d.kv_cache_tokens:,} tokens, "
        f"which is {p4d.max_concurrency:.1f} requests of the full {p4d.max_model_len:,}-token "
        f"context or {p4d.slo_requests_per_replica} of the SLO's",
    )
    says(
        "docs/compare-writeup.md",
        f"the p4d fits with {p4d.kv_cache_gib_per_gpu:.2f} GiB of KV cache per GPU",
    )


def test_the_catalogued_allocatable_is_the_karpenter_reference() -> None:
    # aws/karpenter-provider-aws@1d927085 website/content/en/docs/reference/instance-types.md
    p4d, g5 = ec2.instance("p4d.24xlarge"), ec2.instance("g5.2xlarge")
    assert p4d is not None and g5 is not None
    assert (p4d.allocatable, g5.allocatable) == (
        ec2.Allocatable(95690, 1082712, 737),
        ec2.Allocatable(7910, 29317, 58),
    )


@pytest.mark.parametrize("name", ["docs/performance.md"])
def test_measurements_carry_their_date(name: str) -> None:
    """Every section of a measurement page that shows figures says when they were measured."""
    text = (REPO / name).read_text(encoding="utf-8")
    sections = re.split(r"^(?=## )", text, flags=re.M)[1:]
    undated = [
        s.splitlines()[0]
        for s in sections
        if re.search(r"\d+(\.\d+)? ?(s|ms|MiB)\b", s) and not re.search(r"\d{4}-\d{2}-\d{2}", s)
    ]
    assert not undated, f"{name}: sections with figures but no date: {undated}"


def _golden(case: str) -> pipeline.Rendered:
    return pipeline.render_loaded(
        load_spec_file(REPO / "tests" / "golden" / case / "spec.yaml"), header_command="t"
    )


def _cache_gib(result: pipeline.Rendered) -> int:
    docs = dict(pipeline.yaml_documents(result.files))
    volumes = docs["deployment.yaml"]["spec"]["template"]["spec"]["volumes"]
    return gib(next(v for v in volumes if v["name"] == "models")["emptyDir"]["sizeLimit"])


def test_production_model_caches_are_the_rendered_volumes() -> None:
    bf16 = rendered("llama3-70b-vllm-p4d")
    runtime_fp8, prequantized = _golden("vllm-fp8-online-hub-p5"), _golden("vllm-fp8-dynamic-p5")
    assert _cache_gib(runtime_fp8) == _cache_gib(bf16)
    fp8_weights = runtime_fp8.sizing.weights_gib_per_gpu * runtime_fp8.sizing.tp
    says(
        "docs/production.md",
        f"(below; {_cache_gib(bf16)} GiB for a 70B)",
        f"its cache is the same {_cache_gib(bf16)} GiB as for 16-bit serving, although the FP8 "
        f"weights in GPU memory are about {fp8_weights:.0f} GiB",
        f"gets the smaller cache ({_cache_gib(prequantized)} GiB for a 70B)",
    )


def test_production_scheduling_numbers_are_the_rendered_objects() -> None:
    docs = dict(pipeline.yaml_documents(rendered("llama3-70b-vllm-p4d").files))
    pool = docs["nodepool.yaml"]["spec"]
    minutes = int(pool["disruption"]["consolidateAfter"].removesuffix("m"))
    grace = docs["deployment.yaml"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    says(
        "docs/production.md",
        f"removed only after it has had no model pod for {minutes} minutes",
        f"`terminationGracePeriodSeconds` ({grace} s)",
    )
    interval = docs["servicemonitor.yaml"]["spec"]["endpoints"][0]["interval"]
    says("docs/production.md", f"`interval` {interval.removesuffix('s')} s")
    volume = docs["ec2nodeclass.yaml"]["spec"]["blockDeviceMappings"][0]["ebs"]
    says(
        "docs/compare-writeup.md",
        f"size `cluster.rootVolumeGib` ({gib(volume['volumeSize'])}), gp3 with "
        f"{volume['throughput']} MiB/s",
    )


def test_autoscaling_numbers_are_the_rendered_scaled_object() -> None:
    docs = dict(pipeline.yaml_documents(rendered("llama3-70b-vllm-p4d").files))
    spec = docs["scaledobject.yaml"]["spec"]
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    up, down = behavior["scaleUp"], behavior["scaleDown"]
    (up_policy,), (down_policy,) = up["policies"], down["policies"]
    threshold = spec["triggers"][0]["metadata"]["threshold"]
    says(
        "docs/compare-writeup.md",
        f"scale up after a {up['stabilizationWindowSeconds']} s stabilization, at most "
        f"{up_policy['value']} pods per {up_policy['periodSeconds']} s, scale "
        f"down {down_policy['value']} pod per {down_policy['periodSeconds']} s after a "
        f"{down['stabilizationWindowSeconds']} s window",
    )
    says(
        "docs/production.md",
        f"{up['stabilizationWindowSeconds']} s at the default 15 s scrape",
        f"at most {up_policy['value']} pods per {up_policy['periodSeconds']} s",
        f"`autoscaling.scaleDownStabilization` ({down['stabilizationWindowSeconds']} s)",
        f"then {down_policy['value']} pod per {down_policy['periodSeconds']} s",
    )
    says("docs/user-guide.md", f"while more than {threshold} requests wait per replica")


def test_production_reserve_examples_are_what_llmdeploy_says(tmp_path: Path) -> None:
    small = ec2.instance("g5.xlarge")
    assert small is not None
    cpu, _ = small.pod_share(1)
    says("docs/production.md", f"`g5.xlarge` leaves {cpu / 1000:.1f} CPU beside the reserve")
    spec = tmp_path / "s.yaml"
    preset = (REPO / "presets" / "llama3-8b-vllm-g5.yaml").read_text(encoding="utf-8")
    spec.write_text(
        preset.replace("  instanceFamily: g5\n", "  instanceType: g5.xlarge\n").replace(
            "cluster:\n", "cluster:\n  daemonSetReserve: {cpu: '1', memory: 12Gi}\n", 1
        )
    )
    with pytest.raises(SpecError) as refused:
        pipeline.size_loaded(load_spec_file(spec))
    (message,) = {d.message for d in refused.value.diagnostics if d.severity == "error"}
    says("docs/production.md", f"`{message}`")


def test_the_70b_checkpoint_size_the_guides_round_to() -> None:
    checkpoint = rendered("llama3-70b-vllm-p4d").sizing.checkpoint_gib
    says("docs/user-guide.md", f"are about {checkpoint:.0f} GiB", f"loading {checkpoint:.0f} GiB")
    says("docs/production.md", f"A 70B model in 16-bit is {checkpoint:.0f} GiB of weights")
    a100 = calculator.compute(
        requests.request_from_options("llama-3-70b", instance="p4d.24xlarge", tp=4)
    )
    says("docs/trtllm.md", f"leaves about {a100.kv_cache_gib_per_gpu:.0f} GiB of KV cache per GPU")


def test_shm_rule_is_the_plans() -> None:
    from llmdeploy.plan.pod import SHM_GIB_MAX, SHM_GIB_PER_GPU

    says(
        "docs/production.md",
        f"sized {SHM_GIB_PER_GPU} GiB per GPU (at least 2 GiB, at most {SHM_GIB_MAX} GiB",
    )
    says("docs/trtllm.md", f"({SHM_GIB_PER_GPU} GiB per GPU, as for the other engines)")


def test_trtllm_numbers_are_the_rendered_objects() -> None:
    engine = dict(pipeline.yaml_documents(rendered("llama3-70b-trtllm-int4awq-p4d").files))
    (job,) = [d for d in engine.values() if d.get("kind") == "Job"]
    says(
        "docs/trtllm.md",
        f"`backoffLimit` ({job['spec']['backoffLimit']}) retries, `activeDeadlineSeconds` "
        f"({job['spec']['activeDeadlineSeconds'] // 3600} h)",
    )
    pytorch = dict(pipeline.yaml_documents(rendered("llama33-70b-trtllm-fp8-p5").files))
    query = pytorch["scaledobject.yaml"]["spec"]["triggers"][0]["metadata"]["query"]
    interval = pytorch["servicemonitor.yaml"]["spec"]["endpoints"][0]["interval"]
    (range_,) = re.findall(r"\[(\d+)s\]", query)
    says("docs/trtllm.md", f"scrape intervals ({range_} s at {interval.removesuffix('s')} s)")


# --- docs/multinode.md ---------------------------------------------------------------------


def test_multinode_quotes_the_405b_sizing() -> None:
    from llmdeploy.sizing.pipeline import AUTO_MAX_NODES, with_layout
    from llmdeploy.sizing.suggest import size

    one = requests.request_from_options(
        "llama-3.1-405b", instance="p5.48xlarge", tp=8, max_model_len=16384
    )
    sized = size(one)
    says("docs/multinode.md", f"Llama 3.1 405B in 16-bit holds {sized.checkpoint_gib:.0f} GiB")
    prices = {s.change: s.price_usd_hr for s in sized.suggestions}
    two = prices["nodesPerReplica: 2 (2 x p5.48xlarge, TP8 x PP2)"]
    fp8, p5en = prices["quantization: fp8"], prices["instanceType: p5en.48xlarge"]
    assert two is not None and fp8 is not None and p5en is not None
    says(
        "docs/multinode.md",
        f"`nodesPerReplica: 2 (2 x p5.48xlarge, TP8 x PP2)` at ${two:.2f}/h, after "
        f"`quantization: fp8` and `instanceType: p5en.48xlarge` at ${fp8:.2f} and ${p5en:.2f}",
        f"the fewest nodes of the instance type, up to {AUTO_MAX_NODES}",
        f"405B at TP8: 63 x 2 x 1 KV head x 128 x 2 B = "
        f"{calculator.compute(with_layout(one, 2)).kv_bytes_per_token_per_gpu:,} B/token/GPU",
    )


def test_multinode_quotes_the_layer_split_and_the_group() -> None:
    from llmdeploy.engines.vllm.distributed import MASTER_PORT, RAY_PORT
    from llmdeploy.engines.vllm.pipeline import stage_layers
    from llmdeploy.spec.sections import Hardware

    split4 = ", ".join(map(str, stage_layers("0.19.0", 126, 4)))
    split2 = ", ".join(map(str, stage_layers("0.19.0", 61, 2)))
    nodes_max = Hardware.model_json_schema()["properties"]["nodesPerReplica"]["anyOf"][0]
    efa = {name: ec2.instance(name).efa_interfaces for name in ("p4d.24xlarge", "p5.48xlarge")}
    says(
        "docs/multinode.md",
        f"126 layers on 4 stages: {split4}; DeepSeek-V3's 61 on 2: {split2}",
        f"`1` (default, a Deployment as always) to {nodes_max['maximum']}",
        f"--master-port {MASTER_PORT}",
        f"$LWS_LEADER_ADDRESS:{MASTER_PORT}",
        f"`ray start --address=$LWS_LEADER_ADDRESS:{RAY_PORT} --block`",
        f"p4d/p4de {efa['p4d.24xlarge']}, p5/p5e {efa['p5.48xlarge']}",
    )
    scaled = dict(pipeline.yaml_documents(rendered("llama31-405b-vllm-2xp5").files))
    behavior = scaled["scaledobject.yaml"]["spec"]["advanced"]["horizontalPodAutoscalerConfig"]
    (up,) = behavior["behavior"]["scaleUp"]["policies"]
    says(
        "docs/multinode.md",
        f"scale-up {up['value']} replica per {up['periodSeconds'] // 60} minutes",
    )
