"""The GP's training loss and its two optimizers, in plain torch (float64).

    theta = initial(d, warm_hyper, input_warp)
    theta, iters = lbfgs(x, y, theta, max_iters, deadline)    # or adam(...)
    hyper = to_hyper(theta, d, input_warp)

theta packs, in log space where the quantity is positive:
    log lengthscale (d) | log outputscale | log(noise - NOISE_MIN) | mean | log a (d), log b (d)
the last two blocks only with input warping (`_gp_input_warp`).

Loss: -(log N(y; mean, K + noise I) + log priors) / n, the priors as
densities of the hyperparameters (as gpytorch registers them):
  lengthscale  LogNormal(sqrt2 + log(d)/2, sqrt3)  (Hvarfner et al. 2024)
  outputscale  Gamma(2, 0.15)
  noise        Gamma(1.1, 30) (Optuna's), floored at NOISE_MIN; the fit before
               used LogNormal(-4, 1) ("lognormal", kept for the A/B)
  warp a, b    LogNormal(0, sqrt(0.75))

Why L-BFGS-B (issue 17's diagnosis): 60 Adam steps at rate 0.1 from the
prior's mode stop short of the optimum of this smooth, low-dimensional loss
-- on a 5-D sphere after 20 points the noise was still ~1e-3 of the signal
and the lengthscales half their fitted value, which blurs the posterior near
the incumbent and costs the local precision Optuna's GPSampler has. Optuna and
BoTorch both run L-BFGS-B to convergence; so does this, with the same
iteration bound and deadline as before. The box bounds are L-BFGS-B's own.
Why not gpytorch's modules: the loss is 20 lines, and skipping gpytorch's
lazy tensors makes each evaluation 3-5x cheaper at our sizes.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ._gp_input_warp import BOUNDS as WARP_BOUNDS
from ._gp_input_warp import PRIOR_SCALE as WARP_PRIOR_SCALE
from ._gp_input_warp import warp_torch

__all__ = ["initial", "lbfgs", "adam", "to_hyper", "loss", "NOISE_MIN"]

NOISE_MIN = 1e-6
_LS_BOUNDS = (1e-3, 1e3)
_OS_BOUNDS = (1e-3, 1e2)
_NOISE_MAX = 10.0
_MEAN_BOUNDS = (-10.0, 10.0)  # y is standardized


def _ls_prior(d: int) -> tuple[float, float]:
    return math.sqrt(2.0) + 0.5 * math.log(d), math.sqrt(3.0)


def bounds(d: int, input_warp: bool) -> list[tuple[float, float]]:
    log = lambda lo, hi: (math.log(lo), math.log(hi))  # noqa: E731
    out = [log(*_LS_BOUNDS)] * d + [log(*_OS_BOUNDS), (math.log(1e-9), math.log(_NOISE_MAX)), _MEAN_BOUNDS]
    return out + ([log(*WARP_BOUNDS)] * (2 * d) if input_warp else [])


def initial(d: int, warm, input_warp: bool) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The start: the previous fit's values (clipped into the bounds), else the
    lengthscale prior's mode, unit signal, noise 1e-3 and no warp."""
    loc, scale = _ls_prior(d)
    if warm is not None:
        a = warm.warp_a if warm.warp_a is not None else np.ones(d)
        b = warm.warp_b if warm.warp_b is not None else np.ones(d)
        theta = np.concatenate([np.log(warm.lengthscale), [math.log(warm.outputscale),
                                math.log(max(warm.noise - NOISE_MIN, 1e-9)), warm.mean]])
        warp = np.log(np.concatenate([a, b]))
    else:
        theta = np.concatenate([np.full(d, loc - scale**2), [0.0, math.log(1e-3), 0.0]])
        warp = np.zeros(2 * d)
    theta = np.concatenate([theta, warp]) if input_warp else theta
    lo, hi = np.array(bounds(d, input_warp)).T
    return np.clip(theta, lo, hi)


def _parts(theta, d: int, input_warp: bool):  # type: ignore[no-untyped-def]
    ls, os_, noise = theta[:d].exp(), theta[d].exp(), theta[d + 1].exp() + NOISE_MIN
    mean = theta[d + 2]
    a = b = None
    if input_warp:
        a, b = theta[d + 3 : 2 * d + 3].exp(), theta[2 * d + 3 : 3 * d + 3].exp()
    return ls, os_, noise, mean, a, b


def _log_normal(log_v, loc: float, scale: float):  # type: ignore[no-untyped-def]
    """Sum of log-normal log densities of exp(log_v), up to a constant."""
    return (-((log_v - loc) ** 2) / (2 * scale * scale) - log_v).sum()


