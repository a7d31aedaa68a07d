#!/usr/bin/env python3
"""Turn one lease's results (../shared/gpu toolkit: serve-sweep.sh + loadgen.py) into a
calibration file of the performance model (issue 22; docs/performance-model.md,
"Measured on one H200").

Usage: python scripts/gpu_ingest.py [--header=first|...|tenth] [--tag=TAG] RESULTS_DIR
       OUT.yaml [KEY[:PLAN] ...]   (PLAN: tests/data/perf/gpu-plan/PLAN.yaml when it is not
       KEY.yaml; TAG: appended to every id, for a geometry an earlier lease measured with the
       same sweeps)

RESULTS_DIR/KEY/ holds what serve-sweep.sh wrote for model KEY (its log, one JSON per sweep,
sweeps.txt with the raw summaries). The sweeps of one model ran in the order of
tests/data/perf/gpu-plan/KEY.yaml against one server with prefix caching on, and loadgen.py
builds request i's prompt from the seed i: a request whose prompt an earlier request sent is
a prefix-cache hit if its blocks were not evicted since. This script replays every request's
start and end (the per-request timestamps) against an LRU cache of the server's
``num_gpu_blocks`` (vLLM's free-block queue evicts the least recently freed block first:
vllm/v1/core/block_pool.py) to say which requests hit, and stores them with each row.
"""

from __future__ import annotations

import json
import re
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
BLOCK = 16
GEOMETRY = {
    "q32b": "Qwen3-32B geometry",
    "qawq": "Qwen2.5-7B-Instruct-AWQ geometry",
    "m70fp8": "Llama-3-70B FP8 geometry",
    "mq30": "Qwen3-30B-A3B geometry",
    "goss": "gpt-oss-20b geometry",
    "m8b": "Llama-3.1-8B geometry",
    "m8bk": "Llama-3.1-8B geometry, FP8 KV cache, 32k context",
    "mix": "Mixtral-8x7B geometry",
    "l8awq": "Llama-3.1-8B-Instruct-AWQ geometry",
    "q14b": "Qwen2.5-14B geometry",
    "m1b": "Llama-3.2-1B geometry",
    "g12b": "Gemma-3-12B text geometry",
    "goss120": "gpt-oss-120b geometry",
    "l3b": "Llama-3.2-3B geometry",
    "q8b": "Qwen3-8B geometry",
    "m1b6": "Llama-3.2-1B geometry (sixth lease)",
    "m1bfull": "Llama-3.2-1B geometry, cudagraph_mode FULL",
    "m1bsync": "Llama-3.2-1B geometry, async scheduling off",
    "l3b7": "Llama-3.2-3B geometry (seventh lease)",
    "l3bcg": "Llama-3.2-3B geometry, CUDA graphs up to 1024 tokens",
    "q8b7": "Qwen3-8B geometry (seventh lease)",
    "mq30p": "Qwen3-30B-A3B geometry (eighth lease)",
    "m8bp": "Llama-3.1-8B geometry (eighth lease)",
    "q8bcg": "Qwen3-8B geometry, CUDA graphs up to 1024 tokens",
    "goss9": "gpt-oss-20b geometry (ninth lease)",
    "mq30f8": "Qwen3-30B-A3B geometry, FP8 weights",
    "mq30b9": "Qwen3-30B-A3B geometry (ninth lease)",
    "q72f8": "Qwen2.5-72B FP8 geometry",
    "g27b": "Gemma-2-27B geometry",
    "m70f10": "Llama-3-70B FP8 geometry (tenth lease)",
    "mq30f10": "Qwen3-30B-A3B geometry, FP8 weights (tenth lease)",
    "m8b10": "Llama-3.1-8B geometry (tenth lease)",
    "q32b10": "Qwen3-32B geometry (tenth lease)",
}
WEIGHTS = {
    "qawq": "awq-int4",
    "l8awq": "awq-int4",
    "m70fp8": "fp8",
    "goss": "mxfp4",
    "goss120": "mxfp4",
    "goss9": "mxfp4",
    "mq30f8": "fp8",
    "q72f8": "fp8",
    "m70f10": "fp8",
    "mq30f10": "fp8",
}
MODE = {"closed": "closed-loop", "stagger": "steady", "poisson": "poisson"}


