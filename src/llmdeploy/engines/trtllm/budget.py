"""TensorRT-LLM's GPU-memory budgets, one per backend (``engine.backend``, docs/sizing.md §7):

- engine: the KV cache gets ``kv_cache_free_gpu_mem_fraction`` of the memory free after the
  engine (weights + build-time activation buffers) is loaded (shared/reference/trtllm.md §2.4);
- pytorch: ``KvCacheCreator`` profiles a real forward pass of a ``max_num_tokens`` dummy batch
  after the weights load and CUDA graphs are captured, and gives the KV cache
  ``kv_cache_config.free_gpu_memory_fraction`` of ``total - peak`` (NVIDIA/TensorRT-LLM
  ``tensorrt_llm/_torch/pyexecutor/_util.py`` ``_cal_max_memory``; /work/notes/trtllm-llmapi.md §6).
"""

from __future__ import annotations

import dataclasses

from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
from llmdeploy.engines.trtllm.build import capability
from llmdeploy.engines.trtllm.releases import DEFAULT_TRTLLM_VERSION
from llmdeploy.sizing import gpu_memory
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.parallel import hopper
from llmdeploy.sizing.types import MemoryBudget, SizingRequest

# trtllm-build --max_num_tokens default (RN 0.11; BuildConfig.max_num_tokens,
# tensorrt_llm/builder.py @ 008b2b8d), which trtllm-serve's --max_num_tokens takes as its own
# (tensorrt_llm/commands/serve.py @ 00209af1, get_llm_args)
ENGINE_MAX_NUM_TOKENS = 8192
TOKENS_PER_BLOCK = 32  # LLM API KvCacheConfig.tokens_per_block default


def _refusals(
    req: SizingRequest, arch: Architecture, quant: CheckpointQuant | None, *, pytorch: bool
) -> list[str]:
    """What the backend cannot run as llmdeploy renders it."""
    reasons = []
    gpu = req.gpu
    if quant is not None and quant.method in {"fp8", "fp8-block"} and gpu and not gpu.fp8:
        reasons.append(
            f"TensorRT-LLM FP8 needs FP8 tensor cores (Ada/Hopper); {gpu.model} has none"
        )
    if pytorch and req.kv_cache_dtype == "fp8" and gpu and not gpu.fp8:
        reasons.append(f"an FP8 KV cache needs FP8 tensor cores (Ada/Hopper); {gpu.model} has none")
    nvfp4 = quant is not None and quant.method == "nvfp4"
    if pytorch and nvfp4 and gpu is not None and capability(gpu.compute_capability) < (10, 0):
        reasons.append(f"NVFP4 checkpoints need Blackwell GPUs; {gpu.model} is not one")
    unmodelled = (
        arch.is_mla
        or (quant is not None and quant.method == "mxfp4")
        or arch.has_state_space
        or arch.cross_attention_tokens
    )
    if unmodelled:
        path = (
            "PyTorch-backend path" if pytorch else "Triton TensorRT-LLM backend path (trtllm-build)"
        )
        reasons.append(
            f"the {path} is not modelled for this architecture (MLA, MXFP4 experts, "
            "state-space layers, cross-attention); use engine vllm"
        )
    return reasons


def trtllm_budget(
    req: SizingRequest,
    arch: Architecture,
    quant: CheckpointQuant | None,
    total: float,
    length: int,
) -> MemoryBudget:
    """The budget of the backend the request names (``engine_variant``; engine by default).

    Both: weights (replicated input embedding: the engine path's ``convert_checkpoint.py``
    default; on the PyTorch path its sharding was not verified and replicated is the larger
    figure), activations of a ``max_num_tokens`` batch with fp32 logits, memory outside torch.
    The PyTorch backend also captures CUDA graphs before its profiling run, so they are inside
    the measured peak, and keeps fused-MoE workspaces across it.
    """
    del length  # neither KV pool depends on the request length
    pytorch = req.engine_variant == "pytorch"
    reasons = _refusals(req, arch, quant, pytorch=pytorch)
    tp = max(1, req.tp)
    dt = mem.dtype_bytes(req.dtype)
    parts = mem.weight_breakdown(arch, quant, tp, parallel_embedding=False, dt=dt)
    weights = sum(parts.values()) / mem.GIB
    batched = req.max_num_batched_tokens or ENGINE_MAX_NUM_TOKENS
    seqs = req.max_num_seqs or 64
    reqs = min(seqs, batched) if pytorch else seqs
    act = (
        mem.activation_bytes(
            arch, quant, tp, batched, reqs, dt, sampler_bytes=4.0, moe_workspace=pytorch
        )
        / mem.GIB
    )
    non_torch = mem.non_torch_gib(0.25, tp, req.nvlink, hopper(req))
    graphs = mem.cudagraph_gib(arch) if pytorch else 0.0
    free = total - gpu_memory.CUDA_CONTEXT_GIB - weights - act - non_torch - graphs
    kv = free * req.kv_cache_free_gpu_mem_fraction
    layout = f"every layer sized as full attention; {TOKENS_PER_BLOCK} tokens per block"
    if pytorch:
        assumptions: tuple[str, ...] = (
            "TensorRT-LLM PyTorch backend: KV = free_gpu_memory_fraction x (total - peak of "
            f"weights, a {batched}-token dummy batch, CUDA graphs and memory outside torch) "
            "(_torch/pyexecutor/_util.py _cal_max_memory); CUDA graphs use vLLM's estimate, "
            f"not a TensorRT-LLM measurement; {layout}",
            "TensorRT-LLM 1.3.0rc19/rc20 moved the KV pool by 4 GiB on H100 through a 550 MiB "
            "import-time CUDA context (fixed by PRs #15632/#15985): leave headroom",
        )
    else:
        assumptions = (
            "TensorRT-LLM: KV = kv_cache_free_gpu_mem_fraction x memory free after "
            f"load (trtllm.md §2.4); {layout}",
        )
    return MemoryBudget(
        version=req.engine_version or DEFAULT_TRTLLM_VERSION,
        gmu=None,
        max_gmu=None,
        # what the engine uses: everything but the CUDA context and the free memory it leaves
        budget=total - gpu_memory.CUDA_CONTEXT_GIB - max(0.0, free) + max(0.0, kv),
        weights=weights,
        act=act,
        non_torch=non_torch,
        graphs=graphs,
        graphs_in_budget=pytorch,
        kv=kv,
        batched=batched,
        seqs=seqs,
        breakdown=mem.breakdown_gib(parts),
        layout_arch=dataclasses.replace(arch, layer_attention=("full",) * arch.num_layers),
        block=TOKENS_PER_BLOCK,
        reasons=tuple(reasons),
        assumptions=assumptions,
    )
