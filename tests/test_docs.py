"""Every example in the docs is a test (docs/CONTRIBUTING.md describes the convention).

README.md and docs/*.md are scanned for fenced code blocks, in document order:

* ```` ```console ```` blocks: every line that starts with ``$ llmdeploy`` or
  ``$ python scripts/NAME.py`` is run (a trailing ``\\`` continues it on the next line) and must
  exit 0, or the code of a trailing ``# exit N`` comment, and print the lines shown after it
  (``...`` for lines left out; :func:`shown_matches`). Commands of other tools are shown, not run.
* ```` ```yaml ```` blocks whose first line (after an optional ``# file: NAME`` line) is
  ``apiVersion: llmdeploy.dev/v1alpha1`` are specs: they load and render (with ``--force``
  semantics when the block has a ``# expect: does-not-fit`` comment, and then must indeed not fit).
* A ```` ```yaml ```` block that starts with ``# file: NAME`` (a spec or any other YAML) is
  written to NAME, so later commands can use it.

The blocks of one page run in order in one fresh directory that holds ``presets/`` (the repo's
presets) and ``crds/`` (a CRD directory: the conftest ``crd_dir`` fixture).

Also here: the generated docs (``docs/spec.schema.json``, ``docs/spec-reference.md``) are up to
date, and the exit-code table in ``docs/exit-codes.md`` matches ``ExitCode``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import io
import re
import shlex
import shutil
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from conftest import load_script, unvalidated_kinds
from llmdeploy import pipeline
from llmdeploy.cli import commands as cli
from llmdeploy.errors import DoesNotFitError, ExitCode, MissesSloError
from llmdeploy.spec.load import load_spec_text
from llmdeploy.spec.sections import API_VERSION, Spec

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
FENCE = re.compile(r"^(?P<fence>```+|~~~+)(?P<info>[^\n`]*)$")
EXIT = re.compile(r"\s+#\s*exit\s+(?P<code>\d+)\s*$")
DOCS_COLUMNS = 100  # the terminal width the docs' console output was taken at


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the first line inside the fence
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


@dataclass(frozen=True)
class Command:
    where: str
    words: tuple[str, ...]  # after "llmdeploy", up to a pipe
    exit_code: int
    output: tuple[str, ...] = ()  # the lines the docs show after it, up to the next `$ ` line
    piped: bool = False  # `| other-tool`: what the docs show is that tool's output
    script: str | None = None  # `$ python scripts/NAME.py ...`: that script's main(words)


def blocks(page: Path, text: str | None = None) -> list[Block]:
    """Fenced code blocks of a Markdown page (its text may be given)."""
    out: list[Block] = []
    lines = (page.read_text(encoding="utf-8") if text is None else text).splitlines()
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index].strip())
        if not match:
            index += 1
            continue
        fence = match["fence"]
        lang = match["info"].strip().split(" ")[0].lower()
        body: list[str] = []
        start = index + 2
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence):
            body.append(lines[index])
            index += 1
        index += 1
        out.append(Block(page, start, lang, "\n".join(body) + "\n"))
    return out


def commands(block: Block) -> list[Command]:
    """The `$ llmdeploy` lines of a console block, each with the output shown after it."""
    out: list[Command] = []
    if block.lang != "console":
        return out
    lines = block.text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        number = block.line + index
        index += 1
        if not line.startswith(("$ llmdeploy", "$ python scripts/")):
            continue
        while line.endswith("\\") and index < len(lines):
            line = line[:-1] + " " + lines[index].strip()
            index += 1
        code = 0
        found = EXIT.search(line)
        if found:
            code = int(found["code"])
            line = line[: found.start()]
        words = shlex.split(line[2:], comments=True)
        piped = "|" in words
        if piped:
            words = words[: words.index("|")]
        shown: list[str] = []
        while index < len(lines) and not lines[index].startswith("$ "):
            shown.append(lines[index])
            index += 1
        where = f"{block.page.relative_to(REPO)}:{number}"
        script = words[1] if words[0] == "python" else None
        args = tuple(words[2:] if script else words[1:])
        out.append(Command(where, args, code, tuple(shown), piped, script))
    return out


def yaml_block(block: Block) -> tuple[str | None, str] | None:
    """(file name from a leading `# file: NAME` line or None, the rest) for a YAML block."""
    if block.lang not in ("yaml", "yml"):
        return None
    lines = block.text.splitlines()
    name = None
    if lines and (m := re.fullmatch(r"#\s*file:\s*(\S+)\s*", lines[0])):
        name = m[1]
        lines = lines[1:]
    return name, "\n".join(lines) + "\n"


def spec_block(block: Block) -> tuple[str | None, str] | None:
    """(file name or None, spec text) when the block is an llmdeploy spec."""
    found = yaml_block(block)
    if found is None or not found[1].startswith(f"apiVersion: {API_VERSION}\n"):
        return None
    return found


def file_block(block: Block) -> tuple[str, str] | None:
    """(file name, text) when the block is to be written to the page's directory."""
    found = yaml_block(block)
    if found is None or found[0] is None:
        return None
    return found[0], found[1]


