"""The MXFP4 expert tensors vLLM's Triton MoE backend keeps on Hopper, one MoE layer per rank.

Read in the vLLM 0.24.0 wheel: ``GptOssMxfp4MoEMethod.create_weights``
(model_executor/layers/quantization/mxfp4.py) makes ``w13_weight`` (E, 2I, H/2) and ``w2_weight``
(E, H, I/2) in uint8, their e8m0 scales ``w13_weight_scale`` (E, 2I, H/32) and
``w2_weight_scale`` (E, H, I/32) and bf16 biases, with I padded to 64 for Triton
(fused_moe/oracle/mxfp4.py ``mxfp4_round_up_hidden_size_and_intermediate_size``, H as is).
``convert_gpt_oss_weight_to_mxfp4_moe_kernel_format`` (the ``TRITON_BACKENDS`` branch) then
casts the biases to float32 and passes weights and scales through ``_swizzle_mxfp4``
(quantization/utils/mxfp4_utils.py), which on Hopper converts them to triton_kernels'
``HopperMXValueLayout`` and ``HopperMXScaleLayout`` (vllm/third_party/triton_kernels,
tensor_details/layout_details/hopper_value.py, hopper_scale.py): new, padded tensors. It
deletes ``layer.w13_weight`` and ``layer.w2_weight`` but never the loaded scales, which stay
registered on the layer beside their swizzled copies (``get_fused_moe_quant_config`` still
reads ``layer.w13_weight_scale``). The Hopper layouts apply on torch >= 2.8.1 (below it
``_swizzle_mxfp4`` keeps ``StridedLayout``). Pure arithmetic; ``docs/sizing.md`` §3.1.
"""

from __future__ import annotations

BLOCK = 32  # elements per e8m0 scale (mxfp4_block)
INTERMEDIATE_ALIGN = 64  # vLLM pads the per-rank intermediate to 64 for Triton
# HopperMXValueLayout.swizzle_data (mma v3): a (rows, K bytes) matrix is padded to
# rows % (1 x 2 x 4 x 2 x 1) = 16 and K % (4 x 2 x 4 x 1 x 1) = 32 bytes, i.e. 64 fp4 values
VALUE_ROWS = 16
VALUE_K_BYTES = 32
# vLLM 0.17.0 to 0.21.x vendor a triton_kernels whose swizzle_data first pads both dims to 64
# ("Pre-pad both matrix dims to multiples of 64"; not in 0.16.0 nor from 0.22.0)
VALUE_PREPAD = 64
# HopperMXScaleLayout.swizzle_data: rows % SWIZZLE_ALIGN_M = 2 x num_warps x 2 x 8 with the
# num_warps=8 _swizzle_mxfp4 passes, K % SWIZZLE_ALIGN_K = 2
SCALE_ROWS = 2 * 8 * 2 * 8
SCALE_K = 2
BIAS_BYTES = 4  # w13_bias.to(torch.float32)


def _up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def triton_hopper_tensors(
    experts: int, hidden: int, inter: int, bias: bool, prepad: int = 1
) -> tuple[int, ...]:
    """Bytes of every tensor one MoE layer holds after loading: the swizzled w13 and w2
    values, the loaded w13 and w2 scales, their swizzled copies, and the float32 biases
    (``bias``). ``inter`` is the rank's intermediate width as vLLM created it (padded to
    ``INTERMEDIATE_ALIGN``); ``prepad``: the multiple the value layout first pads both dims of
    each (rows, K bytes) matrix to (``VALUE_PREPAD`` or 1); each tensor is its own
    allocation."""
    rows13, k13 = 2 * inter, hidden // BLOCK  # w13: (2I rows, H inputs)
    rows2, k2 = hidden, inter // BLOCK  # w2: (H rows, I inputs)

    def values(rows: int, k_bytes: int) -> int:
        padded = _up(_up(rows, prepad), VALUE_ROWS) * _up(_up(k_bytes, prepad), VALUE_K_BYTES)
        return experts * padded

    out = [
        values(rows13, hidden // 2),
        values(rows2, inter // 2),
        experts * rows13 * k13,
        experts * rows2 * k2,
        experts * _up(rows13, SCALE_ROWS) * _up(k13, SCALE_K),
        experts * _up(rows2, SCALE_ROWS) * _up(k2, SCALE_K),
    ]
    if bias:
        out += [experts * rows13 * BIAS_BYTES, experts * rows2 * BIAS_BYTES]
    return tuple(out)