def ranges(ids: list[int]) -> str:
    """[0,1,2,5] -> '0-2,5'."""
    out: list[str] = []
    for i in sorted(ids):
        if out and int(out[-1].split("-")[-1]) == i - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


class Lru:
    """Prefix-cache blocks: hashed blocks in LRU order of their release."""

    def __init__(self, blocks: int) -> None:
        self.capacity = blocks
        self.cached: OrderedDict[tuple[Any, ...], None] = OrderedDict()  # free, hashed
        self.in_use = 0

    def start(self, prompt_blocks: list[tuple[Any, ...]], total_blocks: int) -> bool:
        hit = bool(prompt_blocks) and all(b in self.cached for b in prompt_blocks)
        n_hit = 0
        for b in prompt_blocks:  # a hit takes the blocks out of the free queue
            if b in self.cached:
                del self.cached[b]
                n_hit += 1
            else:
                break
        need = total_blocks - n_hit
        self.in_use += total_blocks
        while self.in_use + len(self.cached) > self.capacity and self.cached:
            self.cached.popitem(last=False)  # evict the least recently freed
        del need
        return hit

    def end(self, blocks: list[tuple[Any, ...]]) -> None:
        self.in_use -= len(blocks)
        for b in blocks:
            self.cached[b] = None
            self.cached.move_to_end(b)


def startup(log: str) -> dict[str, Any]:
    def grab(pattern: str) -> str | None:
        m = re.search(pattern, log)
        return m.group(1) if m else None

    return {
        "weights_gib": float(grab(r"Model loading took ([\d.]+) GiB") or "nan"),
        "available_kv_cache_gib": float(grab(r"Available KV cache memory: ([\d.]+) GiB") or "nan"),
        "kv_cache_tokens": int(
            (grab(r"GPU KV cache size: ([\d,]+) tokens") or "0").replace(",", "")
        ),
        "cudagraph_gib_estimated": float(
            grab(r"Estimated CUDA graph memory: ([\d.]+) GiB") or "nan"
        ),
        "max_num_batched_tokens": int(grab(r"max_num_batched_tokens=(\d+)") or 0),
    }


def in_flight(reqs: list[dict[str, Any]]) -> float:
    t0 = min(r["t_start"] for r in reqs)
    t1 = max(r["t_end"] for r in reqs)
    return sum(r["t_end"] - r["t_start"] for r in reqs) / (t1 - t0)


