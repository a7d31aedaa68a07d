#!/usr/bin/env python3
"""Generate the spec's committed documentation from its JSON Schema.

* ``docs/spec.schema.json``: exactly ``llmdeploy schema``
  (``llmdeploy.cli.commands.schema_text()``).
* ``docs/spec-reference.md``: one table per section of the spec (key path, type, default,
  allowed values, description), walked from the same schema, so the page cannot disagree with
  the validator; then each engine's ``ignored_fields`` (``engines/base.py``), from the engines.

Usage::

    python scripts/gen_docs.py          # (re)write both files
    python scripts/gen_docs.py --check  # exit 1 with a diff if either file is out of date

``tests/test_docs.py`` runs the check, so a spec change without regenerated docs fails CI.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCHEMA_FILE = "docs/spec.schema.json"
REFERENCE_FILE = "docs/spec-reference.md"

Schema = dict[str, Any]


# --- walking the schema -------------------------------------------------------------------------


@dataclass
class Row:
    path: str
    type: str
    default: str
    allowed: str
    description: str


@dataclass
class Section:
    path: str  # dotted key path of the object ("" for the top level)
    title: str
    description: str
    rows: list[Row] = field(default_factory=list)


def _resolve(schema: Schema, node: Schema) -> Schema:
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return node
    prefix = "#/$defs/"
    if not ref.startswith(prefix):
        raise ValueError(f"unsupported $ref {ref!r}")
    resolved: Schema = schema["$defs"][ref[len(prefix) :]]
    return resolved


def _anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, spaces to '-', punctuation dropped."""
    text = heading.lower().replace(" ", "-")
    return "".join(ch for ch in text if ch.isalnum() or ch in "-_")


def _heading(path: str, tag: str | None = None) -> str:
    if not path:
        return "Top level"
    return f"`{path}`" + (f" (type: `{tag}`)" if tag is not None else "")


def _code(value: str) -> str:
    # A table cell: escape the pipe, which GitHub treats as a column separator even in code.
    return "`" + value.replace("|", "\\|") + "`"


def _text(value: str) -> str:
    # Prose in a table cell: one line, no column breaks, `<v>` shown rather than read as HTML.
    flat = " ".join(value.split())
    return flat.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _object_branches(schema: Schema, node: Schema) -> list[Schema]:
    """The object schemas a property can hold (a $ref, one side of `X | None`, or the items of
    a list of objects, documented under the list's own key path)."""
    out = []
    for option in [node, *node.get("anyOf", [])]:
        target = _resolve(schema, option)
        if target.get("type") == "array":
            target = _resolve(schema, target.get("items", {}))
        if target.get("type") == "object" and "properties" in target:
            out.append(target)
    return out


def _type_name(schema: Schema, node: Schema, path: str) -> str:
    if "oneOf" in node:
        links = []
        for variant in node["oneOf"]:
            heading = _heading(path, _variant_tag(schema, variant))
            links.append(f"[{heading}](#{_anchor(heading)})")
        return "object, one of " + ", ".join(links)
    if "anyOf" in node:
        return " or ".join(_type_name(schema, option, path) for option in node["anyOf"])
    target = _resolve(schema, node)
    if target is not node and target.get("type") == "object":
        return f"object ([{_heading(path)}](#{_anchor(_heading(path))}))"
    kind = target.get("type")
    if kind == "array":
        return "list of " + _type_name(schema, target.get("items", {}), path)
    if kind == "object":
        values = target.get("additionalProperties")
        if isinstance(values, dict):
            return "map of string to " + _type_name(schema, values, path)
        return "object"
    if kind is None:
        return "any"
    return str(kind)


