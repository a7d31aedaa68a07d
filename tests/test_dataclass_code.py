"""The dataclass methods compiled ahead of time (``llmdeploy.dataclass_code``, issue 25;
docs/performance.md, "Dataclass methods compiled ahead of time"): the table is current, every
entry is exactly the code Python compiles from its text, a render uses it and gives the same
files as without it, and a text outside it is compiled as ``dataclasses`` would."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from types import CodeType, ModuleType

import pytest

from conftest import load_script
from llmdeploy import dataclass_code, dataclass_table, dataclass_table_deps

REPO = Path(__file__).resolve().parents[1]
TABLE_FILE = str(Path(dataclass_table.__file__).resolve())


def _normalised(code: CodeType, first: int) -> CodeType:
    """``code`` as if compiled from ``<string>`` with its outer def on line 1."""
    consts = tuple(_normalised(c, first) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(
        co_filename="<string>", co_firstlineno=code.co_firstlineno - first + 1, co_consts=consts
    )


@pytest.mark.skipif(
    sys.version_info[:2] != dataclass_table.PYTHON,
    reason="the table holds the texts of the Python version that generated it",
)
def test_the_table_is_current() -> None:
    assert load_script("scripts/compile_dataclasses.py").main(["--check"]) == 0


@pytest.mark.parametrize("table", [dataclass_table, dataclass_table_deps])
def test_every_entry_is_the_code_of_its_text(table: ModuleType) -> None:
    assert len(table.TABLE) > 100
    for text, code in table.TABLE.items():
        module = compile(text, "<string>", "exec", dont_inherit=True)
        (expected,) = (c for c in module.co_consts if isinstance(c, CodeType))
        assert code.co_filename == str(Path(table.__file__).resolve())
        assert _normalised(code, code.co_firstlineno) == _normalised(expected, 1), text[:80]


def test_the_package_installs_it_and_its_classes_use_it() -> None:
    from llmdeploy.perf.types import Constants
    from llmdeploy.plan.types import Plan

    assert "exec" in vars(dataclasses)
    for cls in (Constants, Plan):
        for name in ("__init__", "__repr__", "__eq__", "__setattr__"):
            fn = getattr(cls, name)
            assert fn.__qualname__ == f"{cls.__qualname__}.{name}", (cls, name)
            fn = getattr(fn, "__wrapped__", fn)  # __repr__ is wrapped by dataclasses
            assert fn.__code__.co_filename == TABLE_FILE, (cls, name)
            assert fn.__globals__ is vars(sys.modules[cls.__module__]), (cls, name)


def test_a_text_outside_the_table_is_compiled_as_dataclasses_would() -> None:
    @dataclasses.dataclass(frozen=True)
    class Local:  # a class no table holds
        a_field_no_class_has: int
        other: str = "x"

    v = Local(1)
    assert (
        v == Local(1, "x")
        and hash(v) == hash(Local(1))
        and repr(v).endswith("(a_field_no_class_has=1, other='x')")
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.other = "y"  # type: ignore[misc]
    # no future flags leak from llmdeploy.dataclass_code: the annotations stay objects
    assert Local.__init__.__annotations__["a_field_no_class_has"] == "int"  # this module's
    assert Local.__init__.__code__.co_filename == "<string>"
    exec_ = dataclass_code._exec_with({})
    ns: dict[str, object] = {}
    exec_("def f(x: int): return x", {}, ns)
    assert ns["f"].__annotations__ == {"x": int}  # type: ignore[attr-defined]


def test_a_render_is_the_same_without_it(tmp_path: Path) -> None:
    """The preset streamed with the table and with ``LLMDEPLOY_DATACLASS_TABLE=0``."""
    outs = []
    for flag in ("1", "0"):
        env = dict(os.environ, LLMDEPLOY_DATACLASS_TABLE=flag)
        outs.append(
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "llmdeploy",
                    "render",
                    "--preset",
                    "mixtral-8x7b-vllm-p4de",
                    "-o",
                    "-",
                ],
                env=env,
                capture_output=True,
                text=True,
                cwd=tmp_path,
                check=True,
            ).stdout
        )
    assert outs[0] == outs[1] and "kind: NodePool" in outs[0]


def test_it_can_be_turned_off() -> None:
    code = (
        "import dataclasses, llmdeploy.perf.types as t;"
        "print('exec' in vars(dataclasses), t.Constants.__init__.__code__.co_filename)"
    )
    env = dict(os.environ, LLMDEPLOY_DATACLASS_TABLE="0")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "<string>"]


def test_the_dependencies_classes_use_their_table_when_imported_after_the_package() -> None:
    code = (
        "import llmdeploy, annotated_types, llmdeploy.dataclass_table_deps as d;"
        "print(annotated_types.Gt.__init__.__code__.co_filename == d.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["True"]
