"""The interface every serving engine implements, defined once.

The shared stages never branch on an engine's name: they ask the engine registered for the
spec's ``engine.type`` (:mod:`llmdeploy.engines.registry`). An engine answers five questions:

- which version the spec pins (the ``app.kubernetes.io/version`` label, and the spec field
  errors about flags and versions are reported at), and when that release was published;
- what in the spec it cannot serve, before any sizing (:meth:`Engine.check`, and the shared
  fields it does not use, :attr:`Engine.ignored_fields`): ``llmdeploy size`` and ``render``
  both run these checks (:mod:`llmdeploy.spec.checks`), so they accept the same specs;
- what its spec section means for sizing (``SizingRequest`` fields);
- its GPU-memory budget (:meth:`Engine.memory_budget`, used by the size stage), and how it
  divides the layers between pipeline stages (:meth:`Engine.pipeline_split`);
- how it runs one replica in the performance model, with the constants fitted for its version
  (:meth:`Engine.engine_run`, used by the perf stage);
- its part of the plan (:meth:`Engine.plan`: containers, volumes, ports, the autoscaling query,
  ConfigMap entries and extra files), which :func:`llmdeploy.plan.assemble.assemble` completes
  with everything engine-independent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from llmdeploy.sizing.types import EngineSizing

# The interface names only types of the stages below the engines: never an assembler, a
# calculator or the registry (tests/test_architecture.py).
if TYPE_CHECKING:
    from llmdeploy.catalog.ec2 import Instance
    from llmdeploy.errors import Diagnostic
    from llmdeploy.perf.constants import EngineRun
    from llmdeploy.plan.types import EngineParts
    from llmdeploy.sizing.types import Sizing
    from llmdeploy.spec.fields import EngineSection
    from llmdeploy.spec.sections import Spec


@dataclass(frozen=True)
class Ignored:
    """A shared spec field an engine does not use. Set in a spec, it is reported at its line:
    an ``error`` when the spec would not mean what it says (a memory or batching knob), a
    ``warning`` when nothing depends on it."""

    severity: Literal["error", "warning"]
    reason: str  # why it does not apply to this engine
    hint: str | None = None  # what to set instead


@dataclass(frozen=True)
class ReleaseDate:
    """When an engine release was published, and where that was read (``presets`` shows it)."""

    date: str  # ISO 8601 day
    source: str


class Engine(EngineSizing, Protocol):
    """One serving engine; implementations are ``ENGINE`` in ``engines/<name>/engine.py``.
    What the size stage asks of it (``name``, ``runtime_quantizations``, ``memory_budget``,
    ``pipeline_split``) is :class:`llmdeploy.sizing.types.EngineSizing`: a request carries its
    engine, so the size stage never looks one up."""

    version_field: str  # spec path of the version pin (errors about flags are located there)
    # Shared fields (dotted camelCase spec paths) that do nothing on this engine.
    ignored_fields: Mapping[str, Ignored]

    def check(self, spec: Spec, hardware: Sequence[Instance]) -> list[Diagnostic]:
        """What this engine cannot serve, known before sizing: the version it pins, features
        the GPUs of ``hardware`` lack (the instance type, or every size of the family), fields
        that contradict each other. Each diagnostic names its ``field`` (where it is reported);
        a conflict names the other fields in ``notes``. Errors and warnings."""
        ...

    def version(self, section: EngineSection) -> str:
        """The version the spec pins (rendered as ``app.kubernetes.io/version``)."""
        ...

    def release_date(self, version: str) -> ReleaseDate | None:
        """When ``version`` was published, with its source; None where llmdeploy has not read
        it (the presets' releases always have one: tests/test_presets.py)."""
        ...

    def sizing_fields(self, spec: Spec) -> dict[str, object]:
        """``SizingRequest`` fields this engine takes from the spec (``engine_version`` is the
        version its memory model is keyed on, ...)."""
        ...

    # the most sequences llmdeploy lets one replica schedule when it decides the limit
    max_sequences_cap: int

    def decide_batching(self, spec: Spec, sizing: Sizing) -> tuple[Spec, str | None]:
        """The spec with the batch limits the spec leaves out decided from ``sizing``
        (``sizing.batching``), and a line saying what was decided (None: nothing)."""
        ...

    def engine_run(self, sizing: Sizing, spec: Spec | None) -> EngineRun | None:
        """How this engine runs one replica of ``sizing`` in the performance model (batching
        limits, KV admission, precision) and the constants fitted for its version; ``spec`` is
        None in quick mode (``size --model``). None: no constants fitted for this engine, so
        its configurations are not estimated."""
        ...

    def plan(
        self, spec: Spec, instance: Instance, sizing: Sizing, header_command: str
    ) -> EngineParts:
        """This engine's containers, volumes, ports, metric query, ConfigMap and files."""
        ...
