"""Edit a spec's YAML text and keep everything else: comments, key order, quoting, how each
``null`` is spelt. ``llmdeploy plan --write`` writes its winner this way, so the file the user
gets back is their spec with the changed fields, not a dump of the model.

The edits are made on the text, line by line, at the positions ruamel.yaml's round-trip parser
gives each key: a changed value replaces the value's token on its line, a key that takes the
place of a dropped one (``instanceFamily`` -> ``instanceType``) is written on the dropped key's
line, a new key goes after the last line of its mapping, a dropped key's lines are removed, a
replaced section's block is rewritten. The result is parsed back and must equal what a
round-trip dump of the edited document holds; when it does not (flow-style mappings, keys
sharing a line), the round-trip dump is written instead, with ``null`` written as ``null``.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from llmdeploy.spec.careful_yaml import _yaml

__all__ = ["with_changes"]

# A string that YAML reads back as the same string when written plain.
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9._/-]*")
_SPECIAL = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _SPECIAL:
        return text
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def with_changes(
    text: str,
    changes: Mapping[str, Any],
    replace: Mapping[str, Mapping[str, Any]] | None = None,
    drop: Sequence[str] = (),
) -> str:
    """``text`` with each dotted camelCase path of ``changes`` set (mappings created as
    needed; a key that exists keeps its place and comment, a new key takes the place of a
    dropped sibling), each section of ``replace`` replaced whole (its old keys dropped) and
    each path of ``drop`` removed."""
    expected = _dumped(text, changes, replace or {}, drop)
    try:
        edited = _TextEdit(text).apply(changes, replace or {}, drop)
    except _Unsupported:
        return expected
    yaml = _yaml()
    try:
        same = _data(yaml.load(edited)) == _data(yaml.load(expected))  # in any order
    except YAMLError:
        same = False
    return edited if same else expected


def _data(doc: Any) -> Any:
    return json.loads(json.dumps(doc, default=str))


def _dumped(
    text: str,
    changes: Mapping[str, Any],
    replace: Mapping[str, Mapping[str, Any]],
    drop: Sequence[str],
) -> str:
    """The edited document as a round-trip dump (comments kept; ``null`` as ``null``)."""
    yaml = _yaml()
    yaml.preserve_quotes = True
    yaml.representer.add_representer(
        type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    doc = yaml.load(text)
    if not isinstance(doc, CommentedMap):
        raise ValueError("a spec is a mapping")
    for key, section in replace.items():
        doc[key] = CommentedMap(section)
    for path in drop:
        *parents, leaf = path.split(".")
        node = doc
        for part in parents:
            node = node.get(part) if isinstance(node, CommentedMap) else None
        if isinstance(node, CommentedMap) and leaf in node:
            del node[leaf]
    for path, value in changes.items():
        *parents, leaf = path.split(".")
        node = doc
        for part in parents:
            if not isinstance(node.get(part), CommentedMap):
                node[part] = CommentedMap()
            node = node[part]
        node[leaf] = value
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


class _Unsupported(Exception):
    """The text is laid out in a way the line editor does not handle."""


class _TextEdit:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        if self.lines and not self.lines[-1].endswith("\n"):
            self.lines[-1] += "\n"
        self.doc = _yaml().load(text)
        if not isinstance(self.doc, CommentedMap):
            raise _Unsupported

    # --- where things are --------------------------------------------------------------------

    def _node(self, parts: Sequence[str]) -> CommentedMap | None:
        node: Any = self.doc
        for part in parts:
            node = node.get(part) if isinstance(node, CommentedMap) else None
        if not isinstance(node, CommentedMap):
            return None
        if node.fa.flow_style():
            raise _Unsupported  # ``{a: 1, b: 2}``: keys share a line
        return node

    def _end(self, line: int, col: int) -> int:
        """The line after the block of the key at (``line``, ``col``): every later line that
        is more indented (or a ``-`` item at the same indent), trailing blanks excluded."""
        end = line + 1
        last = line + 1
        while end < len(self.lines):
            text = self.lines[end]
            stripped = text.strip()
            indent = len(text) - len(text.lstrip(" "))
            if stripped and not (indent > col or (indent == col and stripped.startswith("- "))):
                break
            end += 1
            if stripped:
                last = end
        return last

    def _key_line(self, node: CommentedMap, key: str) -> tuple[int, int]:
        if node.fa.flow_style():
            raise _Unsupported
        line, col = node.lc.key(key)
        value_line, _ = node.lc.value(key)
        if not self.lines[line][col:].startswith(key):
            raise _Unsupported  # a quoted key, or a flow mapping
        if isinstance(node[key], CommentedMap | list) and value_line == line:
            raise _Unsupported  # a flow collection on the key's line
        return line, col

    def _child_indent(self, node: CommentedMap, parent_col: int) -> int:
        for key in node:
            return int(node.lc.key(key)[1])
        return parent_col + 2

    # --- edits --------------------------------------------------------------------------------

    def apply(
        self,
        changes: Mapping[str, Any],
        replace: Mapping[str, Mapping[str, Any]],
        drop: Sequence[str],
    ) -> str:
        # every edit is a (first line, end line, new lines) splice on the original text
        splices: list[tuple[int, int, list[str]]] = []
        taken: dict[tuple[str, ...], list[tuple[int, int]]] = {}  # parent -> dropped key lines
        for key, section in replace.items():
            line, col = self._key_line(self.doc, key) if key in self.doc else (-1, 0)
            body = [f"{key}:\n", *(f"  {k}: {_scalar(v)}\n" for k, v in section.items())]
            if line < 0:
                splices.append((len(self.lines), len(self.lines), body))
            else:
                splices.append((line, self._end(line, col), body))
        for path in drop:
            *parents, leaf = path.split(".")
            node = self._node(parents)
            if node is None or leaf not in node:
                continue
            line, col = self._key_line(node, leaf)
            taken.setdefault(tuple(parents), []).append((line, col))
            splices.append((line, self._end(line, col), []))
        appended: dict[tuple[str, ...], list[str]] = {}
        for path, value in changes.items():
            *parents, leaf = path.split(".")
            node = self._node(parents)
            if node is not None and leaf in node:
                if isinstance(node[leaf], CommentedMap | list):
                    raise _Unsupported
                line, _ = node.lc.value(leaf)
                key_line, _ = node.lc.key(leaf)
                if line != key_line:
                    raise _Unsupported  # a value on its own line
                splices.append((line, line + 1, [self._with_value(line, node, leaf, value)]))
                continue
            spots = taken.get(tuple(parents), [])
            if node is not None and spots:  # in the place of a dropped sibling
                line, col = spots.pop(0)
                i = next(i for i, s in enumerate(splices) if s[0] == line and s[2] == [])
                splices[i] = (line, splices[i][1], [self._renamed(line, col, leaf, value)])
                continue
            appended.setdefault(tuple(parents), []).append(f"{leaf}: {_scalar(value)}")
        for where, entries in appended.items():
            splices.append(self._insertion(list(where), entries))
        return self._splice(splices)

    def _with_value(self, line: int, node: CommentedMap, key: str, value: Any) -> str:
        text = self.lines[line]
        _, col = node.lc.value(key)
        old = text[col:]
        if old[:1] in ('"', "'"):
            close = old.find(old[0], 1)
            if close < 0:
                raise _Unsupported
            rest = old[close + 1 :]
            quoted = json.dumps(str(value)) if old[0] == '"' else "'" + str(value) + "'"
            if old[0] == "'" and "'" in str(value):
                quoted = json.dumps(str(value))
            return text[:col] + (quoted if isinstance(value, str) else _scalar(value)) + rest
        match = re.match(r"[^#\n]*?(?=\s+#|\s*$)", old)
        if match is None:
            raise _Unsupported
        return text[:col] + _scalar(value) + old[match.end() :]

    def _renamed(self, line: int, col: int, key: str, value: Any) -> str:
        text = self.lines[line]
        comment = re.search(r"\s+#.*$", text.rstrip("\n"))
        tail = comment.group(0) if comment else ""
        return f"{text[:col]}{key}: {_scalar(value)}{tail}\n"

    def _insertion(self, parents: list[str], entries: list[str]) -> tuple[int, int, list[str]]:
        """New ``entries`` at the end of the mapping at ``parents`` (created as needed)."""
        # the deepest mapping that exists, and the parts below it to create
        depth = len(parents)
        while depth > 0 and self._node(parents[:depth]) is None:
            depth -= 1
        node = self._node(parents[:depth])
        assert node is not None
        if depth == 0:
            where, indent = len(self.lines), 0
            while where > 0 and not self.lines[where - 1].strip():
                where -= 1
        else:
            holder = self._node(parents[: depth - 1])
            assert holder is not None
            line, col = self._key_line(holder, parents[depth - 1])
            where, indent = self._end(line, col), self._child_indent(node, col)
        step = 2
        lines = []
        for part in parents[depth:]:
            lines.append(f"{' ' * indent}{part}:\n")
            indent += step
        lines += [f"{' ' * indent}{entry}\n" for entry in entries]
        return where, where, lines

    def _splice(self, splices: list[tuple[int, int, list[str]]]) -> str:
        out = list(self.lines)
        # from the bottom up, so that earlier positions stay valid; of two insertions at one
        # place, the later first, so that they come out in the order given
        order = sorted(range(len(splices)), key=lambda i: (splices[i][0], splices[i][1], i))
        for i in reversed(order):
            start, end, new = splices[i]
            out[start:end] = new
        return "".join(out)