def _allowed(schema: Schema, node: Schema) -> str:
    parts: list[str] = []
    for option in [node, *node.get("anyOf", [])]:
        target = _resolve(schema, option)
        if "items" in target:
            parts.append(_allowed(schema, target["items"]))
        if "const" in target:
            parts.append(_code(json.dumps(target["const"])[1:-1]))
        if "enum" in target:
            parts.append(", ".join(_code(str(v)) for v in target["enum"]))
        if "pattern" in target:
            parts.append("matches " + _code(str(target["pattern"])))
        bounds = []
        if "minimum" in target:
            bounds.append(f"≥ {target['minimum']}")
        if "exclusiveMinimum" in target:
            bounds.append(f"> {target['exclusiveMinimum']}")
        if "maximum" in target:
            bounds.append(f"≤ {target['maximum']}")
        if "exclusiveMaximum" in target:
            bounds.append(f"< {target['exclusiveMaximum']}")
        if bounds:
            parts.append(", ".join(bounds))
        if "minLength" in target or "maxLength" in target:
            lo, hi = target.get("minLength", 0), target.get("maxLength")
            if hi is not None:
                parts.append(f"{lo} to {hi} characters")
            else:
                parts.append("non-empty" if lo == 1 else f"at least {lo} characters")
        if "minItems" in target:
            count = target["minItems"]
            parts.append(f"at least {count} item" + ("s" if count != 1 else ""))
        if "maxItems" in target:
            parts.append(f"at most {target['maxItems']} items")
    return "; ".join(p for p in parts if p)


def _default(node: Schema, required: bool, is_object: bool) -> str:
    if required:
        return "**required**"
    if "default" in node:
        return _code(json.dumps(node["default"], ensure_ascii=False))
    if is_object:
        return "see its keys"
    return "—"


def _variant_tag(schema: Schema, variant: Schema) -> str | None:
    tag = _resolve(schema, variant).get("properties", {}).get("type", {}).get("const")
    return str(tag) if tag is not None else None


def _walk(schema: Schema, obj: Schema, path: str, title: str, out: list[Section]) -> None:
    section = Section(path=path, title=title, description=_text(obj.get("description", "")))
    out.append(section)
    children: list[tuple[str, str, Schema]] = []  # (path, heading, object schema)
    required = set(obj.get("required", []))
    for key, prop in obj.get("properties", {}).items():
        key_path = f"{path}.{key}" if path else key
        description = prop.get("description") or _resolve(schema, prop).get("description", "")
        branches = _object_branches(schema, prop)
        section.rows.append(
            Row(
                path=key_path,
                type=_type_name(schema, prop, key_path),
                default=_default(prop, key in required, bool(branches) or "oneOf" in prop),
                allowed=_allowed(schema, prop),
                description=_text(description),
            )
        )
        for branch in branches:
            children.append((key_path, _heading(key_path), branch))
        for variant in prop.get("oneOf", []):
            heading = _heading(key_path, _variant_tag(schema, variant))
            children.append((key_path, heading, _resolve(schema, variant)))
    for child_path, child_title, child in children:
        _walk(schema, child, child_path, child_title, out)


def sections(schema: Schema) -> list[Section]:
    out: list[Section] = []
    _walk(schema, schema, "", _heading(""), out)
    return out


# --- rendering ----------------------------------------------------------------------------------

HEADER = """\
<!-- Generated by scripts/gen_docs.py from the spec's JSON Schema. Do not edit by hand.
     Regenerate: python scripts/gen_docs.py -->
# Spec reference

Every key of an llmdeploy spec (`apiVersion: {api_version}`, `kind: {kind}`), one table per
section, generated from the JSON Schema that `llmdeploy schema` prints and that is committed as
[`spec.schema.json`](spec.schema.json). Keys are camelCase; unknown keys are errors (with a
did-you-mean suggestion). Editors that speak the YAML language server complete and check specs
that start with

```yaml
# yaml-language-server: $schema={schema_id}
```

(`llmdeploy init` writes that line).

**Types are strict, and the loader and this schema agree on them.** A value has exactly the
type its table names: an `integer` is a number without a decimal point (`4`, not `4.0`, `"4"`
or `true`); a `number` also takes an integer (`1` is `1.0`); a `boolean` is `true` or `false`,
never `yes`, `1` or `"true"`; a `string` is never read from a number or a boolean (quote
`"1e3"` or `"0755"`, which YAML reads as numbers). The one YAML tag a spec may carry is `!!str`,
which makes a scalar a string as quotes do; any other (`!!binary`, `!!timestamp`, `!!int`,
`!custom`, `!!python/...`) is an error at its line. (JSON Schema's `integer` also admits `4.0`;
the loader does not.)

Some checks need more than the schema. `llmdeploy size` and `render` run the same ones, in
one pass, each reported at the field that is wrong: the instance type or family must be in the
GPU catalog, the architecture must be known, the engine must be able to serve the combination
(TensorRT-LLM: an FP8 KV cache or FP8 weights need an FP8 GPU, `engine.maxInputLen` at most
`serving.maxModelLen`; vLLM: every flag accepted by the pinned release), and `instanceType` and
`instanceFamily` are mutually exclusive. A URL (`autoscaling.prometheusAddress`, `model.id`,
S3 URIs) may not carry credentials (`user:password@`, `?token=`): they would be rendered in
plain text ([security.md](security.md)). A shared field the chosen engine does not use is an
error or a warning, never ignored in silence ([below](#fields-an-engine-does-not-use)).

Sections:

"""


