"""scripts/mutation.py's groups name files that exist, and its mutmut configuration reads back.

The script itself (mutmut on a copy of the repository) is too slow for the suite; this keeps it
runnable when a module or a test file is renamed.
"""

from __future__ import annotations

import configparser
from pathlib import Path

from conftest import load_script

REPO = Path(__file__).resolve().parents[1]
MUTATION = load_script("scripts/mutation.py")


def test_every_group_mutates_and_tests_files_that_exist() -> None:
    for group in MUTATION.GROUPS:
        for pattern in group.mutate:
            assert any(p.suffix == ".py" for p in REPO.glob(pattern)), (group.name, pattern)
        for test in group.tests:
            assert (REPO / test).is_file(), (group.name, test)


def test_the_written_configuration_is_what_mutmut_reads() -> None:
    budgets = next(g for g in MUTATION.GROUPS if g.name == "budgets")
    parser = configparser.ConfigParser()
    parser.read_string(MUTATION._config(budgets))
    section = parser["mutmut"]
    lines = {key: [v for v in section[key].split("\n") if v] for key in section}
    assert lines["only_mutate"] == list(budgets.mutate)
    assert lines["pytest_add_cli_args_test_selection"] == list(budgets.tests)
    assert "templates" in lines["also_copy"]  # rendering tests need the templates in the copy


def test_the_wilson_interval_by_hand() -> None:
    # 8 of 10, z = 1.96: centre (0.8 + 1.96^2 / 20) / (1 + 1.96^2 / 10) = 0.71674, half-width
    # 1.96 sqrt(0.8 x 0.2 / 10 + 1.96^2 / 400) / 1.38415 = 0.22658: 49.0 % to 94.3 %
    low, high = MUTATION.wilson(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    # all 10 killed: the upper end is 100 %, the lower 10 / (10 + 1.96^2) = 72.2 %
    low, high = MUTATION.wilson(10, 10)
    assert round(low, 3) == 0.722 and round(high, 9) == 1.0
    assert MUTATION.wilson(0, 0) == (0.0, 1.0)  # nothing tested: nothing known


def test_a_sample_is_the_same_for_the_same_names_and_seed() -> None:
    names = [f"llmdeploy.perf.step.x_f__mutmut_{i}" for i in range(1, 500)]
    drawn = MUTATION.sample(names, 150, seed=22)
    assert len(drawn) == 150 and set(drawn) <= set(names) and drawn == sorted(drawn)
    assert MUTATION.sample(list(reversed(names)), 150, seed=22) == drawn  # mutmut's order
    assert MUTATION.sample(names, 150, seed=23) != drawn
    assert MUTATION.sample(names[:10], 150, seed=22) == sorted(names[:10])  # all there are


def test_the_timeout_multiplier_reaches_mutmut() -> None:
    perf = next(g for g in MUTATION.GROUPS if g.name == "perf")
    parser = configparser.ConfigParser()
    parser.read_string(MUTATION._config(perf, 2.0))
    assert parser["mutmut"]["timeout_multiplier"] == "2.0"
    parser = configparser.ConfigParser()
    parser.read_string(MUTATION._config(perf))
    assert "timeout_multiplier" not in parser["mutmut"]  # mutmut's default
    assert parser["mutmut"]["process_isolation"] == "fork"


def test_forkserver_isolation_reaches_mutmut() -> None:
    # the perf stage memoizes estimates (perf/api.py lru_cache): forked from the process that
    # ran the clean tests, a mutant behind the memo sees the unmutated results
    perf = next(g for g in MUTATION.GROUPS if g.name == "perf")
    parser = configparser.ConfigParser()
    parser.read_string(MUTATION._config(perf, isolation="forkserver"))
    assert parser["mutmut"]["process_isolation"] == "forkserver"
