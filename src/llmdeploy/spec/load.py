"""The load stage: read a spec file into a frozen :class:`~llmdeploy.spec.sections.Spec`.

A plain spec is read by libyaml (:mod:`llmdeploy.spec.fast_yaml`), which records the line and
column of every node; anything else, and every spec with an error, by ruamel's round-trip
loader (:mod:`llmdeploy.spec.careful_yaml`, imported only then). Pydantic errors are mapped
back to those positions (:mod:`llmdeploy.spec.messages`). All errors of a file are reported in
one pass.

Hostile input is refused early with a located message: files over ``MAX_BYTES``, non-UTF-8
bytes, duplicate keys, tabs, any tag but ``!!str``, and alias expansion beyond
``careful_yaml.MAX_NODES`` (YAML bombs).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pydantic

from llmdeploy.errors import Diagnostic, InputError, SpecError
from llmdeploy.spec.fast_yaml import fast_parse
from llmdeploy.spec.messages import diag, diagnostics, nearest
from llmdeploy.spec.sections import API_VERSION, Spec

MAX_BYTES = 1_048_576

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class LoadedSpec:
    spec: Spec
    path: Path | None  # None for a built-in preset
    label: str  # what diagnostics call the file
    positions: Mapping[Path_, tuple[int, int]] = field(default_factory=dict, compare=False)
    lines: tuple[str, ...] = field(default=(), compare=False)
    text: str = field(default="", compare=False)
    header_name: str | None = None  # what generated files' headers call it (None: ``label``)

    @functools.cached_property
    def _where(self) -> Mapping[Path_, tuple[int, int]]:
        if not self.positions and self.text:  # loaded by the fast path: positions on demand
            return parse_yaml(self.text, self.label)[1]
        return self.positions

    def in_file(self, key_path: str) -> bool:
        """Whether the file sets the dotted spec path itself (if not, the default applies)."""
        return _path(key_path) in self._where

    def diagnostic(
        self, key_path: str, message: str, hint: str | None = None, severity: str = "error"
    ) -> Diagnostic:
        """A diagnostic located at a dotted spec path such as ``engine.version`` (the nearest
        enclosing key that exists in the file)."""
        line, col = nearest(self._where, _path(key_path))
        return replace(
            diag(self.label, self.lines, message, line, col, hint),
            severity=severity,
            field=key_path,
        )

    def locate(self, d: Diagnostic, default_field: str | None = None) -> Diagnostic:
        """``d`` located in this file at its ``field`` (else at ``default_field``), its notes
        likewise; a note about a field the file does not set says it is the default."""
        notes = tuple(self._locate_note(n) for n in d.notes)
        key_path = d.field or default_field
        if d.line is not None or key_path is None:
            return replace(d, notes=notes)
        return replace(self.diagnostic(key_path, d.message, d.hint, d.severity), notes=notes)

    def _locate_note(self, note: Diagnostic) -> Diagnostic:
        if note.line is not None or note.field is None:
            return note
        if not self.in_file(note.field):
            return replace(note, message=f"{note.message} (the default)")
        return self.diagnostic(note.field, note.message, note.hint, note.severity)


def _path(key_path: str) -> Path_:
    """A dotted spec path as the YAML positions are keyed: ``engine.extraArgs.2`` is the third
    item of that list."""
    return tuple(int(p) if p.isdigit() else p for p in key_path.split("."))


def parse_yaml(text: str, label: str) -> tuple[Any, dict[Path_, tuple[int, int]]]:
    """Parse one YAML document into plain values plus a path → (line, col) map, with ruamel
    (:mod:`llmdeploy.spec.careful_yaml`, imported only when a spec needs it)."""
    from llmdeploy.spec.careful_yaml import parse_yaml as careful

    return careful(text, label)


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
    where: dict[Path_, tuple[int, int]] = {}
    fast = fast_parse(text, where)
    if fast is not None and "apiVersion" in fast:
        try:
            spec = Spec.model_validate(fast)
        except pydantic.ValidationError:
            pass  # the careful path below reports every error with its position
        else:
            return LoadedSpec(
                spec=spec, path=path, label=label, positions=where, lines=tuple(lines), text=text
            )
    data, positions = parse_yaml(text, label)
    misspelt = difflib.get_close_matches("apiVersion", list(data), n=1, cutoff=0.6)
    if "apiVersion" not in data and not misspelt:  # not a spec at all: one error, not dozens
        raise SpecError(
            [
                diag(
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
        raise SpecError(diagnostics(exc, positions, lines, label)) from None
    return LoadedSpec(
        spec=spec, path=path, label=label, positions=positions, lines=tuple(lines), text=text
    )
