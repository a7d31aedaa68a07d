"""``llmdeploy init``: a starter spec from a preset, commented so a new user sees every option.

The preset is kept as written; every optional section it leaves out is appended as a commented
block holding that section's defaults, taken from the spec models themselves (so the comments
cannot drift from what llmdeploy would use). Uncommenting a block changes nothing until a value
is edited.
"""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML

from llmdeploy.spec.load import parse_yaml
from llmdeploy.spec.sections import Spec, json_schema

SCHEMA_COMMENT = "# yaml-language-server: $schema={url}\n"


def _defaults(section: str) -> tuple[Any, str]:
    """The section's default value as the spec's own model dumps it (camelCase keys), and the
    section model's docstring."""
    field = next(f for n, f in Spec.model_fields.items() if (f.alias or n) == section)
    default = field.get_default(call_default_factory=True)
    if hasattr(default, "model_dump"):
        doc = (type(default).__doc__ or section).strip().splitlines()[0]
        return default.model_dump(by_alias=True, mode="json"), doc
    return None, ""  # a scalar or a required section: not a block to show


def _commented(section: str, value: Any, description: str) -> str:
    yaml = YAML(typ="rt")  # keeps the model's field order
    yaml.default_flow_style = False
    buf = io.StringIO()
    yaml.dump({section: value}, buf)
    body = "".join(f"# {line}\n" if line else "#\n" for line in buf.getvalue().splitlines())
    return f"# --- {section}: {description} (defaults shown)\n{body}"


def starter_spec(preset_text: str, preset: str) -> str:
    data, _ = parse_yaml(preset_text, f"preset {preset}")
    head = SCHEMA_COMMENT.format(url=json_schema()["$id"]) + (
        f"# Starter spec from preset {preset}. Every key: docs/spec-reference.md or "
        "`llmdeploy schema`.\n"
        "# Check it: llmdeploy size FILE   Render it: llmdeploy render FILE -o deploy/ "
        "--crd-dir CRDS\n"
    )
    tail = []
    for name, info in Spec.model_fields.items():
        key = info.alias or name
        if key in data:
            continue
        value, doc = _defaults(key)
        if isinstance(value, dict):
            tail.append(_commented(key, value, doc.rstrip(".")))
    extra = (
        "\n# Optional sections this preset leaves at their defaults:\n" + "\n".join(tail)
        if tail
        else ""
    )
    return head + preset_text + extra
