"""Presentation of a :class:`~llmdeploy.sizing.types.Sizing`: JSON (stable key order) and a
rich table.

The CLI prints what these return; nothing here prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmdeploy.sizing.types import Sizing, StageSizing, Suggestion

if TYPE_CHECKING:
    from rich.console import RenderableType

    from llmdeploy.perf.assess import Performance


def _suggestion_json(s: Suggestion) -> dict[str, Any]:
    return {
        "change": s.change,
        "field": s.field,
        "value": s.value,
        "changes": {path: value for path, value in s.changes},
        "fits": s.fits,
        "kv_cache_gib_per_gpu": round(s.kv_cache_gib_per_gpu, 2),
        "max_concurrency": s.max_concurrency,
        "slo_requests_per_replica": s.slo_requests_per_replica,
        "replicas_for_slo": s.replicas_for_slo,
        "instance": s.instance,
        "nodes": s.nodes,
        "price_usd_hr": s.price_usd_hr,
    }


def _stage_json(x: StageSizing) -> dict[str, Any]:
    return {
        "index": x.index,
        "first_layer": x.first_layer,
        "layers": x.layers,
        "holds": list(x.holds),
        "weights_gib_per_gpu": round(x.weights_gib, 2),
        "activation_gib": round(x.activation_gib, 2),
        "kv_cache_gib_per_gpu": round(x.kv_cache_gib, 2),
        "kv_bytes_per_token_per_gpu": x.kv_bytes_per_token_per_gpu,
        "num_gpu_blocks": x.num_gpu_blocks,
        "fits": x.fits,
    }


def document(sizing: Sizing, performance: Performance | None) -> dict[str, Any]:
    """What ``size --json`` prints: the sizing, then the performance model's result."""
    from llmdeploy.cli import perf_report

    return to_json(sizing) | {"performance": perf_report.to_json(performance)}


def to_json(sizing: Sizing) -> dict[str, Any]:
    """Machine-readable result; key order is part of the interface."""
    s = sizing
    inst = s.instance
    return {
        "fits": s.fits,
        "model": s.model,
        "engine": s.engine,
        "engine_version": s.engine_version,
        "instance": inst.name if inst else None,
        "price_usd_hr": inst.price_usd_hr if inst else None,
        "gpu": s.gpu,
        "gpu_total_gib": s.gpu_total_gib,
        "tp": s.tp,
        "dp": s.data_parallel,
        "expert_parallel": s.expert_parallel,
        "pp": s.pp,
        "nodes": s.nodes,
        "quantization": s.quantization,
        "kv_cache_dtype": s.kv_cache_dtype,
        "max_model_len": s.max_model_len,
        "max_num_batched_tokens": s.max_num_batched_tokens,
        "max_num_seqs": s.max_num_seqs,
        "gpu_memory_utilization": s.gpu_memory_utilization,
        "max_gpu_memory_utilization": s.max_gpu_memory_utilization,
        "budget_gib": round(s.budget_gib, 2),
        "weights_gib_per_gpu": round(s.weights_gib_per_gpu, 2),
        "checkpoint_gib": round(s.checkpoint_gib, 2),
        "activation_gib": round(s.activation_gib, 2),
        "non_torch_gib": round(s.non_torch_gib, 2),
        "cudagraph_gib": round(s.cudagraph_gib, 2),
        "context_gib": s.context_gib,
        "kv_cache_gib_per_gpu": round(s.kv_cache_gib_per_gpu, 2),
        "kv_bytes_per_token_per_gpu": s.kv_bytes_per_token_per_gpu,
        "kv_cache_tokens": s.kv_cache_tokens,
        "num_gpu_blocks": s.num_gpu_blocks,
        "block_size": s.block_size,
        "kv_cache_groups": list(s.kv_cache_groups),
        "state_bytes_per_sequence": s.state_bytes_per_sequence,
        "max_concurrency": s.max_concurrency,
        "slo": {
            "concurrent_requests": s.request.slo_concurrent_requests,
            "tokens_per_request": s.request.slo_input_tokens + s.request.slo_output_tokens,
            "tokens_per_replica_needed": s.slo_tokens_per_replica_needed,
            "requests_per_replica": s.slo_requests_per_replica,
            "replicas_needed": s.replicas_for_slo,
        },
        "reasons": list(s.reasons),
        "suggestions": [_suggestion_json(x) for x in s.suggestions],
        "weights_breakdown_gib": {k: round(v, 3) for k, v in s.weights_breakdown_gib},
        # pipeline stages (empty without pipeline parallelism); the figures above are those of
        # the binding stage, the one with the fewest KV blocks
        "stages": [_stage_json(x) for x in s.stages],
        "binding_stage": s.binding_stage if s.stages else None,
        "assumptions": list(s.assumptions),
    }


