"""How torch's CUDA caching allocator counts one weight tensor in vLLM's "Model loading took".

vLLM logs the weights as ``torch.cuda.memory_allocated`` after the load minus before it
(vllm/utils/mem_utils.py@v0.24.0 ``DeviceMemoryProfiler``, ``CudaPlatform
.get_current_memory_usage``), and that statistic is the sum of the allocator's *blocks*, not
of the tensors' sizes: a block the allocator does not split keeps its whole size
(pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp, read at 001074d2: ``alloc_found_block``
adds ``block->size`` to ``allocated_bytes``; the constants below are that file's). Pure
arithmetic; the rule and its sources are in ``docs/sizing.md`` §3.
"""

from __future__ import annotations

import math

MIB = 1 << 20
# c10/cuda/CUDACachingAllocator.cpp: requests of more than kSmallSize go to the large pool;
# from kMinLargeAlloc on a request gets a segment of its own, rounded up to kRoundLarge
SMALL_SIZE = 1 * MIB  # kSmallSize
MIN_LARGE_ALLOC = 10 * MIB  # kMinLargeAlloc
ROUND_LARGE = 2 * MIB  # kRoundLarge
NO_MAX_SPLIT = (1 << 64) - 1  # torch's default max_split_size: SIZE_MAX, no limit


def load_block_bytes(nbytes: float, max_split: int) -> float:
    """Bytes ``memory_allocated`` counts for one weight tensor of ``nbytes`` created while
    vLLM loads the model with the allocator's ``max_split_size`` at ``max_split`` bytes
    (``NO_MAX_SPLIT``: torch's default).

    A tensor of ``MIN_LARGE_ALLOC`` or more gets a fresh segment rounded up to
    ``ROUND_LARGE`` (``get_allocation_size``; at load no freed block is that large).
    ``should_split`` keeps the block whole when the request is ``max_split`` or more, or when
    the rest is ``SMALL_SIZE`` or less; a whole block counts its rounded size. Smaller tensors
    share 20 MiB segments and are counted as their size (where they land among blocks freed by
    a repacking kernel is not modelled)."""
    if nbytes < MIN_LARGE_ALLOC:
        return nbytes
    block = ROUND_LARGE * math.ceil(nbytes / ROUND_LARGE)
    if nbytes >= max_split or block - nbytes <= SMALL_SIZE:
        return float(block)
    return nbytes
