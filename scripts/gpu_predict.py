#!/usr/bin/env python3
"""Record what llmdeploy predicts for a planned GPU run, before it runs (issue 22).

Usage: python scripts/gpu_predict.py PLAN.yaml OUT.json

PLAN: ``version`` (the vLLM release the toolkit serves), ``models`` (key -> ``config``: a
config.json path, optional ``quantization``/``kv``/``max_model_len``/
``gpu_memory_utilization``/``max_num_batched_tokens``, ``serve_args``: the extra vLLM
arguments the lease passes, which must say the same, and ``constants``: fields of the
performance constants to replace, for a prediction of what a hypothesis says a server setting
does, where the model has no input for that setting) and ``sweeps``
("ISL/OSL/MODE/NREQ" as ../shared/gpu/serve-sweep.sh takes them: closed:C | stagger:C |
poisson:R). Each model is sized by llmdeploy on one H200 (p5en.48xlarge, TP 1, max-model-len
8192, gpu-memory-utilization 0.92, as the toolkit serves it, unless the plan says otherwise)
and each sweep is predicted by the performance model of the commit named in the output, with
the arrival pattern the loadgen drives.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from llmdeploy.engines import registry
from llmdeploy.engines.vllm.perf import cudagraph_tokens_from_args
from llmdeploy.perf.api import estimate
from llmdeploy.perf.inputs import geometry, hardware
from llmdeploy.sizing.requests import request_from_options
from llmdeploy.sizing.suggest import size

REPO = Path(__file__).resolve().parents[1]


def workload(sweep: str) -> Any:
    from llmdeploy.perf import workloads

    return workloads.from_loadgen(sweep)


def toolkit_request(
    config: Path,
    version: str = "0.24.0",
    quant: str = "none",
    kv: str = "auto",
    max_model_len: int = 8192,
    gpu_memory_utilization: float = 0.92,
) -> Any:
    """The sizing request of ``config`` served as the toolkit serves it: one H200
    (p5en.48xlarge), TP 1, vLLM ``version``."""
    return request_from_options(
        str(config),
        instance="p5en.48xlarge",
        gpu=None,
        gpu_memory_gib=None,
        tp=1,
        dp=1,
        expert_parallel=False,
        quantization=quant,
        kv_cache_dtype=kv,
        max_model_len=max_model_len,
        gpu_memory_utilization=gpu_memory_utilization,
        engine="vllm",
        engine_version=version,
        pp=1,
        nodes=1,
        base_dir=Path.cwd(),
    )


def predict(
    config: Path,
    sweeps: list[str],
    version: str,
    quant: str,
    kv: str,
    max_model_len: int = 8192,
    gpu_memory_utilization: float = 0.92,
    max_num_batched_tokens: int | None = None,
    constants: dict[str, float] | None = None,
    serve_args: str = "",
) -> list[Any]:
    req = toolkit_request(config, version, quant, kv, max_model_len, gpu_memory_utilization)
    if max_num_batched_tokens is not None:
        req = dataclasses.replace(req, max_num_batched_tokens=max_num_batched_tokens)
    sz = size(req)
    run = registry.get("vllm").engine_run(sz, None)
    graphs = cudagraph_tokens_from_args(serve_args, run.deployment.cudagraph_max_tokens)
    dep = dataclasses.replace(run.deployment, cudagraph_max_tokens=graphs)
    consts = dataclasses.replace(run.constants, **constants) if constants else run.constants
    assert sz.instance is not None
    hw, m = hardware(sz.instance), geometry(sz.request.architecture)
    out = []
    for sweep in sweeps:
        wl = workload(sweep)
        e = estimate(hw, m, dep, wl, consts)
        out.append(
            {
                "sweep": sweep,
                "kv_cache_tokens": sz.kv_cache_tokens,
                "weights_gib": sz.weights_gib_per_gpu,
                "kv_cache_gib": round(sz.kv_cache_gib_per_gpu, 3),
                "output_tok_s": round(e.output_tokens_per_s, 1),
                "ttft_p50_ms": round(e.ttft_p50_ms, 1),
                "ttft_p99_ms": round(e.ttft_p99_ms, 1),
                "itl_p50_ms": round(e.itl_p50_ms, 2),
                "itl_p99_ms": round(e.itl_p99_ms, 2),
                "mean_batch": round(e.mean_batch, 1),
            }
        )
    return out


def main(argv: list[str]) -> int:
    plan: dict[str, Any] = YAML(typ="safe").load(Path(argv[0]).read_text())
    git = ["git", "-C", str(REPO)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "src"], capture_output=True, text=True)
    out: dict[str, Any] = {
        "commit": commit.stdout.strip(),
        "src_uncommitted_changes": bool(dirty.stdout.strip()),
        "version": plan["version"],
        "models": {},
    }
    for key, m in plan["models"].items():
        out["models"][key] = predict(
            (REPO / m["config"]) if not Path(m["config"]).is_absolute() else Path(m["config"]),
            list(plan["sweeps"]),
            str(plan["version"]),
            str(m.get("quantization", "none")),
            str(m.get("kv", "auto")),
            int(m.get("max_model_len", 8192)),
            float(m.get("gpu_memory_utilization", 0.92)),
            m.get("max_num_batched_tokens"),
            m.get("constants"),
            str(m.get("serve_args", "")),
        )
    Path(argv[1]).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
