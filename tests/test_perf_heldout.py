"""The fifth H200 lease, held out of every fit (``tests/data/perf-heldout/``; docs/performance-
model.md section 9, "The fifth lease"): what a lone request's TTFT holds beside its prefill,
stated from the measurements, and the rows kept apart from the calibration."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import yaml

from conftest import load_script

REPO = Path(__file__).resolve().parents[1]
HELDOUT = REPO / "tests" / "data" / "perf-heldout"
CAL = load_script("scripts/perf_calibration.py")
RES = json.loads((REPO / "tests" / "data" / "perf" / "fit-residuals.json").read_text())


def _rows() -> dict[str, dict[str, float]]:
    doc = yaml.safe_load((HELDOUT / "h200-vllm-0.24.0-arrivals-5.yaml").read_text())
    return {r["id"]: r["metrics"] for r in doc["arrivals"]}


def test_the_held_out_rows_load_and_no_fit_saw_them() -> None:
    held = CAL.load_cases(HELDOUT)
    # the fifth lease's 13, the sixth's 13 (its A/B rows are excluded), the seventh's and the
    # eighth's 9 each, the ninth's 10 (its three gpt-oss-20b rows are excluded), the tenth's 9
    assert len(held) == 63
    fitted = {c.id for c in CAL.load_cases()}
    assert not fitted & {c.id for c in held}


def _predicted() -> dict[str, dict[str, float]]:
    return {c.id: CAL.predict(c) for c in CAL.load_cases(HELDOUT)}


def test_a_lone_prompts_extra_prefill_steps_cost_about_a_millisecond() -> None:
    """One client, the same prompt in one 8192-token step or in 512-token steps (4 or 8): each
    extra step adds 0.7 to 1.6 ms to the TTFT beside the compute, which is the same in both
    (measured: 2048 tokens 54.4 -> 56.4 ms, 4096 tokens 106.0 -> 117.4 ms). The model charged
    every step with prompt tokens a fitted 4.4 ms until these runs (about 5.5 ms per extra
    step); it now charges such a step its graph gaps (``prefill_gpu_layer_us`` x 32 layers) and
    the admission stall only beside running decodes, so a lone prompt's extra steps cost about
    what was measured. (The server log's CUDA-graph mode, FULL_AND_PIECEWISE up to 512 tokens,
    runs the 512-token chunks piecewise and the one-step prompts without graphs.)"""
    m, pred = _rows(), _predicted()
    for tokens, steps in ((2048, 4), (4096, 8)):
        one_id = f"h200-vllm0240-m8b-{tokens}-32-closed1-n12-s5"
        chunked_id = f"h200-vllm0240-m8b-{tokens}-32-closed1-n12-b512-s5"
        per_step = (m[chunked_id]["ttft_p50_ms"] - m[one_id]["ttft_p50_ms"]) / (steps - 1)
        assert 0.5 < per_step < 2.0, (tokens, per_step)
        modelled = (pred[chunked_id]["ttft_p50"] - pred[one_id]["ttft_p50"]) / (steps - 1)
        assert 0.0 < modelled < 2.5, (tokens, modelled)


def test_a_lone_short_prompt_pays_a_fixed_latency_beside_one_step() -> None:
    """At one client a 128-token prompt's TTFT is one engine step plus the fixed latency: the
    8B's 16.2 ms is 11.4 ms beside its decode step (its ITL, 4.84 ms); the 1B's 12.8 ms, 10.6
    ms beside its 2.19 ms step: the same for 16 and 32 layers, so nothing here scales with the
    depth. The model predicts both within 20 % (no admission stall: no one else decodes)."""
    m = _rows()
    for key in ("m8b", "m1b"):
        row = m[f"h200-vllm0240-{key}-128-32-closed1-n12-s5"]
        beside = row["ttft_p50_ms"] - row["itl_p50_ms"]
        assert 9.0 < beside < 13.0, (key, beside)
        predicted = _predicted()[f"h200-vllm0240-{key}-128-32-closed1-n12-s5"]["ttft_p50"]
        assert abs(predicted / row["ttft_p50_ms"] - 1.0) < 0.2, (key, predicted)


def test_a_small_models_wave_waits_for_its_prefill_and_the_completions() -> None:
    """The 1B at 64 clients: the later waves' prompts leave over 70 to 150 ms (one completion
    after another) and their median TTFT is 100 to 170 ms, several times the replay's 57 ms."""
    path = HELDOUT / "traces" / "h200-vllm0240-m1b-512-128-closed64-s5.csv"
    rows = list(csv.DictReader(line for line in path.read_text().splitlines() if line[:1] != "#"))
    starts = [float(r["t_start_ms"]) for r in rows]
    firsts = [float(r["t_first_ms"]) for r in rows]
    for w in (1, 2, 3):
        wave = range(w * 64, (w + 1) * 64)
        spread = max(starts[i] for i in wave) - min(starts[i] for i in wave)
        ttft = sorted(firsts[i] - starts[i] for i in wave)[32]
        assert 70 < spread < 150 and 100 < ttft < 170, (w, spread, ttft)


