"""The render stage: fill Jinja templates from a plan. No decisions, no arithmetic.

One Jinja ``Environment`` for the whole process, built lazily in one place: StrictUndefined,
keep_trailing_newline, trim/lstrip blocks, autoescape off, no globals. Every user-provided
scalar goes through the ``yq`` filter (a JSON-encoded string is a valid YAML double-quoted
scalar, so a value with ``:``, ``yes``, ``1e3``, a newline or ``{{`` stays the same string) and
every shell word through ``sq`` (``shlex.quote``).
"""

from __future__ import annotations

import functools
import json
import shlex
from pathlib import Path
from typing import Any

import jinja2


def templates_dir() -> Path:
    """``templates/`` inside the installed wheel, or at the top of a source checkout."""
    here = Path(__file__).resolve().parent
    packaged = here / "templates"
    if packaged.is_dir():
        return packaged
    return here.parents[1] / "templates"


def yaml_quote(value: object) -> str:
    """Render a scalar as YAML that parses back to exactly the same value."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)


def shell_quote(value: object) -> str:
    return shlex.quote(str(value))


def to_json(value: Any) -> str:
    """Compact JSON (a YAML flow collection) with stable key order."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
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
