"""``--format markdown``: what ``size``, ``plan`` and ``render --check`` print as a pull-request
comment (GitHub-flavoured Markdown): the verdict first, latency against the SLO, replicas,
$/h, what drifted. Built from the same JSON documents ``--format json`` prints, so the two
never disagree.

The CLI prints what these return; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_VERDICT = {
    "meets": "MEETS THE SLO",
    "within-error": "MEETS THE SLO (within the model's error)",
    "misses": "MISSES THE SLO",
    "no-targets": "no latency targets",
    "not-modelled": "performance not modelled",
}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ms(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f} ms"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.2f}"


def size(label: str, doc: Mapping[str, Any]) -> str:
    """``size --format markdown``; ``doc`` is ``size --format json``'s document."""
    perf = doc.get("performance")
    fits = "FITS" if doc["fits"] else "DOES NOT FIT"
    verdict = _VERDICT[perf["verdict"]] if perf else None
    head = f"### llmdeploy size `{label}`: {fits}" + (f", {verdict}" if verdict else "")
    lines = [
        head,
        "",
        f"{doc['model']} on {doc['instance'] or doc['gpu']}: TP {doc['tp']}, "
        f"{doc['quantization']}, KV {doc['kv_cache_dtype']}, {doc['engine']} "
        f"{doc['engine_version']}; KV cache {doc['kv_cache_gib_per_gpu']:.2f} GiB per GPU, "
        f"{doc['max_concurrency']:.2f} requests of {doc['max_model_len']} tokens at once.",
    ]
    if not doc["fits"]:
        lines += ["", *(f"- {_cell(r)}" for r in doc.get("reasons", []))]
    if perf and perf.get("ttft_ms"):
        targets = {t["metric"]: t for t in perf.get("targets", [])}
        lines += [
            "",
            "| latency (p99) | predicted | SLO | |",
            "|---|---:|---:|---|",
        ]
        for metric, name, digits in (("ttft", "TTFT", 0), ("itl", "ITL", 1)):
            t = targets.get(metric)
            slo = _ms(t["slo_ms"]) if t else "-"
            mark = ("met" if t["met"] else "**missed**") if t else ""
            p99 = perf[f"{metric}_ms"]["p99"]
            lines.append(f"| {name} | {_ms(p99, digits)} | {slo} | {mark} |")
        cost = (perf.get("cost") or {}).get("on_demand")
        replicas = perf.get("replicas", {})
        lines += [
            "",
            f"- replicas: {replicas.get('needed', '-')} needed "
            f"({replicas.get('for_memory', '-')} for memory, "
            f"{replicas.get('for_latency', '-')} for latency)",
            "- on-demand: "
            + (
                f"{_usd(cost['usd_per_hour_at_peak'])}/h at the peak "
                f"({cost['nodes_at_peak']} nodes), "
                f"{_usd(cost['usd_per_1m_output_tokens'])}/1M output tokens "
                f"[{cost['price_as_of']}]"
                if cost
                else "no price in the catalog"
            ),
            f"- model error (median, held out): TTFT "
            f"{perf['uncertainty']['median_abs_error']['ttft']:.0%}, ITL "
            f"{perf['uncertainty']['median_abs_error']['itl']:.0%}",
        ]
        lines += [f"- {_cell(m)}" for m in perf.get("misses", [])]
    return "\n".join(lines) + "\n"


def plan(label: str, doc: Mapping[str, Any], exit_note: str | None) -> str:
    """``plan --format markdown``; ``doc`` is ``plan --format json``'s document."""
    rows: Sequence[Mapping[str, Any]] = doc["configurations"]
    best = rows[0] if rows else None
    if best is None:
        verdict = "no configuration fits"
    elif best["meets_slo"]:
        verdict = (
            f"best: {best['engine']} on {best['instance']} TP {best['tp']} "
            f"({best['quantization']}), {_usd(best['usd_per_hour'])}/h, MEETS THE SLO"
        )
    else:
        verdict = "no configuration meets the SLO"
    lines = [
        f"### llmdeploy plan `{label}`: {verdict}",
        "",
        "| # | engine | instance | TP | quant | KV | replicas | TTFT p99 | ITL p99 | SLO "
        "| $/h | $/1M |",
        "|---:|---|---|---:|---|---|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['rank']} | {r['engine']} | {r['instance']} | {r['tp']} | {r['quantization']} "
            f"| {r['kv_cache_dtype']} | {r['replicas'] or '-'} | {_ms(r['ttft_p99_ms'])} "
            f"| {_ms(r['itl_p99_ms'], 1)} | {'meets' if r['meets_slo'] else 'misses'} "
            f"| {_usd(r['usd_per_hour'])} | {_usd(r['usd_per_1m_output_tokens'])} |"
        )
    lines += [
        "",
        f"{doc['tried']} configurations tried: {doc['refused']} refused, {doc['not_fitting']} do "
        f"not fit, {doc['not_modelled']} not modelled, {doc['not_simulated']} not simulated "
        f"({doc['price_basis']}).",
    ]
    if exit_note:
        lines += ["", exit_note]
    return "\n".join(lines) + "\n"


def check(doc: Mapping[str, Any]) -> str:
    """``render --check --format markdown``; ``doc`` is ``render --check --format json``'s."""
    root = doc["directory"]
    if doc["up_to_date"]:
        return f"### llmdeploy render --check `{root}`: up to date ({doc['files']} files)\n"
    lines = [
        f"### llmdeploy render --check `{root}`: {len(doc['drifted'])} files differ from what "
        "the spec renders",
        "",
        *(f"- `{name}` ({why})" for name, why in doc["drifted"].items()),
        "",
        f"Regenerate: `{doc['command']}`",
        "",
        "<details><summary>diff</summary>",
        "",
        "```diff",
        doc["diff"].rstrip("\n"),
        "```",
        "",
        "</details>",
    ]
    return "\n".join(lines) + "\n"
