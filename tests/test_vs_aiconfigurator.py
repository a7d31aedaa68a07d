"""benchmarks/vs_aiconfigurator.py without AIConfigurator: how a calibration row becomes an
AIConfigurator question (arrival pattern, requests in flight, caps, precision), why a row is
skipped, and the error table's arithmetic on hand-made rows (issue 22 item 5).

AIConfigurator facts used below are read in aiconfigurator 0.12.0 / aiconfigurator-core 0.12.0
(PyPI wheels): ``cli_estimate`` in ``aiconfigurator/cli/api.py`` (``ctx_tokens`` defaults to the
ISL; MoE models need ``moe_tp_size`` or ``moe_ep_size``), the quantization names of its
``--gemm-quant-mode`` / ``--kvcache-quant-mode`` / ``--moe-quant-mode`` options
(``aiconfigurator/cli/main.py``), and its system names (``aiconfigurator_core/systems/*.yaml``).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import load_script
from llmdeploy.perf.types import Deployment, Hardware, ModelGeometry, Workload
from llmdeploy.perf.workloads import from_loadgen

REPO = Path(__file__).resolve().parents[1]
VERSIONS = {("h200_sxm", "vllm"): "0.24.0", ("h100_sxm", "trtllm"): "1.3.0rc20"}
H200 = Hardware("NVIDIA H200 SXM 141GB", mem_bw_gbs=4800.0, fp16_tflops=989.0)
H100 = Hardware("NVIDIA H100 SXM5 80GB HBM3", mem_bw_gbs=3350.0, fp16_tflops=989.0)
DENSE = ModelGeometry("dense", 32, 4096, 32, 8, 128, 14336, 128256)
MOE = ModelGeometry("moe", 24, 2880, 64, 8, 64, 0, 201088, num_experts=32, experts_per_token=4)


@pytest.fixture(scope="module")
def vs() -> ModuleType:
    return load_script("benchmarks/vs_aiconfigurator.py")


@dataclass(frozen=True)
class T:
    metric: str
    value: float
    weight: float = 1.0


@dataclass(frozen=True)
class FakeCase:
    """The fields of perf_calibration.Case the script reads, with llmdeploy's own types."""

    workload: Workload
    id: str = "row"
    source: str = "h200-vllm-0.24.0"
    family: str = "vllm"
    version: str = "0.24.0"
    model_key: str = "llama-3.1-8b"
    hw: Hardware = H200
    model: ModelGeometry = DENSE
    dep: Deployment = field(default_factory=lambda: Deployment(max_num_seqs=1024))
    targets: tuple[T, ...] = ()


MODELS = {"llama-3.1-8b": "/cfg/m8b", "gpt-oss-20b": "/cfg/goss"}


def test_arrival_pattern_of_each_row_type(vs: ModuleType) -> None:
    closed = FakeCase(from_loadgen("512/128/closed:8/32"))
    stagger = FakeCase(from_loadgen("512/128/stagger:8/32"))
    poisson = FakeCase(from_loadgen("512/128/poisson:3/60"))
    burst = FakeCase(Workload(200, 200, request_rate=math.inf, num_requests=1000))
    sharegpt_c4 = FakeCase(Workload(232.6, 220.6, concurrency=4, length_cv=1.0))
    offline = FakeCase(Workload(128, 128, concurrency=8192))
    assert vs.arrival(closed, {}) == "closed-loop"
    assert vs.arrival(stagger, {}) == "steady"
    assert vs.arrival(poisson, {}) == "poisson"
    assert vs.arrival(burst, {}) == "burst"
    assert vs.arrival(sharegpt_c4, {}) == "steady"  # lengths vary: no waves
    assert vs.arrival(offline, {"scenario": "offline_max_throughput"}) == "offline"


def test_in_flight_by_littles_law(vs: ModuleType) -> None:
    # sweep format: 1000 tok/s at 100 output tokens = 10 req/s, x 2.0 s end to end = 20
    assert vs.in_flight({"output_tok_s": 1000.0, "e2e_mean_ms": 2000.0}, 100) == pytest.approx(20)
    # calibration format (trt014 qps2, Llama 8B): 504 / 256 req/s x (23 + 255 x 8) ms
    got = vs.in_flight({"output_tok_s_total": 504, "ttft_ms_mean": 23, "itl_ms_mean": 8}, 256)
    assert got == pytest.approx(504 / 256 * (23 + 255 * 8) / 1000)  # 4.06
    # TPOT mean is preferred over the token-weighted ITL mean when the row has both
    both = {"output_tok_s_total": 100, "ttft_ms_mean": 0.5, "tpot_ms_mean": 10, "itl_ms_mean": 99}
    assert vs.in_flight(both, 101) == pytest.approx(100 / 101 * (0.5 + 100 * 10) / 1000)
    # a figure the row gives wins; nothing to go on gives None
    assert vs.in_flight({"mean_in_flight": 7.5, "output_tok_s": 1.0, "e2e_mean_ms": 1.0}, 10) == 7.5
    assert vs.in_flight({"output_tok_s": 1000.0}, 100) is None
    assert vs.in_flight({"requests_s": 2.0, "e2e_mean_ms": None}, 100) is None