def _sixth() -> dict[str, dict[str, float]]:
    doc = yaml.safe_load((HELDOUT / "h200-vllm-0.24.0-arrivals-6.yaml").read_text())
    return {r["id"]: r["metrics"] for r in doc["arrivals"]}


def _engine_means(key: str) -> dict[str, float]:
    """vLLM's own mean TTFT and inter-token time over all of a server's sweeps (its /metrics
    after them), in milliseconds."""
    text = (HELDOUT / "metrics" / f"{key}-s6.metrics-after.txt").read_text()
    got: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if not line.startswith("#") and name.split("{")[0].endswith(("_sum", "_count")):
            got[name.split("{")[0].removeprefix("vllm:")] = float(value)
    return {
        m: 1000.0 * got[f"{m}_seconds_sum"] / got[f"{m}_seconds_count"]
        for m in ("inter_token_latency", "time_to_first_token")
    }


def test_the_open_loops_extra_time_per_token_is_in_the_engine() -> None:
    """The 3B under Poisson arrivals: its clients' per-request ITL rises from 3.2 ms at 10
    requests/s to 8.8 ms at 40, at the same throughput as offered; vLLM's own inter-token
    time over the same sweeps (its /metrics) is within 5 % of the clients' token-weighted mean,
    so the rise is the engine's, not the API server's streaming."""
    m = _sixth()
    itl = [m[f"h200-vllm0240-l3b-512-128-poisson{r}-n{n}"]["itl_p50_ms"]
           for r, n in ((10, 200), (25, 500), (40, 800))]  # fmt: skip
    assert itl[0] < 3.5 and itl[2] > 8.0, itl
    weights = {"poisson10-n200": 200, "poisson25-n500": 500, "poisson40-n800": 800}
    weights |= {"stagger32-n128": 128, "closed32-n128": 128}
    client = sum(
        n * m[f"h200-vllm0240-l3b-512-128-{k}"]["itl_p50_ms"] for k, n in weights.items()
    ) / sum(weights.values())
    engine = _engine_means("l3b")["inter_token_latency"]
    assert abs(engine / client - 1.0) < 0.05, (engine, client)


