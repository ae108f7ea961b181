"""The standard test functions of benchmarks/quality.py, from their published
formulas, and the per-seed shift/rotation that keeps any method from profiting
from a centred or axis-aligned optimum.

Sources (formulas, domains, optima):
  [SB]   S. Surjanovic and D. Bingham, Virtual Library of Simulation Experiments:
         Test Functions and Datasets, https://www.sfu.ca/~ssurjano/optimization.html
         (sphere "spheref", Rosenbrock "rosen", Ackley "ackley", Levy "levy",
         Rastrigin "rastr", Styblinski-Tang "stybtang", Griewank "griewank",
         Michalewicz "michal", Hartmann-6 "hart6", Branin "branin").
  [BBOB] N. Hansen, S. Finck, R. Ros, A. Auger, Real-Parameter Black-Box
         Optimization Benchmarking 2009: Noiseless Functions Definitions,
         INRIA RR-6829, f2 "separable ellipsoid" (condition 10^6).
  Michalewicz optima for d = 2, 5, 10: [SB] and Vanaret et al. 2020 ("Certified
  global minima for a benchmark of difficult optimization problems").

Transforms (seed s, dimension d):
  unbounded kind (sphere, ellipsoid, rosenbrock, ackley, levy, rastrigin,
  styblinski_tang, griewank): x in the usual domain [lo, hi]^d, evaluated as
  h(y* + R (x - o)) with R a random rotation (QR of a Gaussian matrix, sign-
  fixed) and o uniform in the middle 60% of the domain. The minimizer is x = o
  and the minimum h(y*) is unchanged; these formulas are defined on all of R^d
  and their global minimum there is h(y*), so the known optimum stays exact.
  bounded kind (michalewicz, hartmann6, branin): defined on a fixed box whose
  outside has other minima, so no rotation: a random permutation of the
  coordinates and a random reflection (t -> 1 - t in unit coordinates) of each;
  the optimum value is unchanged and the optimum is no longer where the
  formula's author put it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tauopt.space import Space

__all__ = ["Problem", "make", "FUNCTIONS", "dims_for"]


@dataclass(frozen=True)
class Problem:
    name: str
    d: int
    space: Space
    f: Callable[[dict[str, Any]], float]
    optimum: float
    lo: float
    hi: float


def _sphere(y: np.ndarray) -> float:
    return float((y * y).sum())


def _ellipsoid(y: np.ndarray) -> float:
    d = len(y)
    w = 10.0 ** (6.0 * np.arange(d) / max(d - 1, 1))
    return float((w * y * y).sum())


def _rosenbrock(y: np.ndarray) -> float:
    return float((100.0 * (y[1:] - y[:-1] ** 2) ** 2 + (y[:-1] - 1.0) ** 2).sum())


def _ackley(y: np.ndarray) -> float:
    d = len(y)
    a = -20.0 * math.exp(-0.2 * math.sqrt(float((y * y).sum()) / d))
    return a - math.exp(float(np.cos(2 * math.pi * y).sum()) / d) + 20.0 + math.e


def _levy(y: np.ndarray) -> float:
    w = 1.0 + (y - 1.0) / 4.0
    mid = ((w[:-1] - 1) ** 2 * (1 + 10 * np.sin(math.pi * w[:-1] + 1) ** 2)).sum()
    last = (w[-1] - 1) ** 2 * (1 + math.sin(2 * math.pi * w[-1]) ** 2)
    return float(math.sin(math.pi * w[0]) ** 2 + mid + last)


def _rastrigin(y: np.ndarray) -> float:
    return float(10.0 * len(y) + (y * y - 10.0 * np.cos(2 * math.pi * y)).sum())


def _styblinski_tang(y: np.ndarray) -> float:
    return float(0.5 * (y**4 - 16 * y**2 + 5 * y).sum())


def _griewank(y: np.ndarray) -> float:
    i = np.arange(1, len(y) + 1)
    return float((y * y).sum() / 4000.0 - np.prod(np.cos(y / np.sqrt(i))) + 1.0)


def _michalewicz(y: np.ndarray) -> float:
    i = np.arange(1, len(y) + 1)
    return float(-(np.sin(y) * np.sin(i * y * y / math.pi) ** 20).sum())


_H_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]])
_H_P = 1e-4 * np.array(
    [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991], [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]
)
_H_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def _hartmann6(y: np.ndarray) -> float:
    return float(-(_H_ALPHA * np.exp(-(_H_A * (y - _H_P) ** 2).sum(1))).sum())


def _branin(y: np.ndarray) -> float:
    x1, x2 = 15.0 * y[0] - 5.0, 15.0 * y[1]  # [SB]'s domain [-5, 10] x [0, 15] from the unit square
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


_ST = -2.903534  # Styblinski-Tang's minimizer per coordinate [SB]
_MICHAL = {2: -1.8013, 5: -4.687658, 10: -9.66015}

# name -> (formula, domain lo, hi, y* per coordinate or None (bounded), optimum(d), dims)
FUNCTIONS: dict[str, tuple[Callable[[np.ndarray], float], float, float, float | None, Callable[[int], float], tuple[int, ...]]] = {
    "sphere": (_sphere, -5.12, 5.12, 0.0, lambda d: 0.0, (2, 5, 10, 20)),
    "ellipsoid": (_ellipsoid, -5.0, 5.0, 0.0, lambda d: 0.0, (2, 5, 10, 20)),
    "rosenbrock": (_rosenbrock, -5.0, 10.0, 1.0, lambda d: 0.0, (2, 5, 10, 20)),
    "ackley": (_ackley, -32.768, 32.768, 0.0, lambda d: 0.0, (2, 5, 10, 20)),
    "levy": (_levy, -10.0, 10.0, 1.0, lambda d: 0.0, (2, 5, 10, 20)),
    "rastrigin": (_rastrigin, -5.12, 5.12, 0.0, lambda d: 0.0, (2, 5, 10, 20)),
    "styblinski_tang": (_styblinski_tang, -5.0, 5.0, _ST, lambda d: _styblinski_tang(np.full(d, _ST)), (2, 5, 10, 20)),
    "griewank": (_griewank, -600.0, 600.0, 0.0, lambda d: 0.0, (2, 5, 10, 20)),
    "michalewicz": (_michalewicz, 0.0, math.pi, None, lambda d: _MICHAL[d], (2, 5, 10)),
    "hartmann6": (_hartmann6, 0.0, 1.0, None, lambda d: -3.32237, (6,)),
    "branin": (_branin, 0.0, 1.0, None, lambda d: 0.397887, (2,)),
}


def dims_for(name: str) -> tuple[int, ...]:
    return FUNCTIONS[name][5]


def _rotation(d: int, rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    return q * np.sign(np.diag(r))


def make(name: str, d: int, seed: int) -> Problem:
    """The seed-th shifted/rotated (or permuted/reflected) instance of `name` in d dimensions."""
    formula, lo, hi, ystar, optimum, dims = FUNCTIONS[name]
    if d not in dims:
        raise ValueError(f"{name} is defined for d in {dims}, not {d}")
    rng = np.random.default_rng([seed, d, sum(map(ord, name))])
    space = Space.parse([{"name": f"x{i}", "type": "double", "bounds": [lo, hi]} for i in range(d)])
    names = [f"x{i}" for i in range(d)]
    if ystar is not None:
        rot = _rotation(d, rng)
        o = lo + (0.2 + 0.6 * rng.random(d)) * (hi - lo)

        def f(a: dict[str, Any]) -> float:
            x = np.array([a[k] for k in names], dtype=float)
            return formula(ystar + rot @ (x - o))
    else:
        perm, flip = rng.permutation(d), rng.random(d) < 0.5

        def f(a: dict[str, Any]) -> float:
            t = (np.array([a[k] for k in names], dtype=float) - lo) / (hi - lo)
            t = np.where(flip, 1.0 - t, t)[perm]
            return formula(lo + t * (hi - lo))

    return Problem(name, d, space, f, float(optimum(d)), lo, hi)


def minimizer(p: Problem, seed: int) -> dict[str, Any] | None:
    """The instance's minimizer for the rotated kind (x = o), for tests; None for the bounded kind."""
    formula, lo, hi, ystar, _, _ = FUNCTIONS[p.name]
    if ystar is None:
        return None
    rng = np.random.default_rng([seed, p.d, sum(map(ord, p.name))])
    _rotation(p.d, rng)
    o = lo + (0.2 + 0.6 * rng.random(p.d)) * (hi - lo)
    return {f"x{i}": float(o[i]) for i in range(p.d)}
