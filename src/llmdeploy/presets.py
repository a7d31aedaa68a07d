"""The built-in presets as a catalog: what each one serves, on what, why, and whether it fits
with margin.

A preset is a spec under ``presets/`` whose file starts with its rationale: one comment line,
then an empty comment line, then the details (checkpoint and revision, why this instance and
tensor-parallel degree, what the SLO assumes). :func:`catalog` sizes every preset through the
one validation path of ``size`` and ``render`` (:func:`llmdeploy.pipeline.size_loaded`); the
CLI's ``presets`` table, ``presets show`` and the README's preset table are all made from it.
Sizing every preset takes a fraction of a second, so nothing is cached beyond the process.

"Fits with margin" (:func:`margin_problems`) is a rule every preset must pass (tested):

* it fits (the sizing has no reason to refuse it);
* one replica's KV cache (each data-parallel rank's, which serves a request alone) holds at
  least :data:`FULL_LENGTH_REQUESTS` requests of ``serving.maxModelLen`` tokens at once, so one
  long request never stalls a replica;
* the SLO's peak (``slo.concurrentRequests`` requests of ``inputTokens + outputTokens``) needs
  at most ``autoscaling.maxReplicas`` - :data:`SPARE_REPLICAS` replicas: the fleet can still
  absorb the loss of a replica (or of a node's worth, on a preset whose nodes hold one) at peak;
* memory outside the engine's budget: for an engine with a ceiling on its memory fraction
  (vLLM's ``gpu_memory_utilization``, which must leave room for the CUDA context and graphs) the
  fraction is at least :data:`UTILIZATION_HEADROOM` below it; for an engine that sizes its KV
  cache as a fraction of the memory free after loading (TensorRT-LLM), that fraction is at most
  :data:`MAX_FREE_FRACTION`.

* the performance model (docs/performance-model.md) says the preset meets its SLO's latency
  targets at the SLO's peak, each tightened by the model's calibration error, within
  ``maxReplicas``.

``predicted_tokens_per_s`` is the model's output tokens/s of one replica at its share of the
SLO's peak; None (shown as "—") where the model does not cover the configuration.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmdeploy import pipeline
from llmdeploy.engines import registry
from llmdeploy.spec import load

if TYPE_CHECKING:
    from pathlib import Path

    from llmdeploy.catalog.ec2 import Instance
    from llmdeploy.engines.base import ReleaseDate
    from llmdeploy.perf.assess import Performance
    from llmdeploy.sizing.types import Sizing
    from llmdeploy.spec.sections import Spec

FULL_LENGTH_REQUESTS = 2
SPARE_REPLICAS = 1
UTILIZATION_HEADROOM = 0.01
MAX_FREE_FRACTION = 0.9


@dataclass(frozen=True)
class Rationale:
    summary: str  # the first comment line
    details: tuple[str, ...]  # the comment lines after the empty one, as written


@dataclass(frozen=True)
class PresetSummary:
    """One row of the catalog: the spec's choices and the sizing's outcome."""

    name: str
    path: Path
    rationale: Rationale
    spec: Spec
    sizing: Sizing
    margin_problems: tuple[str, ...]
    # the performance model's output tokens/s of one replica at its share of the SLO's peak;
    # None where it does not model the configuration (shown as "—")
    predicted_tokens_per_s: float | None = None

    @property
    def instance(self) -> Instance:
        assert self.sizing.instance is not None  # a preset always sizes on an instance
        return self.sizing.instance

    @property
    def gpus_per_replica(self) -> int:
        # the replica's GPUs over all its nodes
        return self.gpus_per_pod * self.nodes

    @property
    def gpus_per_pod(self) -> int:
        """GPUs one pod requests: TP x DP (x PP) on one node, one pipeline stage per node."""
        return self.spec.hardware.gpus_per_pod

    @property
    def parallelism(self) -> str:
        """``TP2``, ``TP4 DP2 EP``, ``TP8 PP2``: how one replica splits the model over its GPUs."""
        hw = self.spec.hardware
        words = [f"TP{hw.tensor_parallel}"]
        if self.sizing.pp > 1:
            words.append(f"PP{self.sizing.pp}")
        if hw.data_parallel > 1:
            words.append(f"DP{hw.data_parallel}")
        if self.spec.serving.expert_parallel:
            words.append("EP")
        return " ".join(words)

    @property
    def kv_tokens_per_replica(self) -> int:
        """Every data-parallel rank holds its own KV cache (the sizing's tokens are one rank's)."""
        return self.sizing.kv_cache_tokens * self.sizing.data_parallel

    @property
    def nodes(self) -> int:
        """Nodes one replica spans (a LeaderWorkerSet group, one pipeline stage per node)."""
        return self.sizing.nodes

    @property
    def replicas_per_node(self) -> int:
        """Replicas one node holds (1 for a replica that spans several nodes)."""
        return self.instance.pods_per_node(self.gpus_per_pod)

    @property
    def engine(self) -> str:
        return f"{self.sizing.engine} {self.sizing.engine_version}"

    @property
    def engine_release(self) -> ReleaseDate | None:
        """When the preset's engine release was published, with the source of the date."""
        version = self.sizing.engine_version
        return None if version is None else registry.get(self.sizing.engine).release_date(version)

    @property
    def quantization(self) -> str:
        """The spec's weight quantization, or the format a checkpoint stores by itself (gpt-oss's
        MXFP4 experts are served with `quantization: none`)."""
        stored = self.sizing.request.architecture.quantization
        if self.spec.quantization == "none" and stored is not None:
            return stored.method
        return self.spec.quantization

    @property
    def price_per_replica(self) -> float | None:
        price = self.instance.price_usd_hr
        return None if price is None else price * self.nodes / self.replicas_per_node