ALL_BLOCKS = [b for page in PAGES if page.is_file() for b in blocks(page)]
PAGES_WITH_EXAMPLES = sorted(
    {b.page for b in ALL_BLOCKS if commands(b) or spec_block(b) or file_block(b)},
    key=lambda p: str(p),
)


# --- the examples --------------------------------------------------------------------------------


def write_file_block(block: Block, workdir: Path) -> None:
    found = file_block(block)
    assert found is not None
    name, text = found
    target = (workdir / name).resolve()
    assert workdir.resolve() in target.parents, f"{block.where}: {name} is outside the directory"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def run_spec_block(block: Block, workdir: Path, crds: object) -> None:
    found = spec_block(block)
    assert found is not None
    name, text = found
    loaded = load_spec_text(text, block.where, workdir / (name or "spec.yaml"))
    expect_no_fit = "# expect: does-not-fit" in block.text
    expect_miss = "# expect: misses-slo" in block.text
    if expect_no_fit or expect_miss:
        with pytest.raises(DoesNotFitError if expect_no_fit else MissesSloError):
            pipeline.render_loaded(loaded, header_command="docs", crds=crds)
    result = pipeline.render_loaded(
        loaded, header_command="docs", crds=crds, force=expect_no_fit or expect_miss
    )
    assert result.report.ok, f"{block.where}: rendered manifests are invalid"
    assert not unvalidated_kinds(result.report, crds), f"{block.where}: documents not validated"


def _lines(text: str) -> list[str]:
    out = [line.rstrip() for line in text.splitlines()]
    while out and not out[-1]:
        out.pop()
    return out


def shown_matches(shown: Sequence[str], out: Sequence[str], err: Sequence[str] = ()) -> bool:
    """The docs' lines are the printed stdout and stderr lines, each stream in its order and the
    two interleaved in any way (a terminal shows them as the buffers flush); a line ``...``
    stands for any lines left out (none too)."""

    @functools.cache
    def match(i: int, j: int, k: int) -> bool:
        if i == len(shown):
            return j == len(out) and k == len(err)
        if shown[i].strip() == "...":
            return (
                match(i + 1, j, k)
                or (j < len(out) and match(i, j + 1, k))
                or (k < len(err) and match(i, j, k + 1))
            )
        return (j < len(out) and shown[i] == out[j] and match(i + 1, j + 1, k)) or (
            k < len(err) and shown[i] == err[k] and match(i + 1, j, k + 1)
        )

    return match(0, 0, 0)


def run_command(command: Command) -> str | None:
    """None when the command did what the docs say and printed what they show, else a message.

    The comparison is line by line with trailing blanks dropped (rich pads table rows), at the
    terminal width ``DOCS_COLUMNS`` (:func:`shown_matches`). The output of a command piped into
    another tool is that tool's, so it is not compared."""
    if command.script is not None:
        return _run_script(command)
    result = CliRunner().invoke(cli.app, list(command.words), env={"COLUMNS": str(DOCS_COLUMNS)})
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        return f"{command.where}: raised {type(exc).__name__}: {exc}"
    return _compare(command, result.exit_code, result.stdout, result.stderr)


def _run_script(command: Command) -> str | None:
    """A repository script's ``main(argv)``, in process."""
    assert command.script is not None
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = load_script(command.script).main(list(command.words))
    return _compare(command, code, out.getvalue(), err.getvalue())


def _compare(command: Command, code: int, stdout: str, stderr: str) -> str | None:
    said = f"`{command.script or 'llmdeploy'} {shlex.join(command.words)}`"
    if code != command.exit_code:
        return (
            f"{command.where}: {said} exited {code}, the docs say {command.exit_code}\n"
            f"{stderr[-2000:]}"
        )
    shown = _lines("\n".join(command.output))
    out, err = _lines(stdout), _lines(stderr)
    if not command.piped and not shown_matches(shown, out, err):
        diff = "\n".join(
            difflib.unified_diff(shown, err + out, "docs", "stderr+stdout", lineterm="")
        )
        return f"{command.where}: {said} printed something else than the docs show:\n{diff}"
    return None


