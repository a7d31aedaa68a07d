"""The careful YAML path of the load stage: ruamel's round-trip loader, so every node keeps
its line and column, with the hostile-input refusals (duplicate keys, tags, tabs, deep nesting,
alias bombs). :mod:`llmdeploy.spec.load` reads plain specs with libyaml
(:mod:`llmdeploy.spec.fast_yaml`) and comes here for everything else and for every error; this
module, and ruamel with it, is imported only then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from llmdeploy.errors import Diagnostic, SpecError
from llmdeploy.spec.messages import diag, nearest

MAX_NODES = 20_000
MAX_DEPTH = 32  # a spec is at most four levels deep; anything far deeper is hostile

Path_ = tuple[str | int, ...]


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    return yaml


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
            name = _string(key)
            if not isinstance(name, str):
                raise _BadKey(path, key)
            child = (*path, name)
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
            out[name] = _plain(value, positions, child, budget, memo)
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
    if isinstance(node, (str, TaggedScalar)):
        return _string(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


def _string(node: object) -> object:
    """A plain ``str`` for a string node; ``!!str 0x1F`` is the string '0x1F' (the tag scan
    has refused every other tag by now)."""
    if isinstance(node, TaggedScalar):
        return str(node.value)
    return str(node) if isinstance(node, str) else node


# The one explicit tag a spec may carry: `!!str` makes a scalar a string, as quotes do. Every
# other tag (`!!binary`, `!!timestamp`, `!!int`, `!!python/...`, `!custom`) would turn text
# into something the JSON Schema does not describe, or mean nothing at all: refused, located.
_STR_TAG = "tag:yaml.org,2002:str"
_NODE_EVENTS = (ScalarEvent, AliasEvent, MappingStartEvent, SequenceStartEvent)


@dataclass
class _Frame:
    """An open mapping or sequence while scanning parse events: where its next node goes."""

    path: Path_
    is_map: bool
    at_key: bool = True  # mappings: the next node is a key
    key: str | None = None
    index: int = 0

    def next_path(self) -> Path_:
        if not self.is_map:
            return (*self.path, self.index)
        return self.path if self.at_key or self.key is None else (*self.path, self.key)

    def done(self, scalar: str | None) -> None:
        if not self.is_map:
            self.index += 1
        elif self.at_key:
            self.key, self.at_key = scalar, False
        else:
            self.at_key = True


def _tag_problems(text: str, label: str, lines: list[str]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    frames: list[_Frame] = []
    for event in _yaml().parse(text):
        if isinstance(event, (MappingEndEvent, SequenceEndEvent)):
            frames.pop()
            if frames:
                frames[-1].done(None)
            continue
        if not isinstance(event, _NODE_EVENTS):
            continue
        path = frames[-1].next_path() if frames else ()
        tag = getattr(event, "tag", None)
        tag = None if tag is None else str(getattr(tag, "value", tag))
        if tag is not None and not (tag == _STR_TAG and isinstance(event, ScalarEvent)):
            core = "tag:yaml.org,2002:"
            shown = "!!" + tag[len(core) :] if tag.startswith(core) else tag
            where = f" in `{'.'.join(map(str, path))}`" if path else ""
            mark = event.start_mark
            out.append(
                diag(
                    label,
                    lines,
                    f"tag {shown!r} is not allowed{where}: a spec holds only strings, numbers, "
                    "booleans, lists and mappings",
                    mark.line + 1,
                    mark.column + 1,
                    "remove the tag; to make a value a string, quote it (or tag it !!str)",
                )
            )
        if isinstance(event, (MappingStartEvent, SequenceStartEvent)):
            frames.append(_Frame(path, isinstance(event, MappingStartEvent)))
        elif frames:
            frames[-1].done(event.value if isinstance(event, ScalarEvent) else None)
    return out


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
                diag(
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
        tagged = _tag_problems(text, label, lines) if "!" in text else []
        if tagged:  # before construction: `!!binary` or `!!timestamp` would be decoded
            raise SpecError(tagged)
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
        raise SpecError([diag(label, lines, f"YAML: {problem}", line, col, hint)]) from None
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
        line, col = nearest(positions, exc.path)
        raise SpecError(
            [
                diag(
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
        line, col = nearest(positions, exc.path)
        raise SpecError(
            [
                diag(
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
        raise SpecError([diag(label, lines, "a spec is a YAML mapping", 1, 1)])
    return data, positions


def _too_deep(label: str) -> SpecError:
    return SpecError(
        [
            Diagnostic(
                "YAML: nested too deeply", file=label, hint="a spec is at most a few levels deep"
            )
        ]
    )
