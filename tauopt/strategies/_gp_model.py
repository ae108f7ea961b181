"""GP model: hyperparameters fitted by `_gp_mll`, predictions from a cached
Cholesky factorization in numpy, and log expected improvement.

Why not gpytorch's predictive call: at n=50 it costs 100-145 ms per batch of
2,000 candidates here, while one Cholesky of the training covariance, reused for
every candidate batch and every pending point, costs a few ms.

torch is imported inside functions only; the fit itself is `_gp_mll`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Hyper", "GPState", "FitTimeout", "fit", "Posterior", "CandidateBatch", "log_ei"]

_SQRT5 = math.sqrt(5.0)
COLD_ITERS = 60  # fit iterations (L-BFGS-B, or Adam steps) from the prior's mode
WARM_ITERS = 20  # fit iterations from the previous fit's hyperparameters
_LR = 0.1


class FitTimeout(RuntimeError):
    """The hyperparameter fit ran past its deadline."""


@dataclass(frozen=True)
class Hyper:
    """Fitted hyperparameters in their natural units (inputs in features, outputs standardized)."""

    lengthscale: np.ndarray  # (D,)
    outputscale: float
    noise: float
    mean: float
    warp_a: np.ndarray | None = None  # Kumaraswamy input warp per feature (None: not warped)
    warp_b: np.ndarray | None = None

    def warp_inputs(self, x):  # type: ignore[no-untyped-def]
        """Features (torch) as the kernel sees them."""
        if self.warp_a is None or self.warp_b is None:
            return x
        import torch

        from ._gp_input_warp import warp_torch

        return warp_torch(x, torch.as_tensor(self.warp_a), torch.as_tensor(self.warp_b))


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


def _lengthscale_prior_loc(d: int) -> float:
    # Dimension-scaled log-normal prior (Hvarfner et al. 2024, BoTorch's default):
    # longer lengthscales in higher dimension keep the GP from overfitting.
    return math.sqrt(2.0) + 0.5 * math.log(d)


def fit(
    x: np.ndarray,
    y: np.ndarray,
    warm: GPState | None = None,
    deadline: float | None = None,
    max_iters: int | None = None,
    input_warp: bool = False,
    optimizer: str = "lbfgs",
    noise_prior: str = "gamma",
) -> tuple[Hyper, int]:
    """Fit an exact GP (Matern-5/2, ARD, constant mean; optionally Kumaraswamy
    input warping, `_gp_input_warp`) by maximizing the marginal likelihood plus
    priors (`_gp_mll`). optimizer "lbfgs": L-BFGS-B to convergence, at most
    COLD_ITERS (WARM_ITERS when warm-started) iterations, as Optuna's GPSampler
    and BoTorch fit; "adam": that many Adam steps (the fit before issue 17's
    second round). FitTimeout past `deadline` (time.monotonic()).
    Returns the hyperparameters and the number of iterations taken."""
    from . import _gp_mll

    d = x.shape[1]
    theta = _gp_mll.initial(d, warm.hyper if warm is not None and warm.n_features == d else None, input_warp)
    iters = (WARM_ITERS if warm is not None and warm.n_features == d else COLD_ITERS) if max_iters is None else max_iters
    if optimizer == "adam":
        theta, steps = _gp_mll.adam(x, y, theta, iters, deadline, _LR, noise_prior)
    else:
        theta, steps = _gp_mll.lbfgs(x, y, theta, iters, deadline, noise_prior)
    hyper = _gp_mll.to_hyper(theta, d, input_warp)
    if not (np.all(np.isfinite(hyper.lengthscale)) and math.isfinite(hyper.outputscale) and math.isfinite(hyper.noise)):
        raise FloatingPointError("fitted hyperparameters are not finite")
    return hyper, steps


def matern52(a, b, h: Hyper):  # type: ignore[no-untyped-def]
    """Matern-5/2 covariance between torch float64 matrices of (warped) features."""
    import torch

    ls = torch.as_tensor(h.lengthscale, dtype=torch.float64)
    return h.outputscale * matern52_raw(a / ls, b / ls)


def matern52_raw(a, b):  # type: ignore[no-untyped-def]
    """Unit-scale Matern-5/2 between rows already divided by their lengthscales."""
    import torch

    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    # sqrt has an infinite derivative at 0 (a candidate on a training point):
    # a floor keeps the gradient finite; 1e-30 moves the covariance by ~1e-15.
    r = (sq.clamp_min(0.0) + 1e-30).sqrt()
    return (1.0 + _SQRT5 * r + (5.0 / 3.0) * r * r) * torch.exp(-_SQRT5 * r)


class Posterior:
    """Exact GP posterior under fixed hyperparameters, from one Cholesky factor.

    Linear algebra runs in torch (float64, no autograd): torch is pinned to one
    thread in the pool, while numpy's BLAS may spin threads on a busy machine
    (25x slower here at n=1,000 than one pinned thread).

    `noise` per training point lets pending points (kriging believer) sit in the
    model with a near-zero noise, so the variance at a point being evaluated
    collapses and the acquisition looks elsewhere."""

    def __init__(self, x: np.ndarray, y: np.ndarray, noise: np.ndarray, h: Hyper) -> None:
        import torch

        self.x, self.y, self.noise, self.h = x, y, noise, h
        self._tx = h.warp_inputs(torch.as_tensor(x, dtype=torch.float64))
        k = matern52(self._tx, self._tx, h)
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
        mu, var, _ = self._moments(self.h.warp_inputs(xc))
        return mu, var.sqrt()

    def _moments(self, wx):  # type: ignore[no-untyped-def]
        """Mean, variance and v = L^-1 k(X, wx) at (warped) features wx."""
        import torch

        ks = matern52(wx, self._tx, self.h)
        mu = self.h.mean + ks @ self._alpha
        v = torch.linalg.solve_triangular(self._chol, ks.T, upper=False)
        return mu, (self.h.outputscale - (v * v).sum(0)).clamp_min(1e-12), v

    def candidates(self, feats: np.ndarray) -> "CandidateBatch":
        """This posterior on a fixed set of candidate features, ready to take
        some of them as kriging believers (CandidateBatch)."""
        return CandidateBatch(self, feats)

    def with_points(self, xp: np.ndarray, yp: np.ndarray, noise: float) -> "Posterior":
        return Posterior(
            np.vstack([self.x, xp]), np.concatenate([self.y, yp]), np.concatenate([self.noise, np.full(len(xp), noise)]), self.h
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

        self._post, self._h = post, post.h
        z = torch.zeros
        self._f = z((0, feats.shape[1]), dtype=torch.float64)
        self._var, self._v, self._u = z(0, dtype=torch.float64), z((len(post.y), 0), dtype=torch.float64), z((0, 0), dtype=torch.float64)
        self.mu = np.zeros(0)
        self._believers: list[tuple[int, Any]] = []  # (candidate index, sqrt(its variance + noise) then)
        self._r = z(0, dtype=torch.float64)  # per believer: (believed value - its mean then) / that sqrt
        self.add(feats)

    @property
    def sd(self) -> np.ndarray:
        return self._var.sqrt().numpy()

    def _moments(self, f):  # type: ignore[no-untyped-def]
        """Mean, variance under every believer so far, v and u at warped features f."""
        import torch

        mu, var, v = self._post._moments(f)
        if not self._believers:
            return mu, var, v, torch.zeros((0, len(f)), dtype=torch.float64)
        # u_s = (c0(f, b_s) - sum_{r<s} u_r(f) u_r(b_s)) / d_s for every believer s at once:
        # one triangular solve against A (A[r, s] = u_r(b_s) above the diagonal, d_s on it)
        idx = [j for j, _ in self._believers]
        cov = matern52(f, self._f[idx], self._h) - v.T @ self._v[:, idx]
        a = torch.triu(self._u[:, idx], diagonal=1) + torch.diag(torch.stack([d for _, d in self._believers]))
        u = torch.linalg.solve_triangular(a, cov, upper=True, left=False).T
        return mu + self._r @ u, (var - (u * u).sum(0)).clamp_min(1e-12), v, u

    def predict(self, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import torch

        with torch.no_grad():
            mu, var, _, _ = self._moments(self._h.warp_inputs(torch.as_tensor(feats, dtype=torch.float64)))
        return mu.numpy(), var.sqrt().numpy()

    def predict_u(self, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean, variance and u (one row per believer) at new features: what
        Fantasies needs to move the mean with each believer's drawn outcome."""
        import torch

        with torch.no_grad():
            mu, var, _, u = self._moments(self._h.warp_inputs(torch.as_tensor(feats, dtype=torch.float64)))
        return mu.numpy(), var.numpy(), u.numpy()

    def moments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mean, variance and u (believers x candidates) over every candidate so far."""
        return self.mu, self._var.numpy(), self._u.numpy()

    def believer_draws(self, z: np.ndarray) -> np.ndarray:
        """The believers' values under standard-normal draws z (draws x believers):
        the joint posterior written sequentially, each believer's mean given the
        draws of the ones before plus sqrt(its variance then + noise) * its own
        draw. The believers must sit at their means (value=None)."""
        if not self._believers:
            return np.zeros((len(z), 0))
        idx = [j for j, _ in self._believers]
        d = np.array([float(dj) for _, dj in self._believers])
        mu0 = self.mu[idx]
        cross = np.triu(self._u[:, idx].numpy(), 1)  # u_r(b_s), r < s
        return mu0[None, :] + z @ cross + z * d[None, :]

    def add(self, feats: np.ndarray) -> None:
        """More candidates (appended: their indices follow the ones before)."""
        import torch

        with torch.no_grad():
            f = self._h.warp_inputs(torch.as_tensor(feats, dtype=torch.float64))
            mu, var, v, u = self._moments(f)
            self._f, self._var = torch.vstack([self._f, f]), torch.cat([self._var, var])
            self._v, self._u = torch.hstack([self._v, v]), torch.hstack([self._u, u])
        self.mu = np.concatenate([self.mu, mu.numpy()])

    def believe(self, j: int, noise: float, value: float | None = None) -> float:
        """Candidate j joins as a believer with `noise`, at `value` (None: at its
        own mean, which moves no mean); returns its mean before. A value above
        the mean (a pessimistic believer) raises the means around j by u * r,
        r = (value - mean) / sqrt(variance + noise): the GP's conditioning on one
        more observation, written per believer."""
        import torch

        mu_j = float(self.mu[j])
        with torch.no_grad():
            cov = matern52(self._f, self._f[j : j + 1], self._h)[:, 0] - self._v.T @ self._v[:, j] - self._u.T @ self._u[:, j]
            d = (self._var[j] + noise).sqrt()
            u = cov / d
            r = torch.zeros((), dtype=torch.float64) if value is None else (value - mu_j) / d
            self._var = (self._var - u * u).clamp_min(1e-12)
            self._u = torch.vstack([self._u, u])
            self._r = torch.cat([self._r, r.reshape(1)])
        self.mu = self.mu + (u * r).numpy()
        self._believers.append((j, d))
        return mu_j


class Fantasies:
    """Pending points' outcomes as quasi-random draws of their joint posterior
    instead of one believed value (GPConfig(believer="fantasy")): a candidate's
    score is the mean over the draws of its EI given those outcomes, against
    the incumbent lowered by the draw's best pending value. That is the gain
    q-EI (BoTorch's qLogEI, Optuna 5's GPSampler with running trials) credits
    one more point given the pending ones, with the candidate's own outcome
    integrated exactly and only the pending ones sampled. The kriging believer
    is the one draw at every pending point's mean, which never lowers the
    incumbent by more than the mean and never lets a pending point disappoint."""

    def __init__(self, n_believers: int, rng: np.random.Generator, draws: int = 64) -> None:
        from scipy.special import ndtri
        from scipy.stats import qmc

        dim = max(n_believers, 1)
        u = qmc.Sobol(dim, scramble=True, seed=rng).random(draws)
        self.z = ndtri(np.clip(u, 1e-9, 1 - 1e-9))

    def log_ei(self, batch: CandidateBatch, mu: np.ndarray, var: np.ndarray, u: np.ndarray, best: float) -> np.ndarray:
        """log of the mean EI over the draws at points with mean mu, variance var
        (both given every believer) and u = their believer rows."""
        from scipy.special import logsumexp

        b = u.shape[0]
        if b == 0:
            return log_ei(mu, np.sqrt(var), best)
        if b > self.z.shape[1]:
            raise ValueError(f"Fantasies drawn for {self.z.shape[1]} believers, asked about {b}")
        z = self.z[:, :b]
        thr = np.minimum(best, batch.believer_draws(z).min(axis=1))
        scores = log_ei(mu[None, :] + z @ u, np.sqrt(var)[None, :], thr[:, None])
        return logsumexp(scores, axis=0) - math.log(len(z))


def log_ei(mu: np.ndarray, sigma: np.ndarray, best: float | np.ndarray) -> np.ndarray:
    """log E[max(best - f, 0)] for f ~ N(mu, sigma^2) (minimization), stable far
    into the tail where plain EI underflows to 0 and stops ranking candidates."""
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
