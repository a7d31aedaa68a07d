"""The fast verdicts of the load searches (perf/fast.py) against the simulation they stand in
for: the same verdict of every preset and golden spec with and without them, every probe
they decide decided as the simulation decides it, and their estimate and floor within the
stated range of the simulation's figures, on the presets' configurations and on generated
ones. This is the guard for changes to the simulation's mechanisms: a new step-cost term
moves both sides (the fast path calls the same ``StepModel.step``); a new scheduling
mechanism that moves the simulation's p99 ITL out of the stated range fails here."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmdeploy import pipeline
from llmdeploy.catalog import ec2
from llmdeploy.catalog.models import load_architecture
from llmdeploy.engines.trtllm.perf_constants import CONSTANTS as TRTLLM_ROWS
from llmdeploy.engines.vllm.perf_constants import CONSTANTS as VLLM_ROWS
from llmdeploy.perf import api, fast, inputs, sim, workloads
from llmdeploy.perf.api import _constants, sim_input
from llmdeploy.perf.sim_state import SimInput
from llmdeploy.perf.step import StepModel, build_step_model
from llmdeploy.perf.types import Constants, Deployment, Hardware, ModelGeometry
from llmdeploy.spec.load import load_spec_file
from test_perf_hand import FLAT  # every step 10 ms, whatever it carries

REPO = Path(__file__).resolve().parents[1]
SPECS = sorted(REPO.glob("presets/*.yaml")) + sorted(REPO.glob("tests/golden/*/spec.yaml"))
INF = math.inf

Search = tuple[Hardware, ModelGeometry, Deployment, float, float, Constants, float, float, int]


def _searches(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Search]]:
    """The spec's performance verdict, with the simulation only, and the searches it ran."""
    seen: list[Search] = []
    real = api.max_concurrency_meeting

    def spy(hw: Any, m: Any, dep: Any, i: Any, o: Any, ttft: Any, itl: Any, c: Any, **kw: Any):  # type: ignore[no-untyped-def]
        m_ttft, m_itl = kw["margins"]
        t_lim = INF if ttft is None else ttft / (1 + m_ttft)
        i_lim = INF if itl is None else itl / (1 + m_itl)
        seen.append((hw, m, dep, i, o, c, t_lim, i_lim, kw["cap"]))
        return real(hw, m, dep, i, o, ttft, itl, c, **kw)

    with monkeypatch.context() as patch:
        patch.setattr(api, "max_concurrency_meeting", spy)
        patch.setattr(api, "FAST_VERDICTS", False)
        api.estimate.cache_clear()
        perf = pipeline.size_loaded(load_spec_file(path), performance=True).performance
    return perf, seen


def _name(path: Path) -> str:
    return path.parent.name if path.name == "spec.yaml" else path.stem


