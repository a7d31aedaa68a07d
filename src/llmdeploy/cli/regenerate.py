"""The ``# Regenerate:`` line of generated files: one canonical command per output, the same bytes
however the user spelt the paths or wherever they ran it from (issue 23, item 1).

The paths in it are relative to the deepest directory that holds the spec files (or spec
directories) and the output directory: ``llama.yaml -o deploy`` for ``repo/llama.yaml`` rendered
into ``repo/deploy``, whether it was typed as ``-o deploy/``, ``-o ./deploy``, an absolute path
or from another directory. Symbolic links and ``..`` are resolved first. When nothing but the
file-system root holds them all, the paths are absolute (a relative path from ``/`` reads as one
from the current directory). The base comes from the paths themselves, never from the shell's
current directory, so ``render --check`` compares what the spec renders, not how it was typed.

Nothing here touches the file system beyond resolving paths, or prints.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Canonical", "canonical"]


@dataclass(frozen=True)
class Canonical:
    """Canonical spellings of a render's paths and its regenerate command."""

    base: Path  # the directory the names are relative to
    command: str  # the ``# Regenerate:`` command

    def name(self, path: Path) -> str:
        """The canonical name of a spec file (one given, or one in a directory given)."""
        return _relative(_resolve(path), self.base)


def _resolve(path: Path) -> Path:
    return Path(os.path.abspath(path)).resolve()


def _relative(path: Path, base: Path) -> str:
    if base == Path(base.anchor):
        return path.as_posix()
    rel = os.path.relpath(path, base)
    return Path(rel).as_posix()


def canonical(
    specs: Sequence[Path], preset: str | None, output: str, *, force: bool = False
) -> Canonical:
    """The canonical ``llmdeploy render`` command for ``specs`` (or ``preset``) into ``output``
    (a directory, or ``-`` for stdout)."""
    resolved = [_resolve(p) for p in specs]
    out = None if output == "-" else _resolve(Path(output))
    holders = [p.parent for p in resolved] + ([out.parent] if out is not None else [])
    base = Path(os.path.commonpath([str(h) for h in holders])) if holders else Path("/")
    words = ["--preset", preset] if preset else [_relative(p, base) for p in resolved]
    words += ["-o", "-" if out is None else _relative(out, base)]
    if force:
        words.append("--force")
    return Canonical(base, "llmdeploy render " + shlex.join(words))