def test_closed_loop_row_is_asked_at_its_concurrency(vs: ModuleType) -> None:
    case = FakeCase(from_loadgen("512/256/closed:16/64"))
    q = vs.question(case, {}, MODELS, VERSIONS)
    assert q == vs.Question(
        model="/cfg/m8b",
        system="h200_sxm",
        backend="vllm",
        version="0.24.0",
        tp=1,
        isl=512,
        osl=256,
        batch=16,
        ctx_tokens=512,  # cli_estimate's default: the ISL
        gemm_quant="bfloat16",
        kv_quant="bfloat16",
        basis="closed-loop concurrency 16",
    )
    assert vs.question(case, {}, MODELS, VERSIONS, ctx="engine").ctx_tokens == 8192
    assert q.kwargs() == {
        "backend_name": "vllm",
        "backend_version": "0.24.0",
        "isl": 512,
        "osl": 256,
        "batch_size": 16,
        "ctx_tokens": 512,
        "tp_size": 1,
        "gemm_quant_mode": "bfloat16",
        "kvcache_quant_mode": "bfloat16",
    }


def test_poisson_row_is_asked_at_the_measured_requests_in_flight(vs: ModuleType) -> None:
    case = FakeCase(from_loadgen("512/128/poisson:8/160"))
    # 8 req/s x 128 tokens = 1024 tok/s; 4.6 s end to end: 36.8 in flight
    raw = {"metrics": {"output_tok_s": 1024.0, "e2e_mean_ms": 4600.0}}
    q = vs.question(case, raw, MODELS, VERSIONS)
    assert q.batch == 37
    assert q.basis == "poisson: 36.8 in flight (Little's law on the measured run)"
    assert vs.question(case, {"metrics": {}}, MODELS, VERSIONS) == vs.Skip(
        "poisson open loop: the row gives no figure for requests in flight"
    )


def test_running_batch_is_capped_by_max_num_seqs_and_kv(vs: ModuleType) -> None:
    burst = Workload(300, 100, request_rate=math.inf, num_requests=1000)
    raw = {"metrics": {"mean_in_flight": 538.0}}
    # the KV cache holds 100,000 / (300 + 100) = 250 sequences at full length
    kv = FakeCase(burst, dep=Deployment(max_num_seqs=1024, kv_capacity_tokens=100_000))
    q = vs.question(kv, raw, MODELS, VERSIONS)
    assert q.batch == 250
    assert q.basis.endswith("running batch capped at the 250 sequences its KV cache holds")
    seqs = FakeCase(burst, dep=Deployment(max_num_seqs=64, kv_capacity_tokens=10**7))
    q = vs.question(seqs, raw, MODELS, VERSIONS)
    assert q.batch == 64
    assert q.basis.endswith("running batch capped at max_num_seqs 64")


def test_precision_and_moe_sharding(vs: ModuleType) -> None:
    fp8 = FakeCase(
        from_loadgen("512/128/closed:8/32"),
        dep=Deployment(tp=2, gemm_dtype="fp8", weight_bytes_dense=1.0, kv_bytes=1.0),
    )
    q = vs.question(fp8, {}, MODELS, VERSIONS)
    assert (q.gemm_quant, q.kv_quant, q.moe_quant, q.moe_tp, q.tp) == ("fp8", "fp8", None, None, 2)
    mxfp4 = FakeCase(
        from_loadgen("512/128/closed:8/32"),
        model_key="gpt-oss-20b",
        model=MOE,
        dep=Deployment(weight_bytes_expert=0.53125),
    )
    q = vs.question(mxfp4, {}, MODELS, VERSIONS)
    # vLLM without --enable-expert-parallel shards experts over the TP group: MoE TP = TP, EP 1
    assert (q.gemm_quant, q.moe_quant, q.moe_tp) == ("bfloat16", "w4a16_mxfp4", 1)
    assert q.kwargs()["moe_tp_size"] == 1 and q.kwargs()["moe_ep_size"] == 1
    awq = FakeCase(from_loadgen("512/128/closed:8/32"), dep=Deployment(weight_bytes_dense=0.5))
    assert vs.question(awq, {}, MODELS, VERSIONS).gemm_quant == "int4_wo"
    w4a16 = FakeCase(from_loadgen("512/128/closed:8/32"), dep=Deployment(gemm_dtype="w4a16"))
    assert vs.question(w4a16, {}, MODELS, VERSIONS).gemm_quant == "int4_wo"
    w8a8 = FakeCase(from_loadgen("512/128/closed:8/32"), dep=Deployment(gemm_dtype="int8"))
    assert vs.question(w8a8, {}, MODELS, VERSIONS).gemm_quant == "sq"


