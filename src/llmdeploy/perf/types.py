"""Input and output types of the serving-performance model (frozen dataclasses, no logic)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Interconnect = Literal["nvlink", "pcie", "none"]
GemmDtype = Literal["bf16", "fp8", "int8", "w4a16"]
DominantTerm = Literal[
    "weights bandwidth",
    "KV reads",
    "decode compute",
    "prefill compute",
    "all-reduce",
    "overhead",
    "queueing",
]


@dataclass(frozen=True)
class Hardware:
    """One GPU type and the link between the GPUs of a TP group (per-GPU datasheet values)."""

    name: str
    mem_bw_gbs: float  # HBM/GDDR bandwidth, GB/s (1e9 B/s)
    fp16_tflops: float  # dense BF16/FP16 tensor peak
    fp8_tflops: float | None = None  # dense FP8 tensor peak; None: no FP8 tensor cores
    int8_tops: float | None = None  # dense INT8 tensor peak
    interconnect: Interconnect = "nvlink"
    interconnect_bw_gbs: float = 450.0  # per GPU and direction (NVLink4: 450, PCIe Gen4 x16: 32)
    gpu_count: int = 1  # GPUs on the node (informational; TP is in Deployment)
    mem_gib: float | None = (
        None  # informational; capacity comes in as Deployment.kv_capacity_tokens
    )
    # the node's network share of one GPU, per direction, GB/s (EC2 network bandwidth, EFA on
    # p4/p5, divided by the GPUs): pipeline stages on other nodes talk over it; 0: not known
    network_bw_gbs: float = 0.0


@dataclass(frozen=True)
class ModelGeometry:
    """Transformer geometry as in a Hugging Face config.json (decoder-only)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # dense MLP width (gated MLP: 3 matrices)
    vocab: int
    tie_embeddings: bool = False
    # MoE (num_experts == 0: dense model)
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_experts: int = 0
    first_dense_layers: int = 0  # DeepSeek first_k_dense_replace: leading layers with a dense MLP
    # MLA (kv_lora_rank > 0: DeepSeek-style latent attention, KV = kv_lora_rank + qk_rope_head_dim)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    # sliding-window attention on `sliding_layers` of the layers (gpt-oss: 128 on every other layer)
    sliding_window: int = 0
    sliding_layers: int = 0
    # hybrid state-space models (Jamba, Granite-4.0-H, Nemotron-H, Qwen3-Next): layers with
    # attention (-1: all), layers with a state-space mixer instead, and one mixer's parameters
    attention_layers: int = -1
    mamba_layers: int = 0
    mamba_params: int = 0
    dense_mlp_layers: int = -1  # layers with a dense MLP (-1: every layer without experts)
    gated_mlp: bool = True  # gate/up/down (False: up/down, Nemotron-H's relu2 MLPs)


@dataclass(frozen=True)
class Deployment:
    """How one replica is run: parallelism, precision, engine and its batching limits."""

    tp: int = 1
    weight_bytes_dense: float = 2.0  # bytes/param of attention + dense MLP (+ shared experts)
    weight_bytes_expert: float = 2.0  # bytes/param of routed experts (mxfp4: 0.53125)
    lm_head_bytes: float = 2.0  # the LM head usually stays 16-bit under fp8/int4 quantization
    gemm_dtype: GemmDtype = "bf16"  # precision the GEMMs run at (W4A16/W8A16: bf16)
    kv_bytes: float = 2.0  # bytes per KV element (fp8 KV: 1)
    max_num_batched_tokens: int = 8192  # vLLM; TensorRT-LLM max_num_tokens
    max_num_seqs: int = 256  # vLLM max_num_seqs; TensorRT-LLM max_batch_size
    kv_capacity_tokens: int = 1_000_000  # tokens the KV cache of one replica holds (from sizing)
    # KV admission: "reserve" keeps prompt+output per request (TensorRT-LLM guaranteed_no_evict);
    # "optimistic" admits on the prompt and preempts the newest request when full (vLLM V1).
    # The engine plug-in says which one it runs (engines/<name>/perf.py).
    kv_admission: Literal["reserve", "optimistic"] = "optimistic"
    # host/GPU overlap (vLLM --async-scheduling, TensorRT-LLM overlap scheduler); None: the
    # engine version's default
    async_scheduling: bool | None = None
    # layouts beyond one tensor-parallel group (docs/performance-model.md, "Layouts"): the
    # replica's batching limits and KV capacity above are those of all its ranks together
    data_parallel: int = 1  # vLLM --data-parallel-size: ranks of ``tp`` GPUs, one scheduler each
    expert_parallel: bool = False  # --enable-expert-parallel (informational: see step.py)
    pipeline_parallel: int = 1  # stages, ``tp`` GPUs each, a batch in flight per stage
    pipeline_nodes: int = 1  # nodes the stages span (> 1: stage-to-stage over the network)
    state_bytes_per_seq: float = 0.0  # state-space layers' state of one sequence, per GPU
    # tokens of the largest CUDA graph the engine captured (one rank): a step with more runs
    # eagerly (Constants.eager_layer_us); 0: no graphs (--enforce-eager); -1: no limit modelled
    cudagraph_max_tokens: int = -1


