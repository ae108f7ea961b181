"""The GP's view of a Space: a latent unit cube, the feature map the kernel sees,
and the projection back to valid assignments.

Latent coordinates z (one per `space.dims` entry, in [0, 1]):
  double/int  t, the position between the bounds in the parameter's scale
              (log/reverse_log in log space). Integers and stepped doubles are
              relaxed: t moves continuously and the value is rounded to the step
              only when a point is projected.
  categorical the cell floor(z * k) picks the value; z of an observed value is
              its cell centre.
  boolean     z >= 0.5 is True.

Features (what the Matern kernel measures distance on):
  numeric     t, or 0.5 when the parameter is inactive
  categorical one-hot (k columns, each with its own ARD lengthscale), all zero
              when inactive, so an inactive categorical is equally far from every value
  boolean     0 / 1, or 0.5 when inactive

Inactive conditional parameters are handled explicitly: their columns take a
fixed neutral value, so two points that differ only in a parameter inactive for
both are the same point to the model; the parent's columns carry the switch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Sequence

import numpy as np

from ..models import Parameter, Value, same_value
from ..space import Space

__all__ = ["Encoder"]

_NEUTRAL = 0.5


@dataclass(frozen=True)
class _Dim:
    param: Parameter
    kind: str  # "num" | "cat" | "bool"
    col: int  # first feature column
    width: int


@dataclass(frozen=True)
class Encoder:
    space: Space

    @cached_property
    def dims(self) -> tuple[_Dim, ...]:
        out, col = [], 0
        for p in self.space.dims:
            if p.type in ("double", "int"):
                out.append(_Dim(p, "num", col, 1))
                col += 1
            elif p.type == "categorical":
                k = len(p.values or ())
                out.append(_Dim(p, "cat", col, k))
                col += k
            else:  # boolean
                out.append(_Dim(p, "bool", col, 1))
                col += 1
        return tuple(out)

    @cached_property
    def n_features(self) -> int:
        return sum(d.width for d in self.dims)

    @cached_property
    def _index(self) -> dict[str, int]:
        return {d.param.name: i for i, d in enumerate(self.dims)}

    @cached_property
    def numeric_latent(self) -> np.ndarray:
        """Latent coordinates local refinement may move continuously."""
        return np.array([i for i, d in enumerate(self.dims) if d.kind == "num"], dtype=int)

    # -- assignments -> latent ------------------------------------------------

    def latent(self, points: Sequence[Mapping[str, Value]]) -> np.ndarray:
        z = np.full((len(points), len(self.dims)), _NEUTRAL)
        for i, d in enumerate(self.dims):
            name = d.param.name
            if d.kind == "num":  # vectorized per column: histories run to thousands of rows
                rows = [r for r, a in enumerate(points) if name in a]
                if rows:
                    z[rows, i] = _t_of_array(d.param, np.array([float(points[r][name]) for r in rows]))
                continue
            for r, a in enumerate(points):
                if name not in a:
                    continue
                v = a[name]
                if d.kind == "cat":
                    vals = d.param.values or ()
                    k = next((j for j, w in enumerate(vals) if same_value(v, w)), 0)
                    z[r, i] = (k + 0.5) / len(vals)
                else:
                    z[r, i] = 0.75 if v else 0.25
        return z

    # -- latent -> values, activity -------------------------------------------

    def decode(self, z: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Per parameter: projected values (numeric: float, categorical: index,
        boolean: bool) and the activity mask, vectorized over rows."""
        m = z.shape[0]
        values: dict[str, np.ndarray] = {}
        active: dict[str, np.ndarray] = {}
        for p in self.space.order:
            mask = np.ones(m, dtype=bool)
            for c in p.conditions:
                parent = self.space.by_name[c.parent]
                match = np.zeros(m, dtype=bool)
                for v in c.values:
                    match |= _equals(parent, values[parent.name], v)
                mask &= active[parent.name] & match
            active[p.name] = mask
            if p.type == "fixed":
                values[p.name] = np.full(m, 0.0)  # matched by _equals through p.value
                continue
            col = z[:, self._index[p.name]]
            d = self.dims[self._index[p.name]]
            if d.kind == "num":
                values[p.name] = _snap(p, _x_of(p, col))
            elif d.kind == "cat":
                k = len(p.values or ())
                values[p.name] = np.minimum((np.clip(col, 0.0, 1.0) * k).astype(int), k - 1)
            else:
                values[p.name] = col >= 0.5
        return values, active

    def features(self, z: np.ndarray, project: bool = True) -> np.ndarray:
        """Kernel inputs for latent rows. project=False keeps numeric coordinates
        relaxed (unrounded), which local refinement searches over."""
        values, active = self.decode(z)
        x = np.zeros((z.shape[0], self.n_features))
        for i, d in enumerate(self.dims):
            name = d.param.name
            act = active[name]
            if d.kind == "num":
                t = _t_of_array(d.param, values[name]) if project else np.clip(z[:, i], 0.0, 1.0)
                x[:, d.col] = np.where(act, t, _NEUTRAL)
            elif d.kind == "cat":
                rows = np.nonzero(act)[0]
                x[rows, d.col + values[name][rows]] = 1.0
            else:
                x[:, d.col] = np.where(act, values[name].astype(float), _NEUTRAL)
        return x

    def assignments(self, z: np.ndarray) -> list[dict[str, Value]]:
        """Project latent rows to valid assignments (rounding, step, categoricals)."""
        values, active = self.decode(z)
        out = []
        for r in range(z.shape[0]):
            a: dict[str, Value] = {}
            for p in self.space.parameters:
                if not active[p.name][r]:
                    continue
                if p.type == "fixed":
                    a[p.name] = p.value  # type: ignore[assignment]
                elif p.type == "categorical":
                    a[p.name] = (p.values or ())[int(values[p.name][r])]
                elif p.type == "boolean":
                    a[p.name] = bool(values[p.name][r])
                elif p.type == "int":
                    a[p.name] = int(round(values[p.name][r]))
                else:
                    a[p.name] = float(values[p.name][r])
            out.append(a)
        return out