def loss(theta, tx, ty, input_warp: bool, noise_prior: str = "gamma"):  # type: ignore[no-untyped-def]
    """The negative log posterior of the hyperparameters per point (see the module doc)."""
    import torch

    from ._gp_model import matern52_raw

    n, d = tx.shape
    ls, os_, noise, mean, a, b = _parts(theta, d, input_warp)
    xw = warp_torch(tx, a, b) if input_warp else tx
    k = matern52_raw(xw / ls, xw / ls) * os_
    k = k + noise * torch.eye(n, dtype=torch.float64)
    chol, info = torch.linalg.cholesky_ex(k)
    if int(info) != 0:
        return None
    r = (ty - mean).unsqueeze(1)
    v = torch.linalg.solve_triangular(chol, r, upper=False)
    mll = -0.5 * (v * v).sum() - chol.diagonal().log().sum() - 0.5 * n * math.log(2 * math.pi)
    loc, scale = _ls_prior(d)
    prior = _log_normal(theta[:d], loc, scale)
    prior = prior + (os_.log() - 0.15 * os_)  # Gamma(2, 0.15), up to a constant
    if noise_prior == "gamma":  # Gamma(1.1, 30), Optuna's: nearly flat down to NOISE_MIN
        prior = prior + (0.1 * noise.log() - 30.0 * noise)
    else:  # LogNormal(-4, 1): holds the noise near 2e-3 of the signal whatever the data say
        prior = prior + _log_normal(noise.log(), -4.0, 1.0)
    if input_warp:
        prior = prior + _log_normal(theta[d + 3 :], 0.0, WARP_PRIOR_SCALE)  # a and b
    return -(mll + prior) / n


class _Objective:
    """theta (numpy) -> (loss, gradient), checking the deadline at every evaluation."""

    def __init__(self, x: np.ndarray, y: np.ndarray, input_warp: bool, deadline: float | None, noise_prior: str) -> None:
        import torch

        self.tx = torch.as_tensor(x, dtype=torch.float64)
        self.ty = torch.as_tensor(y, dtype=torch.float64)
        self.input_warp, self.deadline, self.noise_prior, self.evals = input_warp, deadline, noise_prior, 0

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        import torch

        from ._gp_model import FitTimeout

        if self.deadline is not None and time.monotonic() > self.deadline:
            raise FitTimeout(f"hyperparameter fit passed its deadline after {self.evals} evaluations")
        self.evals += 1
        t = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
        value = loss(t, self.tx, self.ty, self.input_warp, self.noise_prior)
        if value is None or not bool(torch.isfinite(value)):
            return math.inf, np.zeros_like(theta)  # L-BFGS-B's line search backs off
        value.backward()
        grad = t.grad.numpy()  # type: ignore[union-attr]
        return float(value.item()), np.nan_to_num(grad, nan=0.0, posinf=0.0, neginf=0.0)


def lbfgs(
    x: np.ndarray, y: np.ndarray, theta: np.ndarray, max_iters: int, deadline: float | None, noise_prior: str = "gamma"
) -> tuple[np.ndarray, int]:
    from scipy.optimize import minimize

    obj = _Objective(x, y, len(theta) > x.shape[1] + 3, deadline, noise_prior)
    if not math.isfinite(obj(theta)[0]):
        raise FloatingPointError("marginal likelihood is not finite at the start")
    res = minimize(obj, theta, jac=True, method="L-BFGS-B", bounds=bounds(x.shape[1], obj.input_warp),
                   options={"maxiter": max(1, max_iters), "maxfun": 3 * max(1, max_iters) + 5})
    return np.asarray(res.x, dtype=float), int(res.nit)


def adam(
    x: np.ndarray, y: np.ndarray, theta: np.ndarray, steps: int, deadline: float | None, lr: float,
    noise_prior: str = "lognormal",
) -> tuple[np.ndarray, int]:
    import torch

    obj = _Objective(x, y, len(theta) > x.shape[1] + 3, deadline, noise_prior)
    lo, hi = (torch.as_tensor(v, dtype=torch.float64) for v in np.array(bounds(x.shape[1], obj.input_warp)).T)
    t = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([t], lr=lr)
    for _ in range(steps):
        f, g = obj(t.detach().numpy())
        if not math.isfinite(f):
            raise FloatingPointError("marginal likelihood is not finite")
        opt.zero_grad()
        t.grad = torch.as_tensor(g)
        opt.step()
        with torch.no_grad():
            t.copy_(torch.maximum(torch.minimum(t, hi), lo))
    return t.detach().numpy().copy(), steps


def to_hyper(theta: np.ndarray, d: int, input_warp: bool):  # type: ignore[no-untyped-def]
    from ._gp_model import Hyper

    a = np.exp(theta[d + 3 : 2 * d + 3]) if input_warp else None
    b = np.exp(theta[2 * d + 3 : 3 * d + 3]) if input_warp else None
    return Hyper(np.exp(theta[:d]), float(np.exp(theta[d])), float(np.exp(theta[d + 1]) + NOISE_MIN),
                 float(theta[d + 2]), a, b)
