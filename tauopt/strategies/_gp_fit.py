"""The GP as gpytorch builds it, and its hyperparameter fit.

    model = build(x, y, hyper)           # ExactGP, Matern-5/2 ARD under a ScaleKernel
    hyper, iters = fit(x, y, warm, max_iters, deadline)
    k = kernel(hyper)                    # the fitted covariance, for `_gp_model.Posterior`

The model: constant mean, `ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=d))`,
`GaussianLikelihood` with its noise floored at NOISE_MIN (a `GreaterThan`
constraint). Priors, registered on the modules (so gpytorch's
`ExactMarginalLogLikelihood` adds their log densities):
  lengthscale  LogNormal(sqrt2 + log(d)/2, sqrt3)  (Hvarfner et al. 2024, BoTorch's)
  outputscale  Gamma(2, 0.15)
  noise        Gamma(1.1, 30)  (Optuna's: nearly flat down to the floor, so a
               smooth function is fitted nearly noiseless)

Every positive hyperparameter is `exp(raw)` (plus the floor for the noise), so
the optimizer works in log space, inside box bounds on the raw values.

The fit maximizes `ExactMarginalLogLikelihood` (log marginal likelihood plus log
priors, divided by n) with scipy's L-BFGS-B, the gradient from torch autograd,
as BoTorch's `fit_gpytorch_mll_scipy` does: to convergence, at most `max_iters`
iterations, FitTimeout past the deadline. The model is built once per fit; each
evaluation writes the parameter vector in place.

Exact linear algebra: `exact()` turns gpytorch's iterative solvers and
approximations off (`fast_computations` all False, `max_cholesky_size` above any
training set the strategy builds), so every solve and log determinant is a
Cholesky, in float64. It also evaluates kernels at once and skips gpytorch's
debug checks: lazily evaluated kernels tripled the cost of an evaluation at the
sizes fitted here (BENCHMARKS.md, "GP latency and throughput").

torch and gpytorch are imported here, at module level: import this module
inside functions only (importing `tauopt` loads neither).
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Iterator

import gpytorch
import numpy as np
import torch
from gpytorch.constraints import GreaterThan, Positive
from gpytorch.priors import GammaPrior, LogNormalPrior

from ._gp_model import FitTimeout, Hyper

__all__ = ["NOISE_MIN", "GP", "build", "fit", "kernel", "exact", "hyper_of", "likelihood"]

NOISE_MIN = 1e-6
# Training sets stay far below this (SUBSET_POSTERIOR points plus the pending ones).
MAX_CHOLESKY = 100_000
_LS_BOUNDS = (1e-3, 1e3)
_OS_BOUNDS = (1e-3, 1e2)
_NOISE_RAW_BOUNDS = (math.log(1e-9), math.log(10.0))  # noise - NOISE_MIN
_MEAN_BOUNDS = (-10.0, 10.0)  # y is standardized
OUTPUTSCALE_PRIOR = (2.0, 0.15)  # Gamma(concentration, rate)
NOISE_PRIOR = (1.1, 30.0)


@contextlib.contextmanager
def exact() -> Iterator[None]:
    """gpytorch settings for exact GP computations at the sizes the strategy fits."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(gpytorch.settings.fast_computations(covar_root_decomposition=False, log_prob=False, solves=False))
        stack.enter_context(gpytorch.settings.max_cholesky_size(MAX_CHOLESKY))
        stack.enter_context(gpytorch.settings.debug(False))  # skip the per-call input checks
        stack.enter_context(gpytorch.settings.lazily_evaluate_kernels(False))
        yield


def lengthscale_prior(d: int) -> tuple[float, float]:
    """(loc, scale) of the log-normal lengthscale prior in d dimensions."""
    return math.sqrt(2.0) + 0.5 * math.log(d), math.sqrt(3.0)


def _log_space() -> Positive:
    return Positive(transform=torch.exp, inv_transform=torch.log)


def _covar(d: int, priors: bool) -> gpytorch.kernels.ScaleKernel:
    """Matern-5/2 ARD under a scale kernel, both in log space; with the priors, or none (a fitted kernel)."""
    loc, scale = lengthscale_prior(d)
    base = gpytorch.kernels.MaternKernel(
        nu=2.5, ard_num_dims=d, lengthscale_constraint=_log_space(),
        lengthscale_prior=LogNormalPrior(loc, scale, validate_args=False) if priors else None,
    )
    return gpytorch.kernels.ScaleKernel(
        base, outputscale_constraint=_log_space(), outputscale_prior=GammaPrior(*OUTPUTSCALE_PRIOR) if priors else None
    )


class GP(gpytorch.models.ExactGP):  # type: ignore[misc]
    """Exact GP: constant mean, Matern-5/2 ARD kernel under a scale kernel."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, likelihood: gpytorch.likelihoods.Likelihood) -> None:
        super().__init__(x, y, likelihood)
        d = x.shape[-1]
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = _covar(d, priors=True)

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def likelihood() -> gpytorch.likelihoods.GaussianLikelihood:
    return gpytorch.likelihoods.GaussianLikelihood(
        noise_prior=GammaPrior(*NOISE_PRIOR),
        noise_constraint=GreaterThan(NOISE_MIN, transform=torch.exp, inv_transform=torch.log),
    )


def build(x: np.ndarray, y: np.ndarray, hyper: Hyper | None = None) -> GP:
    """The model on (x, y), float64, at `hyper` (None: the start of a cold fit)."""
    tx = torch.as_tensor(x, dtype=torch.float64)
    ty = torch.as_tensor(y, dtype=torch.float64)
    model = GP(tx, ty, likelihood()).double()
    set_hyper(model, hyper if hyper is not None else cold_start(x.shape[1]))
    return model


def cold_start(d: int) -> Hyper:
    """The lengthscale prior's mode, unit signal, noise 1e-3, zero mean."""
    loc, scale = lengthscale_prior(d)
    return Hyper(np.full(d, math.exp(loc - scale**2)), 1.0, 1e-3 + NOISE_MIN, 0.0)


