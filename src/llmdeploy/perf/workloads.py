"""Arrival patterns: how the SLO's load reaches one replica (docs/performance-model.md,
"Arrival patterns").

Three patterns, each what a kind of client does:

- ``closed-loop``: C clients start together and each sends its next request the moment the
  last one ends, all with the same lengths: what ``vllm bench serve --max-concurrency C``,
  guidellm and genai-perf do. Requests move in waves: a wave's requests start together,
  finish together, and each new wave waits for the prefill of the whole wave (C x prompt
  tokens, ``max_num_batched_tokens`` at a time). The model replays it from t=0.
- ``steady``: the same C clients, staggered, with output lengths spread +-50 %: a steady mix
  with C requests in flight (chat users). The default when the SLO gives a concurrency.
- ``poisson``: an open loop, requests arriving at R per second with exponential gaps and
  output lengths spread +-50 %, whatever the server does (production traffic from many
  independent users). The default when the SLO gives ``requestsPerSecond``.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Literal

from llmdeploy.perf.types import Workload

__all__ = ["ARRIVALS", "OUTPUT_SPREAD", "Arrival", "from_loadgen", "loadgen", "workload"]

Arrival = Literal["closed-loop", "steady", "poisson"]
ARRIVALS: tuple[Arrival, ...] = ("closed-loop", "steady", "poisson")
# output lengths of the steady and Poisson patterns: uniform in mean x [0.5, 1.5]
OUTPUT_SPREAD = 0.5
# a closed loop replays this many waves (the first is left out of the latencies)
_WAVES = 4


def workload(
    arrival: Arrival,
    input_tokens: float,
    output_tokens: float,
    *,
    concurrency: int | None = None,
    requests_per_s: float | None = None,
    num_requests: int | None = None,
) -> Workload:
    """The model's workload of one replica under ``arrival``. ``num_requests`` replays a
    benchmark of that many requests (every request, or the steady window, as it counts);
    without it the closed loop replays a few waves and the others run to a steady state."""
    if arrival == "poisson":
        if requests_per_s is None or requests_per_s <= 0:
            raise ValueError("a Poisson load needs a positive request rate")
        return Workload(
            input_tokens,
            output_tokens,
            request_rate=requests_per_s,
            output_spread=OUTPUT_SPREAD,
            num_requests=num_requests,
            skip_warmup=num_requests is not None,
        )
    if concurrency is None or concurrency < 1:
        raise ValueError(f"a {arrival} load needs a concurrency")
    if arrival == "closed-loop":
        n = num_requests if num_requests is not None else _WAVES * concurrency
        return Workload(
            input_tokens, output_tokens, concurrency=concurrency, num_requests=n, skip_warmup=True
        )
    return Workload(
        input_tokens,
        output_tokens,
        concurrency=concurrency,
        output_spread=OUTPUT_SPREAD,
        num_requests=num_requests,
        skip_warmup=num_requests is not None,
    )


_LOADGEN: dict[str, Arrival] = {"closed": "closed-loop", "stagger": "steady", "poisson": "poisson"}
# the GPU toolkit's load generator (../shared/gpu/loadgen.py) draws its output lengths from
# random.Random(7) and its Poisson gaps from random.Random(11), and staggers client k of C by
# k/C of 30 ms per output token
_LOADGEN_LENGTH_SEED = 7
_LOADGEN_ARRIVAL_SEED = 11
_LOADGEN_STAGGER_S_PER_TOKEN = 0.030


def loadgen(
    arrival: Arrival,
    input_tokens: float,
    output_tokens: float,
    num_requests: int,
    *,
    concurrency: int | None = None,
    requests_per_s: float | None = None,
    spread: float | None = None,
) -> Workload:
    """The workload one sweep of the GPU toolkit's load generator ran, request by request: the
    output lengths and (open loop) arrival times it drew from its fixed seeds, and its stagger.
    A benchmark of a few hundred requests differs from the pattern's mean: the 40 Poisson
    arrivals at 2/s that generator draws span 15 % more time than 40 / 2 s and ask for 11 %
    fewer output tokens than 40 x OSL, so a replay with the pattern's mean lengths and gaps
    predicts about 30 % more throughput than that run could show. ``spread``: its SPREAD
    argument (default 0 for a closed loop, 0.5 otherwise)."""
    base = workload(
        arrival,
        input_tokens,
        output_tokens,
        concurrency=concurrency,
        requests_per_s=requests_per_s,
        num_requests=num_requests,
    )
    s = (0.0 if arrival == "closed-loop" else OUTPUT_SPREAD) if spread is None else spread
    osl = int(output_tokens)
    rng_len = random.Random(_LOADGEN_LENGTH_SEED)
    outs = tuple(
        max(1, round(osl * (1 - s + 2 * s * rng_len.random()))) for _ in range(num_requests)
    )
    arrivals: tuple[float, ...] = ()
    if arrival == "poisson":
        assert requests_per_s is not None  # workload() has checked it
        rng = random.Random(_LOADGEN_ARRIVAL_SEED)
        t, ts = 0.0, []
        for _ in range(num_requests):
            t += rng.expovariate(requests_per_s)
            ts.append(t)
        arrivals = tuple(ts)
    return dataclasses.replace(
        base,
        output_spread=s,
        output_lengths=outs,
        arrival_s=arrivals,
        stagger_s=_LOADGEN_STAGGER_S_PER_TOKEN * osl if arrival == "steady" else None,
    )


def from_loadgen(sweep: str) -> Workload:
    """The workload of one sweep of the GPU toolkit (``ISL/OSL/MODE:ARG/NREQ``, MODE closed,
    stagger or poisson), request by request as it ran (:func:`loadgen`)."""
    isl, osl, mode, nreq = sweep.split("/")
    kind, arg = mode.split(":")
    arrival = _LOADGEN[kind]
    if arrival == "poisson":
        return loadgen(arrival, float(isl), float(osl), int(nreq), requests_per_s=float(arg))
    return loadgen(arrival, float(isl), float(osl), int(nreq), concurrency=int(arg))
