"""Time of one engine iteration on one replica, from geometry, GPU, parallelism and constants.

One step serves ``n_dec`` decoding sequences (one new token each, contexts summing to
``ctx_dec``) plus ``pf_tokens`` prompt tokens of prefill chunks (attention pairs ``pf_pairs``,
already-cached prefix tokens ``pf_prefix``). Per GPU of the TP group:

    GEMMs      per weight group g (dense body, routed experts, LM head):
               t_g = pnorm(bytes_g / (eta_w BW), flops_g / (mu F_gemm); knee)
    attention  decode: pnorm(KV bytes / (eta_kv BW), attn flops / (mu_attn F16))
               prefill: same terms over the chunk's prefix reads and causal pairs
    all-reduce 2 per layer: alpha_link + 2 (t-1)/t * tokens * hidden * 2 B / (eff * link BW)
    GPU        sum of the above + layer_overhead * layers
    host       step_overhead + seq_overhead * sequences in the step
    step       max(GPU, host) if the engine overlaps host and GPU, else GPU + host;
               then at least stream_token * tokens emitted (one frontend process).

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

    @property
    def total(self) -> float:
        layers = self.dense_layers + self.moe_layers
        return (
            self.attn_per_layer * layers
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
    dense_layers = m.layers - moe_layers
    expert = float(3 * d * m.moe_intermediate) if moe else 0.0
    shared = (
        float(m.shared_experts * 3 * d * m.moe_intermediate + d * m.num_experts) if moe else 0.0
    )
    vd = float(m.vocab * d)
    return ParamCounts(
        attn_per_layer=attn,
        dense_mlp_per_layer=float(3 * d * m.intermediate),
        expert=expert,
        num_experts=m.num_experts,
        shared_per_layer=shared,
        dense_layers=dense_layers,
        moe_layers=moe_layers,
        lm_head=vd,
        embedding=0.0 if m.tie_embeddings else vd,
    )


def _kv_heads_per_gpu(m: ModelGeometry, tp: int) -> int:
    return max(1, math.ceil(m.kv_heads / tp))


def kv_bytes_per_token(m: ModelGeometry, tp: int, kv_bytes: float) -> tuple[float, float]:
    """KV bytes per token per GPU: (full-attention layers, sliding-window layers)."""
    if m.kv_lora_rank > 0:  # MLA latent, replicated across TP
        per_layer = float(m.kv_lora_rank + m.qk_rope_head_dim) * kv_bytes
    else:
        per_layer = 2.0 * _kv_heads_per_gpu(m, tp) * m.head_dim * kv_bytes
    sliding = min(m.sliding_layers, m.layers) if m.sliding_window > 0 else 0
    return per_layer * (m.layers - sliding), per_layer * sliding


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
        tokens = n_dec + pf_tokens
        p = self.knee
        g = _pnorm(self.s_dense_w, self.s_dense_f * tokens, p)
        if self.num_experts:
            hit = self.num_experts * (1.0 - (1.0 - self.expert_hit) ** tokens)
            g += _pnorm(self.s_expert_w * hit, self.s_expert_f * tokens, p)
        logits = n_dec + pf_done
        if logits > 0.0:
            g += _pnorm(self.s_lm_w, self.s_lm_f * logits, p)
        slide_ctx = ctx_dec if ctx_dec < n_dec * self.window else n_dec * self.window
        a_dec = _pnorm(
            self.s_kv_full * ctx_dec + self.s_kv_slide * slide_ctx, self.s_att_dec * ctx_dec, p
        )
        a_pf = 0.0
        if pf_tokens > 0.0:
            a_pf = _pnorm(
                (self.s_kv_full + self.s_kv_slide) * (pf_prefix + pf_tokens),
                self.s_att_pf * pf_pairs,
                p,
            )
        ar = self.ar_alpha + self.s_ar_tok * tokens if self.ar_alpha > 0.0 else 0.0
        gpu = g + a_dec + a_pf + ar + self.gpu_fixed
        host = self.host_fixed + self.host_seq * (n_dec + pf_seqs)
        # overlapped host and GPU work: a smooth max (overlap is never perfect)
        step = _pnorm(gpu, host, _OVERLAP_KNEE) if self.overlap else gpu + host
        stream = self.stream_tok * logits
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
        return self.times(n_dec, ctx_dec, pf_tokens, pf_pairs, pf_prefix, pf_seqs, pf_done)[6]


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
    f_att = hw.fp16_tflops * 1e12 * c.mu_attn
    w_bw = c.eta_weights * bw
    # KV projections are replicated when tp > kv_heads
    attn_gpu = pc.attn_per_layer / t
    if m.kv_lora_rank == 0 and t > m.kv_heads:
        kv_w = 2.0 * m.hidden * m.head_dim * m.kv_heads
        attn_gpu += kv_w * (_kv_heads_per_gpu(m, t) / m.kv_heads - 1.0 / t)
    layers_all = pc.dense_layers + pc.moe_layers
    dense_params_gpu = (
        attn_gpu * layers_all
        + pc.dense_mlp_per_layer * pc.dense_layers / t
        + pc.shared_per_layer * pc.moe_layers / t
    )
    dense_bytes = dense_params_gpu * dep.weight_bytes_dense
    expert_params_gpu = pc.expert * pc.moe_layers / t  # one expert in every MoE layer
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
    dec_pair *= m.layers
    pf_pair *= m.layers
    if t > 1:
        alpha_us = c.ar_latency_nvlink_us if hw.interconnect == "nvlink" else c.ar_latency_pcie_us
        ar_alpha = 2 * m.layers * alpha_us * 1e-6
        link = max(1e-3, hw.interconnect_bw_gbs) * 1e9 * c.link_efficiency
        s_ar_tok = 2 * m.layers * (2.0 * (t - 1) / t) * m.hidden * 2.0 / link
    else:
        ar_alpha = 0.0
        s_ar_tok = 0.0
    return StepModel(
        s_dense_w=dense_bytes / w_bw,
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
        host_seq=c.seq_overhead_us * 1e-6,
        overlap=c.host_overlap,
        stream_tok=c.stream_token_us * 1e-6,
        knee=c.gemm_knee,
        kv_tok_full=kv_full,
    )
