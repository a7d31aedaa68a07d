"""Every example in the docs is a test (docs/CONTRIBUTING.md describes the convention).

README.md and docs/*.md are scanned for fenced code blocks, in document order:

* ```` ```console ```` blocks: every line that starts with ``$ llmdeploy`` is run (a trailing
  ``\\`` continues it on the next line) and must exit 0, or the code of a trailing ``# exit N``
  comment. Other lines are output or commands of other tools, shown but not run.
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

import re
import shlex
import shutil
import typing
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from conftest import load_script
from llmdeploy import pipeline
from llmdeploy.cli import commands as cli
from llmdeploy.errors import DoesNotFitError, ExitCode
from llmdeploy.spec.load import load_spec_text
from llmdeploy.spec.sections import API_VERSION, Spec

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
FENCE = re.compile(r"^(?P<fence>```+|~~~+)(?P<info>[^\n`]*)$")
EXIT = re.compile(r"\s+#\s*exit\s+(?P<code>\d+)\s*$")


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
    """The `$ llmdeploy` lines of a console block."""
    out: list[Command] = []
    if block.lang != "console":
        return out
    lines = block.text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        number = block.line + index
        index += 1
        if not line.startswith("$ llmdeploy"):
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
        if "|" in words:
            words = words[: words.index("|")]
        out.append(Command(f"{block.page.relative_to(REPO)}:{number}", tuple(words[1:]), code))
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
    if expect_no_fit:
        with pytest.raises(DoesNotFitError):
            pipeline.render_loaded(loaded, header_command="docs", crds=crds)
    result = pipeline.render_loaded(loaded, header_command="docs", crds=crds, force=expect_no_fit)
    assert result.report.ok, f"{block.where}: rendered manifests are invalid"
    assert not result.report.not_validated, f"{block.where}: documents not validated"


def run_command(command: Command) -> str | None:
    """None when the command did what the docs say, else a message."""
    result = CliRunner().invoke(cli.app, list(command.words))
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        return f"{command.where}: raised {type(exc).__name__}: {exc}"
    if result.exit_code != command.exit_code:
        return (
            f"{command.where}: `llmdeploy {shlex.join(command.words)}` exited "
            f"{result.exit_code}, the docs say {command.exit_code}\n{result.stderr[-2000:]}"
        )
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


# --- generated docs ------------------------------------------------------------------------------


def gen_docs() -> ModuleType:
    return load_script("scripts/gen_docs.py")


def test_generated_docs_are_up_to_date() -> None:
    diff = gen_docs().drift()
    assert diff == "", "generated docs are stale; run: python scripts/gen_docs.py\n" + diff


def test_gen_docs_check_fails_on_drift_and_write_fixes_it(tmp_path: Path) -> None:
    module = gen_docs()
    (tmp_path / "docs").mkdir()
    for rel in (module.SCHEMA_FILE, module.REFERENCE_FILE):
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
