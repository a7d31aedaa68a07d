"""A fast path for reading ordinary specs: libyaml's composer, YAML 1.2 core scalars.

ruamel's round-trip loader (pure Python) keeps every position for diagnostics but costs
~15-40 ms per spec, most of a fleet render (docs/performance.md). Most specs are plain: block
mappings, strings, small numbers. For those, ``fast_parse`` composes the document with libyaml
(C) and resolves scalars itself. Whenever a document could be read differently by the two
paths, or needs a diagnostic, it returns ``None`` and the caller takes the ruamel path, which
stays the single source of truth for errors and positions:

* anchors, aliases, tags, directives, merge keys, several documents: not attempted;
* deep or large flow collections: not attempted (the C composer recurses without a limit);
* a plain scalar that looks like a number, date or special float but is not one of the
  unambiguous forms below: not attempted (YAML 1.1 vs 1.2 differ there);
* a duplicate key or a non-string key: not attempted (ruamel reports it with its position).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_Loader: Any = getattr(yaml, "CSafeLoader", None)

_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")
_FLOAT = re.compile(
    r"^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$|^[-+]?[0-9]+[eE][-+]?[0-9]+$"
)
# Plain scalars ruamel's YAML 1.2 resolver reads as something other than a string or a simple
# int/float (timestamps, 0755, 1_000, 0x/0o/0b, .inf/.nan): left to the careful path.
_SPECIAL = re.compile(
    r"^[0-9]{4}-[0-9][0-9]?-[0-9][0-9]?"
    r"|^[-+]?0[0-9xXoObB]"
    r"|^[-+]?[0-9._]*_[0-9._]*$"
    r"|^[-+]?\.(inf|Inf|INF|nan|NaN|NAN)$|^\.(nan|NaN|NAN)$"
)
_UNSAFE_CHARS = ("&", "*", "!", "<<", "%", "\t")  # tabs: libyaml and ruamel differ
MAX_FLOW = 64
MAX_INDENT = 64


class _Fallback(Exception):
    pass


def _scalar(node: Any) -> Any:
    value: str = node.value
    if node.style in ("|", ">"):  # block scalars: rare in specs, and the parsers' edge cases
        raise _Fallback  # (a header like `|#`) differ
    if node.style:  # quoted: always a string (plain is None or "")
        return value
    if value == "=":  # YAML 1.1's `value` tag, which ruamel keeps as a tagged scalar
        raise _Fallback
    if value in _NULL:
        return None
    if value in _BOOL:
        return _BOOL[value]
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    if _SPECIAL.match(value):
        raise _Fallback
    return value


Positions = dict[tuple[str | int, ...], tuple[int, int]]


def _at(node: Any) -> tuple[int, int]:
    mark = node.start_mark
    return mark.line + 1, mark.column + 1


class _Where:
    """Where each value (and each key, as ``(*path, "<key>")``) starts, as
    :func:`llmdeploy.spec.careful_yaml.parse_yaml` records ruamel's positions. ``exact`` turns
    False at an empty value (``key:`` with nothing after it), which ruamel places on the next
    node's line: the positions are then left to ruamel."""

    def __init__(self) -> None:
        self.at: Positions = {}
        self.exact = True


def _convert(node: Any, depth: int, path: tuple[str | int, ...], where: _Where) -> Any:
    if depth > 16:
        raise _Fallback
    if isinstance(node, yaml.ScalarNode):
        if not node.value and not node.style:
            where.exact = False
        return _scalar(node)
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            where.at.setdefault((*path, index), _at(item))
            items.append(_convert(item, depth + 1, (*path, index), where))
        return items
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _Fallback
            key = _scalar(key_node)
            if not isinstance(key, str) or key in out:
                raise _Fallback
            child = (*path, key)
            where.at.setdefault(child, _at(value_node))
            where.at.setdefault((*child, "<key>"), _at(key_node))
            out[key] = _convert(value_node, depth + 1, child, where)
        return out
    raise _Fallback


def fast_parse(text: str, positions: Positions | None = None) -> dict[str, Any] | None:
    """The document as plain data, or None when the careful (ruamel) path must read it.
    ``positions``, when given, receives the line and column of every value and key (the same
    as ruamel's: ``tests/test_load.py`` compares them), so a spec read here can be given a
    located note without parsing it again; it stays empty where they could differ."""
    if _Loader is None or any(c in text for c in _UNSAFE_CHARS):
        return None
    if text.count("[") + text.count("{") > MAX_FLOW:
        return None
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if stripped.startswith("\t") or len(line) - len(stripped) > MAX_INDENT:
            return None
        if stripped.startswith("---") or stripped.startswith("..."):
            return None
    try:
        node = yaml.compose(text, Loader=_Loader)
        where = _Where()
        data = _convert(node, 0, (), where) if node is not None else None
    except (yaml.YAMLError, _Fallback, RecursionError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if positions is not None and where.exact:
        positions.update(where.at)
    return data
