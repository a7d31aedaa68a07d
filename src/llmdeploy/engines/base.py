"""The interface every serving engine implements, defined once.

The shared stages never branch on an engine's name: they ask the engine registered for the
spec's ``engine.type`` (:mod:`llmdeploy.engines.registry`). An engine answers five questions:

- which version the spec pins (the ``app.kubernetes.io/version`` label, and the spec field
  errors about flags and versions are reported at);
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

if TYPE_CHECKING:
    from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
    from llmdeploy.catalog.ec2 import Instance
    from llmdeploy.errors import Diagnostic
    from llmdeploy.perf.constants import EngineRun
    from llmdeploy.plan.types import EngineParts
    from llmdeploy.sizing.types import MemoryBudget, Sizing, SizingRequest
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


class Engine(Protocol):
    """One serving engine; implementations are ``ENGINE`` in ``engines/<name>/engine.py``."""

    name: str  # the spec's engine.type
    version_field: str  # spec path of the version pin (errors about flags are located there)
    # Spec `quantization` values the engine makes from a 16-bit checkpoint itself (at start, or
    # when it builds an engine); any other value needs a checkpoint already stored that way.
    runtime_quantizations: frozenset[str]
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

    def sizing_fields(self, spec: Spec) -> dict[str, object]:
        """``SizingRequest`` fields this engine takes from the spec (``engine_version`` is the
        version its memory model is keyed on, ...)."""
        ...

    def memory_budget(
        self,
        req: SizingRequest,
        arch: Architecture,
        quant: CheckpointQuant | None,
        total_gib: float,
        max_model_len: int,
    ) -> MemoryBudget:
        """Per-GPU budget: weights, activation peak, non-torch memory, graphs, KV cache left."""
        ...

    def pipeline_split(
        self, version: str | None, num_layers: int, pp: int
    ) -> tuple[int, ...] | None:
        """Decoder layers of each pipeline stage, first stage first, for ``version`` (None: the
        default one); None when llmdeploy serves this engine without pipeline parallelism
        (its ``check`` then refuses a spec that asks for it)."""
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
