"""What a calibration row does not state about its replica, from llmdeploy's own tables: the
GPU's instance type, the model's catalog name, the KV-cache capacity (llmdeploy's sizing, computed
live) and, for TensorRT-LLM's offline rows, trtllm-bench's batch settings.

Part of scripts/perf_calibration.py (docs/performance-model.md, "Calibration").
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import Any

from llmdeploy.perf.types import ModelGeometry
from llmdeploy.sizing import calculator, requests

# an instance type per GPU of the rows: the GPU's datasheet figures and its NVLink (catalog)
INSTANCE_OF_GPU = {"h100": "p5.48xlarge", "h200": "p5en.48xlarge", "a100": "p4de.24xlarge"}
# model names as the rows spell them -> catalog names
MODEL_ALIASES = {"Qwen/Qwen3-32B-FP8": "Qwen/Qwen3-32B"}


def gpu_key(text: str) -> str:
    for key in INSTANCE_OF_GPU:
        if key.upper() in text.upper():
            return key
    raise KeyError(f"GPU {text!r}: add it to INSTANCE_OF_GPU")


def numeric_version(text: str) -> str:
    """'0.17 (doc: ...)' -> '0.17.0'; '1.2.0rc1' -> '1.2.0' (what the sizing tables key on)."""
    found = re.match(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text.strip())
    assert found is not None, text
    return ".".join(part or "0" for part in found.groups())


# ---- KV capacity of a published row: llmdeploy's sizing, live --------------------------------
# Sizing inputs the rows do not state. TensorRT-LLM 0.17's performance overview states
# kv_cache_free_gpu_mem_fraction 0.95 (the calculator's default is 0.9); gpustack's gpt-oss runs
# used --max-model-len 32768.
KV_FRACTION = {"trt017": 0.95}
MAX_MODEL_LEN = {"openai/gpt-oss-120b": 32768}
KV_OVERRIDES = {
    # vLLM refuses to start unless one max_model_len (40960) request fits: >= 10 GiB of KV. The
    # calculator's 4.46 GiB (18,272 tokens) cannot be what ran; use the start-up bound.
    "gs-vllm0110-qwen3-32b-": 40960,
    # the calculator finds no room (weights 65.9 GiB); geometry gives ~60.6 GiB of weights, so
    # ~71.3 - 60.6 - 2.9 (activations) - 0.3 = 7.5 GiB; in tokens of the full-attention group
    # (36864 B/token at TP1) with the sliding group's pages counted: ~2 x 36864 B/token.
    "gs-vllm0102-gptoss120b-h100-tp1-": int(7.5 * 2**30 / (2 * 36864)),
}


def row_model(row: dict[str, Any]) -> str:
    name = str(row["model"]).split()[0]
    return MODEL_ALIASES.get(name, name)


@functools.cache
def _sized_kv_tokens(
    model: str, gpu: str, tp: int, quant: str, kv: str, engine: str, version: str, frac: float
) -> int:
    req = requests.request_from_options(
        model,
        gpu=gpu,
        tp=tp,
        quantization=quant,
        kv_cache_dtype=kv,
        max_model_len=MAX_MODEL_LEN.get(model),
        engine=engine,
        engine_version=version,
    )
    req = dataclasses.replace(req, kv_cache_free_gpu_mem_fraction=frac)
    return calculator.compute(req).kv_cache_tokens


def kv_tokens(row: dict[str, Any], source: str) -> int:
    """Tokens the KV cache of the row's replica holds: the row's own figure when it gives one,
    else an override below, else llmdeploy's sizing of the row's configuration."""
    if row.get("kv_cache_tokens"):
        return int(row["kv_cache_tokens"])
    for prefix, tokens in KV_OVERRIDES.items():
        if str(row["id"]).startswith(prefix):
            return tokens
    return _sized_kv_tokens(
        row_model(row),
        gpu_key(str(row["gpu"])),
        int(row["tp"]),
        "fp8" if str(row.get("weights") or "").startswith("fp8") else "none",
        "fp8" if str(row.get("kv_cache_dtype") or "").startswith("fp8") else "auto",
        "vllm" if row["engine"] == "vllm" else "trtllm",
        numeric_version(str(row["engine_version"])),
        KV_FRACTION.get(source, 0.9),
    )


# ---- TensorRT-LLM offline rows: trtllm-bench's own batch settings ----------------------------
# parameter counts (billions) the heuristic was evaluated with; other models: the catalog's
BENCH_PARAMS_B = {"llama-3.1-8b": 8.03, "llama-3.1-70b": 70.55, "mixtral-8x7b": 46.7}
BENCH_PARAMS_B["mixtral-8x22b"] = 140.6


def trtllm_bench_settings(
    params_b: float, m: ModelGeometry, tp: int, fp8: bool, isl: int, osl: int
) -> tuple[int, int]:
    """trtllm-bench's max_batch_size / max_num_tokens heuristic (tensorrt_llm/bench/build/
    tuning.py ``calc_engine_setting`` + ``finetune_setting``, TensorRT-LLM 0.17 era), on the
    80 GB H100 (79.1 GiB) with the 0.95 KV fraction."""
    b = 1 if fp8 else 2
    per_token_gb = 2 * m.layers * max(tp, m.kv_heads) * m.head_dim * b / 1024**3
    reqs = (79.1 * tp - params_b * b) * 0.95 / per_token_gb / (isl + osl)
    raw_bs = min(reqs, 4096)
    raw_tok = min(raw_bs * (1 + isl / osl), 32768)
    if raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        bs = 128 * math.ceil(raw_bs / 128)
    else:
        bs = 256 * math.ceil(raw_bs / 256)
    if raw_tok < 4096:
        tok = max(2048, 256 * math.ceil(raw_tok / 256))
    elif raw_tok < 8192:
        tok = 512 * math.ceil(raw_tok / 512)
    else:
        tok = 1024 * math.ceil(raw_tok / 1024)
    return bs, tok