def test_full_cuda_graphs_do_not_remove_the_stall_and_sync_scheduling_starts_sooner() -> None:
    """The 1B at 20 and 40 requests/s, served three ways. With -cc.cudagraph_mode=FULL ITL is
    not lower where the stall shows, 40 requests/s (6.39 against 3.93 ms), so the stall is not
    the switch from a full graph to graph pieces (the seventh lease found it: a step above the
    largest graph, 512 tokens, runs without graphs in either mode). With async
    scheduling off, the first token comes about 8 ms sooner at both rates (the engine's own
    TTFT over the sweeps: 21 against 29 ms), which the model's one step of lookahead (about 3
    ms) under-states."""
    m = _sixth()
    row = "h200-vllm0240-{}-512-128-poisson{}-s6"
    for rate in ("20-n400", "40-n800"):
        base, sync = m[row.format("m1b6", rate)], m[row.format("m1bsync", rate)]
        assert base["ttft_p50_ms"] - sync["ttft_p50_ms"] > 5.0, rate
    assert (
        m[row.format("m1bfull", "40-n800")]["itl_p50_ms"]
        > m[row.format("m1b6", "40-n800")]["itl_p50_ms"]
    )
    async_ttft = _engine_means("m1b6")["time_to_first_token"]
    sync_ttft = _engine_means("m1bsync")["time_to_first_token"]
    assert 5.0 < async_ttft - sync_ttft < 12.0, (async_ttft, sync_ttft)


def _seventh() -> dict[str, dict[str, float]]:
    doc = yaml.safe_load((HELDOUT / "h200-vllm-0.24.0-arrivals-7.yaml").read_text())
    return {r["id"]: r["metrics"] for r in doc["arrivals"]}


PROBE = load_script("scripts/gpu_probe_report.py")


def test_an_admission_above_the_largest_cuda_graph_costs_its_launches() -> None:
    """The seventh lease's step probe (vLLM's scheduler, every step of the engine): the 3B under
    Poisson arrivals of 40 and 25 requests/s. Served as before, every admission step (one
    512-token prompt beside running decodes: over 512 tokens) costs 13 to 17 ms beyond a decode
    step; with CUDA graphs up to 1024 tokens the same steps cost 5 ms, about the prompt's
    compute. The clients see it: ITL 6.8 against 3.9 ms and TTFT 52 against 20 ms at 40/s."""
    probes = HELDOUT / "probes"
    served = PROBE.sweeps(probes / "l3b7-s7.engine.jsonl.gz")
    graphed = PROBE.sweeps(probes / "l3bcg-s7.engine.jsonl.gz")
    assert len(served) == len(graphed) == 2  # 40/s, then 25/s (the closed loop is short)
    for a, b in zip(served, graphed, strict=True):
        assert a.above_512 == a.admissions and b.above_512 == b.admissions
        assert a.admission_ms > 12.0 and b.admission_ms < 6.0, (a, b)
        assert abs(a.decode_ms / b.decode_ms - 1.0) < 0.15  # decode steps alike
    m = _seventh()
    row = "h200-vllm0240-{}-512-128-poisson40-n800-s7"
    base, wide = m[row.format("l3b7")], m[row.format("l3bcg")]
    assert wide["itl_p50_ms"] < 0.65 * base["itl_p50_ms"]
    assert wide["ttft_p50_ms"] < 0.5 * base["ttft_p50_ms"]


def test_gpt_oss_stalls_before_new_step_sizes_above_its_largest_graph_only() -> None:
    """The ninth lease's probes (gpu_probe_report.py --stalls): gpt-oss-20b on vLLM 0.24 (MXFP4
    MoE, Triton backend) stalls over 0.5 s before most first-seen step sizes above its largest
    CUDA graph (1024 tokens) and almost never before a repeated one or one the graphs cover:
    compilation, the reason its rows are excluded. A dense model's long periods (its
    8192-token steps) come as often before repeated sizes as before new ones."""
    probes = HELDOUT / "probes"
    goss = PROBE.stalls(probes / "goss9-s9.engine.jsonl.gz", 1024)
    new_n, new_stalled = goss["new above"]
    rep_n, rep_stalled = goss["repeat above"]
    assert new_stalled / new_n > 0.7 and rep_stalled / rep_n < 0.05
    assert goss["new at/below"][1] == 0 and goss["repeat at/below"][1] == 0
    dense = PROBE.stalls(probes / "q72f8-s9.engine.jsonl.gz", 512)
    assert dense["repeat above"][1] > 0  # its big steps are slow whatever their size's history
    assert dense["new above"][1] / dense["new above"][0] < 0.2
    doc = yaml.safe_load((HELDOUT / "h200-vllm-0.24.0-arrivals-9.yaml").read_text())
    gpt_oss = [r for r in doc["arrivals"] if "-goss9-" in r["id"]]
    assert gpt_oss and all("compile" in r["excluded"] for r in gpt_oss)