def test_trtllm_row_is_asked_of_aiconfigurators_trtllm_database(vs: ModuleType) -> None:
    # perf_calibration's offline rows: twice trtllm-bench's max_batch_size in clients
    case = FakeCase(
        Workload(1000, 1000, concurrency=1536),
        family="trtllm-trt",
        version="0.17",
        hw=H100,
        dep=Deployment(tp=4, max_num_seqs=768, kv_capacity_tokens=10**7),
    )
    q = vs.question(case, {"scenario": "offline_max_throughput"}, MODELS, VERSIONS)
    assert (q.system, q.backend, q.version, q.tp) == ("h100_sxm", "trtllm", "1.3.0rc20", 4)
    assert q.batch == 768
    assert q.basis == "offline concurrency 1536, running batch capped at max_num_seqs 768"


def test_skip_reasons(vs: ModuleType) -> None:
    wl = from_loadgen("512/128/closed:8/32")
    a10g = Hardware("NVIDIA A10G 24GB", mem_bw_gbs=600.0, fp16_tflops=125.0)
    assert vs.question(FakeCase(wl, hw=a10g), {}, MODELS, VERSIONS) == vs.Skip(
        "GPU NVIDIA A10G 24GB: no AIConfigurator system"
    )
    assert vs.question(FakeCase(wl, family="sglang"), {}, MODELS, VERSIONS) == vs.Skip(
        "engine sglang: no AIConfigurator backend"
    )
    assert vs.question(FakeCase(wl, family="trtllm-pytorch"), {}, MODELS, VERSIONS) == vs.Skip(
        "no AIConfigurator database for h200_sxm trtllm"
    )
    assert vs.question(FakeCase(wl, model_key="qwen2.5-7b"), {}, MODELS, VERSIONS) == vs.Skip(
        "model qwen2.5-7b: no config.json in the row's file or AIConfigurator"
    )


def _row(vs: ModuleType, metric: str, arrival: str, source: str, **pred: float) -> Any:
    row = vs.Row(f"{source}-{arrival}", source, arrival, metric, 100.0)
    names = {"ours": "llmdeploy", "cv": "llmdeploy CV", "static": "AIC static", "agg": "AIC agg"}
    row.predicted.update({names[k]: v for k, v in pred.items()})
    mode = "AIC static" if arrival == "closed-loop" else "AIC agg"
    if mode in row.predicted:
        row.predicted["AIC matched"] = row.predicted[mode]
    return row


