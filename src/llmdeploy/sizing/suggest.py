"""Instance choice for ``instanceFamily`` and suggestions for configurations that do not fit.

Every suggestion is a concrete change re-sized with :func:`llmdeploy.sizing.calculator.compute`;
only changes whose own outcome fits (and, for an SLO shortfall, holds more of the SLO's
requests) are kept.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from typing import Literal

from llmdeploy.catalog import ec2 as catalog
from llmdeploy.catalog import models
from llmdeploy.errors import Diagnostic, SpecError
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.calculator import compute
from llmdeploy.sizing.parallel import tp_problems
from llmdeploy.sizing.pipeline import AUTO_MAX_NODES, has_pipeline, with_layout
from llmdeploy.sizing.types import Sizing, SizingRequest, Suggestion, on_instance


def size(req: SizingRequest) -> Sizing:
    """Size one configuration, with suggestions when it does not fit or cannot carry the SLO,
    and for a multi-node replica the one-node alternatives that fit."""
    result = compute(req)
    if result.fits and result.replicas_for_slo in (1, None) and req.nodes == 1:
        return result
    return dataclasses.replace(result, suggestions=suggestions(req, result))


def _price_key(inst: catalog.Instance, tp: int) -> tuple[bool, bool, float, int]:
    price = inst.price_usd_hr
    return (inst.gpu_count % tp != 0, price is None, price or math.inf, inst.gpu_count)


def size_for_hardware(
    base: SizingRequest,
    instance_type: str | None,
    instance_family: str | None,
    *,
    suggest: bool = True,
    reserve: catalog.Reserve = catalog.DEFAULT_RESERVE,
    nodes: int | Literal["auto"] = 1,
    pipeline: int | None = None,
) -> Sizing:
    """Size on ``instance_type``, or on the cheapest size of ``instance_family`` that fits and
    hosts the pod beside the DaemonSet ``reserve``; on ``nodes`` nodes per replica, or with
    ``auto`` on the fewest nodes (up to ``AUTO_MAX_NODES``, one pipeline stage each) that fit.
    ``pipeline``: the spec's pipeline-parallel degree (None: one stage per node)."""
    finish = size if suggest else compute
    counts = range(1, AUTO_MAX_NODES + 1) if nodes == "auto" else (nodes,)

    def layout(inst: catalog.Instance, n: int) -> SizingRequest:
        return with_layout(on_instance(base, inst), n, pipeline)

    if instance_type is not None:
        inst = catalog.instance(instance_type)
        if inst is None:
            raise SpecError(
                [
                    Diagnostic(
                        f"unknown instance type {instance_type!r}",
                        field="hardware.instanceType",
                        hint="families: " + ", ".join(catalog.families()),
                    )
                ]
            )
        for n in counts:
            if compute(layout(inst, n)).fits:
                return finish(layout(inst, n))
        return finish(layout(inst, counts[0]))
    members = catalog.family_members(instance_family or "")
    if not members:
        raise SpecError(
            [
                Diagnostic(
                    f"unknown instance family {instance_family!r}",
                    field="hardware.instanceFamily",
                    hint="families: " + ", ".join(catalog.families()),
                )
            ]
        )
    gpus = with_layout(base, 1, pipeline).gpus_per_pod
    ordered = sorted(members, key=lambda i: _price_key(i, gpus))
    # Enough GPUs, and host CPU/memory for the pod (catalog.Instance.hosts_pod); fall back to
    # GPU count alone when no size of the family has the host resources.
    valid = [m for m in ordered if m.hosts_pod(gpus, reserve)] or [
        m for m in ordered if m.gpu_count >= gpus
    ]
    # cheapest replica first: price x nodes, fewer nodes on a tie
    trials = sorted(
        ((inst, n) for inst in valid for n in counts),
        key=lambda t: (_price_key(t[0], gpus)[:2], (t[0].price_usd_hr or math.inf) * t[1], t[1]),
    )
    for inst, n in trials:
        if compute(layout(inst, n)).fits:
            return finish(layout(inst, n))
    pick = valid[0] if valid else max(members, key=lambda i: i.gpu_count)
    return finish(layout(pick, counts[0]))


def _resize(req: SizingRequest) -> tuple[Sizing, str]:
    """Size ``req``; if only the headroom for context + CUDA graphs fails, lower the budget."""
    s = compute(req)
    gmu, ceiling = s.gpu_memory_utilization, s.max_gpu_memory_utilization
    if s.fits or gmu is None or ceiling is None or gmu <= ceiling:
        return s, ""
    lowered = compute(dataclasses.replace(req, gpu_memory_utilization=ceiling))
    if not lowered.fits:
        return s, ""
    return lowered, f", gpuMemoryUtilization: {ceiling}"


