"""The model's inputs from llmdeploy's catalogs and sizing: a GPU and its links
(:class:`~llmdeploy.perf.types.Hardware`), a model's geometry
(:class:`~llmdeploy.perf.types.ModelGeometry`) and the bytes its checkpoint moves.

Engine-independent: what an engine changes (batching limits, KV admission, constants) comes
from its plug-in (``engines/<name>/perf.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from llmdeploy.catalog.architecture import Architecture, CheckpointQuant, layer_shapes, ssm_params
from llmdeploy.catalog.ec2 import Instance
from llmdeploy.perf.types import Deployment, GemmDtype, Hardware, ModelGeometry
from llmdeploy.sizing import memory as mem
from llmdeploy.sizing.types import Sizing

KvAdmission = Literal["reserve", "optimistic"]

__all__ = ["Precision", "deployment", "geometry", "hardware", "precision", "unsupported"]


def unsupported(sizing: Sizing) -> str | None:
    """Why the model cannot estimate this configuration (None: it can). Each is a blind spot
    of docs/performance-model.md."""
    inst = sizing.instance
    if inst is None:
        return "no instance type: the model needs a GPU's bandwidth and compute"
    if sizing.data_parallel > 1 and sizing.pp > 1:
        return "data parallelism combined with pipeline parallelism is not modelled"
    gpu = inst.gpu
    if gpu.mem_bw_gbs is None or gpu.fp16_tflops is None:
        return f"{gpu.model}: memory bandwidth or BF16 peak not in the catalog"
    on_node = sizing.tp > 1 or sizing.data_parallel > 1 or (sizing.pp > sizing.nodes)
    if on_node and inst.link_gbs is None:
        return f"{inst.name}: GPU-to-GPU bandwidth not in the catalog"
    if sizing.nodes > 1 and not inst.network_gbps:
        return f"{inst.name}: network bandwidth between nodes not in the catalog"
    return None


def hardware(inst: Instance) -> Hardware:
    """One GPU of ``inst`` and the link between its GPUs (datasheet figures, catalog/data)."""
    gpu = inst.gpu
    assert gpu.mem_bw_gbs is not None and gpu.fp16_tflops is not None  # unsupported() said so
    return Hardware(
        name=gpu.model,
        mem_bw_gbs=gpu.mem_bw_gbs,
        fp16_tflops=gpu.fp16_tflops,
        fp8_tflops=gpu.fp8_tflops if gpu.fp8 else None,
        int8_tops=gpu.int8_tops,
        interconnect="nvlink" if inst.nvlink else ("pcie" if inst.gpu_count > 1 else "none"),
        interconnect_bw_gbs=inst.link_gbs or 0.0,
        gpu_count=inst.gpu_count,
        mem_gib=(gpu.mem_mib_nvidia_smi or 0) / 1024 or None,
        network_bw_gbs=(inst.network_gbps or 0.0) / 8.0 / max(1, inst.gpu_count),
    )


def _hybrid(arch: Architecture, geo: ModelGeometry) -> ModelGeometry:
    """``geo`` of a hybrid state-space model: its layers' mixers and MLPs counted from its layer
    shapes (catalog/hybrids.py)."""
    shapes = layer_shapes(arch)
    widths = [s.mlp_width for s in shapes if s.mlp_width > 0 and not s.moe]
    moe_layers = sum(1 for s in shapes if s.moe)
    return dataclasses.replace(
        geo,
        attention_layers=sum(1 for s in shapes if s.attention),
        mamba_layers=sum(1 for s in shapes if s.mixer == "mamba"),
        mamba_params=ssm_params(arch),
        dense_mlp_layers=len(widths),
        intermediate=max(widths, default=0),
        first_dense_layers=arch.num_layers - moe_layers if arch.is_moe else 0,
        gated_mlp=arch.gated_mlp,
    )


def geometry(arch: Architecture) -> ModelGeometry:
    """The decoder geometry of ``arch`` as the step model reads it."""
    sliding = sum(1 for kind in arch.layer_attention if kind in ("sliding", "chunked"))
    window = arch.sliding_window or arch.attention_chunk_size or 0
    moe_width = arch.moe_intermediate_size
    shared = round(arch.shared_expert_intermediate_size / moe_width) if moe_width else 0
    geo = ModelGeometry(
        name=arch.name,
        layers=arch.num_layers,
        hidden=arch.hidden_size,
        heads=arch.num_attention_heads,
        kv_heads=arch.num_kv_heads,
        head_dim=arch.head_dim,
        intermediate=arch.intermediate_size,
        vocab=arch.vocab_size,
        tie_embeddings=arch.tie_word_embeddings,
        num_experts=arch.num_experts,
        experts_per_token=arch.experts_per_token,
        moe_intermediate=moe_width,
        shared_experts=shared,
        first_dense_layers=arch.dense_layers if arch.is_moe else 0,
        q_lora_rank=arch.q_lora_rank,
        kv_lora_rank=arch.kv_lora_rank,
        qk_rope_head_dim=arch.qk_rope_head_dim,
        qk_nope_head_dim=arch.qk_nope_head_dim,
        v_head_dim=arch.v_head_dim,
        sliding_window=window if sliding else 0,
        sliding_layers=sliding if window else 0,
    )
    if arch.has_state_space:
        geo = _hybrid(arch, geo)
    return geo


@dataclass(frozen=True)
class Precision:
    """Bytes the weights and KV cache move, and the precision the GEMMs run at."""

    weight_bytes_dense: float
    weight_bytes_expert: float
    lm_head_bytes: float
    gemm_dtype: GemmDtype
    kv_bytes: float


# Checkpoint formats whose GEMMs run on FP8 or INT8 tensor cores (W8A8); weight-only formats
# (AWQ, GPTQ, W4A16, MXFP4 on vLLM's Marlin-style kernels) dequantize to 16-bit and run at the
# BF16 rate (docs/performance-model.md, "Precision").
_GEMM_DTYPE: dict[str, GemmDtype] = {"fp8": "fp8", "fp8-block": "fp8", "int8": "int8"}


def _blend(q: CheckpointQuant | None, component: str) -> float:
    if q is None:
        return 2.0
    share = q.quantized_fraction(component)
    return share * q.bytes_per_weight + (1.0 - share) * 2.0


def precision(sizing: Sizing) -> Precision:
    """What the served checkpoint (the spec's quantization applied to it) moves per step."""
    q, _ = mem.effective_quant(sizing.request.architecture, sizing.request.quantization)
    gemm: GemmDtype = _GEMM_DTYPE.get(q.method, "bf16") if q is not None else "bf16"
    dense_4bit = q is not None and q.bytes_per_weight < 1.0 and q.quantized_fraction("attention")
    if gemm == "bf16" and dense_4bit:
        gemm = "w4a16"  # a 4-bit weight-only dense body (MXFP4 experts alone are not)
    return Precision(
        weight_bytes_dense=(_blend(q, "attention") + _blend(q, "mlp")) / 2.0,
        weight_bytes_expert=_blend(q, "experts"),
        lm_head_bytes=_blend(q, "lm_head"),
        gemm_dtype=gemm,
        kv_bytes=1.0 if sizing.request.kv_cache_dtype == "fp8" else 2.0,
    )


def deployment(
    sizing: Sizing,
    *,
    kv_admission: KvAdmission,
    async_scheduling: bool | None = None,
    cudagraph_max_tokens: int = -1,
) -> Deployment:
    """One replica of ``sizing`` as the model runs it: its TP degree, precision, batching limits
    and the KV-cache capacity the sizing computed; the engine says how it admits requests."""
    p = precision(sizing)
    # every data-parallel rank has its own scheduler, batching limits and KV pool (the
    # sizing's figures are one rank's); the replica's are all of its ranks' together
    dp = max(1, sizing.data_parallel)
    state = sizing.state_bytes_per_sequence
    if sizing.pp > 1 and sizing.kv_layout is not None:
        # the sizing's figures are the binding stage's; a token crosses every stage
        mamba = sizing.request.architecture.layer_attention.count("mamba")
        state = sizing.kv_layout.state_bytes_per_layer * mamba
    return Deployment(
        tp=sizing.tp,
        weight_bytes_dense=p.weight_bytes_dense,
        weight_bytes_expert=p.weight_bytes_expert,
        lm_head_bytes=p.lm_head_bytes,
        gemm_dtype=p.gemm_dtype,
        kv_bytes=p.kv_bytes,
        max_num_batched_tokens=sizing.max_num_batched_tokens * dp,
        max_num_seqs=sizing.max_num_seqs * dp,
        kv_capacity_tokens=max(0, sizing.kv_cache_tokens) * dp,
        kv_admission=kv_admission,
        async_scheduling=async_scheduling,
        data_parallel=dp,
        expert_parallel=sizing.expert_parallel,
        pipeline_parallel=max(1, sizing.pp),
        pipeline_nodes=max(1, sizing.nodes),
        state_bytes_per_seq=float(state),
        cudagraph_max_tokens=cudagraph_max_tokens,
    )
