"""The GP's targets: standardized, or half-rank warped (`HalfRankWarp`).

    y = Standardize.fit(raw).forward(raw)      # raw: values to minimize, all finite
    y = HalfRankWarp.fit(raw).forward(raw)     # the worse half by rank, then standardized

Written here, not taken from gpytorch's ecosystem: BoTorch's `Standardize` and
`Power` outcome transforms exist, but the half-rank warp (Vizier's) does not,
and the strategy chooses between the two per fit (gp._choose_warp).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Standardize", "HalfRankWarp"]


def _finite(raw: np.ndarray) -> np.ndarray:
    raw = np.asarray(raw, dtype=float)
    if not np.all(np.isfinite(raw)):
        raise ValueError("output warping needs finite values (impute failures first)")
    return raw


def _safe_std(v: np.ndarray) -> float:
    sd = float(v.std())
    if not math.isfinite(sd):
        raise FloatingPointError("observed values overflow when standardized")
    return sd if sd > 0 else 1.0


@dataclass(frozen=True)
class Standardize:
    """Mean 0, standard deviation 1 (1 when every value is the same)."""

    center: float
    scale: float

    @staticmethod
    def fit(raw: np.ndarray) -> "Standardize":
        raw = _finite(raw)
        return Standardize(float(raw.mean()), _safe_std(raw))

    def forward(self, raw: np.ndarray) -> np.ndarray:
        return (np.asarray(raw, dtype=float) - self.center) / self.scale

    def inverse(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=float) * self.scale + self.center


@dataclass(frozen=True)
class HalfRankWarp:
    """Keep the better half of the values as they are; map the worse half, by
    rank, onto the upper half of a normal with the better half's spread; then
    standardize. (Vizier's "half-rank" output warping, Song et al. 2024, "The
    Vizier Gaussian Process Bandit Algorithm".)

    Why not a power transform (Box-Cox, Yeo-Johnson): on a smooth bowl the
    fitted Box-Cox is near a log, which turns the minimum into a cusp a Matern
    kernel models badly (README). The region that decides where
    to look next is the better half; its shape is left alone. The worse half
    is where an ill-conditioned or exploding objective puts values orders of
    magnitude away; ranks tame them whatever their scale.

    forward() is defined for any value: piecewise linear through the fitted
    (raw, warped) pairs of the worse half, linear beyond them with the slope
    of the last segment, so it is strictly increasing and `inverse` undoes it."""

    knots_raw: tuple[float, ...]  # the median, then the worse half's distinct values, ascending
    knots_warped: tuple[float, ...]
    mean: float
    std: float

    @staticmethod
    def fit(raw: np.ndarray) -> "HalfRankWarp":
        from scipy.special import ndtri

        raw = _finite(raw)
        med = float(np.median(raw))
        good = raw[raw <= med]
        sigma = float(np.sqrt(np.mean((good - med) ** 2))) or _safe_std(raw)
        worse = np.unique(raw[raw > med])
        n = len(raw)
        # the quantile of each distinct worse value: mid-rank among all n values
        below = np.searchsorted(np.sort(raw), worse, side="left")
        ties = np.searchsorted(np.sort(raw), worse, side="right") - below
        q = np.clip((below + 0.5 * ties) / n, 0.5 + 0.5 / n, 1.0 - 0.5 / n)
        warped = med + sigma * ndtri(q)
        # strictly increasing knots, starting at (median, median)
        kr = np.concatenate([[med], worse])
        kw = np.maximum.accumulate(np.concatenate([[med], warped]))
        kw = kw + 1e-12 * sigma * np.arange(len(kw))  # equal warped values (ties in q) still ordered
        t = _half_rank(raw, kr, kw)
        return HalfRankWarp(tuple(kr), tuple(kw), float(t.mean()), _safe_std(t))

    def forward(self, raw: np.ndarray) -> np.ndarray:
        return (_half_rank(np.asarray(raw, dtype=float), np.array(self.knots_raw), np.array(self.knots_warped)) - self.mean) / self.std

    def inverse(self, y: np.ndarray) -> np.ndarray:
        t = np.asarray(y, dtype=float) * self.std + self.mean
        return _half_rank(t, np.array(self.knots_warped), np.array(self.knots_raw))


def _half_rank(v: np.ndarray, kx: np.ndarray, ky: np.ndarray) -> np.ndarray:
    """Identity up to kx[0]; piecewise linear through (kx, ky) above; past the
    last knot, the last segment's slope (1 when there is a single knot)."""
    out = v.astype(float).copy()
    hi = v > kx[0]
    if len(kx) == 1:
        return out
    slope = (ky[-1] - ky[-2]) / (kx[-1] - kx[-2])
    inside = hi & (v <= kx[-1])
    out[inside] = np.interp(v[inside], kx, ky)
    beyond = v > kx[-1]
    out[beyond] = ky[-1] + slope * (v[beyond] - kx[-1])
    return out
