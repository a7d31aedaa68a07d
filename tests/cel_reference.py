"""The reference CEL evaluator of tests/test_cel.py: cel-python (a tree-walking interpreter of
the CEL spec) plus the Kubernetes string functions it lacks, as ``llmdeploy.check.cel`` ran it
before it moved to Google's runtime (issue 25). Kept only to prove the two agree on every rule
of the bundled CRD schemas."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import celpy
import lark
import re2  # type: ignore[import-untyped, unused-ignore]
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError, base_functions

# --- CEL ---------------------------------------------------------------------------------------


def _find(text: str, pattern: str) -> celtypes.StringType:
    match = re2.search(pattern, text)
    return celtypes.StringType(match.group(0) if match else "")


def _find_all(text: str, pattern: str, limit: int = -1) -> celtypes.ListType:
    found = [celtypes.StringType(m.group(0)) for m in re2.finditer(pattern, text)]
    return celtypes.ListType(found if limit < 0 else found[:limit])


def _split(text: str, sep: str, limit: int = -1) -> celtypes.ListType:
    """Go ``strings.SplitN`` semantics, as in Kubernetes' CEL strings library."""
    if limit == 0:
        return celtypes.ListType()
    if sep == "":
        parts = list(text) if limit < 0 else [*text[: limit - 1], text[limit - 1 :]]
    else:
        parts = text.split(sep) if limit < 0 else text.split(sep, limit - 1)
    return celtypes.ListType(celtypes.StringType(p) for p in parts if sep != "" or p != "")


def _join(items: Sequence[str], sep: str = "") -> celtypes.StringType:
    return celtypes.StringType(sep.join(items))


_ASCII_UPPER, _ASCII_LOWER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"
_LOWER_ASCII: dict[int, int] = str.maketrans(_ASCII_UPPER, _ASCII_LOWER)
_UPPER_ASCII: dict[int, int] = str.maketrans(_ASCII_LOWER, _ASCII_UPPER)
_EXTENSIONS: dict[str, Any] = {
    "find": _find,
    "findAll": _find_all,
    "split": _split,
    "join": _join,
    "lowerAscii": lambda s: celtypes.StringType(s.translate(_LOWER_ASCII)),
    "upperAscii": lambda s: celtypes.StringType(s.translate(_UPPER_ASCII)),
}
# Macros cel-python implements like Kubernetes does ("reduce"/"min" are cel-python inventions).
_MACROS = {"has", "dyn", "all", "exists", "exists_one", "map", "filter"}
_SUPPORTED = _MACROS | set(base_functions) | set(_EXTENSIONS)
_ESCAPED_NAME = re.compile(r"__[a-z]+__")  # Kubernetes escapes field names like "x-y" as x__dash__y


@cache
def _cel_environment() -> celpy.Environment:
    return celpy.Environment()


def parse_rule(rule: str) -> lark.Tree[Any]:
    """Parse with cel-python (raises its parse errors)."""
    tree: lark.Tree[Any] = _cel_environment().compile(rule)
    return tree


@cache
def compile_rule(rule: str) -> celpy.Runner | str:
    """A runnable program, or the reason the rule cannot be evaluated here."""
    if _ESCAPED_NAME.search(rule):
        return "uses an escaped field name"
    env = _cel_environment()
    try:
        ast = parse_rule(rule)
    except Exception as exc:  # cel-python grammar gaps (optionals, ...)
        return f"cel-python cannot parse it ({type(exc).__name__})"
    names: set[str] = set()
    for sub in ast.iter_subtrees():
        if sub.data == "member_dot_arg" and isinstance(sub.children[1], lark.Token):
            names.add(str(sub.children[1]))
        elif sub.data == "ident_arg" and isinstance(sub.children[0], lark.Token):
            names.add(str(sub.children[0]))
    missing = sorted(names - _SUPPORTED)
    if missing:
        return f"uses {', '.join(missing)}, not available in cel-python"
    return env.program(ast, functions=_EXTENSIONS)


def to_cel(value: Any, s: Mapping[str, Any]) -> Any:
    """Schema-aware conversion: ``type: number`` is a CEL double even when written as ``5``."""
    if isinstance(value, dict):
        props: Mapping[str, Any] = s.get("properties", {})
        extra = s.get("additionalProperties")
        extra = extra if isinstance(extra, dict) else {}
        return celtypes.MapType(
            {celtypes.StringType(k): to_cel(v, props.get(k, extra)) for k, v in value.items()}
        )
    if isinstance(value, list):
        items = s.get("items")
        items = items if isinstance(items, dict) else {}
        return celtypes.ListType(to_cel(v, items) for v in value)
    if s.get("type") == "number" and isinstance(value, int) and not isinstance(value, bool):
        return celtypes.DoubleType(value)
    return json_to_cel(value)


def evaluate(program: celpy.Runner, cel_self: Any) -> tuple[str, str]:
    """("pass"|"fail", ""), ("error", detail) for a data error, ("skip", reason) for a gap."""
    try:
        result: Any = program.evaluate({"self": cel_self})
    except CELEvalError as exc:
        result = exc
    except Exception as exc:  # a cel-python defect must not fail the check
        return "skip", type(exc).__name__
    if isinstance(result, CELEvalError):
        message, cause, details = (*result.args, None, None)[:3]
        if cause is TypeError:  # "no such overload": a cel-python gap, not the data
            return "skip", str(message)
        # int("abc"), a missing key, ...: the API server rejects the object too
        return "error", str(details[0] if cause is ValueError and details else message)
    if isinstance(result, celtypes.BoolType):
        return ("pass" if result else "fail"), ""
    return "skip", "non-bool result"