def test_the_model_says_what_a_larger_cuda_graph_buys() -> None:
    """The model reads the server's largest graph (-cc.max_cudagraph_capture_size=1024) and
    predicts the 3B's ITL at 40 requests/s with graphs up to 1024 tokens within 10 %, and less
    than half of the ITL it predicts as served (no fit saw these rows). As served, the same
    configuration measured 8.9 ms in the sixth lease and 6.8 ms in the seventh (a repeat a
    day apart, other prompts); the prediction, 9.5 ms, is within 10 % of the first and 40 %
    above the second."""
    m, pred = _seventh(), _predicted()
    row = "h200-vllm0240-{}-512-128-poisson40-n800-s7"
    got, want = pred[row.format("l3bcg")]["itl_p50"], m[row.format("l3bcg")]["itl_p50_ms"]
    assert abs(got / want - 1.0) < 0.1, (got, want)
    served = pred[row.format("l3b7")]["itl_p50"]
    assert got < 0.5 * served
    sixth = _sixth()["h200-vllm0240-l3b-512-128-poisson40-n800"]["itl_p50_ms"]
    seventh = m[row.format("l3b7")]["itl_p50_ms"]
    assert seventh < 0.8 * sixth  # the repeat's spread
    assert abs(served / sixth - 1.0) < 0.1 and served / seventh - 1.0 < 0.45, (served, sixth)


