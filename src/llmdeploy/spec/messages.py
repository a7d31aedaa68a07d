"""Pydantic's validation errors as diagnostics a person can act on.

Each error is mapped back to its YAML position through the error's ``loc`` (never by matching
message text), with a suggestion where one helps: the closest allowed key for an unknown key,
the closest value for a wrong choice, what to change for a value of the wrong YAML type.

The typing rule (docs/spec-reference.md): a spec value has the JSON Schema's type exactly. A
boolean is never a number, a quoted number is a string, and a string field takes no number.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, Union

import pydantic

from llmdeploy.engines import registry
from llmdeploy.errors import Diagnostic
from llmdeploy.spec.sections import Spec

Path_ = tuple[str | int, ...]

# pydantic error type -> what the field takes, in the words of docs/spec-reference.md
EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
    "tuple_type": "a list",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
}


def nearest(
    positions: Mapping[Path_, tuple[int, int]], path: Path_
) -> tuple[int | None, int | None]:
    """The position of ``path``, or of its nearest enclosing key that is in the file."""
    for end in range(len(path), 0, -1):
        if path[:end] in positions:
            return positions[path[:end]]
    return (1, 1) if positions else (None, None)


def diag(
    label: str,
    lines: list[str] | tuple[str, ...],
    message: str,
    line: int | None,
    col: int | None,
    hint: str | None = None,
) -> Diagnostic:
    src = lines[line - 1] if line is not None and 0 < line <= len(lines) else None
    return Diagnostic(
        message=message, file=label, line=line, column=col, hint=hint, source_line=src
    )


def _model_at(loc: Path_) -> tuple[type[pydantic.BaseModel] | None, Path_]:
    """Walk Spec along a loc of aliases; return the model holding the last key, and the data
    path with union tags removed."""
    model: type[pydantic.BaseModel] | None = Spec
    data_path: list[str | int] = []
    for part in loc[:-1]:
        if model is None:
            data_path.append(part)
            continue
        finfo = _field_by_alias(model, part)
        if finfo is None:
            # a discriminated-union tag such as "trtllm" (not part of the data path)
            continue
        data_path.append(part)
        model = _submodel(finfo.annotation, loc, len(data_path))
    if loc:
        data_path.append(loc[-1])
    return model, tuple(data_path)


def _field_by_alias(model: type[pydantic.BaseModel], key: str | int) -> Any:
    for name, info in model.model_fields.items():
        if key in (info.alias, name):
            return info
    return None


def _submodel(annotation: Any, loc: Path_, depth: int) -> type[pydantic.BaseModel] | None:
    models = [
        c for c in _flatten(annotation) if isinstance(c, type) and issubclass(c, pydantic.BaseModel)
    ]
    tag = loc[depth] if depth < len(loc) else None
    for candidate in models:
        if len(models) > 1 and tag is not None and not _has_tag(candidate, tag):
            continue  # another member of a discriminated union
        return candidate
    return None


def _has_tag(model: type[pydantic.BaseModel], tag: str | int) -> bool:
    """Whether a member of a discriminated union (``type`` of an engine, ``flavor`` of a
    Prometheus) is the one selected by ``tag``; models without a Literal field match any."""
    literals = [
        typing.get_args(info.annotation)
        for info in model.model_fields.values()
        if typing.get_origin(info.annotation) is typing.Literal
    ]
    return not literals or any(tag in values for values in literals)


def _discriminator(err: Mapping[str, Any]) -> str:
    return str(err.get("ctx", {}).get("discriminator", "type")).strip("'")


def _flatten(annotation: Any) -> Iterator[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        yield from _flatten(typing.get_args(annotation)[0])
    elif origin in (Union, types.UnionType):
        for arg in typing.get_args(annotation):
            yield from _flatten(arg)
    else:
        yield annotation


def _aliases(model: type[pydantic.BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _describe(value: object) -> str:
    """A YAML value as the user wrote it, with its type."""
    if isinstance(value, bool):
        return f"{'true' if value else 'false'} (a boolean)"
    if value is None:
        return "null"
    if isinstance(value, int):
        return f"{value} (an integer)"
    if isinstance(value, float):
        return f"{value!r} (a number)"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _type_hint(etype: str, value: object) -> str | None:
    if etype in ("int_type", "float_type") and isinstance(value, str) and _looks_numeric(value):
        return "remove the quotes: a number is written unquoted"
    if etype == "bool_type" and isinstance(value, str):
        return "write true or false, unquoted"
    if etype == "string_type" and isinstance(value, (bool, int, float)):
        return "quote the value: YAML reads it unquoted as a number or boolean"
    return None


def _suggested(model: type[pydantic.BaseModel] | None, key: str) -> str | None:
    allowed = _aliases(model) if model is not None else []
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    return close[0] if close else None


def _did_you_mean(got: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(got, choices, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def diagnostics(
    exc: pydantic.ValidationError,
    positions: Mapping[Path_, tuple[int, int]],
    lines: list[str],
    label: str,
) -> list[Diagnostic]:
    errors = exc.errors(include_url=False)
    # A required key that is missing because it is misspelt is reported once, as the unknown
    # key with its did-you-mean (`apVersion:` is not also "missing `apiVersion`").
    misspelt: set[Path_] = set()
    for err in errors:
        if err["type"] == "extra_forbidden":
            model, path = _model_at(tuple(err["loc"]))
            close = _suggested(model, str(path[-1])) if path else None
            if close is not None:
                misspelt.add((*path[:-1], close))
    out: list[Diagnostic] = []
    seen: set[tuple[Path_, str]] = set()
    for err in errors:
        loc: Path_ = tuple(err["loc"])
        model, path = _model_at(loc)
        etype = err["type"]
        hint: str | None = None
        secrets: tuple[str, ...] = ()
        on_key = bool(path) and path[-1] == "[key]"  # a mapping key failed its own check
        if on_key:
            path = path[:-1]
        where = ".".join(str(p) for p in path) or "spec"
        if etype == "extra_forbidden":
            key = str(path[-1]) if path else ""
            close = _suggested(model, key)
            message = f"unknown field {key!r}" + (
                f" in `{'.'.join(map(str, path[:-1]))}`" if len(path) > 1 else ""
            )
            if close:
                message += f" (did you mean {close!r}?)"
            else:
                hint = "allowed here: " + ", ".join(_aliases(model) if model is not None else [])
            line, col = positions.get((*path, "<key>"), nearest(positions, path))
        elif etype == "missing":
            if path in misspelt:
                continue
            message = f"missing required field `{where}`"
            line, col = nearest(positions, path[:-1])
        elif etype == "literal_error":
            expected = str(err.get("ctx", {}).get("expected", ""))
            choices = [c.strip().strip("'") for c in expected.replace(" or ", ",").split(",")]
            got = err.get("input")
            message = f"`{where}`: {got!r} is not one of {expected}"
            message += _did_you_mean(str(got), [c for c in choices if c])
            line, col = nearest(positions, path)
        elif etype == "union_tag_invalid":
            expected = str(err.get("ctx", {}).get("expected_tags", ""))
            got = err.get("ctx", {}).get("tag")
            tags = [t.strip().strip("'") for t in expected.split(",")]
            tag_key = _discriminator(err)
            message = f"`{where}.{tag_key}`: {got!r} is not one of {expected}"
            message += _did_you_mean(str(got), tags)
            line, col = nearest(positions, (*path, tag_key))
        elif etype == "union_tag_not_found":
            tag_key = _discriminator(err)
            message = f"missing required field `{where}.{tag_key}`"
            if tag_key == "type":
                message += f" (one of {', '.join(repr(t) for t in registry.names())})"
            line, col = nearest(positions, path)
        elif etype in EXPECTED:
            got = err.get("input")
            message = f"`{where}`: expected {EXPECTED[etype]}, got {_describe(got)}"
            hint = _type_hint(etype, got)
            line, col = nearest(positions, path)
        else:
            msg = str(err["msg"])
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, ") :]
            cause = err.get("ctx", {}).get("error")
            hint, secrets = getattr(cause, "hint", None), getattr(cause, "secrets", ())
            # a mapping key's own check: reported at the key, about the mapping
            owner = ".".join(str(p) for p in path[:-1]) if on_key else where
            message = f"`{owner}`: {msg}"
            at_key = positions.get((*path, "<key>")) if on_key else None
            line, col = at_key or nearest(positions, path)
        key_ = (path, message)
        if key_ in seen:
            continue
        seen.add(key_)
        found = diag(label, lines, message, line, col, hint)
        if secrets and found.source_line is not None:  # never echo a credential, not even
            masked = found.source_line  # from the user's own file
            for secret in secrets:
                masked = masked.replace(secret, "***")
            found = replace(found, source_line=masked)
        out.append(found)
    out.sort(key=lambda d: (d.line or 0, d.column or 0))
    return out
