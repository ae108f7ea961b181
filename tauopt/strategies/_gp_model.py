"""GP model: hyperparameters fitted with gpytorch, predictions from a cached
Cholesky factorization in numpy, and log expected improvement.

Why not gpytorch's predictive call: at n=50 it costs 100-145 ms per batch of
2,000 candidates here, while one Cholesky of the training covariance, reused for
every candidate batch and every pending point, costs a few ms.

torch and gpytorch are imported inside `fit` only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

__all__ = ["Hyper", "GPState", "FitTimeout", "fit", "Posterior", "log_ei"]

_SQRT5 = math.sqrt(5.0)
COLD_ITERS = 60  # Adam steps from the prior's mode
WARM_ITERS = 20  # Adam steps from the previous fit's hyperparameters
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


@dataclass(frozen=True)
class GPState:
    """What one fit hands the next one of the same experiment (warm start).
    Only reused when the feature layout is unchanged."""

    n_features: int
    hyper: Hyper
    n_train: int


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
) -> tuple[Hyper, int]:
    """Fit an exact GP (Matern-5/2, ARD) by maximizing the marginal likelihood
    plus priors with Adam. Bounded: at most COLD_ITERS (or WARM_ITERS when warm
    started) steps, and FitTimeout past `deadline` (time.monotonic()).
    Returns the hyperparameters and the number of steps taken."""
    import gpytorch
    import torch
    from gpytorch.constraints import GreaterThan, Interval
    from gpytorch.priors import GammaPrior, LogNormalPrior

    d = x.shape[1]
    tx = torch.as_tensor(x, dtype=torch.float64)
    ty = torch.as_tensor(y, dtype=torch.float64)
    loc, scale = _lengthscale_prior_loc(d), math.sqrt(3.0)

    likelihood = gpytorch.likelihoods.GaussianLikelihood(
        noise_prior=LogNormalPrior(-4.0, 1.0), noise_constraint=GreaterThan(1e-6)
    )

    class _Exact(gpytorch.models.ExactGP):
        def __init__(self) -> None:
            super().__init__(tx, ty, likelihood)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.MaternKernel(
                    nu=2.5,
                    ard_num_dims=d,
                    lengthscale_prior=LogNormalPrior(loc, scale),
                    lengthscale_constraint=Interval(1e-3, 1e3),
                ),
                outputscale_prior=GammaPrior(2.0, 0.15),
                outputscale_constraint=Interval(1e-3, 1e2),
            )

        def forward(self, inp):  # type: ignore[no-untyped-def]
            return gpytorch.distributions.MultivariateNormal(self.mean_module(inp), self.covar_module(inp))

    model = _Exact().to(torch.float64)
    if warm is not None and warm.n_features == d:
        h = warm.hyper
        model.covar_module.base_kernel.lengthscale = torch.as_tensor(np.clip(h.lengthscale, 2e-3, 5e2)).view(1, d)
        model.covar_module.outputscale = float(np.clip(h.outputscale, 2e-3, 50.0))
        likelihood.noise = max(h.noise, 2e-6)
        model.mean_module.constant.data.fill_(h.mean)
        iters = WARM_ITERS
    else:
        # Start at the lengthscale prior's mode, a small noise and unit signal.
        model.covar_module.base_kernel.lengthscale = math.exp(loc - scale**2)
        model.covar_module.outputscale = 1.0
        likelihood.noise = 1e-3
        iters = COLD_ITERS
    if max_iters is not None:
        iters = max_iters

    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    model.train()
    likelihood.train()
    opt = torch.optim.Adam(model.parameters(), lr=_LR)
    steps = 0
    # Force Cholesky (no CG/Lanczos): exact and, at our sizes (<= SUBSET_FIT), faster.
    with gpytorch.settings.max_cholesky_size(100_000), gpytorch.settings.fast_computations(
        covar_root_decomposition=False, log_prob=False, solves=False
    ):
        for _ in range(iters):
            if deadline is not None and time.monotonic() > deadline:
                raise FitTimeout(f"hyperparameter fit passed its deadline after {steps} steps")
            opt.zero_grad()
            loss = -mll(model(tx), ty)
            if not torch.isfinite(loss):
                raise FloatingPointError("marginal likelihood is not finite")
            loss.backward()
            opt.step()
            steps += 1
    with torch.no_grad():
        hyper = Hyper(
            lengthscale=model.covar_module.base_kernel.lengthscale.detach().view(-1).numpy().copy(),
            outputscale=float(model.covar_module.outputscale),
            noise=float(likelihood.noise),
            mean=float(model.mean_module.constant),
        )
    if not (np.all(np.isfinite(hyper.lengthscale)) and math.isfinite(hyper.outputscale) and math.isfinite(hyper.noise)):
        raise FloatingPointError("fitted hyperparameters are not finite")
    return hyper, steps


def matern52(a, b, h: Hyper):  # type: ignore[no-untyped-def]
    """Matern-5/2 covariance between torch float64 matrices (rows are points)."""
    import torch

    ls = torch.as_tensor(h.lengthscale, dtype=torch.float64)
    a = a / ls
    b = b / ls
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    # sqrt has an infinite derivative at 0 (a candidate on a training point):
    # a floor keeps the gradient finite; 1e-30 moves the covariance by ~1e-15.
    r = (sq.clamp_min(0.0) + 1e-30).sqrt()
    return h.outputscale * (1.0 + _SQRT5 * r + (5.0 / 3.0) * r * r) * torch.exp(-_SQRT5 * r)


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
        self._tx = torch.as_tensor(x, dtype=torch.float64)
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

    def predict(self, xc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import torch

        with torch.no_grad():
            mu, sd = self.predict_torch(torch.as_tensor(xc, dtype=torch.float64))
        return mu.numpy(), sd.numpy()

    def predict_torch(self, xc):  # type: ignore[no-untyped-def]
        """Mean and standard deviation as torch tensors, differentiable in xc
        (the gradient-based acquisition optimizer needs d/dx)."""
        import torch

        ks = matern52(xc, self._tx, self.h)
        mu = self.h.mean + ks @ self._alpha
        v = torch.linalg.solve_triangular(self._chol, ks.T, upper=False)
        var = (self.h.outputscale - (v * v).sum(0)).clamp_min(1e-12)
        return mu, var.sqrt()

    def with_points(self, xp: np.ndarray, yp: np.ndarray, noise: float) -> "Posterior":
        return Posterior(
            np.vstack([self.x, xp]), np.concatenate([self.y, yp]), np.concatenate([self.noise, np.full(len(xp), noise)]), self.h
        )


def log_ei(mu: np.ndarray, sigma: np.ndarray, best: float) -> np.ndarray:
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
