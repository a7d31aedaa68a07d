"""Write ``src/llmdeploy/engines/vllm/cli_options.json``: every option string of the vLLM
server's parser, by release, which ``engine.extraArgs`` is checked against.

Input: a directory with one folder per release of ``engines/vllm/flags.py``'s
``CHECKED_VERSIONS``, each holding the parser's source files as shipped in that release's
wheel from PyPI (``vllm/engine/arg_utils.py``, the server's ``cli_args.py``, which moved from
``vllm/entrypoints/openai/`` to ``vllm/entrypoints/launchers/`` in 0.29 and to
``vllm/entrypoints/common/`` in 0.33, and the entrypoints ``vllm/entrypoints/cli/serve.py``,
``vllm/entrypoints/openai/api_server.py``, ``vllm/entrypoints/cli/main.py``,
``vllm/scripts.py`` where the release has them; every ``.py`` file in the folder is read), and
a ``wheels.txt`` naming each wheel and its sha256::

    pip download vllm==0.24.0 --no-deps --only-binary=:all: -d wheels/
    unzip wheels/vllm-0.24.0-*.whl 'vllm/*arg_utils.py' 'vllm/*cli_args.py' \
        'vllm/entrypoints/cli/serve.py' 'vllm/entrypoints/openai/api_server.py' \
        'vllm/entrypoints/cli/main.py' 'vllm/scripts.py' -d src/0.24.0

The options are read with ``ast``, not by running the parser (it needs torch and the compiled
extensions): every string starting with ``-`` passed positionally to an ``add_argument`` call,
and ``--<field>`` for each field of the ``*FrontendArgs`` config classes, which ``cli_args.py``
registers in a loop (``f"--{key.replace('_', '-')}"``) from vLLM 0.10 on. What ``ast`` cannot
see: the ``--no-<flag>`` negatives that ``argparse.BooleanOptionalAction`` adds for boolean
fields (the checker accepts ``--no-X`` wherever ``--X`` exists). ``tests/test_vllm_extra_args.py``
checks the result against the flag table, which was established by running each release's
parser: every form it renders for a release is found here for that release.

Usage: ``python scripts/vllm_cli_options.py SRC_DIR [-o OUT] [--check]``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "llmdeploy" / "engines" / "vllm" / "cli_options.json"


def options_in(source: str) -> set[str]:
    """The option strings one source file registers (see the module docstring)."""
    found: set[str] = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            found.update(
                arg.value
                for arg in node.args
                if isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and arg.value.startswith("-")
            )
        if isinstance(node, ast.ClassDef) and node.name.endswith("FrontendArgs"):
            found.update(
                "--" + item.target.id.replace("_", "-")
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            )
    return found


def release_options(folder: Path) -> set[str]:
    found: set[str] = set()
    for path in sorted(folder.rglob("*.py")):
        found |= options_in(path.read_text(encoding="utf-8"))
    return found


def table(src: Path, releases: list[str]) -> dict[str, object]:
    """{"releases": {version: wheel}, "options": {flag: [[since, until|null], ...]}}, ranges
    over ``releases`` in order (``until``: the first later release without the flag)."""
    wheels: dict[str, dict[str, str]] = {}
    for line in (src / "wheels.txt").read_text(encoding="utf-8").splitlines():
        version, wheel, sha = line.split()
        wheels[version] = {"wheel": wheel, "sha256": sha}
    per_release = {v: release_options(src / v) for v in releases}
    missing = [v for v in releases if not per_release[v] or v not in wheels]
    if missing:
        raise SystemExit(f"no parser sources for: {', '.join(missing)}")
    ranges: dict[str, list[list[str | None]]] = {}
    for flag in sorted(set().union(*per_release.values())):
        spans: list[list[str | None]] = []
        for version in releases:
            present = flag in per_release[version]
            if present and (not spans or spans[-1][1] is not None):
                spans.append([version, None])
            elif not present and spans and spans[-1][1] is None:
                spans[-1][1] = version
        ranges[flag] = spans
    return {
        "source": "PyPI vllm wheels; option strings read with ast by scripts/vllm_cli_options.py",
        "releases": {v: wheels[v] for v in releases},
        "options": ranges,
    }


def render(data: dict[str, object]) -> str:
    return json.dumps(data, indent=1, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(REPO / "src"))
    from llmdeploy.engines.vllm.flags import CHECKED_VERSIONS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("-o", "--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="fail if OUT differs")
    args = parser.parse_args(argv)
    text = render(table(args.src, list(CHECKED_VERSIONS)))
    if args.check:
        if args.out.read_text(encoding="utf-8") != text:
            print(f"{args.out} is stale", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