def _parameters(model: GP) -> list[tuple[torch.nn.Parameter, tuple[float, float]]]:
    """The raw parameters in a fixed order, each with its box bounds."""
    log = lambda lo, hi: (math.log(lo), math.log(hi))  # noqa: E731
    k = model.covar_module
    return [
        (k.base_kernel.raw_lengthscale, log(*_LS_BOUNDS)),
        (k.raw_outputscale, log(*_OS_BOUNDS)),
        (model.likelihood.noise_covar.raw_noise, _NOISE_RAW_BOUNDS),
        (model.mean_module.raw_constant, _MEAN_BOUNDS),
    ]


def set_hyper(model: GP, h: Hyper) -> None:
    """Write h into the model's modules (clipped into the fit's bounds)."""
    raw = _clip(np.concatenate([
        np.log(h.lengthscale), [math.log(h.outputscale), math.log(max(h.noise - NOISE_MIN, 1e-9)), h.mean]
    ]), model)
    _write(model, raw)


def _clip(raw: np.ndarray, model: GP) -> np.ndarray:
    lo, hi = np.array(_bounds(model)).T
    return np.clip(raw, lo, hi)


def _bounds(model: GP) -> list[tuple[float, float]]:
    return [b for p, b in _parameters(model) for _ in range(p.numel())]


def _write(model: GP, raw: np.ndarray) -> None:
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(torch.as_tensor(raw, dtype=torch.float64), [p for p, _ in _parameters(model)])


def hyper_of(model: GP) -> Hyper:
    """The model's hyperparameters in their natural units."""
    k = model.covar_module
    with torch.no_grad():
        return Hyper(
            k.base_kernel.lengthscale.reshape(-1).numpy().copy(), float(k.outputscale),
            float(model.likelihood.noise.reshape(-1)[0]), float(model.mean_module.constant.reshape(-1)[0]),
        )


class _Objective:
    """Raw parameter vector (numpy) -> (-mll, gradient), checking the deadline at
    every evaluation. The last evaluation is kept: the start's check and the
    optimizer's first call are one evaluation."""

    def __init__(self, model: GP, deadline: float | None) -> None:
        self.model, self.deadline, self.evals = model, deadline, 0
        self._last: tuple[bytes, tuple[float, np.ndarray]] | None = None
        self.mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
        self.params = [p for p, _ in _parameters(model)]
        self.x, self.y = model.train_inputs[0], model.train_targets

    def __call__(self, raw: np.ndarray) -> tuple[float, np.ndarray]:
        key = np.asarray(raw, dtype=np.float64).tobytes()
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        out = self._evaluate(raw)
        self._last = (key, out)
        return out

    def _evaluate(self, raw: np.ndarray) -> tuple[float, np.ndarray]:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise FitTimeout(f"hyperparameter fit passed its deadline after {self.evals} evaluations")
        self.evals += 1
        torch.nn.utils.vector_to_parameters(torch.as_tensor(raw, dtype=torch.float64), self.params)
        for p in self.params:
            p.grad = None
        try:
            value = -self.mll(self.model(self.x), self.y)
        except (gpytorch.utils.errors.NotPSDError, torch.linalg.LinAlgError):
            return math.inf, np.zeros_like(raw)  # L-BFGS-B's line search backs off
        if not bool(torch.isfinite(value)):
            return math.inf, np.zeros_like(raw)
        value.backward()
        grad = torch.cat([p.grad.reshape(-1) for p in self.params]).numpy()  # type: ignore[union-attr]
        return float(value.item()), np.nan_to_num(grad, nan=0.0, posinf=0.0, neginf=0.0)


def fit(
    x: np.ndarray, y: np.ndarray, warm: Hyper | None, max_iters: int, deadline: float | None
) -> tuple[Hyper, int]:
    """Maximize the marginal likelihood plus priors from `warm` (None: the cold
    start) by L-BFGS-B; returns the fitted hyperparameters and the iterations taken."""
    from scipy.optimize import minimize

    with exact():
        model = build(x, y, warm)
        model.train()
        obj = _Objective(model, deadline)
        start = torch.nn.utils.parameters_to_vector(obj.params).detach().numpy().copy()
        if not math.isfinite(obj(start)[0]):
            raise FloatingPointError("marginal likelihood is not finite at the start")
        res = minimize(obj, start, jac=True, method="L-BFGS-B", bounds=_bounds(model),
                       options={"maxiter": max(1, max_iters), "maxfun": 3 * max(1, max_iters) + 5})
        _write(model, np.asarray(res.x, dtype=float))
        return hyper_of(model), int(res.nit)


def kernel(h: Hyper) -> Any:
    """The fitted covariance function (a gpytorch ScaleKernel), float64, no gradients to its parameters."""
    k = _covar(len(h.lengthscale), priors=False).double()
    with torch.no_grad():
        k.base_kernel.lengthscale = torch.as_tensor(h.lengthscale, dtype=torch.float64).reshape(1, -1)
        k.outputscale = torch.as_tensor(h.outputscale, dtype=torch.float64)
    k.requires_grad_(False)
    return k
