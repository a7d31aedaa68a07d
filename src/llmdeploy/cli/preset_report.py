"""Presentation of the preset catalog (:mod:`llmdeploy.presets`): the ``presets`` table, the
README's Markdown table (``scripts/gen_docs.py``) and ``presets show``.

The CLI prints what these return; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Sequence

from llmdeploy.perf.uncertainty import UNCERTAINTY
from llmdeploy.presets import (
    FULL_LENGTH_REQUESTS,
    MAX_FREE_FRACTION,
    SPARE_REPLICAS,
    UTILIZATION_HEADROOM,
    PresetSummary,
)

COLUMNS = (
    "preset",
    "model",
    "engine",
    "released",
    "instance",
    "parallel",
    "replicas/node",
    "quantization",
    "KV",
    "$/h node",
    "KV tokens/replica",
    "predicted tok/s",
)
NOT_MODELLED = "—"


def _price(value: float | None) -> str:
    return NOT_MODELLED if value is None else f"{value:.2f}"


def _cells(p: PresetSummary) -> tuple[str, ...]:
    throughput = p.predicted_tokens_per_s
    return (
        p.name,
        p.spec.model.id,
        p.engine,
        NOT_MODELLED if (release := p.engine_release) is None else release.date,
        p.instance.name if p.nodes == 1 else f"{p.nodes} x {p.instance.name}",
        p.parallelism,
        str(p.replicas_per_node) if p.nodes == 1 else f"1/{p.nodes}",
        p.quantization,
        p.spec.kv_cache_dtype,
        _price(p.instance.price_usd_hr),
        str(p.kv_tokens_per_replica),
        NOT_MODELLED if throughput is None else f"{throughput:.0f}",
    )


_RIGHT = {"replicas/node", "$/h node", "KV tokens/replica"}


def table(presets: Sequence[PresetSummary]) -> str:
    """``llmdeploy presets``: one aligned line per preset under a header."""
    rows = [COLUMNS, *(_cells(p) for p in presets)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if name in _RIGHT else cell.ljust(w)
            for name, cell, w in zip(COLUMNS, row, widths, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def price_dates(presets: Sequence[PresetSummary]) -> list[str]:
    return sorted({d for p in presets if (d := p.instance.price_as_of) is not None})


def notes(presets: Sequence[PresetSummary]) -> list[str]:
    """What the table's columns mean (printed under the table)."""
    unpriced = sorted({p.instance.name for p in presets if p.instance.price_usd_hr is None})
    dates = ", ".join(price_dates(presets)) or "unknown"
    out = [
        f"$/h node: us-east-1 Linux on-demand price of the whole node, price list of {dates}"
        + (f"; {NOT_MODELLED}: no on-demand price ({', '.join(unpriced)})" if unpriced else ""),
        "released: the day the engine release was published (its source: llmdeploy presets "
        "show NAME)",
        "predicted tok/s: output tokens/s of one replica at its share of the SLO's peak "
        f"(performance model, median error {UNCERTAINTY.throughput_median:.0%})"
        + (
            f"; {NOT_MODELLED}: not modelled"
            if any(p.predicted_tokens_per_s is None for p in presets)
            else ""
        ),
        "details: llmdeploy presets show NAME",
    ]
    return out


def listing(presets: Sequence[PresetSummary]) -> str:
    """``llmdeploy presets``: the table, then what its columns mean."""
    return table(presets) + "\n" + "".join(f"{line}\n" for line in notes(presets))


def _throughput(p: PresetSummary) -> str:
    tok_s = p.predicted_tokens_per_s
    if tok_s is None:
        return f"{NOT_MODELLED} (not modelled: docs/performance-model.md, blind spots)"
    return (
        f"{tok_s:.0f} output tokens/s per replica at its share of the SLO's peak (performance "
        f"model, median error {UNCERTAINTY.throughput_median:.0%}; `llmdeploy size` has the rest)"
    )


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(presets: Sequence[PresetSummary]) -> str:
    """The README's preset table, then each preset's rationale."""
    head = "| " + " | ".join(COLUMNS) + " |\n"
    rule = "|" + "|".join("---:" if c in _RIGHT else "---" for c in COLUMNS) + "|\n"
    body = ""
    for p in presets:
        cells = [_md(c) for c in _cells(p)]
        cells[0] = f"`{cells[0]}`"
        cells[1] = f"[{cells[1]}](https://huggingface.co/{p.spec.model.id})"
        body += "| " + " | ".join(cells) + " |\n"
    why = "".join(f"- `{p.name}`: {_md(p.rationale.summary)}\n" for p in presets)
    legend = ". ".join(_md(line) for line in notes(presets)[:3])
    return head + rule + body + "\n" + legend + ".\n\n" + why