def test_the_eighth_lease_is_within_half_again_of_the_cross_validation() -> None:
    """Rates and shapes no fit saw, predicted before the run (predictions/probe8-*.json): the
    shipped model's median errors on the eighth lease's rows are within 1.5 times its pooled
    cross-validation on throughput, ITL and TTFT p50 (issue 22's check on unseen runs)."""
    cases = [c for c in CAL.load_cases(HELDOUT) if c.id.endswith("-s8")]
    assert len(cases) == 9
    errors: dict[str, list[float]] = {"thr": [], "itl_p50": [], "ttft_p50": []}
    for case in cases:
        pred = CAL.predict(case)
        for t in case.targets:
            if t.metric in errors:
                errors[t.metric].append(abs(pred[t.metric] / t.value - 1.0))
    pooled = RES["cv"]["pooled"]
    for metric, key in (
        ("thr", "throughput"),
        ("itl_p50", "itl"),
        ("ttft_p50", "ttft_low_moderate"),
    ):
        got = sorted(errors[metric])[len(errors[metric]) // 2]
        assert got < 1.5 * pooled[key], (metric, got, pooled[key])


def test_a_small_models_launches_are_what_graphs_buy_back_and_a_larger_ones_hide() -> None:
    """The probes: with graphs up to 1024 tokens an admission step of the 3B costs a third of
    what it costs served as always (5 against 13 to 17 ms); Qwen3-8B's costs 80 % or more
    of it (14.9 against 16.9 ms at 40/s, 9.8 against 12.3 at 25/s): its prompt's compute hides
    most of its launches."""
    probes = HELDOUT / "probes"
    small = [PROBE.sweeps(probes / f"{k}.engine.jsonl.gz") for k in ("l3b7-s7", "l3bcg-s7")]
    large = [PROBE.sweeps(probes / f"{k}.engine.jsonl.gz") for k in ("q8b7-s7", "q8bcg-s8")]
    for served, graphed in zip(*small, strict=True):
        assert graphed.admission_ms < 0.45 * served.admission_ms
    for served, graphed in zip(*large, strict=True):
        assert 0.75 * served.admission_ms < graphed.admission_ms < served.admission_ms


def test_the_tenth_leases_fp8_admissions_were_predicted_closer_with_the_quantization_launches() -> (
    None
):
    """Both models' predictions were recorded before the tenth lease ran (tests/data/perf/
    predictions/lease10-KEY-2a39ae2.json: the model before; lease10-KEY.json: with
    ``eager_fp8_layer_us``). Where FP8 admission steps run without CUDA graphs (Llama-3-70B FP8
    with 16 staggered clients, Qwen3-30B-A3B FP8 under Poisson 20 requests/s) the model before
    was 21 to 60 % low on TTFT p50 and 6 to 39 % low on ITL p50, the new term's about half as
    far or closer; on the 16-bit controls (Llama-3.1-8B, Qwen3-32B) the two predictions are the
    same."""
    doc = yaml.safe_load((HELDOUT / "h200-vllm-0.24.0-arrivals-10.yaml").read_text())
    measured = {r["id"]: r["metrics"] for r in doc["arrivals"]}
    preds = REPO / "tests" / "data" / "perf" / "predictions"

    def predicted(key: str, name: str) -> dict[str, dict[str, float]]:
        got = json.loads((preds / name).read_text())
        return {p["sweep"]: p for p in got["models"][key]}

    for key, sweep, rid in (
        ("m70f10", "512/128/stagger:16/64", "h200-vllm0240-m70f10-512-128-stagger16-n64-s10"),
        ("mq30f10", "512/128/poisson:20/400", "h200-vllm0240-mq30f10-512-128-poisson20-n400-s10"),
    ):
        before = predicted(key, f"lease10-{key}-2a39ae2.json")[sweep]
        after = predicted(key, f"lease10-{key}.json")[sweep]
        for metric in ("ttft_p50_ms", "itl_p50_ms"):
            got = measured[rid][metric]
            err_before, err_after = before[metric] / got - 1.0, after[metric] / got - 1.0
            assert err_before < -0.04, (rid, metric, err_before)
            assert abs(err_after) < 0.6 * abs(err_before), (rid, metric, err_before, err_after)
    for key in ("m8b10", "q32b10"):
        assert predicted(key, f"lease10-{key}.json") == predicted(
            key, f"lease10-{key}-2a39ae2.json"
        )


def test_an_fp8_admission_step_costs_its_quantization_launches() -> None:
    """scripts/gpu_probe_steps.py on the two 80-layer FP8 servers' probes (Qwen2.5-72B, ninth
    lease; Llama-3-70B, tenth, predicted first): an isolated admission step of about 520 tokens
    beside a few decodes takes 1.4 to 1.5 ms a layer in all (decode step plus its cost beyond
    one), where the Llama-3.1-8B's in BF16 takes 0.5 to 0.8 ms a layer; the model's cost beyond
    a decode step is within 15 % of both FP8 measurements, and over the 8B's."""
    steps = load_script("scripts/gpu_probe_steps.py")
    models = REPO / "tests" / "data" / "perf" / "models"
    for probe, config in (
        ("q72f8-s9", HELDOUT / "models" / "q72f8" / "config.json"),
        ("m70f10-s10", models / "m70fp8" / "config.json"),
        ("m8bp-s8", models / "m8b" / "config.json"),
    ):
        path = HELDOUT / "probes" / f"{probe}.engine.jsonl.gz"
        rows = [r for r in steps.isolated_steps(path) if 513 <= r[0] <= 1024]
        assert len(rows) >= 30, probe
        layers = 32 if probe.startswith("m8b") else 80
        whole = statistics.median(r[3] + r[4] for r in rows) / layers
        line = next(x for x in steps.report(path, config) if x.startswith("513-1024"))
        measured, modelled = (float(v) for v in line.rsplit("|", 1)[1].split(","))
        if layers == 80:
            assert 1.3e-3 < whole < 1.6e-3, (probe, whole)
            assert abs(modelled / measured - 1.0) < 0.15, (probe, measured, modelled)
        else:
            assert 0.5e-3 < whole < 0.8e-3, (probe, whole)
            assert modelled > measured, (probe, measured, modelled)
