"""The start-up cache that ships in the package (docs/performance.md):
the package ``llmdeploy.compiled_templates`` (``scripts/compile_templates.py``), Jinja's Python
module for every template, imported (from cached bytecode) only for an unchanged template source
under the same Jinja version and environment options. It is checked for drift, is actually used
by a render, and gives exactly what compiling from source gives; a stale or foreign entry is
ignored, never trusted. (The CEL parse trees of cel-python went with cel-python, issue 25:
cel-expr-python compiles a rule in about half a millisecond.)
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
import pytest

from conftest import load_script
from llmdeploy import pipeline, render
from llmdeploy.spec import load

REPO = Path(__file__).resolve().parents[1]
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
        name: {"sha256": "0" * 64, "module": real["k8s/service.yaml.j2"]["module"]} for name in real
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
