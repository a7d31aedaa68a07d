"""Edit a spec's YAML text and keep everything else: comments, key order, quoting
(ruamel.yaml round-trip). ``llmdeploy plan --write`` writes its winner this way, so the file
the user gets back is their spec with the changed fields, not a dump of the model."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from ruamel.yaml.comments import CommentedMap

from llmdeploy.spec.load import _yaml

__all__ = ["with_changes"]


def with_changes(
    text: str,
    changes: Mapping[str, Any],
    replace: Mapping[str, Mapping[str, Any]] | None = None,
    drop: Sequence[str] = (),
) -> str:
    """``text`` with each dotted camelCase path of ``changes`` set (mappings created as
    needed; a key that exists keeps its place and comment), each section of ``replace``
    replaced whole (its old keys dropped) and each path of ``drop`` removed."""
    yaml = _yaml()
    yaml.preserve_quotes = True
    doc = yaml.load(text)
    if not isinstance(doc, CommentedMap):
        raise ValueError("a spec is a mapping")
    for key, section in (replace or {}).items():
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
