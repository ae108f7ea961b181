"""What the GP models when an experiment has several objectives or constraint metrics.

- Several objectives, when the GP uses ParEGO (three or four objectives, or
  GPConfig(multi_objective="parego"); two go to EHVI, `_gp_ehvi`): ParEGO (Knowles 2006). Each suggestion draws its own weight
  vector uniformly on the simplex and models the augmented Chebyshev scalarization
  max_i(w_i f_i) + rho * sum_i(w_i f_i) of the objectives, each normalized to [0, 1]
  over the history (signed so smaller is better). Different weights per
  suggestion spread parallel workers along the front; pending points stay in the
  posterior as kriging believers, as for one objective.
- Constraint metrics: one GP per constraint on its signed violation (<= 0 is
  satisfied); the acquisition is multiplied by the probability of feasibility
  (Gardner et al. 2014, "Bayesian optimization with inequality constraints"),
  and while nothing is feasible the probability of feasibility alone is maximized.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..models import Metric, Observation

__all__ = ["Targets", "targets", "draw_weights", "chebyshev", "normalized", "RHO"]

RHO = 0.05  # Knowles' augmentation: keeps weakly dominated points below the front


@dataclass(frozen=True)
class Targets:
    objectives: np.ndarray  # (n, k) signed to minimize; nan where failed or missing
    violations: np.ndarray  # (n, c) value - bound for <=, bound - value for >=; nan where missing
    feasible: np.ndarray  # (n,) bool: every objective and constraint present, every constraint met


def _value(metric: Metric, primary: str, obs: Observation) -> float:
    if obs.failed:
        return np.nan
    v = obs.value if metric.name == primary else obs.metrics.get(metric.name)
    return np.nan if v is None else float(v)


def targets(metrics: tuple[Metric, ...], history: Sequence[Observation]) -> Targets:
    objectives = [m for m in metrics if m.objective is not None]
    constraints = [m for m in metrics if m.constraint is not None]
    primary = objectives[0].name
    obj = np.array([[m.sign * _value(m, primary, o) for m in objectives] for o in history], dtype=float)
    vio = np.array(
        [[m.constraint.violation(_value(m, primary, o)) for m in constraints] for o in history],  # type: ignore[union-attr]
        dtype=np.float64,
    ).reshape(len(history), len(constraints))
    obj = obj.reshape(len(history), len(objectives))
    with np.errstate(invalid="ignore"):
        feasible = np.all(np.isfinite(obj), axis=1) & np.all(np.isfinite(vio), axis=1) & np.all(vio <= 0, axis=1)
    return Targets(obj, vio, feasible)


def draw_weights(k: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform on the (k-1)-simplex."""
    return rng.dirichlet(np.ones(k))


def normalized(objectives: np.ndarray) -> np.ndarray:
    """Each objective scaled to [0, 1] over the rows finite in every objective (a
    constant column: 0); entries that are not finite stay so. ParEGO's and EHVI's
    normalization (needs one such row)."""
    ok = objectives[np.all(np.isfinite(objectives), axis=1)]
    lo, hi = ok.min(axis=0), ok.max(axis=0)
    return (objectives - lo) / np.where(hi > lo, hi - lo, 1.0)


def chebyshev(objectives: np.ndarray, weights: np.ndarray, rho: float = RHO) -> np.ndarray:
    """Augmented Chebyshev scalarization of each row (nan rows stay nan); one column is returned as is."""
    if objectives.shape[1] == 1:
        return objectives[:, 0].copy()
    finite = np.all(np.isfinite(objectives), axis=1)
    out = np.full(len(objectives), np.nan)
    if not finite.any():
        return out
    weighted = normalized(objectives)[finite] * weights
    out[finite] = weighted.max(axis=1) + rho * weighted.sum(axis=1)
    return out
