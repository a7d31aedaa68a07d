"""``llmdeploy plan``: the configurations that fit and meet the spec's SLO, cheapest first.

The search varies what decides speed and cost and keeps the rest of the spec: instance family
(the sizing picks the cheapest size of each that fits), tensor-parallel degree, quantization
(the spec's, and from a 16-bit checkpoint what the engine quantizes at load or build time,
where the GPU supports it), KV-cache dtype and engine. Each candidate is validated as a spec,
sized and put through the performance model with no replica ceiling; the ranking is by $ per
1M output tokens at the SLO's load with the replicas its latency and memory need, then by
the fleet's $/h. Candidates whose spec, engine or sizing refuses them are dropped, counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from llmdeploy.catalog import ec2
from llmdeploy.engines import registry
from llmdeploy.errors import LlmdeployError, UsageError
from llmdeploy.perf.assess import Performance, assess, gpu_share

if TYPE_CHECKING:
    from llmdeploy.sizing.types import Sizing
    from llmdeploy.spec.sections import Spec

__all__ = ["Candidate", "SearchResult", "engine_section", "search"]

TP_DEGREES = (1, 2, 4, 8)
_NO_BUILD: dict[str, dict[str, str]] = {"trtllm": {"backend": "pytorch"}}
NO_CEILING = 1000  # autoscaling.maxReplicas of a candidate: the search finds the count


@dataclass(frozen=True)
class Candidate:
    """One configuration: the spec changes that make it, its sizing and performance."""

    changes: tuple[tuple[str, Any], ...]  # (dotted camelCase spec path, value), in spec order
    sizing: Sizing
    performance: Performance

    @property
    def meets(self) -> bool:
        p = self.performance
        return p.estimate is not None and p.replicas_needed is not None and p.meets_slo is not False

    @property
    def replicas(self) -> int:
        return self.performance.replicas_at_peak

    @property
    def fleet_usd_per_hour(self) -> float:
        c = self.performance.on_demand
        return math.inf if c is None else c.fleet_usd_per_hour

    @property
    def usd_per_1m_output_tokens(self) -> float:
        c = self.performance.on_demand
        if c is None or c.usd_per_1m_output_tokens is None:
            return math.inf
        return c.usd_per_1m_output_tokens

    def key(self) -> tuple[bool, float, float, str]:
        inst = self.sizing.instance
        return (
            not self.meets,
            self.usd_per_1m_output_tokens,
            self.fleet_usd_per_hour,
            inst.name if inst else "",
        )


@dataclass(frozen=True)
class SearchResult:
    candidates: tuple[Candidate, ...]  # the configurations simulated, ranked
    tried: int
    refused: int  # the spec, the engine or the sizing refused it
    not_fitting: int
    not_modelled: int
    pruned: int  # fit, but their cost bound is above the top ``top``: not simulated


def _families(only: Sequence[str] | None) -> list[str]:
    known = [
        f
        for f in ec2.families()
        if any(i.price_usd_hr is not None for i in ec2.instances().values() if i.family == f)
    ]
    if not only:
        return known
    unknown = [f for f in only if f not in ec2.families()]
    if unknown:
        raise UsageError(f"unknown instance family {unknown[0]!r}; known: {', '.join(known)}")
    unpriced = [f for f in only if f not in known]
    if unpriced:
        raise UsageError(
            f"instance family {unpriced[0]!r} has no on-demand price in the catalog, so it cannot "
            f"be ranked by cost; priced families: {', '.join(known)}"
        )
    return [f for f in known if f in only]


def _variants(
    spec: Spec, engines: Sequence[str], families: Sequence[str]
) -> Iterator[tuple[tuple[str, Any], ...]]:
    max_gpus = {f: max(i.gpu_count for i in ec2.instances().values() if i.family == f)
                for f in families}  # fmt: skip
    for engine in engines:
        # from a 16-bit checkpoint, every quantization the engine produces at load or build
        # time (vLLM: FP8; TensorRT-LLM engines: FP8, INT8, INT4 AWQ/GPTQ)
        runtime = registry.get(engine).runtime_quantizations if spec.quantization == "none" else ()
        quants = [spec.quantization, *sorted(runtime)]
        for family in families:
            fp8 = any(i.gpu.fp8 for i in ec2.instances().values() if i.family == family)
            for tp in (t for t in TP_DEGREES if t <= max_gpus[family]):
                for quant in quants if fp8 else [q for q in quants if q != "fp8"]:
                    for kv in ("auto", "fp8") if fp8 else ("auto",):
                        yield (
                            ("engine.type", engine),
                            ("hardware.instanceFamily", family),
                            ("hardware.tensorParallel", tp),
                            ("quantization", quant),
                            ("kvCacheDtype", kv),
                        )


def engine_section(name: str) -> dict[str, str]:
    """The engine section a configuration on another engine starts from."""
    return {"type": name, **_NO_BUILD.get(name, {})}


def _candidate_spec(spec: Spec, changes: tuple[tuple[str, Any], ...]) -> Spec:
    from llmdeploy.spec.sections import Spec as SpecModel

    data = spec.model_dump(by_alias=True, mode="json", exclude_unset=True)
    values = dict(changes)
    if data.get("engine", {}).get("type", registry.DEFAULT) != values["engine.type"]:
        # the new engine's defaults; an engine that needs a build artifact store serves
        # without one where it can (TensorRT-LLM: trtllm-serve on the PyTorch backend)
        data["engine"] = engine_section(values["engine.type"])
    data["hardware"] = {
        "instanceFamily": values["hardware.instanceFamily"],
        "tensorParallel": values["hardware.tensorParallel"],
    }
    data["quantization"] = values["quantization"]
    data["kvCacheDtype"] = values["kvCacheDtype"]
    # the search finds the replica count: no ceiling, whatever the spec's autoscaling says
    data["autoscaling"] = {**data.get("autoscaling", {}), "enabled": True, "minReplicas": 1,
                           "maxReplicas": NO_CEILING}  # fmt: skip
    return SpecModel.model_validate(data)


def search(
    spec: Spec,
    spec_dir: Path | None,
    engines: Sequence[str] | None = None,
    families: Sequence[str] | None = None,
    top: int = 10,
) -> SearchResult:
    """The configurations of ``spec`` the search varies, ranked; at least the ``top`` best are
    exact. Every variant is validated and sized (cheap); the performance model (not cheap)
    runs in the order of a lower bound on $/1M output tokens (the price over the replica's
    throughput ceiling, :func:`llmdeploy.perf.api.throughput_ceiling`) and stops once ``top``
    configurations meet the SLO and no remaining bound can beat the last of them."""
    from llmdeploy.perf import api, inputs
    from llmdeploy.sizing.requests import size_spec

    if spec.hardware.nodes_per_replica != 1:
        raise UsageError("plan searches one-node replicas; this spec spans several nodes")
    if spec.hardware.data_parallel != 1 or spec.hardware.pipeline_parallel not in (None, 1):
        raise UsageError(
            "plan searches tensor-parallel replicas; the performance model does not cover "
            "hardware.dataParallel or pipelineParallel, which this spec sets"
        )
    engines = list(engines or [spec.engine.type])
    for name in engines:
        if name not in registry.names():
            raise UsageError(f"unknown engine {name!r}; known: {', '.join(registry.names())}")
    sized: list[tuple[float, tuple[tuple[str, Any], ...], Spec, Sizing]] = []
    tried = refused = not_fitting = not_modelled = 0
    for changes in _variants(spec, engines, _families(families)):
        tried += 1
        family = dict(changes)["hardware.instanceFamily"]
        try:
            variant = _candidate_spec(spec, changes)
            engine = registry.get(variant.engine.type)
            hardware = [i for i in ec2.instances().values() if i.family == family]
            if any(d.severity == "error" for d in engine.check(variant, hardware)):
                refused += 1
                continue
            sizing = size_spec(variant, spec_dir, suggest=False)
            # each candidate gets the batch limit its own KV cache decides (as render does)
            decided, why = engine.decide_batching(variant, sizing)
            if why is not None:
                variant, sizing = decided, size_spec(decided, spec_dir, suggest=False)
        except (ValidationError, LlmdeployError):
            refused += 1
            continue
        if not sizing.fits or sizing.instance is None:
            not_fitting += 1
            continue
        run = engine.engine_run(sizing, variant)
        if inputs.unsupported(sizing) is not None or run is None:
            not_modelled += 1
            continue
        price = (sizing.instance.price_usd_hr or math.inf) * sizing.nodes * gpu_share(sizing)
        ceiling = api.throughput_ceiling(
            inputs.hardware(sizing.instance),
            inputs.geometry(sizing.request.architecture),
            run.deployment,
            sizing.request.slo_input_tokens,
            run.constants,
            concurrency=sizing.request.slo_concurrent_requests,
        )
        sized.append((price / (ceiling * 3600.0) * 1e6, changes, variant, sizing))
    sized.sort(key=lambda t: t[0])
    found: list[Candidate] = []
    done = 0
    for bound, changes, variant, sizing in sized:
        best = sorted(c.usd_per_1m_output_tokens for c in found if c.meets)
        if len(best) >= top and bound > best[top - 1]:
            break
        done += 1
        run = registry.get(variant.engine.type).engine_run(sizing, variant)
        found.append(Candidate(changes, sizing, assess(sizing, run, variant, threshold=False)))
    found.sort(key=Candidate.key)
    return SearchResult(tuple(found), tried, refused, not_fitting, not_modelled, len(sized) - done)