def reference_markdown(schema: Schema) -> str:
    props = schema.get("properties", {})
    head = HEADER.format(
        api_version=props.get("apiVersion", {}).get("const", "?"),
        kind=props.get("kind", {}).get("const", "?"),
        schema_id=schema.get("$id", ""),
    )
    all_sections = sections(schema)
    chunks = [head]
    chunks += [f"- [{sec.title}](#{_anchor(sec.title)})\n" for sec in all_sections]
    chunks.append(f"- [{IGNORED_TITLE}](#{_anchor(IGNORED_TITLE)})\n")
    for sec in all_sections:
        chunks.append(f"\n## {sec.title}\n\n")
        if sec.description:
            chunks.append(sec.description + "\n\n")
        chunks.append("| key | type | default | allowed values | description |\n")
        chunks.append("|---|---|---|---|---|\n")
        for row in sec.rows:
            chunks.append(
                f"| `{row.path}` | {row.type} | {row.default} | {row.allowed} | "
                f"{row.description} |\n"
            )
    chunks.append(ignored_fields_markdown())
    return "".join(chunks)


IGNORED_TITLE = "Fields an engine does not use"


def ignored_fields_markdown() -> str:
    """Each engine's ``ignored_fields`` (engines/base.py): set in a spec, reported at its line."""
    from llmdeploy.engines import registry

    rows = [
        f"| `{name}` | `{path}` | {ignored.severity} | {_text(ignored.reason)} | "
        f"{_text(ignored.hint or '')} |\n"
        for name in registry.names()
        for path, ignored in registry.get(name).ignored_fields.items()
    ]
    return (
        f"\n## {IGNORED_TITLE}\n\n"
        "Shared fields that do nothing on an engine. Set in a spec, each is an error (the spec "
        "would not mean what it says) or a warning (nothing depends on it), at its line; the "
        "engine's own checks add value-dependent cases (vLLM: `serving.chunkedPrefill: false` "
        "is a warning, V1 always chunks prefill).\n\n"
        "| engine | key | reported as | why | instead |\n"
        "|---|---|---|---|---|\n" + "".join(rows)
    )


def generate() -> dict[str, str]:
    """Relative path -> the text that file must have."""
    from llmdeploy.cli.commands import schema_text
    from llmdeploy.spec.sections import json_schema

    # The committed JSON has sorted keys; the page follows the spec's own field order.
    return {SCHEMA_FILE: schema_text(), REFERENCE_FILE: reference_markdown(json_schema())}


def drift(root: Path = REPO) -> str:
    """A unified diff from the committed files to the generated ones ("" when up to date)."""
    chunks: list[str] = []
    for rel, new in generate().items():
        path = root / rel
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
        if old != new:
            chunks.extend(
                difflib.unified_diff(
                    old.splitlines(keepends=True),
                    new.splitlines(keepends=True),
                    fromfile=f"a/{rel}",
                    tofile=f"b/{rel}",
                )
            )
    return "".join(chunks)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--check", action="store_true", help="do not write; exit 1 with a diff on drift"
    )
    parser.add_argument("--root", type=Path, default=REPO, help="repository root")
    args = parser.parse_args(argv)
    if args.check:
        diff = drift(args.root)
        if diff:
            sys.stdout.write(diff)
            sys.stderr.write("docs are out of date; run: python scripts/gen_docs.py\n")
            return 1
        return 0
    for rel, text in generate().items():
        path = args.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            with path.open("w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            sys.stderr.write(f"wrote {rel}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
