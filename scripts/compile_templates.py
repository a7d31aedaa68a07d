#!/usr/bin/env python3
"""Precompile the Jinja templates: ``src/llmdeploy/compiled_templates.json``.

For every template of the one render environment (``llmdeploy.render.environment()``: the shared
``templates/`` and each engine's), the Python source Jinja generates for it, with the sha256 of
the template source and the key it depends on (Jinja's version and the environment's options).
``llmdeploy.render`` uses an entry only when the template source and the key still match, so a
stale file costs time, never output. Deterministic: same templates and Jinja, same bytes.

Usage::

    python scripts/compile_templates.py          # (re)write the file
    python scripts/compile_templates.py --check  # exit 1 if it is out of date

``tests/test_golden.py`` runs the check.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from llmdeploy import render

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "llmdeploy" / render.COMPILED


def compiled() -> str:
    env = render.environment()
    templates = {}
    for name in env.list_templates():
        source, filename, _ = render.source_loader().get_source(env, name)
        code = env.compile(source, name, filename, raw=True)
        templates[name] = {"sha256": render.source_digest(source), "code": code}
    data = {
        "generated_by": "scripts/compile_templates.py",
        "compile_key": render.compile_key(env),
        "templates": templates,
    }
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    args = parser.parse_args(argv)
    text = compiled()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.is_file() else ""
        if current != text:
            print(f"{OUT} is stale; run: python scripts/compile_templates.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {len(json.loads(text)['templates'])} templates to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
