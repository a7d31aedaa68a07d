"""The two start-up caches that ship in the package (docs/performance.md):

* ``llmdeploy/compiled_templates.json`` (``scripts/compile_templates.py``): Jinja's Python code
  for every template, used only for an unchanged template source under the same Jinja version
  and environment options;
* ``llmdeploy/check/crd_schemas/cel_rules.json`` (``scripts/bundle_crds.py``): the parse tree of
  every CEL rule in the bundled CRD schemas, used only under the same Lark and cel-python parser.

Each is checked for drift, is actually used by a render, and gives exactly what compiling or
parsing from source gives; a stale or foreign entry is ignored, never trusted.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jinja2
import lark
import pytest

from conftest import load_script
from llmdeploy import pipeline, render
from llmdeploy.check import cel
from llmdeploy.spec import load

REPO = Path(__file__).resolve().parents[1]
CEL_RULES = REPO / "src" / "llmdeploy" / "check" / "crd_schemas" / "cel_rules.json"
PRESET = "llama3-70b-trtllm-int4awq-p4d"  # renders engine templates too


def rendered_files(preset: str) -> dict[str, str]:
    path = pipeline.preset_path(preset)
    assert path is not None
    result = pipeline.render_loaded(load.load_spec_file(path), header_command="t", crds=None)
    return dict(result.files)


# --- templates ---------------------------------------------------------------------------------


def test_compiled_templates_are_current() -> None:
    assert load_script("scripts/compile_templates.py").main(["--check"]) == 0


def test_every_template_has_valid_precompiled_code() -> None:
    env = render.environment()
    entries = render._compiled(render.compile_key(env))
    names = env.list_templates()
    assert len(names) >= 20 and set(entries) == set(names)
    for name in names:
        source, _, _ = env.loader.get_source(env, name)
        assert entries[name]["sha256"] == render.source_digest(source), name


@pytest.mark.parametrize("preset", pipeline.preset_names())
def test_precompiled_and_source_templates_render_the_same(
    preset: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    precompiled = rendered_files(preset)
    compiled_from_source: list[str] = []
    real_compile = jinja2.Environment.compile

    def counting(self: jinja2.Environment, source: str, name: Any = None, *a: Any) -> Any:
        compiled_from_source.append(name)
        return real_compile(self, source, name, *a)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    fresh_environment(monkeypatch)
    assert rendered_files(preset) == precompiled
    assert compiled_from_source == []  # every template came from the cache
    monkeypatch.setattr(render, "_compiled", lambda key: {})
    fresh_environment(monkeypatch)
    assert rendered_files(preset) == precompiled
    assert len(compiled_from_source) >= 8


def test_a_changed_template_is_compiled_from_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry whose sha256 is not the source's (a template edited since) is not used."""
    real = render._compiled(render.compile_key(render.environment()))
    wrong = {
        name: {"sha256": "0" * 64, "code": real["k8s/service.yaml.j2"]["code"]} for name in real
    }
    expected = rendered_files(PRESET)
    monkeypatch.setattr(render, "_compiled", lambda key: wrong)
    fresh_environment(monkeypatch)
    assert rendered_files(PRESET) == expected


def test_another_jinja_or_other_options_ignore_the_cache() -> None:
    key = render.compile_key(render.environment())
    assert render._compiled(key)
    assert render._compiled(key.replace(jinja2.__version__, "0.0.0", 1)) == {}
    other = jinja2.Environment(trim_blocks=False)
    assert render.compile_key(other) != key


BUILD_ENVIRONMENT = render.environment.__wrapped__  # type: ignore[attr-defined]


def fresh_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new render environment (its template cache empty), for this test only."""
    monkeypatch.setattr(render, "environment", functools.cache(BUILD_ENVIRONMENT))


# --- CEL parse trees ---------------------------------------------------------------------------


def test_cel_parse_trees_are_current() -> None:
    files = {
        p.name: p.read_text(encoding="utf-8")
        for p in CEL_RULES.parent.glob("*.json")
        if p.name != CEL_RULES.name
    }
    expected = load_script("scripts/bundle_crds.py").cel_rules_file(files)
    current = CEL_RULES.read_text(encoding="utf-8")
    assert current == expected, "stale; run: python scripts/bundle_crds.py --cel"


def same_tree(a: Any, b: Any) -> bool:
    if isinstance(a, lark.Token) or isinstance(b, lark.Token):
        token = (type(a), a.type, str(a), a.line, a.column)
        return token == (type(b), b.type, str(b), b.line, b.column)
    return (
        (a.data.type, str(a.data)) == (b.data.type, str(b.data))
        and (a.meta.empty, getattr(a.meta, "line", None), getattr(a.meta, "column", None))
        == (b.meta.empty, getattr(b.meta, "line", None), getattr(b.meta, "column", None))
        and len(a.children) == len(b.children)
        and all(same_tree(x, y) for x, y in zip(a.children, b.children, strict=True))
    )


def test_cel_parse_trees_equal_what_the_parser_gives() -> None:
    data = json.loads(CEL_RULES.read_text(encoding="utf-8"))
    assert data["parser"] == cel.parser_identity()
    trees = data["rules"]
    assert len(trees) >= 60
    for rule, tree in trees.items():
        if isinstance(tree, dict):
            with pytest.raises(Exception, match=""):
                cel.parse_rule(rule)
            continue
        assert same_tree(cel.tree_from_json(tree), cel.parse_rule(rule)), rule


def test_a_render_does_not_build_the_cel_parser() -> None:
    """In a fresh process: a render validates custom kinds without building cel-python's parser
    (the bundled trees are used), and a rule that is not in the bundle is still parsed."""
    code = """if True:
        from celpy.celparser import CELParser
        from llmdeploy import pipeline
        from llmdeploy.check import bundled, cel
        from llmdeploy.spec import load
        preset = pipeline.preset_path("llama3-70b-vllm-p4d")
        result = pipeline.render_loaded(
            load.load_spec_file(preset), header_command="t", crds=bundled.bundled_registry()
        )
        assert result.report.ok and any(r.crd for r in result.report.results)
        print(type(CELParser.CEL_PARSER).__name__)
        program = cel.compile_rule("self.size() > 2")
        print(type(CELParser.CEL_PARSER).__name__, cel.evaluate(program, cel.to_cel("abc", {})))
    """
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines() == ["_ParserOnFirstUse", "Lark ('pass', '')"]


def test_another_parser_ignores_the_trees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel, "parser_identity", lambda: "lark 0.0.0, cel-python parser x")
    assert cel._bundled_trees.__wrapped__() == {}  # type: ignore[attr-defined]
