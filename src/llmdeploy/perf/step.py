"""Time of one engine iteration on one replica, from geometry, GPU, parallelism and constants.

One step serves ``n_dec`` decoding sequences (one new token each, contexts summing to
``ctx_dec``) plus ``pf_tokens`` prompt tokens of prefill chunks (attention pairs ``pf_pairs``,
already-cached prefix tokens ``pf_prefix``). Per GPU of the TP group:

    GEMMs      per weight group g (dense body, routed experts, LM head):
               t_g = pnorm(bytes_g / (eta_w BW), flops_g / (mu F_gemm); knee)
    attention  decode: pnorm(KV bytes / (eta_kv BW), attn flops / (mu_attn F16))
               prefill: same terms over the chunk's prefix reads and causal pairs
    all-reduce 2 per layer: alpha_link + 2 (t-1)/t * tokens * hidden * 2 B / (eff * link BW)
    GPU        sum of the above + layer_overhead * layers (+ prefill_gpu_layer * layers in a
               step with prompt tokens)
    host       step_overhead + seq_overhead * sequences in the step
               (+ eager_layer * layers in a step with more tokens than the largest CUDA
               graph: it runs kernel by kernel)
    step       max(GPU, host) if the engine overlaps host and GPU, else GPU + host;
               then at least stream_token * tokens emitted (one frontend process).

Layouts (docs/performance-model.md, "Layouts"): a replica of ``ranks`` side-by-side batches
(data-parallel ranks, or pipeline batches in flight) steps as one rank at its share of the
sequences; MoE under DP adds the expert all-gather + reduce-scatter over the DP group and shards
the experts over tp x dp GPUs; pipeline stages add their sends; hybrid state-space models read
and write each sequence's state once per step and count their mixers' weights.

See NOTES.md for the sources of each term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmdeploy.perf.types import Constants, Deployment, Hardware, ModelGeometry

__all__ = ["StepModel", "build_step_model", "kv_bytes_per_token", "param_counts"]


@dataclass(frozen=True, slots=True)
class ParamCounts:
    """Parameter counts of one model (whole model, before TP)."""

    attn_per_layer: float
    dense_mlp_per_layer: float
    expert: float  # one routed expert of one layer
    num_experts: int
    shared_per_layer: float  # shared experts + router of one MoE layer
    dense_layers: int  # layers with a dense MLP
    moe_layers: int
    lm_head: float
    embedding: float  # 0 when tied to the LM head
    # hybrid state-space models: layers with attention (-1: every layer) and with a mixer
    attention_layers: int = -1
    mamba_layers: int = 0
    mamba_per_layer: float = 0.0

    @property
    def attn_layers(self) -> int:
        if self.attention_layers >= 0:
            return self.attention_layers
        return self.dense_layers + self.moe_layers

    @property
    def total(self) -> float:
        return (
            self.attn_per_layer * self.attn_layers
            + self.mamba_per_layer * self.mamba_layers
            + self.dense_mlp_per_layer * self.dense_layers
            + (self.expert * self.num_experts + self.shared_per_layer) * self.moe_layers
            + self.lm_head
            + self.embedding
        )


def param_counts(m: ModelGeometry) -> ParamCounts:
    d = m.hidden
    if m.kv_lora_rank > 0:  # MLA
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = d * m.q_lora_rank + m.q_lora_rank * m.heads * qk if m.q_lora_rank else d * m.heads * qk
        kv = d * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * m.heads * (
            m.qk_nope_head_dim + m.v_head_dim
        )
        o = m.heads * m.v_head_dim * d
        attn = float(q + kv + o)
    else:
        attn = float(d * m.head_dim * (2 * m.heads + 2 * m.kv_heads))
    moe = m.num_experts > 0
    moe_layers = m.layers - m.first_dense_layers if moe else 0
    dense_layers = m.layers - moe_layers if m.dense_mlp_layers < 0 else m.dense_mlp_layers
    mats = 3 if m.gated_mlp else 2
    expert = float(mats * d * m.moe_intermediate) if moe else 0.0
    shared = (
        float(m.shared_experts * mats * d * m.moe_intermediate + d * m.num_experts) if moe else 0.0
    )
    vd = float(m.vocab * d)
    return ParamCounts(
        attn_per_layer=attn,
        dense_mlp_per_layer=float(mats * d * m.intermediate),
        expert=expert,
        num_experts=m.num_experts,
        shared_per_layer=shared,
        dense_layers=dense_layers,
        moe_layers=moe_layers,
        lm_head=vd,
        embedding=0.0 if m.tie_embeddings else vd,
        attention_layers=m.attention_layers,
        mamba_layers=m.mamba_layers,
        mamba_per_layer=float(m.mamba_params),
    )


def _kv_heads_per_gpu(m: ModelGeometry, tp: int) -> int:
    return max(1, math.ceil(m.kv_heads / tp))


def kv_bytes_per_token(m: ModelGeometry, tp: int, kv_bytes: float) -> tuple[float, float]:
    """KV bytes per token per GPU: (full-attention layers, sliding-window layers)."""
    if m.kv_lora_rank > 0:  # MLA latent, replicated across TP
        per_layer = float(m.kv_lora_rank + m.qk_rope_head_dim) * kv_bytes
    else:
        per_layer = 2.0 * _kv_heads_per_gpu(m, tp) * m.head_dim * kv_bytes
    layers = attention_layers(m)
    sliding = min(m.sliding_layers, layers) if m.sliding_window > 0 else 0
    return per_layer * (layers - sliding), per_layer * sliding


def attention_layers(m: ModelGeometry) -> int:
    """Layers with attention (and a KV cache): all but a hybrid's state-space and MLP-only
    layers."""
    return m.layers if m.attention_layers < 0 else m.attention_layers


_OVERLAP_KNEE = 4.0  # p-norm exponent for host/GPU and frontend/engine overlap [est]


def _pnorm(a: float, b: float, p: float) -> float:
    """Smooth maximum of two non-negative times (p -> infinity: max)."""
    if a <= 0.0:
        return b
    if b <= 0.0:
        return a
    hi = a if a > b else b
    lo = b if a > b else a
    ratio: float = (lo / hi) ** p
    scale: float = (1.0 + ratio) ** (1.0 / p)
    return hi * scale


@dataclass(frozen=True, slots=True)
class StepModel:
    """Per-GPU coefficients of the step-time model, precomputed for one configuration."""

    # bytes / (eta*BW) in seconds, flops / (mu*F) in seconds
    s_dense_w: float  # dense body weights read per step
    s_dense_f: float  # dense body GEMM time per token
    s_expert_w: float  # one expert of every MoE layer read
    s_expert_f: float  # expert GEMM time per token (k experts)
    num_experts: int
    expert_hit: float  # k/E
    s_lm_w: float
    s_lm_f: float  # per logit row
    s_kv_full: float  # KV read time per context token (full layers)
    s_kv_slide: float  # per token of sliding layers (context capped at window)
    window: int
    s_att_dec: float  # decode attention compute per (query, key) pair
    s_att_pf: float  # prefill attention compute per pair
    ar_alpha: float  # seconds, all steps with tp > 1 (2 per layer)
    s_ar_tok: float  # seconds per token of all-reduce payload (all layers)
    gpu_fixed: float  # layer overhead * layers
    host_fixed: float
    host_seq: float
    overlap: bool
    stream_tok: float
    knee: float
    kv_tok_full: float  # bytes per token (capacity accounting is in tokens; for reports)
    # Layouts (docs/performance-model.md, "Layouts"). The coefficients above are those of one
    # rank's tensor-parallel group over all layers; ``ranks`` batches run side by side (data
    # parallelism: one per rank, in step; pipeline parallelism: one per stage in flight), so one
    # step of the replica is one rank's step at its share of the sequences.
    ranks: int = 1
    experts_all_ranks: bool = False  # MoE under DP: every GPU's experts serve all ranks' tokens
    a2a_alpha: float = 0.0  # seconds per step: expert dispatch + combine, latency terms
    s_a2a_tok: float = 0.0  # seconds per token of all ranks: dispatch + combine bytes
    pp_alpha: float = 0.0  # seconds per step: stage-to-stage sends, latency terms
    s_pp_tok: float = 0.0  # seconds per token of one batch: stage-to-stage sends
    s_state: float = 0.0  # seconds per sequence in the step: state-space state read + write
    prefill_gpu: float = 0.0  # GPU seconds added to a step that carries prompt tokens
    graph_tokens: float = math.inf  # tokens of the largest CUDA graph (one rank)
    eager_host: float = 0.0  # host seconds a step above ``graph_tokens`` adds (all layers)

    def times(
        self,
        n_dec: float,
        ctx_dec: float,
        pf_tokens: float,
        pf_pairs: float,
        pf_prefix: float,
        pf_seqs: float,
        pf_done: float,
    ) -> tuple[float, float, float, float, float, float, float]:
        """Component times in seconds.

        Returns (weights/GEMM, KV/attention decode, prefill attention, all-reduce,
        GPU fixed, host, total step).
        """
        all_tokens = n_dec + pf_tokens
        stream = self.stream_tok * (n_dec + pf_done)  # one frontend streams every rank's tokens
        if self.ranks > 1:
            # decoding sequences spread evenly over the ranks; a prefill chunk runs on one rank
            # (a few chunks on as many ranks), and the others wait for it: DP ranks of an MoE
            # model step together (dummy batches, padding to the largest rank), a pipeline's
            # batches each cross every stage
            k = float(self.ranks)
            share = min(k, max(1.0, pf_seqs))
            n_dec, ctx_dec = n_dec / k, ctx_dec / k
            pf_tokens, pf_pairs, pf_prefix = pf_tokens / share, pf_pairs / share, pf_prefix / share
            pf_seqs, pf_done = pf_seqs / share, pf_done / share
        tokens = n_dec + pf_tokens
        p = self.knee
        g = _pnorm(self.s_dense_w, self.s_dense_f * tokens, p)
        if self.num_experts:
            e_tok = all_tokens if self.experts_all_ranks else tokens
            hit = self.num_experts * (1.0 - (1.0 - self.expert_hit) ** e_tok)
            g += _pnorm(self.s_expert_w * hit, self.s_expert_f * e_tok, p)
        logits = n_dec + pf_done
        if logits > 0.0:
            g += _pnorm(self.s_lm_w, self.s_lm_f * logits, p)
        slide_ctx = ctx_dec if ctx_dec < n_dec * self.window else n_dec * self.window
        kv_side = self.s_kv_full * ctx_dec + self.s_kv_slide * slide_ctx
        if self.s_state > 0.0:
            kv_side += self.s_state * (n_dec + pf_seqs)
        a_dec = _pnorm(kv_side, self.s_att_dec * ctx_dec, p)
        a_pf = 0.0
        if pf_tokens > 0.0:
            a_pf = _pnorm(
                (self.s_kv_full + self.s_kv_slide) * (pf_prefix + pf_tokens),
                self.s_att_pf * pf_pairs,
                p,
            )
        ar = self.ar_alpha + self.s_ar_tok * tokens if self.ar_alpha > 0.0 else 0.0
        if self.a2a_alpha > 0.0:
            ar += self.a2a_alpha + self.s_a2a_tok * all_tokens
        if self.pp_alpha > 0.0:
            ar += self.pp_alpha + self.s_pp_tok * tokens
        gpu = g + a_dec + a_pf + ar + self.gpu_fixed
        if pf_tokens > 0.0:
            gpu += self.prefill_gpu
        host = self.host_fixed + self.host_seq * (n_dec + pf_seqs)
        if tokens > self.graph_tokens:
            # no CUDA graph holds this many tokens (one rank's): every kernel is launched
            host += self.eager_host
        # overlapped host and GPU work: a smooth max (overlap is never perfect)
        step = _pnorm(gpu, host, _OVERLAP_KNEE) if self.overlap else gpu + host
        if stream > 0.0:
            step = _pnorm(step, stream, _OVERLAP_KNEE)
        return g, a_dec, a_pf, ar, self.gpu_fixed, host, step

    def step(
        self,
        n_dec: float,
        ctx_dec: float,
        pf_tokens: float = 0.0,
        pf_pairs: float = 0.0,
        pf_prefix: float = 0.0,
        pf_seqs: float = 0.0,
        pf_done: float = 0.0,
    ) -> float:
        """Step time in seconds."""
        t = self.times(n_dec, ctx_dec, pf_tokens, pf_pairs, pf_prefix, pf_seqs, pf_done)
        return t[6]


def gemm_peak_tflops(hw: Hardware, dep: Deployment) -> tuple[float, bool]:
    """Tensor peak the GEMMs run at, and whether that is an FP8/INT8 rate."""
    if dep.gemm_dtype == "fp8" and hw.fp8_tflops:
        return hw.fp8_tflops, True
    if dep.gemm_dtype == "int8" and hw.int8_tops:
        return hw.int8_tops, True
    return hw.fp16_tflops, False


def build_step_model(hw: Hardware, m: ModelGeometry, dep: Deployment, c: Constants) -> StepModel:
    t = max(1, dep.tp)
    pc = param_counts(m)
    bw = hw.mem_bw_gbs * 1e9
    peak, low_precision = gemm_peak_tflops(hw, dep)
    mu = c.mu_gemm * (c.fp8_gemm_factor if low_precision else 1.0)
    if dep.gemm_dtype == "w4a16":
        mu *= c.w4_gemm_factor
    f_gemm = peak * 1e12 * mu
    # routed experts: int4/mxfp4 expert weights dequantize like w4a16 (bytes below 1 per param)
    f_expert = f_gemm * c.moe_gemm_factor
    if m.num_experts and c.moe_dim_half > 0.0:
        # the GEMM size of one expert on one GPU: TP slices each expert's intermediate, expert
        # parallelism keeps experts whole (vllm/model_executor/layers/fused_moe/layer.py)
        inter = m.moe_intermediate if dep.expert_parallel else m.moe_intermediate / t
        f_expert *= inter / (inter + c.moe_dim_half)
    f_att = hw.fp16_tflops * 1e12 * c.mu_attn
    w_bw = c.eta_weights * bw
    # the packed 4-bit body streams slower than the 16-bit LM head beside it
    dense_bw = w_bw * (c.w4_bw_factor if dep.gemm_dtype == "w4a16" else 1.0)
    # KV projections are replicated when tp > kv_heads
    attn_gpu = pc.attn_per_layer / t
    if m.kv_lora_rank == 0 and t > m.kv_heads:
        kv_w = 2.0 * m.hidden * m.head_dim * m.kv_heads
        attn_gpu += kv_w * (_kv_heads_per_gpu(m, t) / m.kv_heads - 1.0 / t)
    dense_params_gpu = (
        attn_gpu * pc.attn_layers
        + pc.dense_mlp_per_layer * pc.dense_layers / t
        + pc.shared_per_layer * pc.moe_layers / t
    )
    if pc.mamba_layers:
        dense_params_gpu += pc.mamba_per_layer * pc.mamba_layers / t
    dense_bytes = dense_params_gpu * dep.weight_bytes_dense
    dp = max(1, dep.data_parallel)
    # MoE under data parallelism: the experts are sharded over all tp x dp GPUs (whole experts
    # with --enable-expert-parallel, slices without) and see every rank's tokens
    moe_dp = dp > 1 and m.num_experts > 0
    shard = t * dp if moe_dp else t
    expert_params_gpu = pc.expert * pc.moe_layers / shard  # one expert in every MoE layer
    active_expert_params = expert_params_gpu * m.experts_per_token
    kv_full, kv_slide = kv_bytes_per_token(m, t, dep.kv_bytes)
    kv_bw = c.eta_kv * bw
    heads_gpu = m.heads / t
    if m.kv_lora_rank > 0:
        dec_pair = 2.0 * heads_gpu * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
        pf_pair = 2.0 * heads_gpu * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
    else:
        dec_pair = pf_pair = 4.0 * heads_gpu * m.head_dim
    # attention FLOPs per pair, all layers (sliding layers see at most `window` keys; folded
    # into the full count, a small over-estimate for long prompts on gpt-oss-like models)
    dec_pair *= attention_layers(m)
    pf_pair *= attention_layers(m)
    if t > 1:
        alpha_us = c.ar_latency_nvlink_us if hw.interconnect == "nvlink" else c.ar_latency_pcie_us
        ar_alpha = 2 * m.layers * alpha_us * 1e-6
        link = max(1e-3, hw.interconnect_bw_gbs) * 1e9 * c.link_efficiency
        s_ar_tok = 2 * m.layers * (2.0 * (t - 1) / t) * m.hidden * 2.0 / link
    else:
        ar_alpha = 0.0
        s_ar_tok = 0.0
    a2a_alpha, s_a2a_tok = _all_to_all(hw, m, pc, dp, c) if moe_dp else (0.0, 0.0)
    pp = max(1, dep.pipeline_parallel)
    pp_alpha, s_pp_tok = _stage_sends(hw, m, dep, c) if pp > 1 else (0.0, 0.0)
    return StepModel(
        s_dense_w=dense_bytes / dense_bw,
        s_dense_f=2.0 * dense_params_gpu / f_gemm,
        s_expert_w=expert_params_gpu * dep.weight_bytes_expert / (c.eta_experts * bw),
        s_expert_f=2.0 * active_expert_params / f_expert,
        num_experts=m.num_experts,
        expert_hit=(m.experts_per_token / m.num_experts) if m.num_experts else 0.0,
        s_lm_w=pc.lm_head / t * dep.lm_head_bytes / w_bw,
        s_lm_f=2.0 * pc.lm_head / t / (hw.fp16_tflops * 1e12 * c.mu_gemm),
        s_kv_full=kv_full / kv_bw,
        s_kv_slide=kv_slide / kv_bw,
        window=m.sliding_window if m.sliding_window > 0 else 1 << 30,
        s_att_dec=dec_pair / f_att,
        s_att_pf=pf_pair / f_att,
        ar_alpha=ar_alpha,
        s_ar_tok=s_ar_tok,
        gpu_fixed=c.layer_overhead_us * 1e-6 * m.layers,
        host_fixed=c.step_overhead_us * 1e-6,
        prefill_gpu=c.prefill_gpu_layer_us * 1e-6 * m.layers,
        graph_tokens=float(dep.cudagraph_max_tokens) if dep.cudagraph_max_tokens >= 0 else math.inf,
        eager_host=eager_host_s(m, dep, c),
        host_seq=c.seq_overhead_us * 1e-6,
        overlap=c.host_overlap,
        stream_tok=c.stream_token_us * 1e-6,
        knee=c.gemm_knee,
        kv_tok_full=kv_full,
        ranks=dp * pp,
        experts_all_ranks=moe_dp,
        a2a_alpha=a2a_alpha,
        s_a2a_tok=s_a2a_tok,
        pp_alpha=pp_alpha,
        s_pp_tok=s_pp_tok,
        s_state=2.0 * dep.state_bytes_per_seq / kv_bw,
    )


def eager_host_s(m: ModelGeometry, dep: Deployment, c: Constants) -> float:
    """Host seconds a step without CUDA graphs adds: every layer's launches, more where FP8
    linears quantize their activations (Constants.eager_layer_us, eager_fp8_layer_us)."""
    us = c.eager_layer_us * m.layers
    if dep.gemm_dtype == "fp8":
        us += c.eager_fp8_layer_us * m.layers
    return us * 1e-6


# activations between layers and GPUs are 16-bit (vLLM keeps hidden states in the model dtype)
_ACT_BYTES = 2.0
# topk_weights (float32) and topk_ids (int32) gathered with each token (vLLM AgRsAll2AllManager)
_TOPK_BYTES = 8.0


def _all_to_all(
    hw: Hardware, m: ModelGeometry, pc: ParamCounts, dp: int, c: Constants
) -> tuple[float, float]:
    """Expert dispatch and combine of one step (all MoE layers) under data parallelism: vLLM's
    default all2all backend ``allgather_reducescatter`` (vllm/envs.py VLLM_ALL2ALL_BACKEND;
    vllm/distributed/device_communicators/all2all.py AgRsAll2AllManager) all-gathers the
    hidden states, top-k weights and ids of every DP rank before the experts (dispatch) and
    reduce-scatters their output (combine), over the DP group inside the node. Each is a ring
    collective: alpha + (dp - 1)/dp x bytes of all ranks' tokens / (eff x link). Returns
    (latency seconds per step, seconds per token of all ranks)."""
    alpha_us = c.ar_latency_nvlink_us if hw.interconnect == "nvlink" else c.ar_latency_pcie_us
    link = max(1e-3, hw.interconnect_bw_gbs) * 1e9 * c.link_efficiency
    per_token = (m.hidden * _ACT_BYTES + m.experts_per_token * _TOPK_BYTES) + m.hidden * _ACT_BYTES
    return (
        2 * pc.moe_layers * alpha_us * 1e-6,
        pc.moe_layers * (dp - 1) / dp * per_token / link,
    )


def _stage_sends(
    hw: Hardware, m: ModelGeometry, dep: Deployment, c: Constants
) -> tuple[float, float]:
    """Stage-to-stage sends of one batch crossing a pipeline of ``pp`` stages: ``pp - 1``
    point-to-point sends of the intermediate tensors (hidden states and residual, vLLM
    ``IntermediateTensors`` of e.g. vllm/model_executor/models/llama.py), each TP rank sending
    its 1/tp slice (GroupCoordinator.send_tensor_dict with all_gather_group, vllm/distributed/
    parallel_state.py). Sends between nodes go over the GPU's share of the node's network (EFA),
    the others over NVLink; the latency term is the all-reduce one of that path (PCIe/network
    NCCL: ar_latency_pcie_us), not a fitted figure. Returns (seconds per step, per token)."""
    pp, nodes, t = dep.pipeline_parallel, min(dep.pipeline_nodes, dep.pipeline_parallel), dep.tp
    per_token = 2.0 * m.hidden * _ACT_BYTES / max(1, t)
    net = max(1e-3, hw.network_bw_gbs) * 1e9 * c.link_efficiency
    link = max(1e-3, hw.interconnect_bw_gbs) * 1e9 * c.link_efficiency
    across, within = nodes - 1, pp - nodes
    return (
        (across * c.ar_latency_pcie_us + within * c.ar_latency_nvlink_us) * 1e-6,
        across * per_token / net + within * per_token / link,
    )