def _gib(value: float) -> str:
    return f"{value:.2f} GiB"


def table(sizing: Sizing) -> RenderableType:
    # rich is imported here, not at module level: `size --json` never needs it (~30 ms).
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    """Per-GPU breakdown, verdict, reasons and suggestions."""
    s = sizing
    where = s.instance.name if s.instance else s.gpu
    if s.nodes > 1:
        where = f"{s.nodes} x {where}"
    layout = f"TP {s.tp}" + (f" x DP {s.data_parallel}" if s.data_parallel > 1 else "")
    layout += f" x PP {s.pp}" if s.pp > 1 else ""
    layout += ", EP" if s.expert_parallel else ""
    title = (
        f"{s.model} on {where}: {layout}, {s.quantization}, KV {s.kv_cache_dtype}, "
        f"{s.engine} {s.engine_version}"
    )
    breakdown = Table(title=title, show_header=True, title_justify="left")
    breakdown.add_column(f"per GPU, stage {s.binding_stage}" if s.stages else "per GPU")
    breakdown.add_column("GiB", justify="right")
    gmu = f" x {s.gpu_memory_utilization}" if s.gpu_memory_utilization else ""
    rows = [
        ("usable total (torch)", _gib(s.gpu_total_gib)),
        (f"budget{gmu}", _gib(s.budget_gib)),
        ("weights", _gib(s.weights_gib_per_gpu)),
        (f"activation peak ({s.max_num_batched_tokens} tokens)", _gib(s.activation_gib)),
        ("non-torch (cuBLAS, NCCL)", _gib(s.non_torch_gib)),
        ("CUDA graphs (estimate)", _gib(s.cudagraph_gib)),
        ("CUDA context (outside budget)", _gib(s.context_gib)),
        ("KV cache", _gib(s.kv_cache_gib_per_gpu)),
    ]
    for label, value in rows:
        breakdown.add_row(label, value)
    state = (
        f" + {s.state_bytes_per_sequence} B state/sequence/GPU"
        if s.state_bytes_per_sequence
        else ""
    )
    per_rank = " per DP rank" if s.data_parallel > 1 else ""
    capacity = Text(
        f"KV: {s.kv_bytes_per_token_per_gpu} B/token/GPU{state}, {s.num_gpu_blocks} blocks of "
        f"{s.block_size}, {s.kv_cache_tokens} tokens, max concurrency {s.max_concurrency}x at "
        f"{s.max_model_len} tokens{per_rank}\n"
        f"SLO: {s.request.slo_concurrent_requests} concurrent x "
        f"{s.request.slo_input_tokens}+{s.request.slo_output_tokens} tokens; one replica holds "
        f"{s.slo_requests_per_replica}; replicas for memory: {s.replicas_for_slo or 'n/a'}"
    )
    verdict = Text(
        "FITS" if s.fits else "DOES NOT FIT", style="bold green" if s.fits else "bold red"
    )
    parts: list[RenderableType] = [breakdown]
    if s.stages:
        parts.append(_stage_table(s))
    parts += [capacity, verdict]
    parts.extend(Text(f"  - {reason}", style="red") for reason in s.reasons)
    if s.suggestions:
        sug = Table(title="suggestions (each re-sized)", title_justify="left")
        for column in ("change", "fits", "KV GiB/GPU", "concurrency", "SLO req/replica", "$/h"):
            sug.add_column(column)
        for x in s.suggestions:
            sug.add_row(
                x.change,
                "yes" if x.fits else "no",
                f"{x.kv_cache_gib_per_gpu:.2f}",
                f"{x.max_concurrency}",
                str(x.slo_requests_per_replica),
                f"{x.price_usd_hr:.2f}" if x.price_usd_hr is not None else "-",
            )
        parts.append(sug)
    if s.assumptions:
        parts.append(
            Text("assumptions:\n" + "\n".join(f"  - {a}" for a in s.assumptions), style="dim")
        )
    return Group(*parts)