def test_error_table_compares_the_same_rows(vs: ModuleType) -> None:
    rows = [
        _row(vs, "thr", "closed-loop", "a", ours=110, cv=120, static=95, agg=70),
        _row(vs, "thr", "closed-loop", "a", ours=80, cv=60, static=130, agg=100),
        _row(vs, "thr", "poisson", "b", ours=104, static=150, agg=125),  # no CV prediction
        # AIConfigurator's agg mode refused this row: it counts for no tool
        _row(vs, "thr", "poisson", "b", ours=500, cv=500, static=500),
        _row(vs, "ttft_p50", "poisson", "b", ours=50, cv=25, static=400, agg=300),
    ]
    by = {(e["metric"], e["group"]): e for e in vs.table(rows)}
    thr = by[("throughput", "all")]
    # |errors|: ours 10, 20, 4 -> 10 %; static 5, 30, 50 -> 30 %; agg 30, 0, 25 -> 25 %
    assert thr["rows"] == 3
    assert thr["llmdeploy"] == pytest.approx(0.10)
    assert thr["AIC static"] == pytest.approx(0.30)
    assert thr["AIC agg"] == pytest.approx(0.25)
    # static on the closed loops, agg on the Poisson row: 5, 30, 25 -> 25 %
    assert thr["AIC matched"] == pytest.approx(0.25)
    # CV over the two of the three that have one: 20 and 40 -> 30 %
    assert (thr["llmdeploy CV"], thr["cv_rows"]) == (pytest.approx(0.30), 2)
    closed = by[("throughput", "closed-loop")]
    assert (closed["rows"], closed["llmdeploy"], closed["AIC agg"]) == (
        2,
        pytest.approx(0.15),
        pytest.approx(0.15),
    )
    assert by[("throughput", "b")]["rows"] == 1  # per source as well
    assert ("throughput", "steady") not in by  # no rows: no line
    ttft = by[("TTFT p50", "poisson")]
    assert (ttft["llmdeploy"], ttft["AIC static"], ttft["AIC agg"]) == (0.5, 3.0, 2.0)
    # held out: CV against the matched mode on the rows with both (the two closed loops):
    # CV 20, 40 -> 30 %; static 5, 30 -> 17.5 %
    held = {(e["metric"], e["group"]): e for e in vs.table(rows, vs.HELD_OUT, vs.HELD_OUT)}
    h = held[("throughput", "all")]
    assert (h["rows"], h["llmdeploy CV"], h["AIC matched"]) == (
        2,
        pytest.approx(0.30),
        pytest.approx(0.175),
    )
    assert ("throughput", "poisson") not in held  # one row lacks CV, the other the agg mode
    text = vs.format_table([thr], tools=("llmdeploy", "llmdeploy CV", "AIC matched"))
    assert text.splitlines() == [
        "| metric     | rows of | rows | llmdeploy | llmdeploy CV | AIC matched |",
        "|------------|---------|------|-----------|--------------|-------------|",
        "| throughput | all     | 3    | 10.0 %    | 30.0 % (2)   | 25.0 %      |",
    ]


def test_rows_of_maps_aiconfigurators_figures_to_each_metric(vs: ModuleType) -> None:
    case = FakeCase(
        from_loadgen("512/256/closed:16/64"),
        targets=(T("thr", 2000.0), T("ttft_p50", 100.0), T("itl_p99", 9.0), T("itl_p50", 5.0)),
    )
    ours = {"thr": 2100.0, "ttft_p50": 90.0, "itl_p50": 5.5, "itl_p99": 6.0}
    aic = {"static": {"tokens/s": 2200.0, "ttft": 150.0, "tpot": 4.5}, "agg": {"ttft": 0.0}}
    rows = vs.rows_of(case, "closed-loop", ours, {("row", "thr"): 1800.0}, aic)
    assert [r.metric for r in rows] == ["thr", "ttft_p50", "itl_p50"]  # p99: not compared
    thr, ttft, itl = rows
    assert thr.predicted == {
        "llmdeploy": 2100.0,
        "llmdeploy CV": 1800.0,
        "AIC static": 2200.0,
        "AIC matched": 2200.0,  # a closed loop: static mode's figure
    }
    assert ttft.error("AIC static") == pytest.approx(0.5)
    assert ttft.error("AIC agg") is None  # a zero or missing figure is no prediction
    assert itl.error("llmdeploy") == pytest.approx(0.1)


def test_every_stored_row_maps_or_says_why(vs: ModuleType) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    cal = load_script("scripts/perf_calibration.py")
    data = REPO / "tests" / "data" / "perf"
    raw = vs.load_raw(data)
    models = {name: f"/aic/{name}" for name in vs.AIC_MODEL} | {
        name: f"/row/{name}" for name in raw.configs
    }
    versions = {("h100_sxm", "vllm"): "0.24.0", ("h100_sxm", "trtllm"): "1.3.0rc20"}
    versions[("h200_sxm", "vllm")] = "0.24.0"
    for case in cal.load_cases(data):
        q = vs.question(case, raw.rows[case.id], models, versions)
        if isinstance(q, vs.Skip):
            assert q.reason, case.id
            continue
        assert q.batch >= 1 and q.isl >= 1 and q.osl >= 2, case.id
        if raw.rows[case.id].get("arrival") == "poisson":
            # gpu_ingest.py's Poisson rows give the requests in flight: asked at that number
            assert "in flight (measured)" in q.basis, case.id
        if case.workload.concurrency is not None and case.source == "h200-vllm-0.24.0":
            # the measured H200 closed loops: asked at their own concurrency, the row's config
            assert (q.system, q.backend, q.version) == ("h200_sxm", "vllm", "0.24.0")
            assert q.batch == case.workload.concurrency, case.id
            assert q.model == f"/row/{case.model_key}"


