"""The load stage: read a spec file into a frozen :class:`~llmdeploy.spec.sections.Spec`.

YAML is read with ruamel's round-trip loader so every node keeps its line and column; pydantic
errors are mapped back to those positions through the error's ``loc`` (never by matching
message text). All errors of a file are reported in one pass.

Hostile input is refused early with a located message: files over ``MAX_BYTES``, non-UTF-8
bytes, duplicate keys, tabs, and alias expansion beyond ``MAX_NODES`` (YAML bombs).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import pydantic
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from llmdeploy.errors import Diagnostic, InputError, SpecError
from llmdeploy.spec.fast_yaml import fast_parse
from llmdeploy.spec.sections import API_VERSION, Spec

MAX_BYTES = 1_048_576
MAX_NODES = 20_000
MAX_DEPTH = 32  # a spec is at most four levels deep; anything far deeper is hostile

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class LoadedSpec:
    spec: Spec
    path: Path | None  # None for a built-in preset
    label: str  # what diagnostics and headers call the file
    positions: Mapping[Path_, tuple[int, int]] = field(default_factory=dict, compare=False)
    lines: tuple[str, ...] = field(default=(), compare=False)
    text: str = field(default="", compare=False)

    def diagnostic(self, key_path: str, message: str, hint: str | None = None) -> Diagnostic:
        """A diagnostic located at a dotted spec path such as ``engine.version`` (the nearest
        enclosing key that exists in the file)."""
        path: Path_ = tuple(key_path.split("."))
        positions = self.positions
        if not positions and self.text:  # loaded by the fast path: positions on demand
            _, positions = parse_yaml(self.text, self.label)
        line, col = _nearest(positions, path)
        src = self.lines[line - 1] if line is not None and 0 < line <= len(self.lines) else None
        return Diagnostic(
            message=message, file=self.label, line=line, column=col, hint=hint, source_line=src
        )


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    return yaml


def _diag(
    label: str,
    lines: list[str],
    message: str,
    line: int | None,
    col: int | None,
    hint: str | None = None,
) -> Diagnostic:
    src = lines[line - 1] if line is not None and 0 < line <= len(lines) else None
    return Diagnostic(
        message=message, file=label, line=line, column=col, hint=hint, source_line=src
    )


def _plain(
    node: Any,
    positions: dict[Path_, tuple[int, int]],
    path: Path_,
    budget: list[int],
    memo: dict[int, int],
) -> Any:
    """Convert ruamel nodes to plain Python values, recording positions; count expanded nodes."""
    if len(path) > MAX_DEPTH:
        raise RecursionError("nested too deeply")
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooLarge(path)
    if isinstance(node, CommentedMap):
        memo[id(node)] = memo.get(id(node), 0) + 1
        out: dict[Any, Any] = {}
        for key, value in node.items():
            if not isinstance(key, str):
                raise _BadKey(path, key)
            child = (*path, key)
            try:
                line, col = node.lc.value(key)
            except (KeyError, TypeError):
                line, col = node.lc.line, node.lc.col
            positions.setdefault(child, (line + 1, col + 1))
            try:
                kline, kcol = node.lc.key(key)
                positions.setdefault((*child, "<key>"), (kline + 1, kcol + 1))
            except (KeyError, TypeError):
                pass
            out[key] = _plain(value, positions, child, budget, memo)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for index, value in enumerate(node):
            child = (*path, index)
            try:
                line, col = node.lc.item(index)
                positions.setdefault(child, (line + 1, col + 1))
            except (KeyError, TypeError, IndexError):
                pass
            items.append(_plain(value, positions, child, budget, memo))
        return items
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


class _TooLarge(Exception):
    def __init__(self, path: Path_) -> None:
        self.path = path


class _BadKey(Exception):
    def __init__(self, path: Path_, key: object) -> None:
        self.path = path
        self.key = key


def parse_yaml(text: str, label: str) -> tuple[Any, dict[Path_, tuple[int, int]]]:
    """Parse one YAML document into plain values plus a path → (line, col) map."""
    line: int | None
    col: int | None
    lines = text.splitlines()
    tab = next((i for i, ln in enumerate(lines) if "\t" in ln[: len(ln) - len(ln.lstrip())]), None)
    if tab is not None:
        col = lines[tab].index("\t") + 1
        raise SpecError(
            [
                _diag(
                    label,
                    lines,
                    "tab character in indentation; YAML indents with spaces",
                    tab + 1,
                    col,
                    "replace the tab with spaces",
                )
            ]
        )
    try:
        docs = list(_yaml().load_all(text))
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        hint = None
        if "duplicate key" in str(problem) or type(exc).__name__ == "DuplicateKeyError":
            problem = (
                "duplicate key " + str(exc.problem).split('"')[1]
                if '"' in str(exc.problem)
                else "duplicate key"
            )
            hint = "each key may appear once in a mapping"
        raise SpecError([_diag(label, lines, f"YAML: {problem}", line, col, hint)]) from None
    except YAMLError as exc:
        raise SpecError([Diagnostic(f"YAML: {exc}", file=label)]) from None
    except RecursionError:  # ruamel's composer recurses once per nesting level
        raise _too_deep(label) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise SpecError([Diagnostic(f"YAML: {exc}", file=label)]) from None
    docs = [d for d in docs if d is not None]
    if len(docs) != 1:
        raise SpecError(
            [
                Diagnostic(
                    f"expected exactly one YAML document, found {len(docs)}",
                    file=label,
                    line=1,
                    column=1,
                    source_line=lines[0] if lines else None,
                )
            ]
        )
    positions: dict[Path_, tuple[int, int]] = {}
    try:
        data = _plain(docs[0], positions, (), [MAX_NODES], {})
    except _TooLarge as exc:
        line, col = _nearest(positions, exc.path)
        raise SpecError(
            [
                _diag(
                    label,
                    lines,
                    f"document expands to more than {MAX_NODES} "
                    "nodes (anchors/aliases?); refusing to expand it",
                    line,
                    col,
                    "a spec needs no anchors or aliases",
                )
            ]
        ) from None
    except _BadKey as exc:
        line, col = _nearest(positions, exc.path)
        raise SpecError(
            [
                _diag(
                    label,
                    lines,
                    f"mapping key {exc.key!r} is not a string",
                    line,
                    col,
                    "quote the key",
                )
            ]
        ) from None
    except RecursionError:
        raise _too_deep(label) from None
    if not isinstance(data, dict):
        raise SpecError([_diag(label, lines, "a spec is a YAML mapping", 1, 1)])
    return data, positions


def _too_deep(label: str) -> SpecError:
    return SpecError(
        [
            Diagnostic(
                "YAML: nested too deeply", file=label, hint="a spec is at most a few levels deep"
            )
        ]
    )


def _nearest(
    positions: Mapping[Path_, tuple[int, int]], path: Path_
) -> tuple[int | None, int | None]:
    for end in range(len(path), 0, -1):
        if path[:end] in positions:
            return positions[path[:end]]
    return (1, 1) if positions else (None, None)


def read_text(path: Path, label: str) -> str:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"{label}: cannot read spec: {exc.strerror}") from None
    if size > MAX_BYTES:
        raise SpecError([Diagnostic(f"spec is {size} bytes; the limit is {MAX_BYTES}", file=label)])
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError(
            [
                Diagnostic(
                    f"file is not UTF-8 (byte 0x{raw[exc.start]:02x})",
                    file=label,
                    line=line,
                    column=col,
                    hint="save the file as UTF-8",
                )
            ]
        ) from None


def load_spec_file(path: Path) -> LoadedSpec:
    label = str(path)
    return load_spec_text(read_text(path, label), label, path)


def load_spec_text(text: str, label: str, path: Path | None = None) -> LoadedSpec:
    if "\x00" in text:
        raise SpecError([Diagnostic("file contains NUL bytes", file=label)])
    lines = text.splitlines()
    fast = fast_parse(text)
    if fast is not None and "apiVersion" in fast:
        try:
            spec = Spec.model_validate(fast)
        except pydantic.ValidationError:
            pass  # the careful path below reports every error with its position
        else:
            return LoadedSpec(spec=spec, path=path, label=label, lines=tuple(lines), text=text)
    data, positions = parse_yaml(text, label)
    if "apiVersion" not in data:
        raise SpecError(
            [
                _diag(
                    label,
                    lines,
                    "missing `apiVersion`",
                    1,
                    1,
                    f"add `apiVersion: {API_VERSION}` as the first line",
                )
            ]
        )
    try:
        spec = Spec.model_validate(data)
    except pydantic.ValidationError as exc:
        raise SpecError(_diagnostics(exc, positions, lines, label)) from None
    return LoadedSpec(
        spec=spec, path=path, label=label, positions=positions, lines=tuple(lines), text=text
    )


# --- mapping pydantic errors to positions and suggestions -------------------------------------


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
    for candidate in _flatten(annotation):
        if isinstance(candidate, type) and issubclass(candidate, pydantic.BaseModel):
            tag = loc[depth] if depth < len(loc) else None
            type_field = candidate.model_fields.get("type")
            if type_field is not None and tag is not None and type_field.default != tag:
                continue
            return candidate
    return None


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


def _diagnostics(
    exc: pydantic.ValidationError,
    positions: Mapping[Path_, tuple[int, int]],
    lines: list[str],
    label: str,
) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    seen: set[tuple[Path_, str]] = set()
    for err in exc.errors(include_url=False):
        loc: Path_ = tuple(err["loc"])
        model, path = _model_at(loc)
        etype = err["type"]
        hint: str | None = None
        where = ".".join(str(p) for p in path) or "spec"
        if etype == "extra_forbidden":
            key = str(path[-1]) if path else ""
            allowed = _aliases(model) if model is not None else []
            close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
            message = f"unknown field {key!r}" + (
                f" in `{'.'.join(map(str, path[:-1]))}`" if len(path) > 1 else ""
            )
            if close:
                message += f" (did you mean {close[0]!r}?)"
            else:
                hint = "allowed here: " + ", ".join(allowed)
            line, col = positions.get((*path, "<key>"), _nearest(positions, path))
        elif etype == "missing":
            message = f"missing required field `{where}`"
            line, col = _nearest(positions, path[:-1])
        elif etype == "literal_error":
            expected = str(err.get("ctx", {}).get("expected", ""))
            choices = [c.strip().strip("'") for c in expected.replace(" or ", ",").split(",")]
            got = err.get("input")
            message = f"`{where}`: {got!r} is not one of {expected}"
            close = difflib.get_close_matches(str(got), [c for c in choices if c], n=1, cutoff=0.5)
            if close:
                message += f" (did you mean {close[0]!r}?)"
            line, col = _nearest(positions, path)
        elif etype == "union_tag_invalid":
            expected = str(err.get("ctx", {}).get("expected_tags", ""))
            got = err.get("ctx", {}).get("tag")
            tags = [t.strip().strip("'") for t in expected.split(",")]
            close = difflib.get_close_matches(str(got), tags, n=1, cutoff=0.5)
            message = f"`{where}.type`: {got!r} is not one of {expected}"
            if close:
                message += f" (did you mean {close[0]!r}?)"
            line, col = _nearest(positions, (*path, "type"))
        else:
            msg = str(err["msg"])
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, ") :]
            message = f"`{where}`: {msg}"
            line, col = _nearest(positions, path)
        key_ = (path, message)
        if key_ in seen:
            continue
        seen.add(key_)
        out.append(_diag(label, lines, message, line, col, hint))
    out.sort(key=lambda d: (d.line or 0, d.column or 0))
    return out