@pytest.mark.parametrize("path", SPECS, ids=_name)
def test_every_preset_and_golden_spec_gets_the_same_verdict_with_the_fast_path(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replicas, the concurrency meeting the SLO, the estimate, the targets, the queue
    threshold: the whole Performance is equal, the fast path on or off."""
    slow, searches = _searches(path, monkeypatch)
    api.estimate.cache_clear()
    assert api.FAST_VERDICTS
    quick = pipeline.size_loaded(load_spec_file(path), performance=True).performance
    assert quick == slow
    for search in searches:  # and every probe the searches could make, decided or not
        _check_probes(*search)


def _check_probes(
    hw: Hardware, m: ModelGeometry, dep: Deployment, i: float, o: float, c: Constants,
    t_lim: float, i_lim: float, cap: int,
) -> None:  # fmt: skip
    cc = _constants(dep, c)
    sm = build_step_model(hw, m, dep, cc)
    for conc in sorted({1, 2, 3, *range(4, cap + 1, max(1, cap // 12)), cap}):
        load = workloads.workload("steady", i, o, concurrency=conc)
        _check_point(sm, sim_input(dep, load, cc), api.estimate(hw, m, dep, load, c), t_lim, i_lim)


def _check_point(sm: StepModel, si: Any, e: Any, t_lim: float, i_lim: float) -> None:
    point = fast.steady_point(sm, si)
    if point is None:
        assert fast.decide(sm, si, t_lim, i_lim) is None
        return
    where = f"c={si.concurrency} i={si.input_tokens} o={si.output_tokens}"
    if point.itl_p99_ms is not None:
        ratio = e.itl_p99_ms / point.itl_p99_ms
        assert 1 - fast.ITL_BELOW <= ratio <= 1 + fast.ITL_ABOVE, (where, ratio)
    assert point.ttft_floor_ms <= e.ttft_p99_ms, where
    # at the spec's limits and at limits placed just around the simulation's own figures
    limits = [(t_lim, i_lim)]
    for ft in (0.5, 0.99, 1.01, 2.0, INF):
        for fi in (0.9, 0.99, 1.01, 1.1, INF):
            limits.append((e.ttft_p99_ms * ft, e.itl_p99_ms * fi))
    for lt, li in limits:
        known = fast.decide(sm, si, lt, li)
        truth = e.ttft_p99_ms <= lt and e.itl_p99_ms <= li
        assert known is None or known == truth, (where, lt, li, e.ttft_p99_ms, e.itl_p99_ms)


def test_the_fast_path_decides_probes_of_the_presets_searches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not a path that never fires: of the presets' simulated probes, some are decided."""
    calls = {"simulated": 0}
    real = sim.simulate

    def counting(sm: Any, si: Any) -> Any:
        calls["simulated"] += 1
        return real(sm, si)

    monkeypatch.setattr(api, "simulate", counting)
    counts = {}
    for flag in (False, True):
        monkeypatch.setattr(api, "FAST_VERDICTS", flag)
        api.estimate.cache_clear()
        calls["simulated"] = 0
        for name in ("llama3-70b-vllm-p4d", "llama3-8b-vllm-g6e", "llama33-70b-vllm-fp8-p5"):
            spec = load_spec_file(REPO / "presets" / f"{name}.yaml")
            pipeline.size_loaded(spec, performance=True)
        counts[flag] = calls["simulated"]
    assert counts[False] == 39  # 11 + 13 + 15 load points
    assert counts[True] == 34  # 1, 2 and 2 of them decided without simulating


# --- hand-computed ---------------------------------------------------------------------------


def _si(**kw: Any) -> Any:
    base: dict[str, Any] = dict(
        input_tokens=100.0, output_tokens=101.0, length_cv=0.0, concurrency=1, request_rate=None,
        num_requests=None, max_num_batched_tokens=200, max_num_seqs=64,
        kv_capacity_tokens=1_000_000, reserve_kv=False, pre_engine_s=0.0, output_spread=0.5,
    )  # fmt: skip
    base.update(kw)
    return SimInput(**base)


def test_a_flat_step_gives_every_token_one_step_and_a_floor_from_littles_law() -> None:
    # Every step 10 ms whatever it holds: adding a prompt chunk costs nothing (d_k - d0 = 0),
    # so T = d0 = 10 ms at any concurrency
    for c in (1, 8, 64):
        point = fast.steady_point(FLAT, _si(concurrency=c))
        assert point is not None and point.itl_p99_ms == pytest.approx(10.0)
    # 64 clients, but the KV cache holds 2,000 tokens = 20 prompts of 100: 44 wait. A request
    # decodes o - 1 = 100 steps of >= 10 ms, so at most 20 / 1 s finish per second and the
    # 44 outside spend >= 44 / 20 = 2.2 s each; the floor takes 0.8 of it: 1760 ms. (The KV
    # cache may bind: no ITL estimate.)
    point = fast.steady_point(FLAT, _si(concurrency=64, kv_capacity_tokens=2_000))
    assert point is not None and point.itl_p99_ms is None
    assert point.ttft_floor_ms == pytest.approx(1760.0)
    # it decides a miss against a TTFT target of 1.5 s, and leaves 2 s to the simulation
    assert fast.decide(FLAT, _si(concurrency=64, kv_capacity_tokens=2_000), 1500.0, INF) is False
    assert fast.decide(FLAT, _si(concurrency=64, kv_capacity_tokens=2_000), 2000.0, INF) is None


def test_decisions_follow_the_stated_range() -> None:
    si = _si(concurrency=8)  # T = 10 ms
    assert fast.decide(FLAT, si, INF, 10.0 * (1 - fast.ITL_BELOW) - 0.01) is False
    assert fast.decide(FLAT, si, INF, 10.0) is None  # inside the range: simulate
    assert fast.decide(FLAT, si, INF, 10.0 * (1 + fast.ITL_ABOVE) + 0.01) is True
    # a pass needs the TTFT too, which only the simulation knows
    assert fast.decide(FLAT, si, 10_000.0, 100.0) is None
    assert fast.decide(FLAT, si, 10_000.0, 5.0) is False  # a miss on ITL is a miss


def test_loads_the_estimate_does_not_cover_are_left_to_the_simulation() -> None:
    for si in (
        _si(concurrency=None, request_rate=5.0),  # open loop
        _si(concurrency=8, num_requests=32),  # a benchmark replay
        _si(concurrency=8, cached_requests=frozenset({3})),  # prompt cache hits
        _si(concurrency=8, length_cv=1.0),  # Weibull lengths
    ):
        assert fast.steady_point(FLAT, si) is None
    dp = dataclasses.replace(FLAT, ranks=2)  # data-parallel ranks stepping together
    assert fast.steady_point(dp, _si(concurrency=8)) is None
    # the KV cache may bind (64 x (100 + 152 + 1) + 200 > 15,000 tokens): no estimate, and no
    # floor while the engine holds every client (min(64 sequences, 15,000 / 100 prompts))
    assert fast.steady_point(FLAT, _si(concurrency=64, kv_capacity_tokens=15_000)) == (
        fast.FastPoint(None, 0.0)
    )
    # one client beyond the 64 sequences: it waits for one of 64 slots that each free after
    # 100 steps of 10 ms, 1 s / 64 = 15.6 ms, taken at 0.8: 12.5 ms
    assert fast.steady_point(FLAT, _si(concurrency=65)) == fast.FastPoint(None, 12.5)


# --- generated configurations ----------------------------------------------------------------

INSTANCES = ("g6e.xlarge", "g6e.12xlarge", "g5.12xlarge", "p4d.24xlarge", "p5.48xlarge")
ARCHITECTURES = ("llama-3-8b", "qwen3-32b", "llama-3-70b", "mixtral-8x7b", "gpt-oss-20b")
ROWS = tuple(row[3] for row in (*VLLM_ROWS, *TRTLLM_ROWS))


@st.composite
def _configurations(draw: Any) -> tuple[Hardware, ModelGeometry, Deployment, Constants]:
    inst = ec2.instance(draw(st.sampled_from(INSTANCES)))
    assert inst is not None
    geo = inputs.geometry(load_architecture(draw(st.sampled_from(ARCHITECTURES))))
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if t <= inst.gpu_count]))
    fp8 = draw(st.booleans())
    dep = Deployment(
        tp=tp,
        weight_bytes_dense=1.0 if fp8 else 2.0,
        weight_bytes_expert=1.0 if fp8 else 2.0,
        gemm_dtype="fp8" if fp8 else "bf16",
        max_num_batched_tokens=draw(st.sampled_from([512, 2048, 8192])),
        max_num_seqs=draw(st.sampled_from([16, 64, 256, 1024])),
        kv_capacity_tokens=int(10 ** draw(st.floats(3.7, 6.3))),
        kv_admission=draw(st.sampled_from(["optimistic", "reserve"])),
        async_scheduling=draw(st.sampled_from([None, True, False])),
    )
    return inputs.hardware(inst), geo, dep, draw(st.sampled_from(ROWS))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _configurations(),
    st.integers(16, 4096),
    st.integers(8, 512),
    st.integers(1, 128),
)
def test_generated_configurations_get_the_simulations_verdicts(
    config: tuple[Hardware, ModelGeometry, Deployment, Constants], i: int, o: int, conc: int
) -> None:
    hw, m, dep, c = config
    cc = _constants(dep, c)
    sm = build_step_model(hw, m, dep, cc)
    load = workloads.workload("steady", float(i), float(o), concurrency=conc)
    e = api.estimate(hw, m, dep, load, c)
    if not math.isfinite(e.itl_p99_ms):
        return  # a prompt larger than the cache: nothing to compare
    _check_point(sm, sim_input(dep, load, cc), e, INF, INF)


def _steps(sm: StepModel) -> Iterator[tuple[float, float, float]]:
    for n in (1.0, 2.0, 16.0, 128.0):
        for ctx in (n * 16, n * 1024, n * 8192):
            yield n, ctx, sm.step(n, ctx)


def test_the_floor_rests_on_a_step_that_grows_with_its_batch_and_context() -> None:
    """The TTFT floor takes step(1, prompt) as the least a decode step costs: true while the
    step cost grows with the decoding sequences and their context, which this checks for
    every engine's constants on a dense, an MoE and a sliding-window model."""
    for arch in ("llama-3-70b", "mixtral-8x7b", "gpt-oss-20b"):
        for c in ROWS:
            for interconnect_tp in (1, 4):
                inst = ec2.instance("p4d.24xlarge")
                assert inst is not None
                dep = Deployment(tp=interconnect_tp)
                sm = build_step_model(
                    inputs.hardware(inst), inputs.geometry(load_architecture(arch)), dep, c
                )
                seen = list(_steps(sm))
                for n, ctx, t in seen:
                    assert t >= sm.step(1.0, min(ctx, 16.0)) - 1e-15
                    assert all(t2 >= t - 1e-15 for n2, ctx2, t2 in seen if n2 >= n and ctx2 >= ctx)
