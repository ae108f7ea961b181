"""Expected hypervolume improvement (EHVI) for two objectives, exact and in closed form.

    log_ehvi(mu, sd, front, ref) -> (m,)    # minimization; mu, sd: (m, 2) independent Gaussians

The formula (Emmerich, Giannakoglou & Naujoks 2006, "Single- and multiobjective
evolutionary optimization assisted by Gaussian random field metamodels", IEEE
TEC 10(4); in the box-decomposition form of Yang, Emmerich, Deutz & Baeck 2019,
"Efficient computation of expected hypervolume improvement using box
decomposition algorithms", J. Global Optim. 75, section 3): sort the
non-dominated points p_1..p_k of the front by the first objective (so the second
decreases) and cut the region the front does not dominate (below `ref`) into
k + 1 stripes, stripe i = [l_i, u_i) x (-inf, v_i] with

    l_0 = -inf, u_0 = p_1[0], v_0 = ref[1];   l_i = p_i[0], u_i = p_{i+1}[0] (u_k = ref[0]), v_i = p_i[1].

A new point y improves stripe i by (u_i - max(y_0, l_i))^+ (v_i - y_1)^+, so with
y_0, y_1 independent

    EHVI = sum_i (psi_0(u_i) - psi_0(l_i)) psi_1(v_i),   psi_j(b) = E[(b - y_j)^+]
         = sigma_j (z Phi(z) + phi(z)), z = (b - mu_j) / sigma_j,

using (u - max(y, l))^+ = (u - y)^+ - (l - y)^+ for l <= u. psi_j(b) is the
expected improvement below b, whose logarithm `_gp_model.log_ei` already
computes stably far into the tail, so log EHVI keeps ranking candidates where
EHVI itself underflows (as log EI does for one objective).

Written here: gpytorch has no acquisition functions; BoTorch's (qLogEHVI) are
not a dependency, and this closed form for two objectives is a few lines.
"""

from __future__ import annotations

import numpy as np

from ..pareto import nondominated
from ._gp_model import log_ei

__all__ = ["stripes", "log_ehvi", "ehvi"]


def stripes(front: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(l, u, v) of the k + 1 stripes of the region below `ref` no point of `front` dominates."""
    pts = np.asarray(front, dtype=float).reshape(-1, 2)
    pts = pts[np.all(pts < ref, axis=1)]
    if len(pts):
        pts = pts[nondominated(pts)]
        pts = pts[np.argsort(pts[:, 0], kind="stable")]
    l = np.concatenate([[-np.inf], pts[:, 0]])
    u = np.concatenate([pts[:, 0], [ref[0]]])
    v = np.concatenate([[ref[1]], pts[:, 1]])
    return l, u, v


def log_ehvi(mu: np.ndarray, sd: np.ndarray, front: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """log EHVI of each row (minimization): -inf only where every stripe's term is exactly 0."""
    l, u, v = stripes(front, np.asarray(ref, dtype=float))
    m = len(mu)

    def log_psi(j: int, b: np.ndarray) -> np.ndarray:  # (m, stripes): log E[(b - y_j)^+]
        out = np.full((m, len(b)), -np.inf)
        fin = np.isfinite(b)
        out[:, fin] = log_ei(np.repeat(mu[:, j : j + 1], fin.sum(), 1), np.repeat(sd[:, j : j + 1], fin.sum(), 1), b[None, fin])
        return out

    lu, ll, lv = log_psi(0, u), log_psi(0, l), log_psi(1, v)
    with np.errstate(divide="ignore", invalid="ignore"):
        # log(psi(u) - psi(l)) = log psi(u) + log(1 - exp(log psi(l) - log psi(u))); psi(l) <= psi(u)
        width = lu + np.log1p(-np.minimum(np.exp(ll - lu), 1.0 - 1e-16))
    terms = width + lv
    terms[np.isnan(terms)] = -np.inf  # a stripe of zero width, or both logs -inf
    top = terms.max(axis=1)
    safe = np.where(np.isfinite(top), top, 0.0)
    return np.where(np.isfinite(top), safe + np.log(np.exp(terms - safe[:, None]).sum(axis=1)), -np.inf)


def ehvi(mu: np.ndarray, sd: np.ndarray, front: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.exp(log_ehvi(mu, sd, front, ref))