def ingest(
    results: Path, key: str, plan_name: str | None = None, id_tag: str = ""
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    d = results / key
    log = (d / f"{key}.log").read_text(errors="replace")
    st = startup(log)
    plan_file = REPO / "tests/data/perf/gpu-plan" / f"{plan_name or key}.yaml"
    plan = yaml.safe_load(plan_file.read_text())
    model = plan["models"][key]
    cache = Lru(st["kv_cache_tokens"] // BLOCK)
    rows = []
    run = 0
    for sweep in plan["sweeps"]:
        isl, osl, mode, nreq = sweep.split("/")
        f = d / f"{key}.sweep-{isl}-{osl}-{mode.replace(':', '-')}.json"
        if not f.exists():
            continue
        doc = json.loads(f.read_text())
        reqs = [r for r in doc["requests"] if "t_start" in r]
        events = sorted(
            [(r["t_start"], 1, r) for r in reqs] + [(r["t_end"], 0, r) for r in reqs],
            key=lambda e: (e[0], e[1]),
        )
        hits: list[int] = []
        nb = int(isl) // BLOCK  # full prompt blocks (hashable); output blocks are unique
        # a loadgen run with LOADGEN_SEED set seeds each prompt by (seed, lengths, mode, index):
        # no two sweeps share a prompt; without it, by the index alone
        seed = doc["summary"].get("prompt_seed")
        tag = (seed, isl, osl, mode) if seed else int(isl)
        for _, is_start, r in events:
            pb = [("p", tag, r["id"], i) for i in range(nb)]
            ob = [("o", run, r["id"], i) for i in range((int(isl) + r["osl"]) // BLOCK - nb)]
            if is_start:
                if cache.start(pb, len(pb) + len(ob) + 1):
                    hits.append(r["id"])
            else:
                cache.end(pb + ob)
                cache.in_use -= 1  # the partial last block is not cached
        run += 1
        s = doc["summary"]
        kind, arg = mode.split(":")
        steady, every = s["steady"], s["all"]
        row: dict[str, Any] = {
            "id": f"h200-vllm0240-{key}-{isl}-{osl}-{kind}{arg}-n{nreq}{id_tag}",
            "model": GEOMETRY[key],
            "weights": WEIGHTS.get(key, "bf16"),
            "arrival": MODE[kind],
            "input_tokens": int(isl),
            "output_tokens": int(osl),
            "output_spread": s["spread"],
            "concurrency": int(arg) if kind != "poisson" else None,
            "request_rate": float(arg) if kind == "poisson" else None,
            "num_requests": int(nreq),
            "prefix_cache_hits": ranges(hits),
            "measured_in_flight": round(in_flight(reqs), 1),
            "metrics": {
                "output_tok_s": round(every["output_tok_s"], 1),
                "ttft_p50_ms": round(steady["ttft_p50_ms"], 1),
                "ttft_p99_ms": round(steady["ttft_p99_ms"], 1),
                "itl_p50_ms": round(steady["itl_p50_ms"], 2),
                "itl_p99_ms": round(steady["itl_p99_ms"], 2),
            },
            "raw_summary": s,
        }
        if run == 1:  # the server's first sweep (the throughput includes its warm-up)
            row = {"id": row["id"], "first_on_server": True} | row
        rows.append(row)
    length = int(model.get("max_model_len", 8192))
    gmu = model.get("gpu_memory_utilization", 0.92)
    start = {
        "id": f"h200-vllm0240-{key}-gmu{gmu}-len{length}{id_tag}",
        "model": GEOMETRY[key],
        "config": f"models/{Path(model['config']).parent.name}/config.json",
        "weights": WEIGHTS.get(key, "bf16"),
    }
    keys = {"kv", "max_model_len", "gpu_memory_utilization", "max_num_batched_tokens", "serve_args"}
    if keys & set(model):
        start |= {"kv_cache_dtype": str(model.get("kv", "auto")), "max_model_len": length}
        start |= {"serve_args": str(model.get("serve_args", ""))}
    start |= st
    return start, rows


HEADERS = {}
HEADERS["first"] = """\
# vLLM 0.24.0 on one NVIDIA H200 (141 GB; torch 139.8 GiB), measured 2026-12-01 by llmdeploy's
# developers with ../shared/gpu (offline bundle, serve-sweep.sh, loadgen.py), dummy weights
# (--load-format dummy), converted by scripts/gpu_ingest.py. Server: `vllm serve MODEL
# --load-format dummy --max-model-len 8192 --gpu-memory-utilization 0.92
# --tensor-parallel-size 1 --enable-prefix-caching --enable-chunked-prefill`.
# Load: `loadgen.py URL m ISL OSL MODE NREQ` per row (closed:C waves, stagger:C steady mix with
# outputs +-50 %, poisson:R open loop with outputs +-50 %), the sweeps of one model in the order
# of tests/data/perf/gpu-plan/KEY.yaml. Predictions recorded before the run:
# tests/data/perf/predictions/. metrics: output_tok_s over all requests and the wall time;
# TTFT/ITL over the steady window (requests starting after the first C finished; after the
# first tenth of arrivals). ITL is the per-request mean gap. prefix_cache_hits: requests whose
# whole prompt was in the prefix cache (loadgen seeds prompts by request index, so later sweeps
# re-send earlier prompts); replayed from the timestamps against an LRU of the server's KV
# blocks. raw_summary: loadgen's summary as printed.
"""
HEADERS["second"] = """\
# vLLM 0.24.0 on one NVIDIA H200 (141 GB; torch 139.8 GiB), measured 2026-12-02 by llmdeploy's
# developers with ../shared/gpu (offline bundle, serve-sweep.sh, loadgen.py), dummy weights
# (--load-format dummy), converted by scripts/gpu_ingest.py. Server: `vllm serve MODEL
# --load-format dummy --max-model-len 8192 --gpu-memory-utilization 0.92
# --tensor-parallel-size 1 --enable-prefix-caching --enable-chunked-prefill` plus the start-up
# entry's serve_args. Load: `LOADGEN_SEED=s2 loadgen.py URL m ISL OSL MODE NREQ` per row, with
# the toolkit's loadgen.py changed in one line so that request i's prompt is seeded by
# f"{LOADGEN_SEED}/{ISL}/{OSL}/{MODE}/{i}" (no prompt repeats across sweeps: no prefix-cache
# hits, which the replay below confirms) and the seed written into the summary (prompt_seed).
# Patterns as in h200-vllm-0.24.0-arrivals.yaml. Predictions recorded before the run, at commit
# 1aec067: tests/data/perf/predictions/{mix,m8bk,goss}.json. gpt-oss-20b's sweeps ran on two
# servers (the second after a cut lease: stagger:96 and the Poisson rates; its Poisson 60/s
# sweep was lost); both start-ups logged the same memory figures. Two rows carry `excluded`, set
# by hand after reading the server log (the reason is in the row); the loader skips them.
"""
HEADERS["third"] = """\
# vLLM 0.24.0 on one NVIDIA H200 (141 GB; torch 139.8 GiB), measured 2026-12-02 (third lease)
# by llmdeploy's developers with ../shared/gpu (offline bundle, serve-sweep.sh, loadgen.py),
# dummy weights (--load-format dummy), converted by scripts/gpu_ingest.py. Server and load as in
# h200-vllm-0.24.0-arrivals-2.yaml, with LOADGEN_SEED=s3 (no prompt repeats across sweeps).
# Geometries the fit had not seen: Llama-3.1-8B AWQ (tests/data/perf/models/l8awq) and
# Qwen2.5-14B (models/q14b), and small batches (1 to 16) of two it had: Llama-3.2-1B and
# Qwen2.5-7B AWQ (plans m1bh.yaml and qawqh.yaml; their start-ups logged the same memory
# figures as before). vLLM ran both AWQ geometries through MacheteLinearKernel (log: "Using
# MacheteLinearKernel for AutoAWQMarlinLinearMethod"). Predictions recorded before the runs:
# tests/data/perf/predictions/{l8awq,q14b}.json at commit 4596d0c and {m1bh,qawqh}.json at
# 38cc515 (the model with the toolkit's seeded replay, before its refit).
"""


HEADERS["fourth"] = """\
# vLLM 0.24.0 on one NVIDIA H200 (141 GB; torch 139.8 GiB), measured 2026-12-02 (fourth lease)
# by llmdeploy's developers with ../shared/gpu (offline bundle, serve-sweep.sh, loadgen.py),
# dummy weights (--load-format dummy), converted by scripts/gpu_ingest.py. Server and load as in
# h200-vllm-0.24.0-arrivals-2.yaml, with LOADGEN_SEED=s4 (no prompt repeats across sweeps) and
# loadgen.py also keeping each request's first- and last-token stamps (t_first, t_last).
# Geometries the fit had not seen: Gemma-3-12B text (models/g12b: Gemma3ForCausalLM, five
# 1024-token sliding-window layers to one global) and gpt-oss-120b (models/goss120) served with
# --gpu-memory-utilization 0.54 --max-num-batched-tokens 1024 (0.54 of an H200 is 0.95 of an
# H100: the budget of the one start-up sizing missed by more than 5 %); and the Llama-3.1-8B AWQ
# geometry again at 96 and 48 clients (plan l8awq4.yaml; ids tagged -s4; its start-up logged
# the third lease's figures), whose per-request timings are in traces/. Predictions recorded
# before the runs at commit b4302de: tests/data/perf/predictions/{l8awq4,g12b,goss120}.json.
"""

HEADERS["fifth"] = """\
# vLLM 0.24.0 on one NVIDIA H200 (141 GB; torch 139.8 GiB), measured 2026-12-03 (fifth lease)
# by llmdeploy's developers with ../shared/gpu (offline bundle, serve-sweep.sh, loadgen.py),
# dummy weights (--load-format dummy), converted by scripts/gpu_ingest.py. Server and load as in
# h200-vllm-0.24.0-arrivals-4.yaml, with LOADGEN_SEED=s5 (no prompt repeats across sweeps, and
# first- and last-token stamps per request). What a lone request's TTFT holds beside its
# prefill: Llama-3.1-8B at one client with 128- to 4096-token prompts (plan m8bc1.yaml), the
# same with --max-num-batched-tokens 512 so that a long prompt takes 4 or 8 prefill steps
# (m8bc1b.yaml; ids tagged -b512), and Llama-3.2-1B at one client and at 64 (m1bc1.yaml); ids
# tagged -s5. Predictions recorded before the runs at commit 3eb4d95:
# tests/data/perf/predictions/{m8bc1,m8bc1b,m1bc1}.json.
"""
HEADERS["sixth"] = """\
# vLLM 0.24.0 on one NVIDIA H200 (141 GB; torch 139.8 GiB), measured 2026-12-03 (sixth lease)
# by llmdeploy's developers with ../shared/gpu (offline bundle, serve-sweep.sh, loadgen.py),
# dummy weights (--load-format dummy), converted by scripts/gpu_ingest.py. Server and load as in
# h200-vllm-0.24.0-arrivals-4.yaml, with LOADGEN_SEED=s6 (no prompt repeats across sweeps, and
# first- and last-token stamps per request). Geometries no fit has seen, Llama-3.2-3B
# (models/l3b, plan l3b.yaml) and Qwen3-8B (models/q8b, q8b.yaml), under Poisson arrivals of 10
# to 40 requests/s, 32 staggered clients and a closed loop of 32; and Llama-3.2-1B served three
# ways (plan m1bab.yaml; ids tagged -s6): as always, with -cc.cudagraph_mode=FULL and with
# --no-async-scheduling, each on its own server, the last two kept out of every comparison
# (``excluded``: settings the model has no input for). Predictions recorded before the runs from
# two models: tests/data/perf/predictions/{l3b,q8b,m1bab}.json (commit 26455c3, the admission
# stall) and {l3b,q8b,m1bab}-237ba0e.json (the model then shipped).
"""
HEADERS["seventh"] = """\
# vLLM 0.24.0 on one NVIDIA H200 (141 GB; torch 139.8 GiB), measured 2026-12-03 (seventh lease)
# by llmdeploy's developers with ../shared/gpu (offline bundle, serve-sweep.sh, loadgen.py),
# dummy weights (--load-format dummy), converted by scripts/gpu_ingest.py. Server and load as in
# h200-vllm-0.24.0-arrivals-6.yaml, with LOADGEN_SEED=s7, /metrics scraped after every sweep
# (metrics/*-s7.*) and a step probe in every engine process (scripts/gpu_probe/
# sitecustomize.py: the time and size of every scheduled step, probes/*.jsonl.gz). Plan
# probe7.yaml, ids tagged -s7: Llama-3.2-3B and Qwen3-8B served as in the sixth lease (l3b7,
# q8b7), and Llama-3.2-3B with -cc.max_cudagraph_capture_size=1024 (l3bcg), under Poisson
# arrivals of 40 and 25 requests/s and a closed loop of 32. Predictions recorded before the runs
# (tests/data/perf/predictions/probe7.json, commit 437ee68: the admission-stall model, with the
# hypothesis that the stall is the eager run of a step above 512 tokens for l3bcg).
"""
HEADERS["eighth"] = """\
# vLLM 0.24.0 on one NVIDIA H200 (141 GB; torch 139.8 GiB), measured 2026-12-03 (eighth lease)
# by llmdeploy's developers with ../shared/gpu (offline bundle, serve-sweep.sh, loadgen.py),
# dummy weights (--load-format dummy), converted by scripts/gpu_ingest.py. Server, load, probe
# and /metrics as in h200-vllm-0.24.0-arrivals-7.yaml, with LOADGEN_SEED=s8, ids tagged -s8.
# Predicted before the runs by the eager-step model (commit 2e25a81;
# tests/data/perf/predictions/probe8-{mq30,m8b,q8bcg}.json, plans probe8-*.yaml): Qwen3-30B-A3B
# with 1024-token prompts under Poisson 6 and 12 requests/s and a closed loop of 16 (mq30p);
# Llama-3.1-8B under Poisson 10 and 24 requests/s and a closed loop of 48 (m8bp); Qwen3-8B with
# -cc.max_cudagraph_capture_size=1024 under Poisson 40 and 25 requests/s and a closed loop of
# 32 (q8bcg, beside the seventh lease's q8b7 served as always).
"""
HEADERS["ninth"] = """\
# vLLM 0.24.0 on one NVIDIA H200 (141 GB; torch 139.8 GiB), measured 2026-12-04 (ninth lease)
# by llmdeploy's developers with ../shared/gpu (offline bundle, serve-sweep.sh, loadgen.py),
# dummy weights (--load-format dummy), converted by scripts/gpu_ingest.py. Server, load, probe
# and /metrics as in h200-vllm-0.24.0-arrivals-7.yaml, with LOADGEN_SEED=s9, ids tagged -s9.
# Predicted before the runs by two models, the candidate with fitted 4-bit expert GEMMs (commit
# e536537: tests/data/perf/predictions/lease9-KEY.json) and main's (9c7a8be:
# lease9-KEY-9c7a8be.json), plans lease9-*.yaml: gpt-oss-20b (goss9) and Qwen3-30B-A3B in bf16
# (mq30b9) under long-prompt closed loops (2048-token prompts, 32 clients: waves of 8192-token
# prefill steps), gpt-oss-20b also under Poisson 20 requests/s and a closed loop of 48 with
# 1024-token prompts; Qwen3-30B-A3B with FP8 weights, experts included (mq30f8, Poisson 10
# requests/s: its two closed loops ran on a first server whose results did not come back, the
# device returns at most so many files); Qwen2.5-72B FP8 (q72f8) and Gemma-2-27B (g27b), dense
# geometries no fit saw, under closed loops and Poisson arrivals. vLLM served gpt-oss-20b with
# CUDA graphs up to 1024 tokens (its log: "largest=1024"), which the predictions did not know.
"""
HEADERS["tenth"] = """\
# vLLM 0.24.0 on one NVIDIA H200 (141 GB; torch 139.8 GiB), measured 2026-12-04 (tenth lease)
# by llmdeploy's developers with ../shared/gpu (offline bundle, serve-sweep.sh, loadgen.py),
# dummy weights (--load-format dummy), converted by scripts/gpu_ingest.py. Server, load, probe
# and /metrics as in h200-vllm-0.24.0-arrivals-7.yaml, with LOADGEN_SEED=s10, ids tagged -s10.
# Predicted before the runs by two models, main's (2a39ae2: tests/data/perf/predictions/
# lease10-KEY-2a39ae2.json) and the candidate with the host time of FP8 activation quantization
# in steps above the largest CUDA graph (eager_fp8_layer_us; commit 7c71e62: lease10-KEY.json),
# plans lease10-*.yaml: Llama-3-70B FP8 (m70f10) with 1024-token prompts under Poisson 3
# requests/s, a closed loop of 64 and 16 staggered clients; Qwen3-30B-A3B with FP8 weights
# (mq30f10) under Poisson 20 requests/s and a closed loop of 16; Llama-3.1-8B (m8b10) under a
# closed loop of 128 and Poisson 16 requests/s of 1024-token prompts; Qwen3-32B (q32b10) with
# 1024-token prompts under Poisson 6 requests/s and a closed loop of 24. Shapes, rates and
# concurrencies no fit saw.
"""


def main(argv: list[str]) -> int:
    header, tag = "first", ""
    while argv and argv[0].startswith("--"):
        flag, _, value = argv.pop(0).partition("=")
        if flag == "--header":
            header = value
        elif flag == "--tag":
            tag = f"-{value}"
        else:
            raise SystemExit(f"unknown flag {flag}")
    results, out = Path(argv[0]), Path(argv[1])
    keys = argv[2:] or sorted(p.name for p in results.iterdir() if p.is_dir())
    starts, rows = [], []
    for arg in keys:  # KEY, or KEY:PLAN when the plan file is not KEY.yaml
        k, _, plan = arg.partition(":")
        s, r = ingest(results, k, plan or None, tag if plan else "")
        starts.append(s)
        rows += r
    body = yaml.safe_dump({"startup": starts, "arrivals": rows}, sort_keys=False, width=200)
    out.write_text(HEADERS[header] + body)
    print(f"{out}: {len(starts)} start-ups, {len(rows)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