@dataclass(frozen=True)
class Workload:
    """Offered load on ONE replica. Give concurrency (closed loop) or request_rate (open loop)."""

    input_tokens: float
    output_tokens: float
    concurrency: int | None = (
        None  # closed loop: clients each sending the next request on completion
    )
    request_rate: float | None = (
        None  # open loop: requests/s, Poisson arrivals (math.inf: all at t=0)
    )
    # 0: fixed lengths (ignore_eos benchmarks); >0: coefficient of variation of both lengths
    # (ShareGPT-like traffic is about 1). Lengths are drawn from deterministic Weibull quantiles.
    length_cv: float = 0.0
    # None: steady state (staggered start, warm-up discarded). An int: replay a benchmark of that
    # many requests from t=0 with all clients starting together, every request counted.
    num_requests: int | None = None
    # output lengths uniform in [mean (1 - s), mean (1 + s)], prompts fixed (the GPU toolkit's
    # ``stagger`` and ``poisson`` loads; 0: no spread). Used instead of ``length_cv`` when > 0.
    output_spread: float = 0.0
    # replays only: requests that start before the first ``concurrency`` finish (closed loop)
    # or the first tenth of arrivals (open loop) are left out of the latencies, as the GPU
    # toolkit's steady-window summary does (perf.workloads)
    skip_warmup: bool = False
    # replays only: the requests (by index) that find their whole prompt in vLLM's prefix
    # cache (a benchmark that re-sends prompts it sent before); only the block holding each
    # one's last prompt token is computed (perf.sim)
    cached_requests: frozenset[int] = frozenset()
    # replays of a staggered closed loop: client k starts at k/C of this many seconds (None:
    # of the model's own estimate of one request's time)
    stagger_s: float | None = None
    # replays of a recorded benchmark schedule (perf.workloads.loadgen): request i's output
    # length, and (open loop) its arrival in seconds after the benchmark's clock started.
    # Empty: the model's own deterministic lengths and arrivals (perf.lengths).
    output_lengths: tuple[int, ...] = ()
    arrival_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class Constants:
    """Mechanism-level efficiency constants of one engine family and version range."""

    engine: str  # the engine family these were fitted for (a label, never branched on)
    versions: str  # human-readable version range these were fitted for
    eta_weights: float  # achieved fraction of HBM bandwidth streaming weights
    eta_kv: float  # achieved fraction of HBM bandwidth reading KV in attention
    eta_experts: float  # achieved fraction of HBM bandwidth reading routed-expert weights (MoE)
    mu_gemm: float  # achieved fraction of dense tensor peak in large GEMMs
    mu_attn: float  # achieved fraction of BF16 peak in prefill (flash) attention
    fp8_gemm_factor: float  # FP8 GEMMs reach this fraction of mu_gemm (of the FP8 peak)
    gemm_knee: float  # smoothness of max(bandwidth, compute) per GEMM (p-norm exponent)
    ar_latency_nvlink_us: float  # one all-reduce, latency term, NVLink/NVSwitch
    ar_latency_pcie_us: float  # one all-reduce, latency term, PCIe (NCCL)
    link_efficiency: float  # achieved fraction of the link bandwidth in all-reduce
    layer_overhead_us: float  # GPU-side per-layer floor per step (launch gaps, small kernels)
    step_overhead_us: float  # per-step host cost (scheduling, input prep, sampling)
    seq_overhead_us: float  # host cost per scheduled sequence per step
    host_overlap: bool  # True: host work overlaps the GPU (async scheduling): max(), else sum
    stream_token_us: float  # frontend cost per streamed token (caps tokens/s of one server)
    ttft_overhead_ms: float  # per-request fixed latency before the first token (HTTP, tokenize)
    request_overhead_ms: float  # serial frontend work per request (one API-server process)
    # routed-expert GEMMs (fused MoE: many small grouped GEMMs, tokens x k / E rows each)
    # reach this fraction of the dense GEMM efficiency mu_gemm
    moe_gemm_factor: float = 1.0
    # ... times i / (i + moe_dim_half), i the per-GPU intermediate size of one routed expert
    # (moe_intermediate / tp; whole experts under expert parallelism): the grouped GEMMs of
    # small experts run short K loops (the down projection) over few N tiles (the gate/up
    # projection), so a fine-grained MoE (Qwen3-30B-A3B: 768) reaches a smaller fraction of
    # peak than a coarse one (Mixtral: 14336). 0: no size term.
    moe_dim_half: float = 0.0
    # weight-only 4-bit GEMMs (AWQ/GPTQ on Marlin-style kernels: dequantize, then BF16 MMA)
    # reach this fraction of mu_gemm at the BF16 peak
    w4_gemm_factor: float = 1.0
    # ... and stream their packed weights at this fraction of eta_weights: at decode batch
    # sizes the kernel dequantizes every weight it loads (unpack, zero point, scale) in the
    # same loop as the loads, and does not keep HBM as busy as a BF16 GEMV does
    w4_bw_factor: float = 1.0
    # GPU time per decoder layer of a step that carries prompt tokens, beyond its compute: on
    # vLLM >= 0.12 (default cudagraph_mode FULL_AND_PIECEWISE, vllm/config/compilation.py) a
    # pure-decode step replays one full CUDA graph, a step with prompt tokens runs graph pieces
    # with attention eager between them (none above 512 tokens), and the GPU idles between
    # launches (the fifth H200 lease: a lone 8B prompt's extra 512-token steps cost 0.7 to 1.6
    # ms each). 0: none.
    prefill_gpu_layer_us: float = 0.0
    # host time per decoder layer of a step that runs without CUDA graphs: one with more tokens
    # than the largest captured graph (``Deployment.cudagraph_max_tokens``; vLLM runs such a
    # step eagerly, kernel by kernel from Python: vllm/v1/cudagraph_dispatcher.py, and
    # vllm/config/vllm.py sets the largest graph to min(2 x max_num_seqs, 512,
    # max_num_batched_tokens) by default). A step of one 512-token prompt beside running decodes
    # is such a step; for a small model the launches, not the GPU, then set its time (the
    # seventh H200 lease: Llama-3.2-3B under Poisson arrivals, 13 to 17 ms per admission beyond a
    # decode step, 5 ms with graphs up to 1024 tokens). 0: none.
    eager_layer_us: float = 0.0
    # ... and, in the same steps, per layer whose linears run in FP8, the host time of the
    # activation quantization launched before each of them (vllm/_custom_ops.py
    # scaled_fp8_quant, called by the FP8 linear and MoE methods: one more op per linear, a
    # dynamic scale's reduction included). The ninth H200 lease's probes put an isolated
    # admission step of Qwen2.5-72B FP8 (522 tokens) at 117 ms, 1.46 ms per layer, where the
    # 16-bit dense models' cost 0.4 to 0.9 ms per layer. 0: none.
    eager_fp8_layer_us: float = 0.0


@dataclass(frozen=True)
class PerfEstimate:
    """Predicted serving metrics of one replica at the offered load."""

    ttft_p50_ms: float
    ttft_p99_ms: float
    ttft_mean_ms: float
    itl_p50_ms: float  # per-request mean inter-token latency (TPOT), median over requests
    itl_p99_ms: float
    itl_mean_ms: float  # token-weighted mean gap (what `vllm bench` calls mean ITL)
    output_tokens_per_s: float  # per replica (whole TP group)
    requests_per_s: float
    mean_batch: float  # time-averaged number of decoding sequences
    dominant_term: DominantTerm  # largest share of decode-step time
    ttft_dominant_term: DominantTerm  # "queueing" when waiting dominates TTFT, else step terms
    step_breakdown: tuple[tuple[str, float], ...]  # share of step time per term (sums to 1)
    kv_bound: bool  # the batch was limited by KV-cache capacity at some point
    saturated: bool  # open loop: offered rate above what the replica serves
    decode_step_ms: float  # step time of a pure decode step at the mean batch