@pytest.mark.parametrize(
    "page", PAGES_WITH_EXAMPLES, ids=[str(p.relative_to(REPO)) for p in PAGES_WITH_EXAMPLES]
)
def test_docs_examples_work(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crd_dir: Path, crds: object
) -> None:
    (tmp_path / "presets").symlink_to(REPO / "presets", target_is_directory=True)
    (tmp_path / "crds").symlink_to(crd_dir, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LLMDEPLOY_CRD_DIR", raising=False)
    for block in (b for b in ALL_BLOCKS if b.page == page):
        if file_block(block):
            write_file_block(block, tmp_path)
        if spec_block(block):
            run_spec_block(block, tmp_path, crds)
        for command in commands(block):
            problem = run_command(command)
            assert problem is None, problem


def test_there_are_docs_examples() -> None:
    """A scanner that finds nothing would pass every page: make sure it finds the guide."""
    guide = REPO / "docs" / "user-guide.md"
    assert guide in PAGES_WITH_EXAMPLES
    guide_blocks = [b for b in ALL_BLOCKS if b.page == guide]
    assert sum(len(commands(b)) for b in guide_blocks) >= 8
    assert any(c.exit_code == int(ExitCode.DOES_NOT_FIT) for b in guide_blocks for c in commands(b))


def test_block_parser() -> None:
    page = REPO / "docs" / "CONTRIBUTING.md"
    text = (
        "x\n```console\n$ llmdeploy size --model llama-3-70b \\\n    --tp 4  # exit 4\n"
        "output line\n$ kubectl apply -f deploy/\n$ llmdeploy render -p a -o - | kubectl apply"
        " -f -\n```\n"
    )
    parsed = blocks(page, text)
    assert [b.lang for b in parsed] == ["console"]
    found = commands(parsed[0])
    assert [c.words for c in found] == [
        ("size", "--model", "llama-3-70b", "--tp", "4"),
        ("render", "-p", "a", "-o", "-"),
    ]
    assert [c.exit_code for c in found] == [4, 0]
    assert found[0].where.endswith(":3")
    assert [c.output for c in found] == [("output line",), ()]
    assert [c.piped for c in found] == [False, True]


def test_shown_output_must_be_what_was_printed() -> None:
    out, err = ["a", "b", "c"], ["note: x"]
    assert shown_matches(["note: x", "a", "b", "c"], out, err)
    assert shown_matches(["a", "b", "note: x", "c"], out, err)  # streams interleave
    assert shown_matches(["a", "...", "note: x"], out, err)
    assert shown_matches(["..."], out, err)
    assert not shown_matches(["a", "b", "c"], out, err)  # a printed line left out
    assert not shown_matches(["b", "a", "c", "note: x"], out, err)  # out of order
    assert not shown_matches(["a", "b", "c", "d", "note: x"], out, err)  # a line not printed
    assert not shown_matches(["a", "B", "c", "note: x"], out, err)
    wrong = Command("t:1", ("presets",), 0, ("llama3-70b-vllm-p4d  vllm  (not what it prints)",))
    problem = run_command(wrong)
    assert problem is not None and "printed something else than the docs show" in problem
    listed = [line for line in _lines(CliRunner().invoke(cli.app, ["presets"]).stdout)]
    assert run_command(dataclasses.replace(wrong, output=tuple(listed))) is None


# --- generated docs ------------------------------------------------------------------------------


def gen_docs() -> ModuleType:
    return load_script("scripts/gen_docs.py")


def test_generated_docs_are_up_to_date() -> None:
    diff = gen_docs().drift()
    assert diff == "", "generated docs are stale; run: python scripts/gen_docs.py\n" + diff


def test_gen_docs_check_fails_on_drift_and_write_fixes_it(tmp_path: Path) -> None:
    module = gen_docs()
    (tmp_path / "docs").mkdir()
    for rel in (module.SCHEMA_FILE, module.REFERENCE_FILE, module.README_FILE):
        shutil.copy(REPO / rel, tmp_path / rel)
    assert module.main(["--check", "--root", str(tmp_path)]) == 0
    reference = tmp_path / module.REFERENCE_FILE
    reference.write_text(reference.read_text(encoding="utf-8").replace("| `name` |", "| `nom` |"))
    assert module.main(["--check", "--root", str(tmp_path)]) == 1
    assert module.main(["--root", str(tmp_path)]) == 0
    assert module.main(["--check", "--root", str(tmp_path)]) == 0
    assert (tmp_path / module.REFERENCE_FILE).read_text() == (
        REPO / module.REFERENCE_FILE
    ).read_text()
    # the README's preset table: a stale row is drift, and writing restores the catalog's
    readme = tmp_path / module.README_FILE
    readme.write_text(readme.read_text(encoding="utf-8").replace("| mxfp4 |", "| none |"))
    assert module.main(["--check", "--root", str(tmp_path)]) == 1
    assert module.main(["--root", str(tmp_path)]) == 0
    assert readme.read_text(encoding="utf-8") == (REPO / module.README_FILE).read_text()


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Annotated, unions, Optional)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _key_paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every key path of the spec, from the pydantic models (not from the schema)."""
    out: set[str] = set()
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        out.add(path)
        for sub in _models_in(field.annotation):
            out |= _key_paths(sub, path + ".")
    return out


def test_spec_reference_documents_every_key() -> None:
    reference = (REPO / "docs" / "spec-reference.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([^`]+)` \|", reference, re.M))
    missing = _key_paths(Spec) - documented
    assert not missing, f"keys missing from docs/spec-reference.md: {sorted(missing)}"


def test_exit_code_table_matches_the_enum() -> None:
    table = (REPO / "docs" / "exit-codes.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|", table, re.M))
    assert {int(k): v for k, v in rows.items()} == {int(c): c.name for c in ExitCode}
