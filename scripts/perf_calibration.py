"""The calibration rows of the performance model as model inputs and targets.

Read by scripts/perf_fit.py and scripts/perf_report.py (docs/performance-model.md,
"Calibration"). A directory holds ``calibration.yaml`` (published rows, a list) and/or sweep
files in the format of ``h200-vllm-0.24.0.yaml`` (a mapping with ``startup`` and ``serving``);
tests/data/perf/ holds the copies of ../shared/perf the constants were fitted on. Every
assumption that is not in a row is written here, next to the rows it applies to.

The GPU and the model geometry come from llmdeploy's catalogs (the same
:mod:`llmdeploy.perf.inputs` functions the product uses); the KV-cache capacity of a published
row comes from llmdeploy's own sizing (:func:`llmdeploy.sizing.calculator.compute`), computed
live, with the few overrides below; a sweep's capacity is the one its start-up log gives.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from llmdeploy.catalog import ec2
from llmdeploy.catalog.models import load_architecture
from llmdeploy.engines.trtllm.perf_constants import CONSTANTS as TRTLLM_CONSTANTS
from llmdeploy.engines.vllm.perf import cudagraph_max_tokens, cudagraph_tokens_from_args
from llmdeploy.engines.vllm.perf_constants import CONSTANTS as VLLM_CONSTANTS
from llmdeploy.perf import inputs
from llmdeploy.perf.api import estimate
from llmdeploy.perf.constants import ConstantsRow, constants_for
from llmdeploy.perf.types import Constants, Deployment, GemmDtype, Hardware, ModelGeometry, Workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
import perf_sizing as sizing

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "perf"
# every constants row, in the order the fit writes them (vLLM's two ranges, then TRT-LLM's two)
CONSTANT_ROWS: tuple[ConstantsRow, ...] = VLLM_CONSTANTS + TRTLLM_CONSTANTS
SHAREGPT_CV = 1.0  # spread of ShareGPT prompt/output lengths [est]


@dataclass(frozen=True)
class Target:
    metric: str  # thr | ttft_p50 | ttft_p99 | ttft_mean | itl_p50 | itl_p99 | itl_mean
    value: float
    weight: float


@dataclass(frozen=True)
class Case:
    id: str
    source: str  # trt017 | trt014 | gpustack (by id), else the file's stem (h200-vllm-0.24.0)
    family: str  # constants family: vllm | trtllm-trt | trtllm-pytorch
    version: str
    model_key: str  # catalog name of the model
    load: str  # low | moderate | high | saturated (the TTFT accuracy split)
    hw: Hardware
    model: ModelGeometry
    dep: Deployment
    workload: Workload
    targets: tuple[Target, ...]
    notes: tuple[str, ...] = ()

    @property
    def constants(self) -> Constants:
        return constants_for(CONSTANT_ROWS, self.family, self.version)


def _yaml(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text())


@functools.cache
def hardware(gpu: str) -> Hardware:
    inst = ec2.instance(sizing.INSTANCE_OF_GPU[gpu])
    assert inst is not None, gpu
    return inputs.hardware(inst)


@functools.cache
def geometry(model: str) -> ModelGeometry:
    return inputs.geometry(load_architecture(model))


def _family(row: dict[str, Any]) -> str:
    if row["engine"] == "vllm":
        return "vllm"
    return "trtllm-pytorch" if "PyTorch" in str(row.get("runtime", "")) else "trtllm-trt"


def _precision(row: dict[str, Any]) -> tuple[float, float, GemmDtype, float]:
    """(dense bytes/param, expert bytes/param, GEMM dtype, KV bytes/element)."""
    w = str(row.get("weights") or "bf16")
    kvb = 1.0 if str(row.get("kv_cache_dtype") or "auto").startswith("fp8") else 2.0
    if w.startswith("fp8"):
        return 1.0, 1.0, "fp8", kvb
    if w.startswith("mxfp4"):  # MXFP4 experts: 4-bit values + one 8-bit scale per 32
        return 2.0, 0.5 + 1.0 / 32.0, "bf16", kvb
    if w.startswith(("awq", "gptq", "int4")):  # W4A16, group 128: 4-bit + fp16 scale/zero
        return 0.5 + 4.0 / 128.0, 0.5 + 4.0 / 128.0, "w4a16", kvb
    return 2.0, 2.0, "bf16", kvb


def _t(metric: str, value: Any, weight: float) -> list[Target]:
    if value is None:
        return []
    v = float(value)
    return [Target(metric, v, weight)] if math.isfinite(v) and v > 0 else []


def _source(rid: str, fallback: str) -> str:
    for prefix, name in (("trt017", "trt017"), ("trt014", "trt014"), ("gs-", "gpustack")):
        if rid.startswith(prefix):
            return name
    return fallback


def published_case(row: dict[str, Any], fallback_source: str) -> Case:
    """One row of a calibration.yaml-format file, by its scenario."""
    rid, scen = str(row["id"]), str(row["scenario"])
    src = _source(rid, fallback_source)
    model_name = sizing.row_model(row)
    arch = load_architecture(model_name)
    m = geometry(model_name)
    fam, ver = _family(row), str(row["engine_version"]).split()[0]
    tp = int(row["tp"])
    wd, we, gd, kvb = _precision(row)
    met = row["metrics"]
    isl, osl = float(row["input_tokens"]), float(row["output_tokens"])
    cv = SHAREGPT_CV if "ShareGPT" in str(row.get("lengths", "")) else 0.0
    thr = met.get("output_tok_s_total")
    dep = Deployment(
        tp=tp,
        weight_bytes_dense=wd,
        weight_bytes_expert=we,
        gemm_dtype=gd,
        kv_bytes=kvb,
        max_num_batched_tokens=8192,
        max_num_seqs=1024 if fam == "vllm" else 2048,  # vLLM V1 on H100; TRT-LLM 0.14+ builds
        kv_capacity_tokens=sizing.kv_tokens(row, src),
        # TensorRT-LLM's default capacity policy is guaranteed_no_evict (engines/trtllm/perf.py)
        kv_admission="optimistic" if fam == "vllm" else "reserve",
        async_scheduling=True if "--async-scheduling" in str(row.get("notes", "")) else None,
        # vLLM's default largest CUDA graph at max_num_seqs 1024 (engines/vllm/perf.py)
        cudagraph_max_tokens=cudagraph_max_tokens(1024, 8192) if fam == "vllm" else -1,
    )
    notes: list[str] = []
    targets: list[Target] = []
    if scen == "offline_max_throughput":
        bs, tok = sizing.trtllm_bench_settings(
            sizing.BENCH_PARAMS_B.get(arch.name, arch.total_params_b),
            m,
            tp,
            gd == "fp8",
            int(isl),
            int(osl),
        )
        notes.append(f"trtllm-bench heuristic: max_batch_size {bs}, max_num_tokens {tok}")
        dep = dataclasses.replace(dep, max_num_batched_tokens=tok, max_num_seqs=bs)
        # a saturated closed loop (twice the batch in clients) is the offline throughput
        wl = Workload(isl, osl, concurrency=min(int(row["num_requests"]), 2 * bs))
        targets += _t("thr", thr, 1.0)
        load = "saturated"
    elif scen.startswith("online_serving"):  # open loop at the QPS, a replay of num_requests
        rate = row["request_rate"]
        rate_f = math.inf if str(rate).upper() == "INF" else float(rate)
        wl = Workload(isl, osl, request_rate=rate_f, num_requests=int(row["num_requests"]))
        inf = math.isinf(rate_f)
        limited = (not inf) and float(met.get("requests_s") or 0) >= 0.9 * rate_f
        targets += _t("thr", thr, 0.3 if limited else 1.0)  # rate-limited: equals the QPS
        targets += _t("ttft_mean", met.get("ttft_ms_mean"), 0.3 if inf else 1.0)
        targets += _t("itl_mean", met.get("itl_ms_mean"), 1.0)
        load = "saturated" if inf else ("moderate" if limited else "high")
    else:
        n_req = int(row["num_requests"])
        if "-32000-" in rid:
            osl = 7681 / 100  # EOS not ignored: 7,681 of 10,000 tokens generated
            notes.append("output mean 76.8 tokens (EOS not ignored)")
        if scen == "online_fixed_concurrency":
            conc = int(row["concurrency"])
            wl = Workload(isl, osl, concurrency=conc, length_cv=cv, num_requests=n_req)
            targets += _t("thr", thr, 1.0)
            targets += _t("ttft_p50", met.get("ttft_ms_p50"), 1.0)
            targets += _t("ttft_p99", met.get("ttft_ms_p99"), 0.3)
            targets += _t("itl_p50", met.get("tpot_ms_p50"), 1.0)
            targets += _t("itl_p99", met.get("tpot_ms_p99"), 0.3)
            targets += _t("itl_mean", met.get("itl_ms_mean"), 0.5)
            load = "low" if conc <= 16 else "moderate" if conc <= 64 else "high"
        else:  # online_burst_all_at_once
            wl = Workload(isl, osl, request_rate=math.inf, length_cv=cv, num_requests=n_req)
            # KV capacity is the weakest input of these rows: trtllm-serve's pool is about half
            # the calculator's (Little's law on the bursts); the overrides are bounds/guesses
            weak_kv = fam == "trtllm-pytorch" or any(rid.startswith(p) for p in sizing.KV_OVERRIDES)
            # bursts of hundreds of requests: batch dynamics, length spread and preemption
            # dominate, so they inform the fit less than clean rows
            w = 0.2 if "untuned" in str(row.get("notes", "")) else 0.3 if weak_kv else 0.5
            if weak_kv:
                notes.append("KV capacity uncertain: down-weighted")
            targets += _t("thr", thr, w)
            targets += _t("itl_p50", met.get("tpot_ms_p50"), 0.5 * w)
            targets += _t("itl_mean", met.get("itl_ms_mean"), 0.5 * w)
            targets += _t("ttft_p50", met.get("ttft_ms_p50"), 0.0)  # queue wait: reported only
            load = "saturated"
    return Case(
        rid,
        src,
        fam,
        ver,
        arch.name,
        load,
        hardware(sizing.gpu_key(str(row["gpu"]))),
        m,
        dep,
        wl,
        tuple(targets),
        tuple(notes),
    )


def _sweep_model(text: str) -> str:
    """'Llama-3.1-8B-Instruct geometry' -> 'llama-3.1-8b' (the catalog name: same geometry)."""
    return text.split()[0].lower().removesuffix("-instruct")


def sweep_cases(doc: dict[str, Any], source: str) -> list[Case]:
    """A measured sweep (``h200-vllm-0.24.0.yaml`` format): vLLM, one GPU, closed-loop replays
    with the logged request counts, the KV capacity from each model's start-up log."""
    kv = {_sweep_model(str(s["model"])): int(s["kv_cache_tokens"]) for s in doc["startup"]}
    out: list[Case] = []
    for row in doc["serving"]:
        rid, name = str(row["id"]), _sweep_model(str(row["model"]))
        met = row["metrics"]
        isl, osl, c = (
            float(row["input_tokens"]),
            float(row["output_tokens"]),
            int(row["concurrency"]),
        )
        dep = Deployment(
            tp=1,
            max_num_batched_tokens=8192,
            max_num_seqs=1024,
            kv_capacity_tokens=kv[name],
            cudagraph_max_tokens=cudagraph_max_tokens(1024, 8192),  # the logs: 512
        )
        wl = Workload(isl, osl, concurrency=c, num_requests=int(row["num_requests"]))
        tpot = (float(met["e2e_mean_ms"]) - float(met["ttft_mean_ms"])) / (osl - 1)
        notes: list[str] = []
        itl50, itl99 = float(met["itl_p50_ms"]), float(met["itl_p99_ms"])
        if itl50 > 1.3 * tpot:
            # the client's per-chunk gap exceeds the per-token time: the server streams several
            # tokens per chunk (frontend behind); fit the per-token time from e2e instead
            notes.append(f"ITL p50 {itl50} ms is per chunk; e2e gives {tpot:.2f} ms per token")
            itl99, itl50 = itl99 * tpot / itl50, tpot
        # Llama-3.2-1B under load: every request waits ~40 ms + 1.8 ms x concurrency before its
        # first token (Little's law on the rows), with prefill steps of ~20 ms: not a GPU
        # mechanism (frontend/harness); at c >= 64 its >12k tok/s also saturate the frontend.
        # Reported, but kept from bending the GPU constants: TTFT weight 0, the rest 0.3.
        tiny = geometry(name).layers < 20
        w_ttft = 0.0 if tiny and c > 1 else 1.0
        w_rest = 0.3 if tiny and c >= 64 else 1.0
        targets = (
            _t("thr", met["output_tok_s"], w_rest)
            + _t("ttft_p50", met["ttft_p50_ms"], w_ttft)
            + _t("ttft_p99", met["ttft_p99_ms"], 0.3 * w_ttft)
            + _t("itl_p50", itl50, w_rest)
            + _t("itl_p99", itl99, 0.3 * w_rest)
        )
        load = "low" if c <= 16 else "moderate" if c <= 64 else "high"
        gpu = sizing.gpu_key(str(row["gpu"]))
        version = str(row["engine_version"])
        out.append(
            Case(
                rid,
                source,
                "vllm",
                version,
                name,
                load,
                hardware(gpu),
                geometry(name),
                dep,
                wl,
                tuple(targets),
                tuple(notes),
            )
        )
    return out


