"""A pooled strategy job and its outcome: the picklable boundary between the
engine's compute executor and a strategy (vizier's SuggestRequest/SuggestDecision).

A job carries the strategy's `run` function itself (a module-level function,
pickled by reference), so a worker process runs strategies registered in any
importable module, not only the built-in ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..models import Value
from ._request import SuggestRequest

__all__ = ["Draws", "StrategyJob", "StrategyOutcome", "Run", "request_rng", "rng_for", "run_job"]


@dataclass(frozen=True)
class StrategyOutcome:
    """candidates: proposed assignments (the engine dedups them exactly).
    strategy_used: what produced them (e.g. "gp", or "sobol" after a fallback).
    fallback_reason: why the requested strategy was not used (None when it was).
    fit_seconds: time spent fitting/optimizing. state: warm state for the next job
    of the same experiment (None for stateless strategies)."""

    candidates: tuple[dict[str, Value], ...]
    strategy_used: str
    fallback_reason: str | None = None
    fit_seconds: float = 0.0
    state: Any = None


@dataclass(frozen=True)
class StrategyJob:
    """What crosses into a worker: the strategy's run function, the request, the
    warm state of the experiment's previous job, and the time left to answer."""

    run: "Run"
    request: SuggestRequest
    warm: Any = None
    deadline_s: float | None = None

    def with_warm(self, warm: Any, deadline_s: float | None) -> "StrategyJob":
        return StrategyJob(self.run, self.request, warm, deadline_s)


Run = Callable[[StrategyJob], StrategyOutcome]


_U64 = (1 << 64) - 1


class Draws:
    """The generators of one experiment's draws, one bit generator reused.

    Draw `drawn` of seed `seed` is Philox (a counter-based generator) keyed by the
    seed, its counter starting at `drawn` in the third word: each draw has its own
    stream of 2**128 blocks, reproducible from (seed, drawn) alone, so a restarted
    experiment draws what it would have, whichever executor runs the job. Moving a
    reused generator to a draw costs a state assignment (~4 µs); building one
    (`default_rng`, which hashes a seed sequence and reads OS entropy) ~45 µs, which
    was the largest cost of an inline ask. Not thread-safe: one owner (an actor)."""

    __slots__ = ("_bits", "_generator", "_state", "_counter")

    def __init__(self, seed: int) -> None:
        if seed < 0:
            raise ValueError(f"seed: give an integer >= 0, got {seed}")
        if seed >> 128:  # Philox keys are 128 bits: fold larger seeds (rare) into one
            seed = int.from_bytes(hashlib.blake2b(str(seed).encode(), digest_size=16).digest(), "big")
        self._bits = np.random.Philox(key=[seed & _U64, seed >> 64])
        self._generator = np.random.Generator(self._bits)
        self._state = self._bits.state
        self._counter = np.zeros(4, dtype=np.uint64)
        self._state["state"]["counter"] = self._counter

    def at(self, drawn: int) -> np.random.Generator:
        """The generator positioned at the start of draw `drawn` (the one returned
        before is moved too: use it before asking for the next draw)."""
        self._counter[:] = 0
        self._counter[2] = drawn & _U64
        self._counter[3] = drawn >> 64
        state = self._state
        state["buffer_pos"], state["has_uint32"], state["uinteger"] = 4, 0, 0  # nothing buffered: as new
        self._bits.state = state
        return self._generator


def rng_for(seed: int, drawn: int) -> np.random.Generator:
    """The one generator of a draw: reproducible from (seed, drawn) (see Draws)."""
    return Draws(seed).at(drawn)


def request_rng(request: SuggestRequest) -> np.random.Generator:
    return rng_for(request.seed, request.drawn)


def run_job(job: StrategyJob) -> StrategyOutcome:
    """Run one job (module level, so it pickles into worker processes)."""
    return job.run(job)
