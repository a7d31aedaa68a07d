"""The engine registry: the one place that names every serving engine.

Each entry maps the spec's ``engine.type`` to the package that holds everything about that
engine. A package provides ``spec.py`` (``SECTION``: the pydantic model of its ``engine:``
section), ``engine.py`` (``ENGINE``: an :class:`~llmdeploy.engines.base.Engine`) and, if it
renders files of its own, ``templates/`` (reachable as ``<name>/<file>`` in the one Jinja
environment). Adding an engine is one new folder and one line here (docs/architecture.md).

Modules are imported on first use, so a command pays only for the engines it touches.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmdeploy.engines.base import Engine
    from llmdeploy.spec.fields import EngineSection

ENGINES: dict[str, str] = {
    "vllm": "llmdeploy.engines.vllm",
    "trtllm": "llmdeploy.engines.trtllm",
}
DEFAULT = "vllm"  # the engine of a spec without an `engine:` section


def names() -> tuple[str, ...]:
    return tuple(ENGINES)


@functools.cache
def get(name: str) -> Engine:
    """The engine for ``engine.type`` (KeyError for a name that is not registered)."""
    engine: Engine = importlib.import_module(f"{ENGINES[name]}.engine").ENGINE
    return engine


def section_models() -> tuple[type[EngineSection], ...]:
    """Every engine's ``engine:`` section model, in registry order (the spec's union)."""
    return tuple(importlib.import_module(f"{pkg}.spec").SECTION for pkg in ENGINES.values())


def default_section() -> EngineSection:
    section: EngineSection = importlib.import_module(f"{ENGINES[DEFAULT]}.spec").SECTION()
    return section


def template_dirs() -> dict[str, Path]:
    """``{engine name: its templates/ folder}`` for engines that ship templates."""
    out: dict[str, Path] = {}
    for name, pkg in ENGINES.items():
        found = importlib.util.find_spec(pkg)
        for location in (found.submodule_search_locations or []) if found else []:
            folder = Path(location) / "templates"
            if folder.is_dir():
                out[name] = folder
    return out