def _stage_table(s: Sizing) -> RenderableType:
    """One row per pipeline stage (per GPU of that stage); the binding stage is marked."""
    from rich.table import Table

    table = Table(
        title=f"pipeline stages (KV cache of every stage = stage {s.binding_stage}'s)",
        title_justify="left",
    )
    for column in ("stage", "layers", "also holds", "weights", "activation", "KV cache", "blocks"):
        table.add_column(column, justify="left" if column in ("stage", "also holds") else "right")
    for x in s.stages:
        table.add_row(
            f"{x.index}{' *' if x.index == s.binding_stage else ''}",
            f"{x.first_layer}-{x.first_layer + x.layers - 1} ({x.layers})",
            ", ".join(x.holds) or "-",
            _gib(x.weights_gib),
            _gib(x.activation_gib),
            _gib(x.kv_cache_gib),
            str(x.num_gpu_blocks),
        )
    return table


def exit_code(sizing: Sizing, performance: Performance | None) -> int:
    """0 fits and meets (or has no latency target), 4 does not fit, 8 misses the SLO."""
    from llmdeploy.errors import ExitCode

    if not sizing.fits:
        return int(ExitCode.DOES_NOT_FIT)
    if performance is not None and performance.meets_slo is False:
        return int(ExitCode.MISSES_SLO)
    return int(ExitCode.OK)


def fleet_json(rows: list[tuple[str, str, Any, int]]) -> dict[str, Any]:
    """``size DIR --json``: each spec's ``size --json`` document (or its error), in order."""
    from llmdeploy.errors import LlmdeployError, worst_exit_code

    specs = []
    for label, _, outcome, code in rows:
        entry: dict[str, Any] = {"spec": label, "exit_code": code}
        if isinstance(outcome, LlmdeployError):
            entry["error"] = outcome.message
        else:
            entry |= document(outcome.sizing, outcome.performance)
        specs.append(entry)
    return {"exit_code": worst_exit_code(row[-1] for row in rows), "specs": specs}


def fleet_table(rows: list[tuple[str, str, Any, int]]) -> RenderableType:
    """``size DIR``: one row per spec (by its name): where it runs, KV cache, the verdicts,
    $/h, its exit code."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from llmdeploy.cli.perf_report import verdict
    from llmdeploy.errors import LlmdeployError

    t = Table(title="one row per spec (on-demand $; p99 ms)", title_justify="left", box=None,
              padding=(0, 1), pad_edge=False)  # fmt: skip
    for column in ("name", "instance", "TP", "KV GiB/GPU", "fits", "TTFT", "ITL", "SLO", "repl",
                   "$/h", "exit"):  # fmt: skip
        t.add_column(column, justify="left" if column in ("name", "instance", "fits", "SLO")
                     else "right", overflow="fold" if column == "name" else "ellipsis")  # fmt: skip
    for _, name, outcome, code in rows:
        if isinstance(outcome, LlmdeployError):
            t.add_row(name, "error", *["-"] * 8, str(code))
            continue
        s, p = outcome.sizing, outcome.performance
        e = p.estimate if p is not None else None
        cost = p.on_demand if p is not None else None
        t.add_row(
            name,
            s.instance.name if s.instance else (s.gpu or "-"),
            str(s.tp),
            f"{s.kv_cache_gib_per_gpu:.2f}",
            "yes" if s.fits else "NO",
            f"{e.ttft_p99_ms:.0f}" if e else "-",
            f"{e.itl_p99_ms:.1f}" if e else "-",
            verdict(p) if p is not None else "-",
            str(p.replicas_at_peak) if e and p else "-",
            f"{cost.fleet_usd_per_hour:.2f}" if cost else "-",
            str(code),
        )
    bad = sum(row[-1] != 0 for row in rows)
    return Group(t, Text(f"{len(rows)} specs, {bad} with a non-zero exit code", style="dim"))
