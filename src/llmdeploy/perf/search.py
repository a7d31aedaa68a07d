"""``llmdeploy plan``: the configurations that fit and meet the spec's SLO, cheapest first.

The search varies what decides speed and cost and keeps the rest of the spec: instance family
(the sizing picks the cheapest size of each that fits), tensor-parallel degree, quantization
(the spec's, and from a 16-bit checkpoint what the engine quantizes at load or build time,
where the GPU supports it), KV-cache dtype and engine. Each candidate is validated as a spec,
sized and put through the performance model with no replica ceiling, so its cost is that of
the replicas the SLO needs. A configuration meets the SLO when its latency does with those
replicas and the deployment can run them: no more than ``autoscaling.maxReplicas`` (with
autoscaling on) and no more GPUs than the NodePool limit ``cluster.gpuLimit`` (Karpenter
launches no node past its NodePool's limits: kubernetes-sigs/karpenter@v1.14.1
``pkg/controllers/provisioning/provisioner.go`` :471 ``Limits.ExceededBy``). The ranking
(``RANKINGS``) is by the fleet's $/h at the SLO load by default (a team with a fixed load pays
for the fleet its peak needs), or by $ per 1M output tokens, p99 TTFT or p99 ITL. Candidates
whose spec, engine or sizing refuses them are dropped, counted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from llmdeploy.catalog import ec2
from llmdeploy.engines import registry
from llmdeploy.errors import LlmdeployError, UsageError
from llmdeploy.perf.assess import Performance, assess, fleet_nodes, gpu_share

if TYPE_CHECKING:
    from llmdeploy.sizing.types import Sizing
    from llmdeploy.spec.sections import Spec

__all__ = ["RANKINGS", "Candidate", "SearchResult", "engine_section", "search"]

TP_DEGREES = (1, 2, 4, 8)
_NO_BUILD: dict[str, dict[str, str]] = {"trtllm": {"backend": "pytorch"}}
NO_CEILING = 1000  # autoscaling.maxReplicas of a candidate: the search finds the count
# --rank-by: what each order sorts on first (every order then breaks ties on the fleet's $/h)
RANKINGS = {
    "usd-per-hour": "the fleet's on-demand $/h at the SLO load",
    "usd-per-1m-tokens": "$ per 1M output tokens at the SLO load",
    "ttft": "p99 time to first token at the SLO load",
    "itl": "p99 inter-token latency at the SLO load",
}
DEFAULT_RANKING = "usd-per-hour"


@dataclass(frozen=True)
class Candidate:
    """One configuration: the spec changes that make it, its sizing and performance."""

    changes: tuple[tuple[str, Any], ...]  # (dotted camelCase spec path, value), in spec order
    sizing: Sizing
    performance: Performance
    max_replicas: int | None = None  # the spec's autoscaling.maxReplicas; None: autoscaling off
    gpu_limit: int | None = None  # the NodePool limit on nvidia.com/gpu (cluster.gpuLimit)

    @property
    def latency_meets(self) -> bool:
        p = self.performance
        return p.estimate is not None and p.replicas_needed is not None and p.meets_slo is not False

    @property
    def meets(self) -> bool:
        """The latency meets the SLO with replicas the deployment can run."""
        return self.latency_meets and self.over_limit is None

    @property
    def replicas(self) -> int:
        """The replicas the SLO needs: those the estimate and the cost are for."""
        p = self.performance
        return max(p.replicas_at_peak, p.replicas_needed or 0)

    @property
    def fleet_gpus(self) -> int:
        inst = self.sizing.instance
        assert inst is not None
        return fleet_nodes(self.sizing, self.replicas) * inst.gpu_count

    @property
    def over_limit(self) -> str | None:
        """Why the deployment cannot run the replicas the SLO needs (None: it can)."""
        if self.performance.replicas_needed is None:
            return None
        n = self.replicas
        if self.max_replicas is not None and n > self.max_replicas:
            return (
                f"needs {n} replicas at the SLO's peak; autoscaling.maxReplicas allows "
                f"{self.max_replicas}"
            )
        if self.gpu_limit is not None and self.fleet_gpus > self.gpu_limit:
            return (
                f"needs {self.fleet_gpus} GPUs for {n} replicas; cluster.gpuLimit (the NodePool "
                f"limit) allows {self.gpu_limit}"
            )
        return None

    def misses(self) -> tuple[str, ...]:
        over = self.over_limit
        return (*self.performance.misses(), *((over,) if over else ()))

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

    def metric(self, rank_by: str) -> float:
        """The value ``rank_by`` (a ``RANKINGS`` key) sorts on."""
        e = self.performance.estimate
        if rank_by == "usd-per-hour":
            return self.fleet_usd_per_hour
        if rank_by == "usd-per-1m-tokens":
            return self.usd_per_1m_output_tokens
        if e is None:
            return math.inf
        return e.ttft_p99_ms if rank_by == "ttft" else e.itl_p99_ms

    def key(self, rank_by: str = DEFAULT_RANKING) -> tuple[bool, bool, float, float, float, str]:
        """Those that meet the SLO first, then those whose latency does beyond the limits."""
        inst = self.sizing.instance
        return (
            not self.meets,
            not self.latency_meets,
            self.metric(rank_by),
            self.fleet_usd_per_hour,
            self.usd_per_1m_output_tokens,
            inst.name if inst else "",
        )


@dataclass(frozen=True)
class SearchResult:
    candidates: tuple[Candidate, ...]  # the configurations simulated, ranked by ``rank_by``
    tried: int
    refused: int  # the spec, the engine or the sizing refused it
    not_fitting: int
    not_modelled: int
    pruned: int  # fit, but their bound on ``rank_by`` is above the top ``top``: not simulated
    rank_by: str = DEFAULT_RANKING


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


def releases(spec: Spec, spec_dir: Path | None) -> tuple[tuple[str, str], ...]:
    """(model.id, quantization) of the pre-quantized releases of the spec's model that the
    catalog knows (:func:`llmdeploy.catalog.models.releases_of`), when the spec serves that
    model's 16-bit checkpoint; () otherwise."""
    from llmdeploy.catalog import models
    from llmdeploy.sizing.memory import CHECKPOINT_MATCH

    if not models.is_catalog_ref(spec.model.architecture):
        return ()
    arch = models.load_architecture(spec.model.architecture, spec_dir)
    if arch.quantization is not None or models.quantized_checkpoint(spec.model.id) is not None:
        return ()
    out = []
    for repo in models.releases_of(spec.model.id, arch.name):
        q = models.quantized_checkpoint(repo)
        method = q.quantization.method if q is not None and q.quantization else ""
        # the spec value that names how it is stored (GPTQ before AWQ: W4A16 is GPTQ's layout)
        value = next((v for v in ("fp8", "int8", "int4-gptq", "int4-awq")
                      if method in CHECKPOINT_MATCH[v]), None)  # fmt: skip
        if value is not None:
            out.append((repo, value))
    return tuple(out)


