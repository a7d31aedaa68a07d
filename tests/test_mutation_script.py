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