def _margin(p: PresetSummary) -> list[str]:
    if p.margin_problems:
        return ["NOT MET", *p.margin_problems]
    s = p.sizing
    where = "engine rank" if s.data_parallel > 1 else "replica"
    parts = [
        f"{s.max_concurrency} requests of {s.max_model_len} tokens per {where} "
        f"(at least {FULL_LENGTH_REQUESTS})",
        f"{SPARE_REPLICAS} replica to spare at the SLO's peak",
    ]
    if s.gpu_memory_utilization is not None and s.max_gpu_memory_utilization is not None:
        parts.append(
            f"gpu_memory_utilization {s.gpu_memory_utilization}, at least "
            f"{UTILIZATION_HEADROOM} below its ceiling {s.max_gpu_memory_utilization}"
        )
    else:
        fraction = s.request.kv_cache_free_gpu_mem_fraction
        parts.append(
            f"the KV cache takes {fraction} of the memory free after loading (at most "
            f"{MAX_FREE_FRACTION})"
        )
    return ["fits with margin", *parts]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _release(p: PresetSummary) -> str:
    release = p.engine_release
    if release is None:
        return f"{NOT_MODELLED}: llmdeploy has not read when {p.engine} was published"
    return f"{release.date} (source: {release.source})"


def show(p: PresetSummary) -> str:
    """``presets show NAME``: the rationale and what the sizing says (the breakdown follows)."""
    s, spec, inst = p.sizing, p.spec, p.instance
    revision = spec.model.revision or "not pinned in the spec (model.revision unset)"
    price = inst.price_usd_hr
    if price is None:
        cost = f"{NOT_MODELLED}: the catalog has no on-demand price for {inst.name}"
    else:
        per_replica = _price(p.price_per_replica)
        cost = (
            f"${price:.2f}/h per node, ${per_replica}/h per replica (us-east-1 Linux "
            f"on-demand, price list of {inst.price_as_of or 'unknown date'})"
        )
    scaling = spec.autoscaling
    facts = [
        ("model", spec.model.id),
        ("revision", revision),
        ("engine", p.engine),
        ("released", _release(p)),
        (
            "instance",
            f"{inst.name} ({inst.gpu_count} x {inst.gpu.model}), {p.parallelism} "
            f"({_plural(p.gpus_per_replica, 'GPU')} per replica), "
            f"{_plural(p.replicas_per_node, 'replica')} per node",
        ),
        (
            "weights",
            f"{s.quantization} (quantization: {spec.quantization}), KV cache {s.kv_cache_dtype}",
        ),
        ("price", cost),
        (
            "KV cache",
            f"{p.kv_tokens_per_replica} tokens per replica, {s.max_concurrency} requests of "
            f"{s.max_model_len} tokens at once"
            + (f" on each of its {s.data_parallel} engine ranks" if s.data_parallel > 1 else ""),
        ),
        (
            "SLO",
            f"{s.request.slo_concurrent_requests} concurrent x {s.request.slo_input_tokens}+"
            f"{s.request.slo_output_tokens} tokens need "
            f"{_plural(s.replicas_for_slo or 0, 'replica')} ({s.slo_requests_per_replica} "
            f"requests each); autoscaling {scaling.min_replicas} to {scaling.max_replicas}",
        ),
        ("throughput", _throughput(p)),
    ]
    margin, *why = _margin(p)
    facts.append(("margin", margin))
    width = max(len(k) for k, _ in facts)
    lines = [f"{p.name}: {p.rationale.summary}", ""]
    if p.rationale.details:
        lines += [*p.rationale.details, ""]
    lines += [f"{k.ljust(width)}  {v}" for k, v in facts]
    lines += [f"{' ' * width}  - {line}" for line in why]
    return "\n".join(lines) + "\n"
