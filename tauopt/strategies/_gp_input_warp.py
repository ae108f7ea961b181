"""Input warping: a Kumaraswamy CDF per feature, learned with the GP's
hyperparameters (Snoek et al. 2014, "Input Warping for Bayesian Optimization
of Non-Stationary Functions", ICML; BoTorch's `Warp` input transform).

    u = warp(x, a, b) = 1 - (1 - x**a)**b        x in [0, 1], a, b > 0
    x = unwarp(u, a, b) = (1 - (1 - u)**(1/b))**(1/a)

Why: a stationary kernel gives every part of the unit cube the same
wiggliness. Many objectives change fast near one edge (a learning rate near
its top, a function near its optimum after a log-scaled parameter) and slowly
elsewhere; a monotone bijection of each coordinate, fitted by marginal
likelihood, stretches where the function moves fast and compresses where it is
flat. a = b = 1 is the identity, and the prior (log-normal around 1, as
BoTorch's) keeps the warp near it unless the data ask for more, so a coordinate
the data say nothing about (a one-hot column is only ever 0 or 1, which every
warp fixes) stays unwarped. It is strictly increasing for every a, b > 0, so
"nearer in x" stays "nearer in u" along each coordinate. (In float64 the
most extreme shapes in BOUNDS saturate to exactly 1 within ~1e-3 of the top
edge: never decreasing, and strictly increasing everywhere else.)

Inputs are squeezed into [EPS, 1 - EPS] first: x**a has an infinite slope at
0 when a < 1, and (1 - x**a)**b one at 1 when b < 1.
"""

from __future__ import annotations

import numpy as np

__all__ = ["warp", "unwarp", "warp_torch", "BOUNDS", "PRIOR_SCALE", "EPS"]

EPS = 1e-6
BOUNDS = (0.2, 5.0)  # a and b: beyond these the warp flattens a coordinate to a step
PRIOR_SCALE = 0.75**0.5  # log-normal(0, sqrt(0.75)) on a and b, BoTorch's choice


def _squeeze(x):  # type: ignore[no-untyped-def]
    return x * (1.0 - 2.0 * EPS) + EPS


def warp(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kumaraswamy CDF of each column (numpy)."""
    xs = _squeeze(np.clip(np.asarray(x, dtype=float), 0.0, 1.0))
    return 1.0 - np.power(1.0 - np.power(xs, a), b)


def unwarp(u: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The inverse of `warp` on its range."""
    u = np.asarray(u, dtype=float)
    xs = np.power(1.0 - np.power(1.0 - u, 1.0 / np.asarray(b)), 1.0 / np.asarray(a))
    return (xs - EPS) / (1.0 - 2.0 * EPS)


def warp_torch(x, a, b):  # type: ignore[no-untyped-def]
    """Kumaraswamy CDF of each column (torch, differentiable in x, a and b)."""
    xs = _squeeze(x.clamp(0.0, 1.0))
    return 1.0 - (1.0 - xs.pow(a)).clamp_min(1e-300).pow(b)
