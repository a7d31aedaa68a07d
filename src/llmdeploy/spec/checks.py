"""The checks every command that reads a spec runs before sizing: ``size``, ``render`` and the
library's :func:`llmdeploy.pipeline.size_loaded` alike, so they accept the same specs and report
each problem the same way, at the field that is wrong.

Past the schema (the load stage), a spec must name hardware in the GPU catalog and a model
architecture llmdeploy can size, and its engine must be able to serve it: the engine's own
cross-field checks (``Engine.check``) and the shared fields it does not use
(``Engine.ignored_fields``), reported as errors or warnings but never passed over in silence.
All problems of a file are reported in one pass.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from llmdeploy.catalog import ec2 as catalog
from llmdeploy.catalog.models import load_architecture
from llmdeploy.engines import registry
from llmdeploy.errors import (
    Diagnostic,
    ExitCode,
    LlmdeployError,
    SpecError,
    SpecFieldError,
    UnsupportedFlagError,
)
from llmdeploy.spec.load import LoadedSpec

if TYPE_CHECKING:
    from pydantic import BaseModel

    from llmdeploy.catalog.ec2 import Instance
    from llmdeploy.spec.sections import Spec


def check_spec(loaded: LoadedSpec) -> tuple[Diagnostic, ...]:
    """Every check that needs no sizing. Raises SpecError carrying all errors (and warnings),
    located in the spec; returns the warnings, located, when there is no error."""
    spec = loaded.spec
    found: list[Diagnostic] = []
    hardware = _hardware(spec, found)
    try:
        load_architecture(spec.model.architecture, loaded.path.parent if loaded.path else None)
    except SpecError as exc:
        found.extend(d if d.field else _at(d, "model.architecture") for d in exc.diagnostics)
    engine = registry.get(spec.engine.type)
    for key_path, ignored in engine.ignored_fields.items():
        if is_set(spec, key_path):
            found.append(
                Diagnostic(
                    f"`{key_path}` does not apply to engine {engine.name}: {ignored.reason}",
                    field=key_path,
                    severity=ignored.severity,
                    hint=ignored.hint,
                )
            )
    found.extend(engine.check(spec, hardware))
    located = sorted((loaded.locate(d) for d in found), key=lambda d: (d.line or 0, d.column or 0))
    if any(d.severity == "error" for d in located):
        raise SpecError(located)
    return tuple(located)


def _at(d: Diagnostic, key_path: str) -> Diagnostic:
    return Diagnostic(d.message, hint=d.hint, severity=d.severity, field=key_path, notes=d.notes)


def _hardware(spec: Spec, found: list[Diagnostic]) -> tuple[Instance, ...]:
    """The instances the spec allows: its instance type, or every size of its family."""
    hw = spec.hardware
    families = catalog.families()
    if hw.instance_type is not None:
        instance = catalog.instance(hw.instance_type)
        if instance is None:
            found.append(_unknown_type(hw.instance_type, families))
        return (instance,) if instance is not None else ()
    members = catalog.family_members(hw.instance_family or "")
    if not members:
        message = (
            f"`hardware.instanceFamily`: {hw.instance_family!r} is not a GPU instance family "
            "in llmdeploy's catalog"
        )
        close = difflib.get_close_matches(str(hw.instance_family), families, n=1, cutoff=0.6)
        found.append(
            Diagnostic(
                message + (f" (did you mean {close[0]!r}?)" if close else ""),
                field="hardware.instanceFamily",
                hint=None if close else "GPU instance families: " + ", ".join(families),
            )
        )
    return tuple(members)


def _unknown_type(name: str, families: list[str]) -> Diagnostic:
    family = name.partition(".")[0]
    where = "hardware.instanceType"
    if family not in families:  # m5.large, c7i.4xlarge: no GPU, or not catalogued
        return Diagnostic(
            f"`{where}`: {name!r} is not a GPU instance type: llmdeploy's catalog has no "
            f"family {family!r}",
            field=where,
            hint="GPU instance families: " + ", ".join(families),
        )
    sizes = [i.name for i in catalog.family_members(family)]
    close = difflib.get_close_matches(name, sizes, n=1, cutoff=0.6)
    return Diagnostic(
        f"`{where}`: {name!r} is not a size of the {family} family"
        + (f" (did you mean {close[0]!r}?)" if close else ""),
        field=where,
        hint=None if close else f"{family} sizes: " + ", ".join(sizes),
    )


def is_set(spec: Spec, key_path: str) -> bool:
    """Whether the spec sets the dotted camelCase path itself (rather than taking a default)."""
    node: BaseModel = spec
    for part in key_path.split("."):
        name = next((n for n, f in type(node).model_fields.items() if f.alias == part), part)
        if name not in node.model_fields_set:
            return False
        node = getattr(node, name)
    return True


@contextlib.contextmanager
def located(loaded: LoadedSpec, default_field: str) -> Iterator[None]:
    """Give spec errors raised by later stages a FILE:LINE:COL in the spec: at the field each
    names, else at ``default_field``."""
    try:
        yield
    except UnsupportedFlagError as exc:
        raise SpecError([loaded.diagnostic(default_field, exc.message)]) from None
    except SpecFieldError as exc:
        raise SpecError([loaded.diagnostic(exc.key_path, exc.message, exc.hint)]) from None
    except SpecError as exc:
        raise type(exc)([loaded.locate(d, default_field) for d in exc.diagnostics]) from None
    except LlmdeployError as exc:
        if exc.exit_code != ExitCode.SPEC:
            raise
        raise SpecError([loaded.diagnostic(default_field, exc.message)]) from None
