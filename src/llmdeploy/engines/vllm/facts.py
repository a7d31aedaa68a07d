"""What changes across vLLM releases for the memory model, each read from the release's own
source (the wheels listed in ``engines/vllm/flags.py``; ``docs/sizing.md`` §2 cites files).

Pure functions of (version, architecture, GPU, request); the budget in ``budget.py`` uses them.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmdeploy.catalog.architecture import Architecture, CheckpointQuant
from llmdeploy.engines.vllm.flags import Version, parse_version
from llmdeploy.sizing import mxfp4
from llmdeploy.sizing.allocator import NO_MAX_SPLIT

__all__ = ["parse_version"]

# DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES in vllm/config/vllm.py, by release
_MRV2_ARCHS: tuple[tuple[Version, frozenset[str]], ...] = (
    ((0, 22, 0), frozenset({"Qwen3ForCausalLM"})),
    ((0, 23, 0), frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"})),
    (
        (0, 24, 0),
        frozenset(
            {
                "Qwen3ForCausalLM",
                "DeepseekV2ForCausalLM",
                "Qwen2MoeForCausalLM",
                "GraniteMoeForCausalLM",
                "LlamaForCausalLM",
                "MistralForCausalLM",
            }
        ),
    ),
    (
        (0, 25, 0),
        frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"}),
    ),
    (
        (0, 28, 0),
        frozenset(
            {
                "DeepseekV2ForCausalLM",
                "DeepseekV4ForCausalLM",
                "GraniteMoeForCausalLM",
                "KimiK3ForConditionalGeneration",
                "Qwen2MoeForCausalLM",
            }
        ),
    ),
)


def _arch_set(v: Version) -> frozenset[str]:
    found: frozenset[str] = frozenset()
    for since, archs in _MRV2_ARCHS:
        if v >= since:
            found = archs
    return found


def model_runner_v2(version: str, arch: Architecture, quantized: bool) -> bool:
    """Whether ``vllm serve`` runs this model on Model Runner V2 (``VllmConfig.
    use_v2_model_runner`` with ``VLLM_USE_V2_MODEL_RUNNER`` unset and none of the features V2
    lacks, none of which llmdeploy renders).

    0.22-0.23: a listed architecture that is neither MoE nor quantized; 0.24: a listed
    architecture; 0.25-0.27: not a state-space hybrid, and listed or not MoE; 0.28: hybrids
    only when listed; from 0.29: every model."""
    v = parse_version(version)
    if v < (0, 22, 0):
        return False
    if v >= (0, 29, 0):
        return True
    listed = any(a in _arch_set(v) for a in arch.architectures)
    if v < (0, 24, 0):
        return listed and not arch.is_moe and not quantized
    if v < (0, 25, 0):
        return listed
    if arch.has_state_space and (v < (0, 28, 0) or not listed):
        return False
    return listed or not arch.is_moe


@dataclass(frozen=True)
class VllmFacts:
    """What changes across vLLM releases (each row cited in docs/sizing.md)."""

    version: tuple[int, int, int]
    v1: bool  # V1 engine is the default from 0.8.0
    large_batch_defaults: bool  # >= 70 GiB non-A100 GPUs: 8192 tokens / 1024 seqs (>= 0.9.0)
    sampler_bytes: float  # profiled sampler bytes per (request x vocab) element
    non_torch_tp1_gib: float
    default_gmu: float
    cudagraph_in_budget: bool  # the profiled CUDA-graph memory is subtracted from the budget
    runner_v2: bool = False

    @property
    def label(self) -> str:
        return ".".join(str(p) for p in self.version)


def vllm_facts(
    version: str, arch: Architecture | None = None, quantized: bool = False
) -> VllmFacts:
    v = parse_version(version)
    v2 = arch is not None and model_runner_v2(version, arch, quantized)
    return VllmFacts(
        version=v,
        v1=v >= (0, 8, 0) and not (arch is not None and arch.cross_attention_tokens),
        large_batch_defaults=v >= (0, 9, 0),
        sampler_bytes=_sampler_bytes(v, v2),
        non_torch_tp1_gib=0.25 if v >= (0, 18, 0) or v < (0, 8, 0) else 0.13,
        # 0.9 through 0.19.1, 0.92 from 0.20.0 (each release's own parser; engines/vllm/flags.py)
        default_gmu=0.92 if v >= (0, 20, 0) else 0.9,
        # MRv1 subtracts its CUDA-graph estimate from 0.21; MRv2's profile_cudagraph_memory()
        # returns 0 until 0.28 (gpu/model_runner.py) and estimates from 0.29
        cudagraph_in_budget=v >= (0, 29, 0) if v2 else v >= (0, 21, 0),
        runner_v2=v2,
    )


def _sampler_bytes(v: Version, runner_v2: bool) -> float:
    """Profiled sampler bytes per (request x vocab) element."""
    if runner_v2:
        # MRv2's dummy sampler run has no sampling parameters: bf16 logits + an fp32 copy
        # (sample/sampler.py, 0.22-0.25), the logits only from 0.26 (processing is skipped)
        return 6.0 if v < (0, 26, 0) else 2.0
    # MRv1: sort-based native top-k/top-p until 0.16; 0.17 dropped the profiled peak
    # (Qwen3-14B 5.64 -> 2.23 GiB at 1024 x 151936 logits); calibrated, docs/sizing.md
    return 14.9 if v >= (0, 17, 0) else 38.4


def cudagraph_estimate_gib(layers: int) -> float:
    """The CUDA-graph memory Model Runner V1 profiles and subtracts from the KV budget (0.21+).

    vLLM 0.24.0 v1/worker/gpu_model_runner.py ``profile_cudagraph_memory``: per mode (FULL and
    PIECEWISE, 51 sizes each up to 512 tokens at the defaults) it captures the two largest
    graphs into a scratch pool and extrapolates, first capture + (n - 1) x the second; the
    modes overlay (max) and ``gpu_worker.py`` subtracts the result. The per-graph driver
    overhead dominates, so it hardly grows with depth: logged "Estimated CUDA graph memory"
    0.61 GiB for a 28-layer Qwen2.5-7B and 0.64 for a 48-layer Qwen3-30B-A3B (one H200,
    tests/data/calibration), well below the captured pools of vLLM 0.19 that
    ``sizing.memory.cudagraph_gib`` describes. Read on 0.24.0; 0.21-0.23 assumed the same."""
    return 0.568 + 0.0015 * layers


def compute_major(cc: str | None) -> int:
    """Major compute capability; unknown GPUs count as Hopper (the cautious default)."""
    head = (cc or "9").split(".")[0].rstrip("?")
    return int(head) if head.isdigit() else 9


def mla_block_size(version: str, cc_major: int) -> int:
    """Tokens per KV block of MLA models: FlashMLA (64) on Hopper from 0.8 (CUTLASS MLA, 128, on
    Blackwell from 0.10.2) until 0.17; from 0.18 the backend's preferred size (FLASH_ATTN_MLA 16
    on Hopper, FlashInfer MLA 32 on Blackwell); Triton MLA (16) elsewhere
    (vllm/platforms/cuda.py, check_and_update_config / update_block_size_for_backend)."""
    v = parse_version(version)
    if v < (0, 8, 0) or cc_major < 9:
        return 16
    if v >= (0, 18, 0):
        return 32 if cc_major >= 10 else 16
    if cc_major >= 10 and v >= (0, 10, 2):
        return 128
    return 64


def group_ratio(version: str) -> float | None:
    """KV grouping of hybrid models (kv_cache_utils._get_kv_cache_groups_uniform_page_size):
    every layer full attention before the hybrid allocator (0.9.1); groups of the smallest
    kind's size until 0.11; the largest kind's size when it is within 1.25x (0.12-0.17) or
    1.5x (from 0.18) of the smallest."""
    v = parse_version(version)
    if v < (0, 9, 1):
        return None
    if v < (0, 12, 0):
        return 1.0
    return 1.25 if v < (0, 18, 0) else 1.5


def rope_cache_fp32(arch: Architecture) -> bool:
    """vLLM builds gpt-oss's rotary cache in float32 (models/gpt_oss.py ``OAIAttention``:
    ``get_rope(..., dtype=torch.float32)``; rotary_embedding/base.py ``cache.to(dtype)``), every
    other model's in the model dtype."""
    return arch.model_type == "gpt_oss"