def _hits(text: str) -> frozenset[int]:
    """'0-2,5' -> {0, 1, 2, 5}."""
    out: set[int] = set()
    for part in filter(None, str(text or "").split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


@functools.cache
def _arrival_setup(
    directory: str,
    config: str,
    kv_tokens: int,
    mnbt: int,
    kv: str = "auto",
    length: int = 8192,
    serve_args: str = "",
) -> tuple[Any, ...]:
    """The product's own view of one served geometry: llmdeploy sizes the config.json on one
    H200 (p5en.48xlarge) and the vLLM plug-in says how it runs a replica (the KV cache dtype
    and max-model-len the server was started with); the KV capacity and batching limit are the
    ones the start-up log gives."""
    from llmdeploy.engines import registry
    from llmdeploy.sizing.requests import request_from_options
    from llmdeploy.sizing.suggest import size

    req = request_from_options(
        str(Path(directory) / config), instance="p5en.48xlarge", gpu=None, gpu_memory_gib=None,
        tp=1, dp=1, expert_parallel=False, quantization="none", kv_cache_dtype=kv,
        max_model_len=length, gpu_memory_utilization=0.92, engine="vllm", engine_version="0.24.0",
        pp=1, nodes=1, base_dir=Path(directory),
    )  # fmt: skip
    sz = size(req)
    run = registry.get("vllm").engine_run(sz, None)
    assert sz.instance is not None
    mnbt = mnbt or 8192
    graphs = cudagraph_max_tokens(
        sz.max_num_seqs,
        mnbt,
        enforce_eager=sz.request.enforce_eager,
        architectures=sz.request.architecture.architectures,
    )
    dep = dataclasses.replace(
        run.deployment,
        kv_capacity_tokens=kv_tokens,
        max_num_batched_tokens=mnbt,
        cudagraph_max_tokens=cudagraph_tokens_from_args(serve_args, graphs),
    )
    return inputs.hardware(sz.instance), inputs.geometry(sz.request.architecture), dep


def arrival_cases(doc: dict[str, Any], source: str, directory: Path) -> list[Case]:
    """Measured rows under an arrival pattern (``h200-vllm-0.24.0-arrivals.yaml``, written by
    scripts/gpu_ingest.py): each as the product models it, the workload of its pattern
    (perf.workloads), the prefix-cache hits the harness caused, the logged KV capacity."""
    from llmdeploy.perf import workloads

    starts = {str(s["model"]): s for s in doc["startup"]}
    out: list[Case] = []
    for row in doc["arrivals"]:
        if row.get("excluded"):  # kept in the file with the reason (a warm-up stall in the log)
            continue
        st = starts[str(row["model"])]
        hw, geo, dep = _arrival_setup(
            str(directory), str(st["config"]), int(st["kv_cache_tokens"]),
            int(st.get("max_num_batched_tokens") or 8192),
            str(st.get("kv_cache_dtype", "auto")), int(st.get("max_model_len", 8192)),
            str(st.get("serve_args", "")),
        )  # fmt: skip
        isl, osl = float(row["input_tokens"]), float(row["output_tokens"])
        arrival = row["arrival"]
        # request by request as loadgen.py ran it: its seeded lengths, gaps and stagger
        wl = workloads.loadgen(
            arrival, isl, osl, int(row["num_requests"]), concurrency=row.get("concurrency"),
            requests_per_s=row.get("request_rate"), spread=float(row["output_spread"]),
        )  # fmt: skip
        wl = dataclasses.replace(wl, cached_requests=_hits(row.get("prefix_cache_hits", "")))
        met = row["metrics"]
        # the first sweep after a server start: its throughput over all requests includes the
        # warm-up (Triton JIT compilations vLLM logs during the first requests); its latencies
        # are over the steady window, after the first C requests
        # (``warmup_stall``: a later sweep whose all-request figures show such a stall, with
        # the evidence in the row)
        thr = None if row.get("first_on_server") or row.get("warmup_stall") else met["output_tok_s"]
        targets = (
            _t("thr", thr, 1.0)
            + _t("ttft_p50", met["ttft_p50_ms"], 1.0)
            + _t("ttft_p99", met["ttft_p99_ms"], 0.3)
            + _t("itl_p50", met["itl_p50_ms"], 1.0)
            + _t("itl_p99", met["itl_p99_ms"], 0.3)
        )
        flight = float(row.get("measured_in_flight") or 0)
        load = "low" if flight <= 16 else "moderate" if flight <= 64 else "high"
        notes = (f"arrival {arrival}, {flight:g} in flight",)
        name = str(row["model"]).split()[0].lower()
        out.append(
            Case(
                str(row["id"]),
                source,
                "vllm",
                "0.24.0",
                name,
                load,
                hw,
                geo,
                dep,
                wl,
                tuple(targets),
                notes,
            )
        )
    return out


def load_cases(directory: Path = DATA) -> list[Case]:
    """Every case of the YAML files in ``directory``: ``calibration.yaml`` first, then the
    sweep files in name order."""
    directory = directory.resolve()  # a start-up's config path is relative to it
    files = sorted(directory.glob("*.yaml"), key=lambda p: (p.name != "calibration.yaml", p.name))
    cases: list[Case] = []
    for path in files:
        doc = _yaml(path)
        if isinstance(doc, list):
            cases += [published_case(row, path.stem) for row in doc]
        elif isinstance(doc, dict) and "serving" in doc:
            cases += sweep_cases(doc, path.stem)
        elif isinstance(doc, dict) and "arrivals" in doc:
            cases += arrival_cases(doc, path.stem, directory)
    return cases


METRICS = ("thr", "ttft_p50", "ttft_p99", "ttft_mean", "itl_p50", "itl_p99", "itl_mean")


def predict(case: Case, constants: Constants | None = None) -> dict[str, float]:
    """The model's prediction of every metric a case can be compared on."""
    e = estimate(case.hw, case.model, case.dep, case.workload, constants or case.constants)
    return {
        "thr": e.output_tokens_per_s,
        "ttft_p50": e.ttft_p50_ms,
        "ttft_p99": e.ttft_p99_ms,
        "ttft_mean": e.ttft_mean_ms,
        "itl_p50": e.itl_p50_ms,
        "itl_p99": e.itl_p99_ms,
        "itl_mean": e.itl_mean_ms,
    }