# -- numeric scales -------------------------------------------------------------


def _x_of(p: Parameter, t: np.ndarray) -> np.ndarray:
    lo, hi = p.bounds  # type: ignore[misc]
    t = np.clip(t, 0.0, 1.0)
    if p.scale == "log":
        x = np.exp(math.log(lo) + t * (math.log(hi) - math.log(lo)))
    elif p.scale == "reverse_log":
        x = hi + lo - np.exp(math.log(lo) + (1.0 - t) * (math.log(hi) - math.log(lo)))
    else:
        x = lo + t * (hi - lo)
    return np.clip(x, lo, hi)


def _t_of_array(p: Parameter, x: np.ndarray) -> np.ndarray:
    lo, hi = p.bounds  # type: ignore[misc]
    x = np.clip(np.asarray(x, dtype=float), lo, hi)
    if p.scale == "log":
        t = (np.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo))
    elif p.scale == "reverse_log":
        t = 1.0 - (np.log(np.maximum(hi + lo - x, lo)) - math.log(lo)) / (math.log(hi) - math.log(lo))
    else:
        t = (x - lo) / (hi - lo)
    return np.clip(t, 0.0, 1.0)


def _snap(p: Parameter, x: np.ndarray) -> np.ndarray:
    if p.type != "int" and p.step is None:
        return x
    lo, hi = p.bounds  # type: ignore[misc]
    step = p.step if p.step is not None else 1
    kmax = math.floor((hi - lo) / step + 1e-9)
    k = np.clip(np.round((x - lo) / step), 0, kmax)
    if p.type == "int":
        return lo + k * step
    return np.round(lo + k * step, 12)


def _equals(p: Parameter, decoded: np.ndarray, v: Value) -> np.ndarray:
    """Which rows of a decoded parameter take value v (bool kept apart from numbers)."""
    m = decoded.shape[0]
    if p.type == "fixed":
        return np.full(m, same_value(p.value, v))  # type: ignore[arg-type]
    if p.type == "categorical":
        idx = [j for j, w in enumerate(p.values or ()) if same_value(w, v)]
        return np.isin(decoded, idx)
    if p.type == "boolean":
        return decoded == v if isinstance(v, bool) else np.zeros(m, dtype=bool)
    if isinstance(v, (bool, str)):
        return np.zeros(m, dtype=bool)
    return np.isclose(decoded, float(v), rtol=0.0, atol=1e-9)
