"""Deterministic request lengths and arrival times (no random numbers: spread quantiles)."""

from __future__ import annotations

import math

__all__ = ["arrival_times", "lengths"]

_PHI = (math.sqrt(5.0) - 1.0) / 2.0  # golden-ratio sequence: evenly spread quantiles
_SQRT2 = math.sqrt(2.0) - 1.0  # a second, independent sequence for the other length


def _u(j: int, step: float) -> float:
    return (0.5 + j * step) % 1.0


def _weibull_shape(cv: float) -> float:
    """Weibull shape k whose coefficient of variation is ``cv`` (bisection)."""

    def cv_of(k: float) -> float:
        g1 = math.gamma(1.0 + 1.0 / k)
        return math.sqrt(max(0.0, math.gamma(1.0 + 2.0 / k) / (g1 * g1) - 1.0))

    lo, hi = 0.3, 50.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if cv_of(mid) > cv:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _draws(n: int, mean: float, cv: float, step: float) -> list[int]:
    if cv <= 0.0 or n <= 1:
        return [max(1, round(mean))] * n
    k = _weibull_shape(cv)
    cap = 8.0 * mean
    raw = [min(cap, (-math.log(1.0 - _u(j, step) * 0.999999)) ** (1.0 / k)) for j in range(n)]
    scale = mean / (sum(raw) / n)
    return [max(1, round(x * scale)) for x in raw]


def lengths(
    n: int, input_mean: float, output_mean: float, cv: float, output_spread: float = 0.0
) -> list[tuple[int, int]]:
    """(prompt, output) lengths of ``n`` requests with the given means and spread: Weibull
    draws of coefficient of variation ``cv`` for both, or (``output_spread`` > 0) fixed prompts
    and outputs uniform in ``output_mean`` x [1 - spread, 1 + spread]."""
    if output_spread > 0.0:
        p = max(1, round(input_mean))
        outs = [
            max(1, round(output_mean * (1.0 - output_spread + 2.0 * output_spread * _u(j, _PHI))))
            for j in range(n)
        ]
        return [(p, o) for o in outs]
    ins = _draws(n, input_mean, cv, _SQRT2)
    outs = _draws(n, output_mean, cv, _PHI)
    return list(zip(ins, outs, strict=True))


def arrival_times(n: int, rate: float) -> list[float]:
    """Poisson-like arrival times at ``rate`` per second (exponential gaps, deterministic order)."""
    if math.isinf(rate):
        return [0.0] * n
    t = 0.0
    out = []
    for j in range(n):
        out.append(t)
        t += -math.log(1.0 - _u(j, _PHI) * 0.999999) / rate
    return out
