"""One error tree for llmdeploy.

Every error the user can cause is a subclass of :class:`LlmdeployError`. Errors carry data and
an exit code; they never print. ``cli`` is the single place that turns them into output and an
exit status (see ``docs/exit-codes.md``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class ExitCode(enum.IntEnum):
    """Process exit codes. Documented in docs/exit-codes.md; keep the two in sync."""

    OK = 0
    INTERNAL = 1  # a bug in llmdeploy: please report it
    USAGE = 2  # bad command line (typer/click also uses 2)
    SPEC = 3  # the spec file is invalid (syntax, schema, semantics)
    DOES_NOT_FIT = 4  # the sizing check says the configuration cannot start
    VALIDATION = 5  # a rendered or given manifest failed schema validation
    DRIFT = 6  # render --check found the output directory differs
    IO = 7  # a file could not be read or written
    MISSES_SLO = 8  # the performance model says the SLO's latency targets are missed


def worst_exit_code(codes: Iterable[int]) -> int:
    """The exit code of several specs (``size DIR``, ``plan DIR``): the worst of theirs, an
    error first, then "does not fit" (4), then "misses the SLO" (8); 0 when all are 0."""
    order = {ExitCode.OK: 0, ExitCode.MISSES_SLO: 1, ExitCode.DOES_NOT_FIT: 2}
    return max(codes, key=lambda c: order.get(ExitCode(c), 3), default=0)


@dataclass(frozen=True)
class Diagnostic:
    """One problem in a user file, located by 1-based line and column.

    A stage that knows which spec field is wrong but not where it is in the file sets ``field``
    (a dotted camelCase path such as ``engine.maxInputLen``); the pipeline then locates it with
    the loaded spec. ``notes`` point at the other fields of a conflict, each located the same
    way (severity ``note``). ``severity`` is ``error`` or ``warning``: warnings are reported and
    rendering goes on.
    """

    message: str
    file: str = "<spec>"
    line: int | None = None
    column: int | None = None
    hint: str | None = None
    source_line: str | None = None
    severity: str = "error"
    field: str | None = None
    notes: tuple[Diagnostic, ...] = ()

    def location(self) -> str:
        if self.line is None:
            return self.file
        col = self.column if self.column is not None else 1
        return f"{self.file}:{self.line}:{col}"


@dataclass(frozen=True)
class Notice:
    """A warning or an assumption a later stage reports about a spec field (printed, located
    at ``key_path``, by the CLI; it does not stop the command)."""

    key_path: str
    message: str
    severity: str = "warning"  # warning | note
    hint: str | None = None


class LlmdeployError(Exception):
    """Root of every error llmdeploy raises on purpose."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[object, ...]:
        # Errors cross process boundaries (fleet rendering): rebuild them from their data,
        # not from the formatted message.
        return (_rebuild, (type(self), self.__dict__))


def _rebuild(cls: type[LlmdeployError], state: dict[str, object]) -> LlmdeployError:
    exc = cls.__new__(cls)
    Exception.__init__(exc, state.get("message", ""))
    exc.__dict__.update(state)
    return exc


class UsageError(LlmdeployError):
    exit_code = ExitCode.USAGE


class SpecError(LlmdeployError):
    """The spec is invalid. Carries every diagnostic found in one pass."""

    exit_code = ExitCode.SPEC

    def __init__(self, diagnostics: list[Diagnostic] | tuple[Diagnostic, ...]) -> None:
        self.diagnostics = tuple(diagnostics)  # warnings found in the same pass included
        errors = [d for d in self.diagnostics if d.severity == "error"] or [*self.diagnostics]
        first = errors[0] if errors else Diagnostic("invalid spec")
        count = len(errors)
        suffix = f" (and {count - 1} more)" if count > 1 else ""
        super().__init__(f"{first.location()}: {first.message}{suffix}")


class SpecFieldError(LlmdeployError):
    """A later stage found a spec field that cannot work (a contradiction with the checkpoint,
    a missing credential). Carries the field's dotted spec path; the pipeline turns it into a
    located :class:`SpecError`."""

    exit_code = ExitCode.SPEC

    def __init__(self, key_path: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.key_path = key_path
        self.hint = hint


class UnknownArchitectureError(SpecError):
    """A model architecture the calculator does not support (refused, never guessed)."""


class DoesNotFitError(LlmdeployError):
    """The sizing verdict says the configuration cannot start. Carries the sizing result."""

    exit_code = ExitCode.DOES_NOT_FIT

    def __init__(self, message: str, sizing: object) -> None:
        super().__init__(message)
        self.sizing = sizing


class MissesSloError(LlmdeployError):
    """The performance model says the sized configuration misses a latency target of the SLO
    at its load. Carries the sizing and the performance result."""

    exit_code = ExitCode.MISSES_SLO

    def __init__(self, message: str, sizing: object, performance: object) -> None:
        super().__init__(message)
        self.sizing = sizing
        self.performance = performance


class ValidationFailedError(LlmdeployError):
    """Rendered or given manifests failed schema validation. Carries the check report."""

    exit_code = ExitCode.VALIDATION

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report


class InputError(LlmdeployError):
    """An input file or directory could not be read."""

    exit_code = ExitCode.IO


class CheckInputError(InputError):
    """A manifest or CRD given to ``validate`` could not be read or parsed."""


class UnsupportedFlagError(LlmdeployError):
    """An engine flag requested for a version whose parser does not accept it."""

    exit_code = ExitCode.SPEC

    def __init__(self, flag: str, version: str, reason: str) -> None:
        super().__init__(f"flag {flag} is not accepted by version {version}: {reason}")
        self.flag = flag
        self.version = version
        self.reason = reason


class UnsupportedVersionError(LlmdeployError, ValueError):
    """A version string that is not a release, or older than llmdeploy supports."""

    exit_code = ExitCode.SPEC


class DriftError(LlmdeployError):
    exit_code = ExitCode.DRIFT

    def __init__(self, message: str, diff: str) -> None:
        super().__init__(message)
        self.diff = diff


class OutputError(LlmdeployError):
    exit_code = ExitCode.IO