def _fields(r: SizingRequest) -> dict[str, object]:
    return {
        "hardware.instanceType": r.instance.name if r.instance else None,
        "hardware.tensorParallel": r.tp,
        "hardware.nodesPerReplica": r.nodes,
        # across nodes the degree follows from the nodes (one stage each)
        "hardware.pipelineParallel": r.pp if r.nodes == 1 else 1,
        "quantization": r.quantization,
        "kvCacheDtype": r.kv_cache_dtype,
        "serving.maxModelLen": r.max_model_len,
        "serving.gpuMemoryUtilization": r.gpu_memory_utilization,
    }


def _changes(base: SizingRequest, new: SizingRequest) -> tuple[tuple[str, str], ...]:
    old, now = _fields(base), _fields(new)
    return tuple((path, str(value)) for path, value in now.items() if value != old[path])


def apply_suggestion(req: SizingRequest, suggestion: Suggestion) -> SizingRequest:
    """``req`` with every change of ``suggestion`` applied (to re-size it independently)."""
    for path, value in suggestion.changes:
        if path == "hardware.instanceType":
            inst = catalog.instance(value)
            assert inst is not None
            req = on_instance(req, inst)
        elif path == "hardware.tensorParallel":
            req = dataclasses.replace(req, tp=int(value))
        elif path == "hardware.nodesPerReplica":  # one stage per node; PP follows if set
            req = with_layout(req, int(value))
        elif path == "hardware.pipelineParallel":
            req = dataclasses.replace(req, pp=int(value))
        elif path == "quantization":
            req = dataclasses.replace(req, quantization=value)
        elif path == "kvCacheDtype":
            req = dataclasses.replace(req, kv_cache_dtype=value)
        elif path == "serving.maxModelLen":
            req = dataclasses.replace(req, max_model_len=int(value))
        elif path == "serving.gpuMemoryUtilization":
            req = dataclasses.replace(req, gpu_memory_utilization=float(value))
    return req


def _suggestion(
    change: str, field: str, value: object, s: Sizing, base: SizingRequest
) -> Suggestion:
    return Suggestion(
        change=change,
        field=field,
        value=str(value),
        changes=_changes(base, s.request),
        fits=s.fits,
        kv_cache_gib_per_gpu=s.kv_cache_gib_per_gpu,
        max_concurrency=s.max_concurrency,
        slo_requests_per_replica=s.slo_requests_per_replica,
        replicas_for_slo=s.replicas_for_slo,
        instance=s.instance.name if s.instance else None,
        price_usd_hr=s.instance.price_usd_hr * s.nodes
        if s.instance and s.instance.price_usd_hr is not None
        else None,
        nodes=s.nodes,
    )


def _better(current: Sizing, s: Sizing) -> bool:
    if not s.fits:
        return False
    if not current.fits:
        return True
    return s.slo_requests_per_replica > current.slo_requests_per_replica


def _tp_candidates(req: SizingRequest, limit: int) -> Iterable[int]:
    for tp in range(req.tp + 1, limit + 1):
        if not tp_problems(req.architecture, tp, dataclasses.replace(req, tp=tp)):
            yield tp


def _max_length(req: SizingRequest, current: Sizing) -> int | None:
    """Longest max_model_len (a multiple of 1024, or of 16 below 1024) that fits."""
    if current.kv_cache_gib_per_gpu <= 0 or current.num_gpu_blocks == 0:
        return None
    lo, hi = 16, current.max_model_len - 1
    best = None
    while lo <= hi:  # the KV pages one request needs grow with its length
        mid = (lo + hi) // 2
        if compute(dataclasses.replace(req, max_model_len=mid)).fits:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    if best is None:
        return None
    return best // 1024 * 1024 if best >= 1024 else best // 16 * 16 or None


