"""The render stage: fill Jinja templates from a plan. No decisions, no arithmetic.

One Jinja ``Environment`` for the whole process, built lazily in one place: StrictUndefined,
keep_trailing_newline, trim/lstrip blocks, autoescape off, no globals. Every user-provided
scalar goes through the ``yq`` filter (a JSON-encoded string is a valid YAML double-quoted
scalar, so a value with ``:``, ``yes``, ``1e3``, a newline or ``{{`` stays the same string) and
every shell word through ``sq`` (``shlex.quote``).

Compiling the templates (Jinja source to Python, then Python to bytecode) costs ~70 ms, every
process. So the package ``llmdeploy.compiled_templates`` ships the Python module Jinja generates
for each template (its ``ModuleLoader`` form), written by ``scripts/compile_templates.py``, which
Python imports from its cached bytecode like any module; a template's module is used only when
its source is unchanged (sha256), under the Jinja version and environment options that compiled
it. Anything else, a template edited since, or a third engine's, is compiled from source as
before.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import re
import shlex
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from llmdeploy.engines import registry

if TYPE_CHECKING:
    from llmdeploy.plan.types import Plan, TemplateText


def templates_dir() -> Path:
    """The shared Kubernetes templates: ``templates/`` inside the installed wheel, or at the top
    of a source checkout. Engines' own templates live in ``engines/<name>/templates/`` and are
    named ``<name>/<file>``."""
    here = Path(__file__).resolve().parent
    packaged = here / "templates"
    if packaged.is_dir():
        return packaged
    return here.parents[1] / "templates"


# Characters a YAML parser would fold, refuse or read as a line break inside a double-quoted
# scalar: C1 controls and DEL, NEL, the Unicode line/paragraph separators, BOM, non-characters
# and lone surrogates. They are written as \uXXXX escapes, which YAML reads back exactly.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def yaml_quote(value: object) -> str:
    """Render a scalar as YAML that parses back to exactly the same value."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return json.dumps(value)
    text = json.dumps(str(value), ensure_ascii=False)
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def shell_quote(value: object) -> str:
    return shlex.quote(str(value))


def to_json(value: Any) -> str:
    """Compact JSON (a YAML flow collection) with stable key order."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def source_loader() -> jinja2.BaseLoader:
    """Where the templates' sources are: the shared ones, then each engine's under its name."""
    return jinja2.ChoiceLoader(
        [
            jinja2.FileSystemLoader(str(templates_dir())),
            jinja2.PrefixLoader(
                {
                    name: jinja2.FileSystemLoader(str(folder))
                    for name, folder in registry.template_dirs().items()
                }
            ),
        ]
    )


COMPILED = "compiled_templates"  # the package of precompiled template modules


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def compile_key(env: jinja2.Environment) -> str:
    """What Jinja's generated code depends on besides the source: its version and the options."""
    options = (
        env.block_start_string,
        env.block_end_string,
        env.variable_start_string,
        env.variable_end_string,
        env.comment_start_string,
        env.comment_end_string,
        env.line_statement_prefix,
        env.line_comment_prefix,
        env.trim_blocks,
        env.lstrip_blocks,
        env.newline_sequence,
        env.keep_trailing_newline,
        env.optimized,
        env.undefined.__name__,
        sorted(env.extensions),
    )
    return f"jinja2 {jinja2.__version__} {json.dumps(options)}"


class _PrecompiledLoader(jinja2.BaseLoader):
    """Reads each template's source, and uses its precompiled code when that is still valid."""

    def __init__(self, source: jinja2.BaseLoader) -> None:
        self.source = source

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str | None, Callable[[], bool] | None]:
        return self.source.get_source(environment, template)

    def list_templates(self) -> list[str]:
        return self.source.list_templates()

    def load(
        self,
        environment: jinja2.Environment,
        name: str,
        globals: MutableMapping[str, Any] | None = None,
    ) -> jinja2.Template:
        source, filename, uptodate = self.get_source(environment, name)
        entry = _compiled(compile_key(environment)).get(name)
        if entry is not None and entry["sha256"] == source_digest(source):
            module = importlib.import_module(f"llmdeploy.{COMPILED}.{entry['module']}")
            return environment.template_class.from_module_dict(
                environment, module.__dict__, environment.make_globals(globals)
            )
        code = environment.compile(source, name, filename)
        return environment.template_class.from_code(
            environment, code, environment.make_globals(globals), uptodate
        )


@functools.cache
def _compiled(key: str) -> Mapping[str, Any]:
    """Template name -> {"sha256", "module"}, when written under the same ``compile_key``."""
    index = importlib.import_module(f"llmdeploy.{COMPILED}")
    templates: Mapping[str, Any] = index.TEMPLATES if key == index.COMPILE_KEY else {}
    return templates


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=_PrecompiledLoader(source_loader()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,
        cache_size=-1,
    )
    env.filters["yq"] = yaml_quote
    env.filters["sq"] = shell_quote
    env.filters["json"] = to_json
    return env


def render_template(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


def render_text(text: TemplateText) -> str:
    """A file or ConfigMap value the plan describes as a template and its context."""
    return render_template(text.template, **dict(text.context))


# --- rendering a plan -------------------------------------------------------------------------

HEADER = "# Generated by llmdeploy from {source}. Do not edit by hand.\n# Regenerate: {command}\n"


def header(source: str, command: str) -> str:
    # Any line break (\n, \r, NEL, U+2028...) in a user-controlled part would end the comment
    # and start YAML: every non-printable character becomes "?".
    def flat(text: str) -> str:
        return "".join(ch if ch.isprintable() else "?" for ch in text)

    return HEADER.format(source=flat(source), command=flat(command))


def render_plan(plan: Plan, source: str) -> tuple[tuple[str, str], ...]:
    """Render every object of a plan: ((filename, text), ...) in the plan's fixed order,
    followed by extra files and a kustomization.yaml listing the manifests."""
    from llmdeploy.plan.types import KV

    head = header(source, plan.header_command)
    config_map_data = tuple(KV(e.key, render_text(e.content)) for e in plan.config_map_data)
    out: list[tuple[str, str]] = []
    for res in plan.resources:
        text = render_template(res.template, plan=plan, res=res, config_map_data=config_map_data)
        out.append((res.filename, head + text))
    files = [name for name, _ in out]
    out.append(
        ("kustomization.yaml", head + render_template("k8s/kustomization.yaml.j2", files=files))
    )
    for extra in plan.extra_files:
        out.append((extra.filename, render_text(extra.content)))
    return tuple(out)