TRITON_KERNELS_VENDORED = (0, 12, 0)  # first release with vllm/third_party/triton_kernels
PREPAD_FROM, PREPAD_UNTIL = (0, 17, 0), (0, 22, 0)  # its values pre-padded to 64 (sizing/mxfp4)


@dataclass(frozen=True)
class Mxfp4Layout:
    """How vLLM holds MXFP4 experts: ``align`` (intermediate, hidden) multiples the kernel
    pads to, the ``backend`` name, and ``hopper_swizzle`` where the Triton backend keeps them
    in triton_kernels' Hopper layout (sizing/mxfp4.py), ``value_prepad`` the multiple its
    values are first padded to."""

    align: tuple[int, int]
    backend: str
    hopper_swizzle: bool = False
    value_prepad: int = 1


def mxfp4_layout(version: str, cc_major: int) -> Mxfp4Layout:
    """The MXFP4 MoE backend and its layout: FlashInfer TRT-LLM on Blackwell (256/256); on
    Hopper Triton where triton_kernels can be imported (quantization/mxfp4.py
    get_mxfp4_backend from 0.10.2; 0.24.0 fused_moe/oracle/mxfp4.py select_mxfp4_moe_backend),
    Marlin otherwise and below Hopper (128/256). vLLM ships triton_kernels in
    vllm/third_party from 0.12.0 (vllm-project/vllm#28788, after 0.11.2); before that a pip
    install had to add it by hand (#27370: "users have to install triton_kernels manually"), so
    0.10.2 to 0.11.x are sized as Marlin, as their logs on an H100 show (65.97 GiB for
    gpt-oss-120b). Triton pads the intermediate to 64 and not the hidden size
    (``mxfp4_round_up_hidden_size_and_intermediate_size``), then its Hopper swizzle pads and
    keeps the loaded scales beside swizzled copies (sizing/mxfp4.py; on torch >= 2.8.1, which
    every release from 0.11.1 requires): gpt-oss-20b on an H200 at 0.24.0 logged 13.58 GiB,
    gpt-oss-120b on an H100 at 0.14.1 64.38. The triton_kernels vendored in 0.17.0 to 0.21.x
    first pads the values to 64 (read in the 0.17.0, 0.18.0, 0.19.0 and 0.21.0 wheels; not in
    0.16.0, 0.22.0, 0.23.0, 0.24.0): gpt-oss-20b at TP 2 on 0.19.0 logged 7.01."""
    v = parse_version(version)
    if cc_major >= 10:
        return Mxfp4Layout((256, 256), "FlashInfer TRT-LLM")
    if cc_major == 9 and v >= TRITON_KERNELS_VENDORED:
        prepad = mxfp4.VALUE_PREPAD if PREPAD_FROM <= v < PREPAD_UNTIL else 1
        return Mxfp4Layout((mxfp4.INTERMEDIATE_ALIGN, 1), "Triton", True, prepad)
    return Mxfp4Layout((128, 256), "Marlin")