def _cheapest_instance(req: SizingRequest, current: Sizing) -> tuple[str, Sizing] | None:
    """The cheapest other instance type that serves ``req`` on one node (its pipeline stages,
    if any, inside that node)."""
    found: list[tuple[float, int, str, Sizing]] = []
    one = req if req.nodes == 1 else with_layout(req, 1, 1)
    for inst in catalog.instances().values():
        if inst.price_usd_hr is None or (req.instance and inst.name == req.instance.name):
            continue
        base = on_instance(one, inst)
        tps = [one.tp] if one.gpus_per_pod <= inst.gpu_count else []
        per_tp = one.gpus_per_pod // one.tp  # DP x PP ranks of each TP group, in the one pod
        tps += [t for t in _tp_candidates(base, inst.gpu_count // per_tp) if t not in tps]
        for tp in tps:
            s, extra = _resize(dataclasses.replace(base, tp=tp))
            enough = s.replicas_for_slo == 1 if current.fits else True
            if s.fits and enough:
                change = (
                    f"instanceType: {inst.name}"
                    + (f", tensorParallel: {tp}" if tp != req.tp else "")
                    + (", nodesPerReplica: 1" if req.nodes > 1 else "")
                    + extra
                )
                found.append((inst.price_usd_hr, tp, change, s))
                break
    if not found:
        return None
    _, _, change, s = min(found, key=lambda item: (item[0], item[1]))
    return change, s


def _more_nodes(req: SizingRequest, current: Sizing) -> list[Suggestion]:
    """The fewest nodes per replica (more than now; TP = the node's GPUs, one pipeline stage
    per node) on the same instance type that fit, for an engine with pipeline parallelism."""
    inst = req.instance
    if current.fits or inst is None or inst.gpu_count is None:
        return []
    if not has_pipeline(req):
        return []
    for n in range(max(2, req.nodes + 1), AUTO_MAX_NODES + 1):
        trial = with_layout(dataclasses.replace(req, tp=inst.gpu_count), n)
        s, extra = _resize(trial)
        if s.fits:
            change = (
                f"nodesPerReplica: {n}"
                + (f", tensorParallel: {inst.gpu_count}" if inst.gpu_count != req.tp else "")
                + extra
                + f" ({n} x {inst.name}, TP{inst.gpu_count} x PP{n})"
            )
            return [_suggestion(change, "hardware.nodesPerReplica", n, s, req)]
    return []


def _one_node(req: SizingRequest) -> list[Suggestion]:
    """For a replica on several nodes: the same model on one node, when it fits there, is
    cheaper and faster (no pipeline bubbles, no traffic between nodes)."""
    if req.nodes == 1:
        return []
    single = with_layout(req, 1, 1)
    out: list[Suggestion] = []
    s, extra = _resize(single)
    if s.fits:
        out.append(_suggestion(f"nodesPerReplica: 1{extra}", "hardware.nodesPerReplica", 1, s, req))
    for suggestion in suggestions(single, compute(single)):
        if suggestion.fits and suggestion.field != "hardware.nodesPerReplica":
            changes = (("hardware.nodesPerReplica", "1"), *suggestion.changes)
            out.append(
                dataclasses.replace(
                    suggestion, change=f"nodesPerReplica: 1, {suggestion.change}", changes=changes
                )
            )
    return out


def suggestions(req: SizingRequest, current: Sizing) -> tuple[Suggestion, ...]:
    """Changes that make ``req`` fit (or carry more of its SLO), each with its verified outcome;
    one-node changes first, more nodes per replica last."""
    if req.nodes > 1 and current.fits:
        return tuple(_one_node(req))
    out: list[Suggestion] = []
    arch = req.architecture
    limit = req.gpus_per_instance or (8 if req.gpu is not None or req.gpu_total_gib else 1)
    if not current.fits:
        s, extra = _resize(req)
        if extra and s.fits:
            value = s.gpu_memory_utilization
            out.append(
                _suggestion(extra.lstrip(", "), "serving.gpuMemoryUtilization", value, s, req)
            )
    # across nodes TP is the node's GPUs; inside one node TP x PP GPUs
    for tp in _tp_candidates(req, limit // (req.gpus_per_pod // req.tp)) if req.nodes == 1 else ():
        s, extra = _resize(dataclasses.replace(req, tp=tp))
        if _better(current, s):
            out.append(
                _suggestion(f"tensorParallel: {tp}{extra}", "hardware.tensorParallel", tp, s, req)
            )
            break
    if arch.quantization is None:
        options = (
            ["fp8", "int4-awq"]
            if req.quantization == "none"
            else (["int4-awq"] if req.quantization in ("fp8", "int8") else [])
        )
        runtime = req.runtime_quantizations
        if runtime is None:
            runtime = req.engine.runtime_quantizations
        for quant in options:
            if quant == "fp8" and (req.gpu is None or not req.gpu.fp8):
                continue  # suggest FP8 only on GPUs with FP8 tensor cores
            trial, note = dataclasses.replace(req, quantization=quant), ""
            if quant not in runtime:  # the engine needs a checkpoint stored that way
                repos = models.quantized_repos(arch.name, mem.REQUESTED_QUANT[quant].method)
                note = f" ({repos[0]})" if repos else " (pre-quantized)"
                if repos:  # size the published repo itself (its own geometry)
                    trial = dataclasses.replace(
                        trial, architecture=models.load_architecture(repos[0])
                    )
            s, extra = _resize(trial)
            if _better(current, s):
                label = f"quantization: {quant}{note}{extra}"
                out.append(_suggestion(label, "quantization", quant, s, req))
    if req.kv_cache_dtype == "auto":
        s, extra = _resize(dataclasses.replace(req, kv_cache_dtype="fp8"))
        if _better(current, s):
            out.append(_suggestion(f"kvCacheDtype: fp8{extra}", "kvCacheDtype", "fp8", s, req))
    if not current.fits:
        length = _max_length(req, current)
        if length is not None:
            s = compute(dataclasses.replace(req, max_model_len=length))
            out.append(_suggestion(f"maxModelLen: {length}", "serving.maxModelLen", length, s, req))
    cheapest = _cheapest_instance(req, current)
    if cheapest is not None:
        change, s = cheapest
        assert s.instance is not None
        out.append(_suggestion(change, "hardware.instanceType", s.instance.name, s, req))
    out.extend(_more_nodes(req, current))
    return tuple(out)
