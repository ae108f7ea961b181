"""Parameter importance from observations alone, for any strategy.

Method `binned_variance` (named on the dashboard's chart): for each parameter,
group the successful observations into bins of that parameter (up to 10
quantile bins of a numeric parameter, on its log scale if it has one; one bin
per value of a categorical or boolean; one "inactive" bin where a conditional
parameter was off) and take the variance of the bins' mean metric values,
weighted by bin size, over the metric's total variance: the share of the
metric's variance explained by that parameter alone. Bins of a few points
explain some variance by chance alone, so the estimate is bias-corrected
(epsilon squared: (SS_between - (k-1) MS_within) / SS_total, floored at 0),
which puts a parameter that does nothing near 0. It ignores interactions, and
with few observations it is noisy: `observations` is returned so a reader can judge.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..models import Observation, Parameter

__all__ = ["importance", "METHOD"]

METHOD = "binned_variance"
_BINS = 10
_INACTIVE = "\0inactive"


def importance(parameters: Sequence[Parameter], observations: Sequence[Observation]) -> dict[str, Any]:
    done = [o for o in observations if not o.failed and o.value is not None]
    y = np.array([o.value for o in done], dtype=float)
    rows: list[dict[str, Any]] = []
    total = float(y.var()) if len(y) > 1 else 0.0
    for p in parameters:
        if p.type == "fixed":
            continue
        score = 0.0
        if total > 0.0:
            labels = _bin_labels(p, [o.assignments.get(p.name, _INACTIVE) for o in done])
            score = _eta_squared(labels, y, total)
        rows.append({"name": p.name, "importance": score})
    rows.sort(key=lambda r: -r["importance"])
    return {"method": METHOD, "observations": len(done), "parameters": rows}


def _bin_labels(p: Parameter, values: list[Any]) -> list[Any]:
    if p.type not in ("double", "int"):
        return [repr(v) for v in values]
    numeric = [v for v in values if v is not _INACTIVE and v != _INACTIVE]
    if not numeric:
        return ["inactive"] * len(values)
    log = p.scale in ("log", "reverse_log") and min(numeric) > 0
    xs = np.array([math.log(v) if log else float(v) for v in numeric])
    edges = np.unique(np.quantile(xs, np.linspace(0, 1, _BINS + 1)[1:-1]))
    out: list[Any] = []
    for v in values:
        if v is _INACTIVE or v == _INACTIVE:
            out.append("inactive")
        else:
            out.append(int(np.searchsorted(edges, math.log(v) if log else float(v), side="right")))
    return out


def _eta_squared(labels: list[Any], y: np.ndarray, total: float) -> float:
    groups: dict[Any, list[float]] = {}
    for label, v in zip(labels, y):
        groups.setdefault(label, []).append(float(v))
    n, k = len(y), len(groups)
    mean = float(y.mean())
    ss_total = total * n
    ss_between = sum(len(vs) * (sum(vs) / len(vs) - mean) ** 2 for vs in groups.values())
    ms_within = (ss_total - ss_between) / (n - k) if n > k else 0.0
    return float(min(1.0, max(0.0, (ss_between - (k - 1) * ms_within) / ss_total)))
