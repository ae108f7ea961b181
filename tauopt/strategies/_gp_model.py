"""GP model: hyperparameters fitted by `_gp_fit` (gpytorch), predictions from
a cached Cholesky factorization of gpytorch's fitted kernel, and log expected
improvement.

Why the posterior is not gpytorch's predictive call: at n=50 it costs 100-145 ms
per batch of 2,000 candidates here, while one Cholesky of the training
covariance, reused for every candidate batch and every pending point (and
updated in place per believer, `CandidateBatch`, which gpytorch has no
counterpart for), costs a few ms. tests/test_gp_pieces.py pins it to gpytorch's
posterior.

torch and gpytorch are imported inside functions only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Hyper", "GPState", "FitTimeout", "fit", "Posterior", "CandidateBatch", "log_ei"]

COLD_ITERS = 60  # L-BFGS-B iterations from the cold start
WARM_ITERS = 20  # L-BFGS-B iterations from the previous fit's hyperparameters


class FitTimeout(RuntimeError):
    """The hyperparameter fit ran past its deadline."""


@dataclass(frozen=True)
class Hyper:
    """Fitted hyperparameters in their natural units (inputs in features, outputs standardized)."""

    lengthscale: np.ndarray  # (D,)
    outputscale: float
    noise: float
    mean: float


@dataclass(frozen=True)
class GPState:
    """What one fit hands the next one of the same experiment (warm start).
    Only reused when the feature layout is unchanged."""

    n_features: int
    hyper: Hyper
    n_train: int
    others: tuple[Hyper, ...] = ()  # the other modelled outputs' fits (EHVI: the second objective)
    # The output warp last chosen (gp._choose_warp): (half_rank kept, history size
    # when chosen); None when no choice was made. gp._standing_warp decides when it stands.
    warp: tuple[bool, int] | None = None
    fitted_at: int = 0  # the history size when `hyper` was last fitted (gp._standing_fit)


def fit(
    x: np.ndarray,
    y: np.ndarray,
    warm: GPState | None = None,
    deadline: float | None = None,
    max_iters: int | None = None,
) -> tuple[Hyper, int]:
    """Fit the exact GP (`_gp_fit`: gpytorch, Matern-5/2 ARD, constant mean,
    priors) by L-BFGS-B on its marginal likelihood: at most COLD_ITERS
    iterations, WARM_ITERS when warm-started from a fit with the same features.
    FitTimeout past `deadline` (time.monotonic()).
    Returns the hyperparameters and the number of iterations taken."""
    from . import _gp_fit

    d = x.shape[1]
    start = warm.hyper if warm is not None and warm.n_features == d else None
    iters = (WARM_ITERS if start is not None else COLD_ITERS) if max_iters is None else max_iters
    hyper, steps = _gp_fit.fit(x, y, start, iters, deadline)
    if not (np.all(np.isfinite(hyper.lengthscale)) and math.isfinite(hyper.outputscale) and math.isfinite(hyper.noise)):
        raise FloatingPointError("fitted hyperparameters are not finite")
    return hyper, steps


class Posterior:
    """Exact GP posterior under fixed hyperparameters, from one Cholesky factor.

    Linear algebra runs in torch (float64, no autograd): torch is pinned to one
    thread in the pool, while numpy's BLAS may spin threads on a busy machine
    (25x slower here at n=1,000 than one pinned thread).

    `noise` per training point lets pending points (kriging believer) sit in the
    model with a near-zero noise, so the variance at a point being evaluated
    collapses and the acquisition looks elsewhere."""

    def __init__(self, x: np.ndarray, y: np.ndarray, noise: np.ndarray, h: Hyper, k_fn: Any = None) -> None:
        import torch

        from ._gp_fit import kernel

        self.x, self.y, self.noise, self.h = x, y, noise, h
        self.kernel = kernel(h) if k_fn is None else k_fn
        self._tx = torch.as_tensor(x, dtype=torch.float64)
        k = self.cov(self._tx, self._tx)
        k.diagonal().add_(torch.as_tensor(noise, dtype=torch.float64))
        jitter = 0.0
        for _ in range(4):  # escalate jitter a few times before giving up
            kj = k if jitter == 0.0 else k + jitter * torch.eye(len(k), dtype=torch.float64)
            chol, info = torch.linalg.cholesky_ex(kj)
            if int(info) == 0 and bool(torch.isfinite(chol).all()):
                break
            jitter = 1e-8 if jitter == 0.0 else jitter * 100
        else:
            raise np.linalg.LinAlgError("covariance matrix is not positive definite even with jitter")
        self._chol = chol
        resid = torch.as_tensor(y - h.mean, dtype=torch.float64).unsqueeze(1)
        self._alpha = torch.cholesky_solve(resid, chol).squeeze(1)

    def cov(self, a, b):  # type: ignore[no-untyped-def]
        """The fitted kernel between torch float64 feature matrices (dense)."""
        return self.kernel.forward(a, b)

    def loo_mean(self) -> np.ndarray:
        """Each training point's leave-one-out predictive mean, from this factor
        alone (Rasmussen & Williams 2006, eq. 5.12): y_i - alpha_i / [K^-1]_ii,
        the same hyperparameters, no refit."""
        import torch

        with torch.no_grad():
            kinv_diag = torch.cholesky_inverse(self._chol).diagonal()
            return self.y - (self._alpha / kinv_diag).numpy()

    def predict(self, xc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import torch

        with torch.no_grad():
            mu, sd = self.predict_torch(torch.as_tensor(xc, dtype=torch.float64))
        return mu.numpy(), sd.numpy()

    def predict_torch(self, xc):  # type: ignore[no-untyped-def]
        """Mean and standard deviation as torch tensors, differentiable in xc
        (the gradient-based acquisition optimizer needs d/dx)."""
        mu, var, _ = self._moments(xc)
        return mu, var.sqrt()

    def _moments(self, wx):  # type: ignore[no-untyped-def]
        """Mean, variance and v = L^-1 k(X, wx) at features wx."""
        import torch

        ks = self.cov(wx, self._tx)
        mu = self.h.mean + ks @ self._alpha
        v = torch.linalg.solve_triangular(self._chol, ks.T, upper=False)
        return mu, (self.h.outputscale - (v * v).sum(0)).clamp_min(1e-12), v

    def candidates(self, feats: np.ndarray) -> "CandidateBatch":
        """This posterior on a fixed set of candidate features, ready to take
        some of them as kriging believers (CandidateBatch)."""
        return CandidateBatch(self, feats)

    def with_points(self, xp: np.ndarray, yp: np.ndarray, noise: float) -> "Posterior":
        return Posterior(
            np.vstack([self.x, xp]), np.concatenate([self.y, yp]), np.concatenate([self.noise, np.full(len(xp), noise)]), self.h,
            self.kernel,
        )


class CandidateBatch:
    """A posterior on a growing set of candidates, some of which join it as kriging
    believers (one batch's picks), updated in place instead of refitted.

    A believer sits at its own predicted mean, so no mean moves; every variance
    drops by the point's posterior covariance with the believer, squared, over
    the believer's variance (plus its noise). Kept per candidate: L^-1 k(X, c)
    and one row per believer (u), so a believer costs one kernel column over the
    set and two products, O(m (n + b)); `predict` on new points (the hill-climb's
    trials) costs what Posterior.predict does plus O(b) small products. Rebuilding
    the posterior with each believer (Posterior.with_points) costs a Cholesky and a
    new triangular solve over every candidate."""

    def __init__(self, post: Posterior, feats: np.ndarray) -> None:
        import torch

        self._post = post
        z = torch.zeros
        self._f = z((0, feats.shape[1]), dtype=torch.float64)
        self._var, self._v, self._u = z(0, dtype=torch.float64), z((len(post.y), 0), dtype=torch.float64), z((0, 0), dtype=torch.float64)
        self.mu = np.zeros(0)
        self._believers: list[tuple[int, Any]] = []  # (candidate index, sqrt(its variance + noise) then)
        self.add(feats)

    @property
    def sd(self) -> np.ndarray:
        return self._var.sqrt().numpy()

    def _moments(self, f):  # type: ignore[no-untyped-def]
        """Mean, variance under every believer so far, v and u at features f."""
        import torch

        mu, var, v = self._post._moments(f)
        if not self._believers:
            return mu, var, v, torch.zeros((0, len(f)), dtype=torch.float64)
        # u_s = (c0(f, b_s) - sum_{r<s} u_r(f) u_r(b_s)) / d_s for every believer s at once:
        # one triangular solve against A (A[r, s] = u_r(b_s) above the diagonal, d_s on it)
        idx = [j for j, _ in self._believers]
        cov = self._post.cov(f, self._f[idx]) - v.T @ self._v[:, idx]
        a = torch.triu(self._u[:, idx], diagonal=1) + torch.diag(torch.stack([d for _, d in self._believers]))
        u = torch.linalg.solve_triangular(a, cov, upper=True, left=False).T
        return mu, (var - (u * u).sum(0)).clamp_min(1e-12), v, u

    def predict(self, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import torch

        with torch.no_grad():
            mu, var, _, _ = self._moments(torch.as_tensor(feats, dtype=torch.float64))
        return mu.numpy(), var.sqrt().numpy()

    def add(self, feats: np.ndarray) -> None:
        """More candidates (appended: their indices follow the ones before)."""
        import torch

        with torch.no_grad():
            f = torch.as_tensor(feats, dtype=torch.float64)
            mu, var, v, u = self._moments(f)
            self._f, self._var = torch.vstack([self._f, f]), torch.cat([self._var, var])
            self._v, self._u = torch.hstack([self._v, v]), torch.hstack([self._u, u])
        self.mu = np.concatenate([self.mu, mu.numpy()])

    def believe(self, j: int, noise: float) -> float:
        """Candidate j joins as a believer with `noise`, at its own mean (which
        moves no mean); returns that mean."""
        import torch

        mu_j = float(self.mu[j])
        with torch.no_grad():
            cov = self._post.cov(self._f, self._f[j : j + 1])[:, 0] - self._v.T @ self._v[:, j] - self._u.T @ self._u[:, j]
            d = (self._var[j] + noise).sqrt()
            u = cov / d
            self._var = (self._var - u * u).clamp_min(1e-12)
            self._u = torch.vstack([self._u, u])
        self._believers.append((j, d))
        return mu_j


def log_ei(mu: np.ndarray, sigma: np.ndarray, best: float | np.ndarray) -> np.ndarray:
    """log E[max(best - f, 0)] for f ~ N(mu, sigma^2) (minimization), stable far
    into the tail where plain EI underflows to 0 and stops ranking candidates.
    Written here: gpytorch has no acquisition functions (BoTorch's LogEI is not a
    dependency), and candidates are scored in numpy from `Posterior`."""
    from scipy.special import erfcx, ndtr

    z = (best - mu) / sigma
    out = np.empty_like(z)
    hi = z > -1.0
    zh = z[hi]
    out[hi] = np.log(zh * ndtr(zh) + np.exp(-0.5 * zh * zh) / math.sqrt(2 * math.pi))
    zl = np.maximum(z[~hi], -1e6)
    # h(z) = phi(z) * (1 + z*sqrt(pi/2)*erfcx(-z/sqrt2)); the bracket ~ 1/z^2 in the tail.
    br = 1.0 + zl * math.sqrt(math.pi / 2) * erfcx(-zl / math.sqrt(2))
    tail = np.where(br > 1e-12, np.log(np.maximum(br, 1e-300)), -2.0 * np.log(-zl))
    out[~hi] = -0.5 * zl * zl - 0.5 * math.log(2 * math.pi) + tail
    return out + np.log(sigma)
