"""Pipeline parallelism in the sizing: one replica's layers divided between stages, each stage
sized as its own GPUs see it, and the replica's verdict from the stages together.

A stage holds its share of the decoder layers (the engine's split, ``Engine.pipeline_split``;
vLLM's is ``get_pp_indices``), the input embedding on the first stage and the final norm,
``lm_head`` and sampler on the last (``sizing.memory``). Each stage is sized with
:func:`llmdeploy.sizing.calculator.compute` on an :class:`Architecture` cut down to its layers,
so weights, activation, CUDA graphs and the KV bytes per token are that stage's own. vLLM then
gives every worker the fewest KV blocks any worker can hold (vllm/v1/core/kv_cache_utils.py@
v0.19.0 ``get_kv_cache_configs``, step 5: "Change the num_blocks of each worker to the smallest
among all workers"), so the stage with the fewest blocks decides the replica's capacity, and
the replica fits only if every stage does.

Across nodes llmdeploy maps tensor parallelism to the GPUs of one node (NVLink) and one pipeline
stage to each node (EFA between them), the mapping vLLM's docs recommend (tensor parallel size
= GPUs per node, pipeline parallel size = nodes: docs/serving/parallelism_scaling.md, as quoted
in shared/reference/multinode.md §1): one pod per node, each requesting every GPU of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from llmdeploy.catalog.architecture import Architecture
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.types import PipelineStage, Sizing, SizingRequest, StageSizing

# `nodesPerReplica: auto` tries 1 to this many nodes of the instance type.
AUTO_MAX_NODES = 8


def with_layout(req: SizingRequest, nodes: int, pipeline: int | None = None) -> SizingRequest:
    """``req`` on ``nodes`` nodes of its instance: one stage per node across nodes, else the
    spec's ``pipeline`` stages (default 1) inside the one node."""
    pp = pipeline if pipeline is not None else nodes
    return dataclasses.replace(req, nodes=nodes, pp=pp, stage=None)


def layout_problems(req: SizingRequest) -> list[str]:
    """Why the replica's TP x PP layout cannot be served on its nodes."""
    out: list[str] = []
    tp, pp, nodes, gpus = req.tp, req.pp, req.nodes, req.gpus_per_instance
    where = req.instance.name if req.instance else "the instance"
    if pp > req.architecture.num_layers:
        out.append(
            f"pipeline parallel {pp} exceeds the model's {req.architecture.num_layers} layers"
        )
    if nodes > 1:
        if gpus is not None and tp != gpus:
            out.append(
                f"across nodes, tensor parallel must be the {gpus} GPUs of one {where} "
                f"(tensor parallelism inside a node, one pipeline stage per node), not {tp}"
            )
        if pp != nodes:
            out.append(
                f"pipeline parallel {pp} on {nodes} nodes: each node runs one pipeline stage, "
                f"so pipeline parallel must be {nodes}"
            )
    elif gpus is not None and pp > 1 and tp * pp > gpus:
        out.append(
            f"tensor parallel {tp} x pipeline parallel {pp} = {tp * pp} GPUs exceeds the "
            f"{gpus} GPU(s) of {where}"
        )
    return out


def stage_architecture(arch: Architecture, stage: PipelineStage) -> Architecture:
    """``arch`` with only the decoder layers of ``stage`` (MoE models keep their leading dense
    layers where they fall; per-layer attention kinds are sliced)."""
    start, end = stage.first_layer, stage.first_layer + stage.layers
    dense = max(0, min(end, arch.dense_layers) - start)
    return dataclasses.replace(
        arch,
        num_layers=stage.layers,
        dense_layers=dense,
        layer_attention=arch.layer_attention[start:end],
        layer_shape_list=arch.layer_shape_list[start:end],
    )


def stages(req: SizingRequest) -> tuple[PipelineStage, ...] | None:
    """The replica's stages (None: the engine has no pipeline parallelism)."""
    split = req.engine.pipeline_split(req.engine_version, req.architecture.num_layers, req.pp)
    if split is None:
        return None
    out, first = [], 0
    for index, layers in enumerate(split):
        out.append(PipelineStage(index, len(split), first, layers))
        first += layers
    return tuple(out)


