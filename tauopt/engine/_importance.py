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

An experiment whose strategy can explain its parameters answers with that
strategy's own method instead: the strategy registry says which can
(`importance_for`: the GP past its initial design, by its fitted length-scales,
method `gp_lengthscales`). Should that fail, the answer is `binned_variance`
(the method says which).

`ImportanceCache` keeps one answer per experiment until its history changes, so
open tabs polling the page do not refit the GP.
"""

from __future__ import annotations

from typing import Any, Sequence

import logging
from collections import OrderedDict

import numpy as np

from ..models import Experiment, Observation, Parameter
from ..space import Space
from ..strategies import importance_for
from ._shared import SharedRuns

__all__ = ["importance", "experiment_importance", "ImportanceCache", "METHOD"]

log = logging.getLogger("tauopt.engine")

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


def experiment_importance(exp: Experiment, observations: Sequence[Observation]) -> dict[str, Any]:
    """The importance the experiment's strategy affords: its own account where the
    registry has one (the GP's length-scales), binned_variance otherwise (and when
    that account fails)."""
    space = Space(exp.parameters)
    explained = importance_for(exp.strategy, space, len(observations), exp.strategy_options, exp.observation_budget)
    if explained is not None:
        try:
            shares = explained.shares(space, exp.metric, observations, exp.strategy_options.seed or 0)
        except Exception as exc:  # noqa: BLE001 - an estimate, never an error: fall back and say which
            log.info("importance of %s: %s unavailable (%s); %s instead", exp.id, explained.method, exc, METHOD)
        else:
            rows = [{"name": k, "importance": v} for k, v in sorted(shares.items(), key=lambda kv: -kv[1])]
            done = sum(1 for o in observations if not o.failed and o.value is not None)
            return {"method": explained.method, "observations": done, "parameters": rows}
    return importance(exp.parameters, observations)


class ImportanceCache:
    """One answer per experiment, reused while its history is unchanged; computed on a
    worker thread (a GP fit takes a second or so and must not hold the event loop), once
    for all the callers that ask while it runs."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._held: OrderedDict[str, tuple[tuple[Any, ...], dict[str, Any]]] = OrderedDict()
        self._runs = SharedRuns()

    async def get(self, exp: Experiment, observations: Sequence[Observation]) -> dict[str, Any]:
        key = (len(observations), observations[-1].id if observations else None, exp.strategy)
        held = self._held.get(exp.id)
        if held is not None and held[0] == key:
            self._held.move_to_end(exp.id)
            return held[1]
        out: dict[str, Any] = await self._runs.run((exp.id, key), experiment_importance, exp, observations)
        self._held[exp.id] = (key, out)
        self._held.move_to_end(exp.id)
        while len(self._held) > self._size:
            self._held.popitem(last=False)
        return out


def _bin_labels(p: Parameter, values: list[Any]) -> np.ndarray:
    """A bin number per value (vectorized: a 10,000-observation page asks for this)."""
    if p.type not in ("double", "int"):
        _, codes = np.unique(np.array([repr(v) for v in values], dtype=object).astype(str), return_inverse=True)
        return codes
    active = np.array([v is not _INACTIVE and v != _INACTIVE for v in values], dtype=bool)
    out = np.full(len(values), -1, dtype=np.int64)  # -1: the "inactive" bin
    if not active.any():
        return out
    xs = np.array([float(v) for v, on in zip(values, active) if on])
    if p.scale in ("log", "reverse_log") and xs.min() > 0:
        xs = np.log(xs)
    edges = np.unique(np.quantile(xs, np.linspace(0, 1, _BINS + 1)[1:-1]))
    out[active] = np.searchsorted(edges, xs, side="right")
    return out


def _eta_squared(labels: np.ndarray, y: np.ndarray, total: float) -> float:
    _, group = np.unique(labels, return_inverse=True)
    n, k = len(y), int(group.max()) + 1
    sizes = np.bincount(group, minlength=k)
    means = np.bincount(group, weights=y, minlength=k) / sizes
    ss_total = total * n
    ss_between = float(np.sum(sizes * (means - float(y.mean())) ** 2))
    ms_within = (ss_total - ss_between) / (n - k) if n > k else 0.0
    return float(min(1.0, max(0.0, (ss_between - (k - 1) * ms_within) / ss_total)))
