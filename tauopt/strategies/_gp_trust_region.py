"""A TuRBO-style trust region for the GP in higher dimensions (Eriksson et al.
2019, "Scalable Global Optimization via Local Bayesian Optimization", NeurIPS).

In d >= 10 a global GP with a few dozen points is nearly flat away from the
data, and expected improvement over the whole cube spends the budget on the
corners. TuRBO keeps the search in a box around the incumbent whose side
grows after a run of successes and shrinks after a run of failures:

    length 0.8 at the start, within [0.5**7, 1.6]
    success = the batch's best beats the incumbent by 1e-3 * |incumbent|
    3 successes in a row       -> length * 2 (capped at 1.6)
    ceil(max(4, d) / batch) failures in a row -> length / 2
    length below 0.5**7        -> restart at 0.8 (the data are kept)

The state is not stored: `replay` recomputes it from the history in
observation order, so it survives restarts and needs nothing in the store.
The box is stretched per coordinate by the GP's lengthscales (normalized to a
geometric mean of 1), as TuRBO does: long along directions that barely matter.

Written here: neither gpytorch nor BoTorch ships TuRBO's state (BoTorch shows it
in a tutorial only), and this one is replayed from the stored history.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

__all__ = ["TrustRegion", "step", "replay", "box", "failure_tolerance", "MIN_DIM"]

LENGTH_INIT = 0.8
LENGTH_MIN = 0.5**7
LENGTH_MAX = 1.6
SUCCESS_TOL = 3
MIN_DIM = 10  # below this, the global acquisition does better (README, measured)
_IMPROVE = 1e-3


@dataclass(frozen=True)
class TrustRegion:
    length: float = LENGTH_INIT
    successes: int = 0
    failures: int = 0
    restarts: int = 0


def failure_tolerance(d: int, batch: int) -> int:
    return int(math.ceil(max(4.0 / batch, d / batch)))


def step(tr: TrustRegion, improved: bool, d: int, batch: int) -> TrustRegion:
    """The region after one batch of observations."""
    if improved:
        tr = replace(tr, successes=tr.successes + 1, failures=0)
    else:
        tr = replace(tr, successes=0, failures=tr.failures + 1)
    if tr.successes >= SUCCESS_TOL:
        tr = replace(tr, length=min(2.0 * tr.length, LENGTH_MAX), successes=0)
    elif tr.failures >= failure_tolerance(d, batch):
        tr = replace(tr, length=tr.length / 2.0, failures=0)
    if tr.length < LENGTH_MIN:
        tr = TrustRegion(restarts=tr.restarts + 1)
    return tr


def replay(values: np.ndarray, n_init: int, d: int, batch: int) -> TrustRegion:
    """The region after observing `values` (to minimize, in order; NaN = failed),
    the first `n_init` being the initial design, the rest in batches of `batch`."""
    batch = max(1, int(batch))
    v = np.where(np.isfinite(values), values, np.inf)
    tr = TrustRegion()
    if len(v) == 0:
        return tr
    best = float(np.min(v[: max(n_init, 1)]))
    for start in range(max(n_init, 1), len(v), batch):
        chunk = float(np.min(v[start : start + batch]))
        improved = math.isfinite(chunk) and chunk < best - _IMPROVE * abs(best)
        tr = step(tr, improved, d, batch)
        best = min(best, chunk)
    return tr


def box(center: np.ndarray, lengthscale: np.ndarray, length: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper corners, clipped to the unit cube, of the region around
    `center` (unit coordinates) with side `length` stretched by lengthscale."""
    ls = np.asarray(lengthscale, dtype=float)
    w = ls / ls.mean()
    w = w / np.exp(np.mean(np.log(w)))  # geometric mean 1: the volume is length**d
    lo = np.clip(center - w * length / 2.0, 0.0, 1.0)
    hi = np.clip(center + w * length / 2.0, 0.0, 1.0)
    return lo, hi