def _variants(
    spec: Spec,
    engines: Sequence[str],
    families: Sequence[str],
    prequantized: Sequence[tuple[str, str]] = (),
) -> Iterator[tuple[tuple[str, Any], ...]]:
    max_gpus = {f: max(i.gpu_count for i in ec2.instances().values() if i.family == f)
                for f in families}  # fmt: skip
    for engine in engines:
        # from a 16-bit checkpoint, every quantization the engine produces at load or build
        # time (vLLM: FP8; TensorRT-LLM engines: FP8, INT8, INT4 AWQ/GPTQ), and the model's
        # pre-quantized releases, each stored one way
        runtime = registry.get(engine).runtime_quantizations if spec.quantization == "none" else ()
        checkpoints = [(spec.model.id, q) for q in (spec.quantization, *sorted(runtime))]
        checkpoints += list(prequantized)
        for family in families:
            fp8 = any(i.gpu.fp8 for i in ec2.instances().values() if i.family == family)
            for tp in (t for t in TP_DEGREES if t <= max_gpus[family]):
                for model_id, quant in checkpoints:
                    if quant == "fp8" and not fp8:
                        continue
                    for kv in ("auto", "fp8") if fp8 else ("auto",):
                        yield (
                            ("model.id", model_id),
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
    if values["model.id"] != spec.model.id:  # another checkpoint: the spec's pin is not its
        data["model"] = {**data["model"], "id": values["model.id"]}
        data["model"].pop("revision", None)
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
    rank_by: str = DEFAULT_RANKING,
    progress: Callable[[int, int], None] | None = None,
) -> SearchResult:
    """The configurations of ``spec`` the search varies, ranked by ``rank_by`` (a ``RANKINGS``
    key); at least the ``top`` best are exact. Every variant is validated and sized (cheap);
    the performance model (not cheap) runs in the order of a lower bound on what the ranking
    sorts on, and stops once ``top`` configurations meet the SLO and no remaining bound can
    beat the last of them. The bounds: the fleet's $/h is at least the nodes of the replicas
    memory alone needs; $/1M output tokens at least the price over the replica's throughput
    ceiling (:func:`llmdeploy.perf.api.throughput_ceiling`); latencies have none (every
    variant is simulated). ``progress(done, total)`` is called as variants are sized and
    simulated (total: variants to size plus those left to simulate)."""
    from llmdeploy.perf import api, inputs
    from llmdeploy.perf.token_budget import decide_for_spec, most_kv
    from llmdeploy.sizing.requests import size_spec

    if rank_by not in RANKINGS:
        import difflib

        close = difflib.get_close_matches(rank_by, list(RANKINGS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(f"--rank-by {rank_by!r}{hint}: one of {', '.join(RANKINGS)}")
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
    ceiling_of = spec.autoscaling.max_replicas if spec.autoscaling.enabled else None
    limits = {"max_replicas": ceiling_of, "gpu_limit": spec.cluster.gpu_limit}
    variants = list(_variants(spec, engines, _families(families), releases(spec, spec_dir)))
    report = progress or (lambda done, total: None)
    sized: list[tuple[float, tuple[tuple[str, Any], ...], Spec, Sizing, Sizing]] = []
    tried = refused = not_fitting = not_modelled = 0
    for changes in variants:
        tried += 1
        report(tried, len(variants))
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
        node_price = sizing.instance.price_usd_hr or math.inf
        # the bounds hold for whatever token budget the SLO decides below: the smallest
        # candidate leaves the most KV cache
        low = most_kv(variant, sizing, spec_dir)
        if rank_by == "usd-per-hour":
            bound = node_price * fleet_nodes(sizing, max(1, low.replicas_for_slo or 1))
        elif rank_by == "usd-per-1m-tokens":
            low_run = run if low is sizing else engine.engine_run(low, variant)
            assert low_run is not None
            ceiling = api.throughput_ceiling(
                inputs.hardware(sizing.instance),
                inputs.geometry(sizing.request.architecture),
                low_run.deployment,
                sizing.request.slo_input_tokens,
                run.constants,
                concurrency=sizing.request.slo_concurrent_requests,
            )
            price = node_price * sizing.nodes * gpu_share(sizing)
            bound = price / (ceiling * 3600.0) * 1e6
        else:
            bound = 0.0
        sized.append((bound, changes, variant, sizing, low))
    sized.sort(key=lambda t: t[0])
    found: list[Candidate] = []
    done = 0
    for bound, changes, variant, sizing, low in sized:
        best = sorted(c.metric(rank_by) for c in found if c.meets)
        if len(best) >= top and bound > best[top - 1]:
            break
        done += 1
        report(tried + done, tried + len(sized))
        # the token budget its SLO decides (docs/performance-model.md, "Token budget")
        variant, sizing, _ = decide_for_spec(variant, sizing, spec_dir, known=low)
        run = registry.get(variant.engine.type).engine_run(sizing, variant)
        perf = assess(sizing, run, variant, threshold=False)
        found.append(Candidate(changes, sizing, perf, **limits))
    found.sort(key=lambda c: c.key(rank_by))
    return SearchResult(
        tuple(found), tried, refused, not_fitting, not_modelled, len(sized) - done, rank_by
    )
