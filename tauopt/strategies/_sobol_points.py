"""Scrambled Sobol' points addressable by index, from `scipy.stats.qmc.Sobol`.

    sobol_points(d, start, n, seed)       rows start..start+n-1 of the scrambled sequence
    sobol_points_unscrambled(d, start, n) the plain sequence

Point k depends on k alone (scipy's Gray-code order), so an experiment
restarted after a crash continues from `drawn` with exactly the points it would
have got, however the sequence was cut into calls.

scipy is imported on the first call, not with this module, so `import tauopt`
stays light. One engine per (d, seed) is kept and fast-forwarded only when a
call does not continue where the last one stopped: an experiment drawing one
point per ask pays one `random(1)`. Engines are shared between the event loop
(inline asks) and pool threads (the GP's Sobol fallback), hence the lock.

Dimensions beyond scipy's table (MAX_DIMS = 21201) are drawn as further blocks
of at most MAX_DIMS columns, each scrambled with its own seed derived from
(seed, block): every 1-D projection is still a scrambled (0, m, 1)-net.
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = ["sobol_points", "sobol_points_unscrambled", "warm_up", "MAX_DIMS", "MAX_POINTS"]

BITS = 30  # scipy's default: points lie on a 2^-30 grid
MAX_POINTS = 1 << BITS  # indices 0 .. 2^30 - 1; beyond, the sequence would repeat
MAX_DIMS = 21201  # scipy's direction-number table (Joe & Kuo)
_CACHED_ENGINES = 256
_engines: OrderedDict[tuple[int, int | None], Any] = OrderedDict()
_lock = threading.Lock()


def _engine(d: int, seed: int | None) -> Any:
    """The cached scipy engine for (d, seed); seed None means unscrambled. Caller holds _lock."""
    key = (d, seed)
    engine = _engines.get(key)
    if engine is None:
        from scipy.stats import qmc  # lazy: scipy costs ~100 ms to import

        engine = qmc.Sobol(d, scramble=seed is not None, rng=seed, bits=BITS)
        _engines[key] = engine
        if len(_engines) > _CACHED_ENGINES:
            _engines.popitem(last=False)
    else:
        _engines.move_to_end(key)
    return engine


def _draw(d: int, seed: int | None, start: int, n: int) -> np.ndarray:
    with _lock:
        engine = _engine(d, seed)
        if engine.num_generated != start:
            engine.reset()
            if start:
                engine.fast_forward(start)
        if start == 0 and n & (n - 1):
            # scipy warns when a fresh sequence is cut at a count that is not a power
            # of two; draw the next power of two and keep the rows asked for.
            rows = engine.random(1 << n.bit_length())[:n]
            engine.reset()  # the engine's position no longer says where this call stopped
            return rows
        return engine.random(n)


def warm_up() -> None:
    """Import scipy's qmc now (about 0.5 s, more on a busy machine), not in the first ask."""
    from scipy.stats import qmc  # noqa: F401


def _check(d: int, start: int, n: int) -> None:
    if d < 0 or start < 0 or n < 0:
        raise ValueError(f"sobol_points needs d, start, n >= 0; got d={d}, start={start}, n={n}")
    if start + n > MAX_POINTS:
        raise ValueError(f"sobol_points covers indices below 2^{BITS}; start={start} + n={n} goes past it")


def sobol_points(d: int, start: int, n: int, seed: int, *, scramble: bool = True) -> np.ndarray:
    """Points start..start+n-1 of the scrambled Sobol' sequence for (d, seed): shape (n, d), in [0, 1).

    Deterministic in (d, seed): any split of 0..N into calls gives the same rows.
    `scramble=False` gives the plain sequence and ignores seed (at most MAX_DIMS dimensions).
    """
    # operator.index: numpy ints in, Python ints out; floats rejected.
    d, start, n, seed = (operator.index(x) for x in (d, start, n, seed))
    _check(d, start, n)
    if scramble and seed < 0:
        raise ValueError(f"sobol_points needs seed >= 0; got {seed}")
    if not scramble and d > MAX_DIMS:
        raise ValueError(f"sobol_points without scrambling covers at most {MAX_DIMS} dimensions; got d={d}")
    if n == 0 or d == 0:
        return np.zeros((n, d), dtype=np.float64)
    if d <= MAX_DIMS:
        return _draw(d, seed if scramble else None, start, n)
    blocks = []
    for b, lo in enumerate(range(0, d, MAX_DIMS)):
        width = min(MAX_DIMS, d - lo)
        block_seed = seed if b == 0 else int(np.random.SeedSequence([seed, b]).generate_state(1)[0])
        blocks.append(_draw(width, block_seed, start, n))
    return np.concatenate(blocks, axis=1)


def sobol_points_unscrambled(d: int, start: int, n: int) -> np.ndarray:
    """The plain Sobol' sequence (first point 0), equal to scipy's scramble=False."""
    return sobol_points(d, start, n, 0, scramble=False)