# vLLM 0.24.0 model_executor/models/gemma4_mm.py get_mm_max_tokens_per_item: a video item is up
# to _VIDEO_MAX_FRAMES (32) frames of _VIDEO_MAX_SOFT_TOKENS (70) soft tokens plus boi/eoi and
# about 6 timestamp tokens each
GEMMA4_VIDEO_ITEM_TOKENS = 32 * (70 + 2 + 6)


def mm_prefix_min_batched_tokens(version: str, arch: Architecture) -> int:
    """The floor vLLM raises a default ``max_num_batched_tokens`` to for a multimodal prefix-LM
    model (bidirectional attention over an item, so one item must fit in one batch): the
    largest item of any modality the model supports (0: no floor).

    vLLM 0.24.0 engine/arg_utils.py ``_set_default_max_num_seqs_and_batched_tokens_args``
    (``is_multimodal_model and is_mm_prefix_lm``: ``_get_min_mm_batched_tokens``, from the
    model's ``get_mm_max_tokens_per_item``). Gemma 4 is the model that overrides it (a 32-frame
    video: 2496 tokens), so on GPUs with the 2048-token default (A100, and those under 70 GiB)
    Gemma 4 batches 2496; Gemma 3 relies on dummy profiling (no override), so no floor. Read
    from 0.24.0; earlier releases are not checked and get no floor."""
    if parse_version(version) < (0, 24, 0) or not arch.encoders:
        return 0
    if not arch.model_type.startswith("gemma4"):
        return 0
    return max(GEMMA4_VIDEO_ITEM_TOKENS, *(e.tokens_per_item for e in arch.encoders))