def test_without_aiconfigurator_it_says_so_and_exits_0(
    vs: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(vs, "_aic_api", lambda: None)
    assert vs.main([]) == 0
    assert capsys.readouterr().out == (
        "vs_aiconfigurator: AIConfigurator is not installed (pip install -e '.[peer]')\n"
    )


def test_cv_prediction_is_the_model_folds(vs: ModuleType) -> None:
    rows = [
        {"id": "a", "metric": "thr", "fold": "model Llama-3.1-8B", "predicted": 1.0},
        {"id": "a", "metric": "thr", "fold": "H200 file", "predicted": 2.0},  # after: ignored
        {"id": "b", "metric": "thr", "fold": "source trt014", "predicted": 3.0},
        {"id": "b", "metric": "thr", "fold": "model Qwen3-32B", "predicted": 4.0},
        {"id": "c", "metric": "ttft_p50", "fold": "source gpustack", "predicted": 5.0},
        {"id": "d", "metric": "thr", "fold": "H200 file (vLLM 0.24)", "predicted": 6.0},
        {"id": "d", "metric": "thr", "fold": "H200 arrivals: Qwen3-32B", "predicted": 7.0},
    ]
    assert vs.cv_from(rows) == {
        ("a", "thr"): 1.0,
        ("b", "thr"): 4.0,
        ("c", "ttft_p50"): 5.0,
        ("d", "thr"): 7.0,  # perf_fit's per-geometry fold of the arrival rows
    }


def test_refusals_are_said_once_when_both_modes_agree(vs: ModuleType) -> None:
    assert vs.refusals({"static": "E: no MoE data", "agg": "E: no MoE data"}) == [
        "static and agg: E: no MoE data"
    ]
    assert vs.refusals({"agg": "RuntimeError: OOM"}) == ["agg: RuntimeError: OOM"]
    assert vs.refusals({"static": "A", "agg": "B"}) == ["static: A", "agg: B"]


@dataclass(frozen=True)
class WithHits(Workload):
    """A workload with prefix-cache hits (the field the arrival rows' loader sets)."""

    cached_requests: frozenset[int] = frozenset()


def test_prefix_hits_become_aiconfigurators_mean_cached_prefix(vs: ModuleType) -> None:
    base = from_loadgen("512/128/stagger:8/32")
    hits = WithHits(**{f: getattr(base, f) for f in base.__dataclass_fields__})
    hits = WithHits(**{**hits.__dict__, "cached_requests": frozenset(range(8))})
    q = vs.question(FakeCase(hits), {}, MODELS, VERSIONS)
    # 8 of 32 prompts were whole in the cache: 512 x 8 / 32 = 128 cached tokens per request
    assert q.prefix == 128 and q.kwargs()["prefix"] == 128
    assert q.basis == "steady concurrency 8, prefix 128 tokens (8 of 32 prompts cached)"
    assert "prefix" not in vs.question(FakeCase(base), {}, MODELS, VERSIONS).kwargs()


def test_arrival_rows_file(vs: ModuleType, tmp_path: Path) -> None:
    """scripts/gpu_ingest.py's format: ``startup`` with each model's config path, ``arrivals``
    with the pattern and the requests measured in flight beside the metrics."""
    (tmp_path / "models" / "q32b").mkdir(parents=True)
    (tmp_path / "models" / "q32b" / "config.json").write_text('{"num_hidden_layers": 64}')
    (tmp_path / "h200-arrivals.yaml").write_text(
        "startup:\n"
        "- {model: Qwen3-32B geometry, config: models/q32b/config.json}\n"
        "arrivals:\n"
        "- id: p8\n"
        "  model: Qwen3-32B geometry\n"
        "  arrival: poisson\n"
        "  measured_in_flight: 21.4\n"
        "  metrics: {output_tok_s: 812.1}\n"
    )
    raw = vs.load_raw(tmp_path)
    assert raw.configs == {"qwen3-32b": {"num_hidden_layers": 64}}
    row = raw.rows["p8"]
    case = FakeCase(from_loadgen("512/128/poisson:8/160"), model_key="qwen3-32b")
    assert vs.arrival(case, row) == "poisson"
    q = vs.question(case, row, {"qwen3-32b": "/cfg/q32b"}, VERSIONS)
    assert (q.batch, q.model) == (21, "/cfg/q32b")
    assert q.basis == "poisson: 21.4 in flight (measured)"
