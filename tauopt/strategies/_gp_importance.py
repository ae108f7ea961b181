"""Parameter importance from the GP's fitted length-scales (method `gp_lengthscales`).

The GP strategy's own model -- the same encoding (`_gp_encode`: each numeric
parameter one unit column, a categorical one one-hot column per value), the
same Matern-5/2 kernel with one ARD length-scale per column, the same priors --
fitted once on the history (at most SUBSET_FIT points, chosen as the strategy
chooses them). A short length-scale means the metric changes over a small part
of that column's range, so a parameter's importance is its inverse length-scale
(a categorical's: the largest over its columns), normalized to sum to 1 over
the parameters. The metric modelled is the first objective, signed so smaller
is better, failures imputed with the worst value seen (as the strategy does).

Cheap compared with the strategy: one hyperparameter fit, no acquisition. torch
and gpytorch are imported inside `fit` only (`_gp_fit`).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..models import Metric, Observation
from ..space import Space
from ._gp_encode import Encoder
from ._gp_model import fit
from ._gp_warping import Standardize
from .gp import SUBSET_FIT, _subset

__all__ = ["METHOD", "MIN_OBSERVATIONS", "lengthscale_importance"]

METHOD = "gp_lengthscales"
MIN_OBSERVATIONS = 3  # successful ones: fewer and the fit returns the prior


def lengthscale_importance(space: Space, metric: Metric, history: Sequence[Observation], seed: int = 0) -> dict[str, float]:
    """{parameter name: share of the summed inverse length-scales}, over the space's
    tunable parameters. Raises ValueError with fewer than MIN_OBSERVATIONS successes;
    whatever the fit raises (ImportError without torch) passes through."""
    enc = Encoder(space)
    finite = [o for o in history if not o.failed and o.value is not None and math.isfinite(o.value)]
    if enc.n_features == 0 or len(finite) < MIN_OBSERVATIONS:
        raise ValueError(f"needs {MIN_OBSERVATIONS} successful observations and a tunable parameter")
    raw = np.array([np.nan if o.failed or o.value is None else metric.sign * o.value for o in history], dtype=float)
    raw[~np.isfinite(raw)] = np.nanmax(raw)  # failures: the worst value seen
    y = Standardize.fit(raw).forward(raw)
    x = enc.features(enc.latent([o.assignments for o in history]))
    keep = _subset(y, SUBSET_FIT, np.random.default_rng(seed))
    hyper, _ = fit(x[keep], y[keep])
    inverse = 1.0 / np.asarray(hyper.lengthscale, dtype=float)
    scores = {d.param.name: float(inverse[d.col : d.col + d.width].max()) for d in enc.dims}
    total = sum(scores.values())
    return {name: (s / total if total > 0 else 0.0) for name, s in scores.items()}
