"""Helpers the spec-building tests share (imported from the tests directory)."""

from __future__ import annotations

import copy
from typing import Any


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``base`` with ``over`` merged in, mapping by mapping."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out