def rationale(text: str, label: str) -> Rationale:
    """The leading comment of a preset: summary line, empty comment line, details."""
    lines = text.splitlines()
    head: list[str] = []
    for line in lines:
        if not line.startswith("#"):
            break
        head.append(line[1:].removeprefix(" ").rstrip())
    if len(head) < 2 or not head[0] or head[1]:  # a packaging bug: tests keep it from shipping
        raise ValueError(
            f"{label}: a preset starts with a one-line rationale comment, then an empty "
            "comment line ('#'), then the details"
        )
    return Rationale(summary=head[0], details=tuple(head[2:]))


def margin_problems(
    spec: Spec, sizing: Sizing, performance: Performance | None = None
) -> tuple[str, ...]:
    """Why ``spec`` does not fit with margin (the rule in the module docstring); () if it does."""
    out = [f"does not fit: {reason}" for reason in sizing.reasons]
    if performance is not None:
        out += [f"misses the SLO: {m}" for m in performance.misses()]
        out += [f"SLO at risk: {w}" for w in performance.warnings()]
    if sizing.max_concurrency < FULL_LENGTH_REQUESTS:
        where = "engine rank's" if sizing.data_parallel > 1 else "replica's"
        out.append(
            f"one {where} KV cache holds {sizing.max_concurrency} requests of "
            f"{sizing.max_model_len} tokens, fewer than {FULL_LENGTH_REQUESTS}"
        )
    scaling = spec.autoscaling
    most = scaling.max_replicas if scaling.enabled else scaling.min_replicas
    needed = sizing.replicas_for_slo
    if needed is None:
        out.append("one replica's KV cache holds none of the SLO's requests")
    elif needed + SPARE_REPLICAS > most:
        out.append(
            f"the SLO's peak needs {needed} replicas and at most {most} run: fewer than "
            f"{SPARE_REPLICAS} to spare"
        )
    gmu, ceiling = sizing.gpu_memory_utilization, sizing.max_gpu_memory_utilization
    if gmu is not None and ceiling is not None:
        if gmu > round(ceiling - UTILIZATION_HEADROOM, 2):
            out.append(
                f"gpu_memory_utilization {gmu} is within {UTILIZATION_HEADROOM} of its ceiling "
                f"{ceiling} (CUDA context and graphs live outside the budget)"
            )
    elif sizing.request.kv_cache_free_gpu_mem_fraction > MAX_FREE_FRACTION:
        out.append(
            f"the KV cache takes {sizing.request.kv_cache_free_gpu_mem_fraction} of the free "
            f"memory, more than {MAX_FREE_FRACTION}"
        )
    return tuple(out)


def summary(name: str) -> PresetSummary:
    """The catalog row of one preset; UsageError for a name that is not a preset."""
    return _summary(name)


@functools.cache
def _summary(name: str) -> PresetSummary:
    path = pipeline.preset_path(name)
    if path is None:
        raise pipeline.unknown_preset(name)
    loaded = load.load_spec_file(path)
    sized = pipeline.size_loaded(loaded, suggest=False, performance=True)
    perf = sized.performance
    return PresetSummary(
        name=name,
        path=path,
        rationale=rationale(path.read_text(encoding="utf-8"), f"preset {name}"),
        spec=loaded.spec,
        sizing=sized.sizing,
        margin_problems=margin_problems(loaded.spec, sized.sizing, perf),
        predicted_tokens_per_s=perf.estimate.output_tokens_per_s
        if perf is not None and perf.estimate is not None
        else None,
    )


def catalog() -> list[PresetSummary]:
    """Every preset, by name."""
    return [summary(name) for name in pipeline.preset_names()]
