"""How vLLM divides the decoder layers between pipeline-parallel stages.

A port of ``get_pp_indices`` (``vllm/distributed/utils.py``), by release:

- up to 0.7.3: every stage gets ``layers // pp`` and the last stage the remainder
  (vllm/distributed/utils.py@v0.7.3: ``if pp_rank == pp_size - 1: end_layer =
  num_hidden_layers``);
- from 0.8.0: the remainder goes one layer each to the stages before the last, from the
  second-to-last backwards (``for i in range(2, remaining_layers + 2): partitions[-i] += 1``,
  vllm/distributed/utils.py@v0.8.0 and unchanged through @v0.33.0): the last stage holds the
  final norm and ``lm_head``, and with fewer leftover layers than middle stages the first stage
  (the embedding) is spared too.

Every checked wheel (0.6.0 ... 0.33.0, ``engines/vllm/flags.py`` CHECKED_VERSIONS) has one of
these two forms. ``VLLM_PP_LAYER_PARTITION`` overrides the split; llmdeploy never sets it.
"""

from __future__ import annotations

from llmdeploy.engines.vllm.flags import parse_version

# The first release that spreads the remainder over the stages before the last.
REMAINDER_BEFORE_LAST_SINCE = (0, 8, 0)


def stage_layers(version: str, num_layers: int, pp: int) -> tuple[int, ...]:
    """Decoder layers of each stage, first stage first (sums to ``num_layers``)."""
    if pp < 1:
        raise ValueError(f"pipeline parallel size must be >= 1, got {pp}")
    parts = [num_layers // pp] * pp
    remainder = num_layers % pp
    if parse_version(version) < REMAINDER_BEFORE_LAST_SINCE:
        parts[-1] += remainder
    else:
        for i in range(2, remainder + 2):
            parts[-i] += 1
    return tuple(parts)