def group_zero_bytes(version: str, cc_major: int, q: CheckpointQuant | None) -> float | None:
    """Bytes per (group x output channel) zero point an AWQ linear layer keeps on the GPU when
    its kernel unpacks them (None: packed as stored, ``bits / 8``).

    From 0.24.0 every AWQ checkpoint loads through ``AutoAWQConfig``
    (quantization/__init__.py maps awq and awq_marlin to it), whose linear method picks a
    kernel with ``choose_mp_linear_kernel`` (quantization/auto_awq.py
    ``AutoAWQMarlinLinearMethod``). On Hopper that is Machete, first in the CUDA list after
    CUTLASS W4A8 (fp8 activations only) and able to take uint4 with zero points at group 64
    or 128 (kernels/linear/__init__.py ``_POSSIBLE_KERNELS``, utils/machete_utils.py); its
    ``transform_w_zp`` stores ``-scale x zero`` in the activation dtype, one 16-bit value per
    group and output channel instead of a packed 4-bit one
    (kernels/linear/mixed_precision/machete.py). Marlin, elsewhere and before 0.24, keeps
    them packed. The MoE experts load through Marlin's MoE kernel, packed, either way."""
    if q is None or q.method != "awq" or not q.group_size:
        return None
    if parse_version(version) < (0, 24, 0) or cc_major != 9 or q.group_size not in (64, 128):
        return None
    return 2.0


LOAD_MAX_SPLIT_BYTES = 20 << 20  # "20 MiB is the minimum PyTorch allows for max_split_size_mb"


def load_max_split_bytes(version: str) -> int:
    """The caching allocator's ``max_split_size`` while vLLM loads the weights, which decides
    how the weights are counted in "Model loading took" (sizing/allocator.py).

    From 0.21.0 ``Worker.load_model`` (v1/worker/gpu_worker.py) runs the load, both model
    runners, inside ``_scoped_allocator_max_split(max_split_size_mb=20)`` (added by
    vllm-project/vllm#41268 against start-up fragmentation), so no block of 20 MiB or more is
    split. Read in the 0.21.0, 0.22.1, 0.23.0 and 0.24.0 wheels; 0.20.2 has no such scope and
    loads under torch's default, no limit."""
    if parse_version(version) >= (0, 21, 0):
        return LOAD_MAX_SPLIT_BYTES
    return NO_MAX_SPLIT


def mamba_mode(arch: Architecture, prefix_caching: bool) -> str:
    """vLLM's mamba cache mode (MambaModelConfig.verify_and_update_config, 0.17+): none without
    prefix caching; with it, all for models that support mamba prefix caching, else align."""
    if not prefix_caching or arch.ssm is None:
        return "none"
    return "all" if arch.ssm.prefix_caching else "align"


# The nearest format vLLM still serves when a checkpoint's method is gone from a release:
# bitsandbytes left the quantization registry in 0.28.0 (engines/vllm/flags.py)
_NEAREST: dict[str, str] = {
    "bnb-4bit": "an AWQ or GPTQ 4-bit checkpoint of the same model (quantization: int4-awq "
    "or int4-gptq: about the same weight memory, 0.52 B per weight)",
    "bnb-8bit": "the 16-bit checkpoint with quantization: fp8, or an int8 W8A8 checkpoint "
    "(quantization: int8)",
}


def quantization_problem(version: str, q: CheckpointQuant | None) -> str:
    """Why vLLM ``version`` cannot load this checkpoint format (its quantization registry),
    with the last checked release that can and the nearest format this one serves."""
    from llmdeploy.engines.vllm.flags import CHECKED_VERSIONS, accepted_values

    if q is None or not q.quant_method:
        return ""
    methods = accepted_values("quantization", version) or ()
    if q.quant_method in methods:
        return ""
    problem = (
        f"vLLM {version} has no {q.quant_method!r} quantization method for this checkpoint "
        f"({q.label})"
    )
    older = [
        v
        for v in CHECKED_VERSIONS
        if parse_version(v) < parse_version(version)
        and q.quant_method in (accepted_values("quantization", v) or ())
    ]
    if older:
        problem += f"; pin engine.version {older[-1]} (the last checked release that has it)"
    if q.method in _NEAREST:
        problem += f", or serve {_NEAREST[q.method]}"
    return problem
