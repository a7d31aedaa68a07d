"""The grouped uncertainty (issue 22 item 6): the shipped block of perf/uncertainty.py is what
scripts/perf_uncertainty.py writes from the stored cross-validation, and an open loop states
its capacity's throughput error (docs/performance-model.md, section 7)."""

from __future__ import annotations

import json

from conftest import load_script
from llmdeploy.perf.uncertainty import GROUPS

UNC = load_script("scripts/perf_uncertainty.py")
FIT = UNC.perf_fit
RES = UNC.res


def test_the_shipped_grouped_block_is_what_the_script_writes() -> None:
    stored = json.loads(RES.RESIDUALS.read_text())
    grouped = UNC.groups(stored["cv"]["rows"], UNC.cal.load_cases())
    written = FIT.replace_block(
        FIT.UNCERTAINTY_FILE.read_text(),
        "GROUPED UNCERTAINTY",
        UNC.block(grouped, "leave-one-group-out CV", stored["uncertainty"]),
    )
    assert written == FIT.UNCERTAINTY_FILE.read_text()


def _row(rid: str, metric: str, err: float) -> dict[str, object]:
    return {"id": rid, "metric": metric, "rel_err": err, "weight": 1.0, "load": "low"}


POOLED = {
    f"{m}_{q}": v for m in ("throughput", "itl", "ttft") for q, v in (("median", 0.5), ("p90", 0.9))
}


def test_an_open_loop_takes_its_capacitys_throughput_error_and_keeps_its_latencies() -> None:
    # three Poisson rows whose throughput the replay gets exactly (0) and whose ITL is 10 %
    # off; three steady rows 4 %, 6 % and 8 % off on throughput: the Poisson group states the
    # steady group's throughput median, 6 %, and its own ITL median, 10 %
    poisson = [_row(f"p{i}", m, e) for i in range(3) for m, e in (("thr", 0.0), ("itl_p50", 0.1))]
    steady = [_row(f"s{i}", "thr", e) for i, e in enumerate((0.04, 0.06, 0.08))]
    grouped = {("vllm", "Hopper", "poisson"): poisson, ("vllm", "Hopper", "steady"): steady}
    u = UNC.figures(grouped, ("vllm", "Hopper", "poisson"), POOLED)
    assert (
        u["throughput_median"]
        == UNC.figures(grouped, ("vllm", "Hopper", "steady"), POOLED)["throughput_median"]
    )
    assert abs(u["throughput_median"] - 0.06) < 1e-9 and abs(u["itl_median"] - 0.1) < 1e-9
    # without a steady group of the same family and GPU: the pooled figure, not the 0
    alone = {("vllm", "Hopper", "poisson"): poisson}
    assert UNC.figures(alone, ("vllm", "Hopper", "poisson"), POOLED)["throughput_median"] == 0.5


def test_the_shipped_poisson_group_states_the_steady_groups_throughput() -> None:
    for (family, arch, arrival), u in GROUPS.items():
        steady = GROUPS.get((family, arch, "steady"))
        if arrival == "poisson" and steady is not None:
            assert u.throughput_median == steady.throughput_median
            assert u.throughput_p90 == steady.throughput_p90