def has_pipeline(req: SizingRequest) -> bool:
    """Whether the request's engine splits a model into pipeline stages at all."""
    return req.engine.pipeline_split(req.engine_version, 2, 2) is not None


def stage_request(req: SizingRequest, stage: PipelineStage) -> SizingRequest:
    return dataclasses.replace(
        req, architecture=stage_architecture(req.architecture, stage), stage=stage
    )


def _holds(stage: PipelineStage, arch: Architecture) -> tuple[str, ...]:
    out = []
    if stage.first or (arch.tie_word_embeddings and stage.last):
        out.append("embedding")
    if stage.last:
        out.append("lm_head" if not arch.tie_word_embeddings else "lm_head (tied)")
    return tuple(out)


def combine(
    req: SizingRequest, parts: Sequence[tuple[PipelineStage, Sizing]], problems: Sequence[str]
) -> Sizing:
    """The replica's sizing from its stages' sizings: the stage with the fewest KV blocks
    decides capacity (the most weights breaks a tie); reasons shared by every stage are
    reported once, a stage's own reasons with its layers."""
    binding_index = min(
        range(len(parts)),
        key=lambda i: (parts[i][1].num_gpu_blocks, -parts[i][1].weights_gib_per_gpu),
    )
    binding = parts[binding_index][1]
    reasons = list(problems)
    shared = set.intersection(*(set(s.reasons) for _, s in parts))
    for reason in parts[0][1].reasons:
        if reason in shared and reason not in reasons:
            reasons.append(reason)
    for stage, s in parts:
        end = stage.first_layer + stage.layers - 1
        reasons.extend(
            f"pipeline stage {stage.index} (layers {stage.first_layer}-{end}): {reason}"
            for reason in s.reasons
            if reason not in shared
        )
    table = tuple(
        StageSizing(
            index=stage.index,
            first_layer=stage.first_layer,
            layers=stage.layers,
            holds=_holds(stage, req.architecture),
            weights_gib=s.weights_gib_per_gpu,
            activation_gib=s.activation_gib,
            kv_cache_gib=s.kv_cache_gib_per_gpu,
            kv_bytes_per_token_per_gpu=s.kv_bytes_per_token_per_gpu,
            num_gpu_blocks=s.num_gpu_blocks,
            fits=s.fits,
        )
        for stage, s in parts
    )
    assumptions = list(binding.assumptions)
    assumptions.append(
        f"pipeline parallel {req.pp}: each stage sized on its own layers; the KV cache of every "
        f"stage is that of stage {binding_index}, the one with the fewest blocks (vLLM gives "
        "every worker the smallest count); pipeline stages are taken to add no non-torch "
        "memory beyond the tensor-parallel group's (vllm.md §1.2 logs 0.07 GiB at PP 2 and 4); "
        "not calibrated against multi-node start-up logs"
    )
    return dataclasses.replace(
        binding,
        fits=not reasons,
        reasons=tuple(reasons),
        model=req.architecture.name,
        request=req,
        checkpoint_gib=round(mem.checkpoint_bytes(req.architecture) / mem.GIB, 4),
        assumptions=tuple(dict.fromkeys(assumptions)),
        pp=req.pp,
        nodes=req.nodes,
        stages=table,
        binding_stage=binding_index,
    )


NO_PIPELINE = "the engine is served without pipeline parallelism by llmdeploy"


def refused(req: SizingRequest, single: Sizing, reasons: Sequence[str]) -> Sizing:
    """``single`` (the replica sized as one stage on one node) refused for ``reasons``: a layout
    that has no stages to size. An engine without pipeline parallelism refuses the spec in its
    own ``check``, at the field; quick mode lands here."""
    return dataclasses.replace(
        single,
        fits=False,
        reasons=(*reasons, *single.reasons),
        request=req,
        pp=req.pp,
        nodes=req.nodes,
    )
