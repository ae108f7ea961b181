"""The GP's pieces, each pinned on its own: the gpytorch model and its fit
against gpytorch's own marginal likelihood and posterior, the output warps,
the trust region, the warp choice and the in-place believer updates."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("gpytorch")

from tauopt.models import Metric, Observation  # noqa: E402
from tauopt.space import Space  # noqa: E402
from tauopt.strategies import _gp_trust_region as tr  # noqa: E402
from tauopt.strategies._gp_encode import Encoder  # noqa: E402
from tauopt.strategies._gp_warping import HalfRankWarp, Standardize  # noqa: E402
from tauopt.strategies._request import SuggestRequest  # noqa: E402
from tauopt.strategies.gp import GPConfig, propose_gp  # noqa: E402
from tauopt.schema import parse_metric  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


# -- output warping ------------------------------------------------------------------


def test_standardize_centres_scales_and_inverts() -> None:
    raw = np.exp(np.random.default_rng(4).normal(10.0, 2.0, 500))
    w = Standardize.fit(raw)
    np.testing.assert_allclose(w.forward(raw), (raw - raw.mean()) / raw.std())
    np.testing.assert_allclose(w.inverse(w.forward(raw)), raw, rtol=1e-12)
    assert Standardize.fit(np.full(4, 3.0)).scale == 1.0  # constant values: no division by zero


def test_output_warps_refuse_non_finite_values_with_a_message() -> None:
    for warp in (Standardize, HalfRankWarp):
        with pytest.raises(ValueError, match="impute failures first"):
            warp.fit(np.array([1.0, np.nan]))


# -- trust region --------------------------------------------------------------------


def test_trust_region_doubles_after_three_successes_and_is_capped() -> None:
    t = tr.TrustRegion()
    for _ in range(2):
        t = tr.step(t, True, d=10, batch=1)
    assert t.length == tr.LENGTH_INIT
    t = tr.step(t, True, d=10, batch=1)
    assert t.length == 2 * tr.LENGTH_INIT and t.successes == 0
    for _ in range(30):
        t = tr.step(t, True, d=10, batch=1)
    assert t.length == tr.LENGTH_MAX


@pytest.mark.parametrize(("d", "batch", "tol"), [(10, 1, 10), (20, 1, 20), (10, 4, 3), (10, 8, 2), (2, 8, 1)])
def test_trust_region_halves_after_the_failure_tolerance_and_a_success_resets_the_count(d: int, batch: int, tol: int) -> None:
    assert tr.failure_tolerance(d, batch) == tol
    t = tr.TrustRegion()
    for _ in range(tol - 1):
        t = tr.step(t, False, d, batch)
    assert t.length == tr.LENGTH_INIT
    reset = tr.step(t, True, d, batch)
    assert reset.failures == 0 and reset.length == tr.LENGTH_INIT
    t = tr.step(t, False, d, batch)
    assert t.length == tr.LENGTH_INIT / 2 and t.failures == 0


def test_trust_region_restarts_when_it_collapses() -> None:
    t = tr.TrustRegion()
    halvings = 0
    while t.restarts == 0:
        t = tr.step(t, False, d=10, batch=10)
        halvings += 1
    assert halvings == 7  # 0.8 / 2**7 < 0.5**7 <= 0.8 / 2**6
    assert t == tr.TrustRegion(restarts=1)


def test_replay_counts_batches_after_the_initial_design() -> None:
    init = [5.0, 4.0, 6.0]
    improving = np.array(init + [3.0, 2.0, 1.0])  # three successes in a row, batch 1
    assert tr.replay(improving, 3, d=10, batch=1).length == 2 * tr.LENGTH_INIT
    flat = np.array(init + [4.0] * 10)
    assert tr.replay(flat, 3, d=10, batch=1).length == tr.LENGTH_INIT / 2
    # in batches of 5: the 10 flat values are 2 failed batches, below tolerance 2? ceil(10/5) = 2 -> halved
    assert tr.replay(flat, 3, d=10, batch=5).length == tr.LENGTH_INIT / 2
    # an improvement by less than 1e-3 relative is not a success
    tiny = np.array(init + [4.0 - 1e-4] * 3)
    assert tr.replay(tiny, 3, d=10, batch=1).successes == 0
    # failed observations (NaN) count as failures, never crash
    assert tr.replay(np.array(init + [np.nan] * 10), 3, d=10, batch=1).length == tr.LENGTH_INIT / 2


def test_box_is_centred_stretched_by_lengthscale_and_clipped_to_the_cube() -> None:
    ls = np.array([1.0, 4.0, 0.25])
    lo, hi = tr.box(np.full(3, 0.5), ls, 0.2)
    np.testing.assert_allclose((lo + hi) / 2, 0.5)
    side = hi - lo
    assert math.isclose(float(np.prod(side)), 0.2**3, rel_tol=1e-9)  # volume length**d
    assert side[1] > side[0] > side[2]
    lo, hi = tr.box(np.array([0.0, 1.0, 0.5]), np.ones(3), 0.4)
    np.testing.assert_allclose(lo, [0.0, 0.8, 0.3])
    np.testing.assert_allclose(hi, [0.2, 1.0, 0.7])


# -- the strategy uses them ------------------------------------------------------------


def _sphere_request(d: int, n: int, pending: int = 0) -> SuggestRequest:
    space = Space.parse([{"name": f"x{i}", "type": "double", "bounds": [-1, 1]} for i in range(d)])
    rng = np.random.default_rng(d)
    pts = [space.from_unit(u) for u in rng.random((n + pending, d))]
    hist = tuple(Observation(str(i), "e", None, a, float(sum(v * v for v in a.values()))) for i, a in enumerate(pts[:n]))
    return SuggestRequest(space, Metric("y"), hist, tuple(pts[n:]), 2, 1, n + pending)


def test_gp_searches_inside_the_trust_region_box_in_twelve_dimensions() -> None:
    req = _sphere_request(12, 40, pending=3)
    r = propose_gp(req, np.random.default_rng(0), config=GPConfig(trust_region=True))
    assert r.info.fallback_reason is None
    assert r.info.tr_length is not None
    enc = Encoder(req.space)
    best = min(req.history, key=lambda o: o.value)  # type: ignore[arg-type,return-value]
    center = enc.latent([best.assignments])[0]
    ls = r.state.hyper.lengthscale  # type: ignore[union-attr]
    lo, hi = tr.box(center, ls, r.info.tr_length)
    for a in r.candidates:
        z = enc.latent([a])[0]
        assert np.all(z >= lo - 1e-9) and np.all(z <= hi + 1e-9)
    assert len(r.candidates) == 2 and r.candidates[0] != r.candidates[1]


def _inside_box(req: SuggestRequest, r) -> list[bool]:  # type: ignore[no-untyped-def]
    enc = Encoder(req.space)
    best = min(req.history, key=lambda o: o.value)  # type: ignore[arg-type,return-value]
    lo, hi = tr.box(enc.latent([best.assignments])[0], r.state.hyper.lengthscale, r.info.tr_length)
    return [bool(np.all((z >= lo - 1e-9) & (z <= hi + 1e-9))) for z in enc.latent(list(r.candidates))]


def test_one_pick_of_a_batch_comes_from_the_whole_cube_in_the_trust_region_regime() -> None:
    """GPConfig.global_pick: a batch of four with nothing pending has one pick chosen
    over the whole cube (here outside the box), the others in the box; off, all four in it."""
    req = replace(_sphere_request(12, 40), n=4)
    on = propose_gp(req, np.random.default_rng(0))
    off = propose_gp(req, np.random.default_rng(0), config=GPConfig(global_pick=False))
    assert on.info.fallback_reason is None and len(on.candidates) == 4
    assert _inside_box(req, on).count(False) == 1
    assert _inside_box(req, off) == [True] * 4
    one = propose_gp(replace(req, n=1), np.random.default_rng(0))  # a single pick: in the box
    assert _inside_box(req, one) == [True]


def test_gp_uses_no_trust_region_below_ten_dimensions_or_when_switched_off() -> None:
    on = GPConfig(trust_region=True)
    assert propose_gp(_sphere_request(6, 20), np.random.default_rng(0), config=on).info.tr_length is None
    assert propose_gp(_sphere_request(6, 20), np.random.default_rng(0)).info.tr_length is None
    off = propose_gp(_sphere_request(12, 40), np.random.default_rng(0), config=GPConfig(trust_region=False))
    assert off.info.fallback_reason is None and off.info.tr_length is None


def test_gp_uses_the_trust_region_by_default_from_ten_dimensions() -> None:
    r = propose_gp(_sphere_request(12, 40, pending=3), np.random.default_rng(0))  # on by default: measured (README)
    assert r.info.fallback_reason is None and r.info.tr_length is not None


def test_gp_config_refuses_bad_values_with_what_to_give() -> None:
    with pytest.raises(ValueError, match="large_history: give an integer >= 1"):
        GPConfig(large_history=0)
    with pytest.raises(ValueError, match="min_separation: give a distance >= 0"):
        GPConfig(min_separation=-0.1)


# -- the hyperparameter fit ------------------------------------------------------------


def _bowl(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.random((n, d))
    y = ((x - 0.3) ** 2).sum(1)
    return x, (y - y.mean()) / y.std()


def test_the_model_is_gpytorchs_exact_gp_with_the_priors_and_noise_floor_registered() -> None:
    import gpytorch
    from gpytorch.priors import GammaPrior, LogNormalPrior

    from tauopt.strategies import _gp_fit

    x, y = _bowl(12, 4, 0)
    model = _gp_fit.build(x, y)
    assert isinstance(model, gpytorch.models.ExactGP)
    assert isinstance(model.covar_module, gpytorch.kernels.ScaleKernel)
    base = model.covar_module.base_kernel
    assert isinstance(base, gpytorch.kernels.MaternKernel) and base.nu == 2.5 and base.ard_num_dims == 4
    priors = {name: prior for name, _, prior, _, _ in model.named_priors()}
    ls, os_, noise = (priors[k] for k in (
        "covar_module.base_kernel.lengthscale_prior", "covar_module.outputscale_prior", "likelihood.noise_covar.noise_prior"))
    assert isinstance(ls, LogNormalPrior) and isinstance(os_, GammaPrior) and isinstance(noise, GammaPrior)
    loc, scale = _gp_fit.lengthscale_prior(4)
    assert (float(ls.loc), float(ls.scale)) == pytest.approx((math.sqrt(2) + 0.5 * math.log(4), math.sqrt(3)))
    assert (float(ls.loc), float(ls.scale)) == pytest.approx((loc, scale))
    assert (float(os_.concentration), float(os_.rate)) == pytest.approx((2.0, 0.15))
    assert (float(noise.concentration), float(noise.rate)) == pytest.approx((1.1, 30.0))
    with torch_no_grad():
        model.likelihood.noise_covar.raw_noise.fill_(-1e3)  # as low as the raw value goes
        assert float(model.likelihood.noise) == pytest.approx(_gp_fit.NOISE_MIN)
    assert all(p.dtype == np.float64 or str(p.dtype) == "torch.float64" for p in model.parameters())


def torch_no_grad():  # type: ignore[no-untyped-def]
    import torch

    return torch.no_grad()


def test_exact_settings_give_gpytorchs_marginal_likelihood_by_cholesky_at_a_thousand_points() -> None:
    """Under `exact()` gpytorch's ExactMarginalLogLikelihood at n = 1,000 (past its
    default max_cholesky_size of 800, where it would switch to CG and Lanczos) is
    the exact Gaussian log density plus the priors' log densities, over n."""
    import torch
    from scipy import stats

    from tauopt.strategies import _gp_fit
    from tauopt.strategies._gp_model import Hyper

    rng = np.random.default_rng(0)
    n, d = 1000, 3
    x, y = rng.random((n, d)), rng.standard_normal(n)
    h = Hyper(np.array([0.3, 0.7, 1.5]), 1.3, 0.05, 0.2)
    import gpytorch

    with _gp_fit.exact(), torch.no_grad():
        model = _gp_fit.build(x, y, h)
        model.train()
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
        got = float(mll(model(model.train_inputs[0]), model.train_targets))
        k = model.covar_module(model.train_inputs[0]).to_dense().numpy() + h.noise * np.eye(n)
    loc, scale = _gp_fit.lengthscale_prior(d)
    priors = (stats.lognorm(scale, scale=math.exp(loc)).logpdf(h.lengthscale).sum()
              + stats.gamma(2.0, scale=1 / 0.15).logpdf(h.outputscale) + stats.gamma(1.1, scale=1 / 30.0).logpdf(h.noise))
    want = (stats.multivariate_normal(np.full(n, h.mean), k).logpdf(y) + priors) / n
    assert got == pytest.approx(want, rel=1e-9)


def test_fit_ends_at_a_maximum_of_gpytorchs_marginal_likelihood_above_its_start() -> None:
    """The fitted hyperparameters are a stationary point of gpytorch's
    ExactMarginalLogLikelihood (with the priors) in the fit's log-space
    parameters, and a higher one than the cold start's."""
    import gpytorch
    import torch

    from tauopt.strategies import _gp_fit
    from tauopt.strategies._gp_model import fit

    x, y = _bowl(30, 5, 0)
    h, iters = fit(x, y, max_iters=500)
    assert iters > 1

    def mll_at(hyper, grad: bool = False):  # type: ignore[no-untyped-def]
        with _gp_fit.exact():
            model = _gp_fit.build(x, y, hyper)
            model.train()
            mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
            value = mll(model(model.train_inputs[0]), model.train_targets)
            if not grad:
                return float(value.detach())
            value.backward()
            return torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy()

    assert mll_at(h) > mll_at(_gp_fit.cold_start(5)) + 0.1
    assert np.abs(mll_at(h, grad=True)).max() < 1e-3


def test_noise_prior_lets_a_noiseless_smooth_function_be_fitted_nearly_noiseless() -> None:
    from tauopt.strategies._gp_model import fit

    x, y = _bowl(30, 5, 0)
    h, _ = fit(x, y)
    assert h.noise < 3e-4  # Gamma(1.1, 30) is nearly flat down to the floor: no blur near the optimum


def test_the_posterior_with_pending_points_is_gpytorchs_own(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Posterior (and CandidateBatch's in-place believers) from the fitted
    hyperparameters equal gpytorch's posterior of the same ExactGP conditioned on
    the observations and the pending points at their believed values (a fixed
    noise per point: the observations' fitted noise, PENDING_NOISE for the
    pending ones): mean and variance to 1e-6 relative, on random data."""
    import gpytorch
    import torch

    from tauopt.strategies import _gp_fit
    from tauopt.strategies._gp_model import Posterior, fit
    from tauopt.strategies.gp import PENDING_NOISE

    for seed in range(3):
        rng = np.random.default_rng(seed)
        n, d = 25 + 10 * seed, 2 + seed
        x = rng.random((n, d))
        y = np.sin(5 * x).sum(1) + 0.1 * rng.standard_normal(n)
        y = (y - y.mean()) / y.std()
        h, _ = fit(x, y)
        pend, probe = rng.random((4, d)), rng.random((200, d))
        post = Posterior(x, y, np.full(n, h.noise), h)
        y_p, _ = post.predict(pend)
        mu, sd = post.with_points(pend, y_p, PENDING_NOISE).predict(probe)
        batch = post.candidates(np.vstack([pend, probe]))
        for j in range(len(pend)):
            batch.believe(j, PENDING_NOISE)
        mu_b, sd_b = batch.predict(probe)

        tx = torch.as_tensor(np.vstack([x, pend]))
        ty = torch.as_tensor(np.concatenate([y, y_p]))
        noise = torch.as_tensor(np.concatenate([np.full(n, h.noise), np.full(len(pend), PENDING_NOISE)]))
        lik = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=noise)
        model = _gp_fit.GP(tx, ty, lik).double()
        model.covar_module.base_kernel.lengthscale = torch.as_tensor(h.lengthscale)
        model.covar_module.outputscale = h.outputscale
        model.mean_module.constant = h.mean
        model.eval()
        with _gp_fit.exact(), torch.no_grad():
            f = model(torch.as_tensor(probe))
            want_mu, want_var = f.mean.numpy(), f.variance.numpy()
        np.testing.assert_allclose(mu, want_mu, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(sd**2, want_var, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(mu_b, want_mu, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(sd_b**2, want_var, rtol=1e-6, atol=1e-9)


def test_fit_stops_at_its_deadline() -> None:
    import time

    from tauopt.strategies._gp_model import FitTimeout, fit

    x, y = _bowl(30, 5, 0)
    with pytest.raises(FitTimeout):
        fit(x, y, deadline=time.monotonic() - 1.0)


# -- half-rank output warp ---------------------------------------------------------------


def test_half_rank_warp_is_monotone_and_invertible_everywhere_and_keeps_the_better_half_linear() -> None:
    from tauopt.strategies._gp_warping import HalfRankWarp

    rng = np.random.default_rng(0)
    raw = np.concatenate([rng.random(12), 10 ** rng.uniform(0, 6, 12), [0.5, 0.5, 3.0, 3.0]])  # heavy tail, ties
    w = HalfRankWarp.fit(raw)
    v = np.linspace(-5.0, 3e6, 20001)
    f = w.forward(v)
    assert np.all(np.diff(f) > 0)  # strictly increasing beyond the data too
    np.testing.assert_allclose(w.inverse(f), v, rtol=1e-9, atol=1e-6)
    y = w.forward(raw)
    assert list(np.argsort(y, kind="stable")) == list(np.argsort(raw, kind="stable"))  # same ranking
    good = raw <= np.median(raw)
    slope = np.polyfit(raw[good], y[good], 1)[0]
    np.testing.assert_allclose(y[good], np.polyval(np.polyfit(raw[good], y[good], 1), raw[good]), atol=1e-9)
    assert slope > 0
    # the tail is tamed: the worst value sits a few standard deviations out, not 1e6 of them
    assert y.max() < 4.0 and abs(y.mean()) < 1e-9 and abs(y.std() - 1.0) < 1e-9


def test_leave_one_out_means_equal_the_posterior_without_each_point() -> None:
    from tauopt.strategies._gp_model import Hyper, Posterior

    rng = np.random.default_rng(5)
    x = rng.random((25, 3))
    y = np.sin(4 * x).sum(1) + 0.05 * rng.standard_normal(25)
    h = Hyper(np.array([0.4, 0.6, 0.9]), 1.5, 1e-2, 0.2)
    loo = Posterior(x, y, np.full(25, h.noise), h).loo_mean()
    for i in range(25):
        rest = np.arange(25) != i
        mu, _ = Posterior(x[rest], y[rest], np.full(24, h.noise), h).predict(x[i : i + 1])
        assert loo[i] == pytest.approx(float(mu[0]), abs=1e-8)


def _warp_choice(raw_of, n: int) -> bool:  # type: ignore[no-untyped-def]
    from tauopt.strategies.gp import _choose_warp, fit

    x = np.random.default_rng(0).random((n, 3))
    raw = raw_of(x)
    plain = Standardize.fit(raw).forward(raw)
    warped = HalfRankWarp.fit(raw).forward(raw)
    return _choose_warp(x, raw, (plain, fit(x, plain)[0]), (warped, fit(x, warped)[0]))


@pytest.mark.parametrize("n", [20, 40])
def test_warp_choice_keeps_the_plain_model_of_a_bowl_and_takes_half_rank_for_an_exploding_objective(n: int) -> None:
    assert not _warp_choice(lambda x: ((x - 0.3) ** 2).sum(1), n)  # the plain GP ranks a bowl near perfectly
    assert _warp_choice(lambda x: np.exp(8 * x.sum(1)), n)  # one huge value flattens the rest for the plain GP


def test_warp_choice_needs_enough_points_to_rank() -> None:
    from tauopt.strategies.gp import WARP_MIN_TRAIN

    assert not _warp_choice(lambda x: np.exp(8 * x.sum(1)), WARP_MIN_TRAIN - 1)


def test_chosen_warp_is_reported_and_separation_applies_only_when_half_rank_is_kept() -> None:
    space = Space.parse([{"name": f"x{i}", "type": "double", "bounds": [0, 1]} for i in range(3)])
    rng = np.random.default_rng(0)
    config = GPConfig(choose_warp=True, min_separation=0.02)
    for f, kept in ((lambda u: float(np.exp(8 * u.sum())), True), (lambda u: float(((u - 0.3) ** 2).sum()), False)):
        hist = [Observation(str(i), "e", None, space.from_unit(u), f(u)) for i, u in enumerate(rng.random((30, 3)))]
        r = propose_gp(SuggestRequest(space, Metric("y"), tuple(hist)), np.random.default_rng(1), config=config)
        assert r.info.fallback_reason is None and r.info.half_rank is kept
        plain = propose_gp(
            SuggestRequest(space, Metric("y"), tuple(hist)), np.random.default_rng(1), config=GPConfig(choose_warp=False)
        )
        # the plain model kept: exactly the proposal without the choice (no separation, same fit)
        assert (r.candidates == plain.candidates) is (not kept)


def test_min_separation_keeps_half_rank_batches_of_pending_points_apart(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from tauopt.strategies import gp
    from tauopt.strategies._gp_encode import Encoder as _Enc

    monkeypatch.setattr(gp, "_choose_warp", lambda *a: True)  # the half-rank model kept, whatever the data

    space = Space.parse([{"name": "x1", "type": "double", "bounds": [-5, 10]}, {"name": "x2", "type": "double", "bounds": [0, 15]}])

    def branin(a: dict) -> float:
        x1, x2 = a["x1"], a["x2"]
        return (x2 - 5.1 / (4 * math.pi**2) * x1**2 + 5 / math.pi * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10

    rng = np.random.default_rng(0)
    hist = []
    for i in range(12):
        a = space.from_unit(rng.random(2))
        hist.append(Observation(str(i), "e", None, a, branin(a)))

    def min_gap(config: GPConfig) -> float:
        pending: tuple = ()
        for _ in range(8):
            r = propose_gp(SuggestRequest(space, Metric("y"), tuple(hist), pending), np.random.default_rng(len(pending)), config=config)
            pending = pending + (r.candidates[0],)
        z = _Enc(space).latent(list(pending))
        d = np.sqrt(((z[:, None] - z[None]) ** 2).sum(-1))
        return float(d[np.triu_indices(8, 1)].min())

    assert min_gap(GPConfig(min_separation=0.0)) < 0.02  # the sharper model alone clusters the batch here
    assert min_gap(GPConfig(min_separation=0.02)) >= 0.02


def _toy_posterior(seed: int):  # type: ignore[no-untyped-def]
    """Standardized targets, their posterior, candidates, candidates added later, probes."""
    from tauopt.strategies._gp_model import Hyper, Posterior

    rng = np.random.default_rng(seed)
    x = rng.random((40, 3))
    y = np.sin(3 * x).sum(1)
    y = (y - y.mean()) / y.std()
    h = Hyper(np.array([0.3, 0.5, 0.8]), 1.2, 1e-3, 0.1)
    post = Posterior(x, y, np.full(40, h.noise), h)
    return y, post, rng.random((300, 3)), rng.random((20, 3)), rng.random((50, 3))


def test_a_candidate_batch_updates_as_the_posterior_rebuilt_with_each_believer() -> None:
    """CandidateBatch (a batch's later picks) equals Posterior.with_points point by
    point: means, variances on the set, on points added later and on new points."""
    y, post, cands, extra, probe = _toy_posterior(0)
    batch, rebuilt, every = post.candidates(cands), post, cands
    for step, j in enumerate((3, 77, 3, 310, 12)):  # a repeat, and one added after two believers
        if step == 2:
            batch.add(extra)
            every = np.vstack([cands, extra])
        mu_j = batch.believe(j, 1e-6)
        want_j, _ = rebuilt.predict(every[j : j + 1])
        assert mu_j == pytest.approx(float(want_j[0]), abs=1e-9)
        rebuilt = rebuilt.with_points(every[j : j + 1], want_j, 1e-6)
        mu, sd = rebuilt.predict(every)
        np.testing.assert_allclose(batch.mu, mu, atol=1e-9)
        np.testing.assert_allclose(batch.sd, sd, atol=1e-9)
        np.testing.assert_allclose(np.vstack(batch.predict(probe)), np.vstack(rebuilt.predict(probe)), atol=1e-9)


def test_from_a_large_history_the_warp_choice_and_the_fit_stand_until_the_history_grows(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from tauopt.strategies import gp

    n = GPConfig().large_history
    grown = math.ceil(n * gp.REWARP_GROWTH)
    space = Space.parse([{"name": f"x{i}", "type": "double", "bounds": [0, 1]} for i in range(3)])
    units = np.random.default_rng(0).random((grown, 3))
    hist = [Observation(str(i), "e", None, space.from_unit(u), float(np.exp(8 * u.sum()))) for i, u in enumerate(units)]
    fits: list[int] = []  # the points each fit saw
    real_fit = gp.fit
    monkeypatch.setattr(gp, "fit", lambda *a, **k: fits.append(len(a[0])) or real_fit(*a, **k))

    def ask(m: int, warm, config: GPConfig = GPConfig()):  # type: ignore[no-untyped-def]
        fits.clear()
        r = propose_gp(SuggestRequest(space, Metric("y"), tuple(hist[:m])), np.random.default_rng(m), warm, config=config)
        assert r.info.fallback_reason is None and len(r.candidates) == 1
        return r, len(fits), (r.info.half_rank, r.info.warp_reused, r.info.hyper_reused)

    # chosen: both models fitted on a subset, the half-rank one kept and alone fitted on every point
    first, n_fits, how = ask(n, None)
    assert (how, n_fits, first.state.warp, first.state.fitted_at) == ((True, False, False), 3, (True, n), n)
    assert fits == [gp.WARP_CHOOSE, gp.WARP_CHOOSE, n]
    later, n_fits, how = ask(n + 8, first.state)  # a few observations on, both stand: no fit
    assert (how, n_fits, later.state.warp, later.state.fitted_at) == ((True, True, True), 0, (True, n), n)
    assert later.state.hyper is first.state.hyper and later.info.iterations == 0
    tenth = math.ceil(n * gp.REFIT_GROWTH)  # grown by a tenth: fitted again, the warp still stands
    refit, n_fits, how = ask(tenth, later.state)
    assert (how, n_fits, refit.state.warp, refit.state.fitted_at) == ((True, True, False), 1, (True, n), tenth)
    planted = replace(first.state, warp=(False, n), fitted_at=0)  # a standing choice is obeyed, not re-made
    obeyed, n_fits, how = ask(n + 8, planted)
    assert (how, n_fits, obeyed.state.warp) == ((False, True, False), 1, (False, n))
    again, n_fits, how = ask(grown, planted)  # grown by a quarter: chosen again
    assert (how, n_fits, again.state.warp, again.state.fitted_at) == ((True, False, False), 3, (True, grown), grown)
    small, n_fits, how = ask(100, replace(planted, warp=(False, 100), fitted_at=100))  # below it: every proposal,
    assert (how, fits) == ((True, False, False), [100, 100])  # both models on every point
    always, n_fits, how = ask(n + 8, first.state, GPConfig(large_history=10**9))  # switched off
    assert (how, fits) == ((True, False, False), [n + 8, n + 8])


# -- a long history ------------------------------------------------------------------


def test_a_history_past_the_cap_is_cut_to_the_cap_keeping_each_objectives_best_in_arrival_order() -> None:
    from tauopt.strategies import gp

    space = Space.parse([{"name": "x", "type": "double", "bounds": [0, 1]}])
    n = gp.HISTORY_CAP + 500
    rng = np.random.default_rng(0)
    hist = tuple(
        Observation(str(i), "e", None, {"x": float(u)}, None if i % 9 == 0 else float(u), i % 9 == 0, metrics={"b": float(1 - u)})
        for i, u in enumerate(rng.random(n))
    )
    metrics = (Metric("a"), parse_metric({"name": "b", "objective": "maximize"}))
    request = SuggestRequest(space, metrics[0], hist, (), 1, metrics=metrics)
    cut = gp._bounded(request, np.random.default_rng(1))
    assert len(cut.history) == gp.HISTORY_CAP
    ids = [int(o.id) for o in cut.history]
    assert ids == sorted(ids)  # arrival order kept
    ok = [o for o in hist if not o.failed]
    assert min(ok, key=lambda o: o.value) in cut.history and max(ok, key=lambda o: o.metrics["b"]) in cut.history
    assert gp._bounded(replace(request, history=hist[: gp.HISTORY_CAP]), np.random.default_rng(1)).history == hist[: gp.HISTORY_CAP]


def test_a_proposal_past_the_cap_counts_the_whole_history_for_its_warm_state(monkeypatch: pytest.MonkeyPatch) -> None:
    from tauopt.strategies import gp

    monkeypatch.setattr(gp, "HISTORY_CAP", 40)
    r = propose_gp(_sphere_request(2, 60), np.random.default_rng(0))
    assert r.info.fallback_reason is None
    assert r.state is not None and r.state.fitted_at == 60 and r.state.warp is not None and r.state.warp[1] == 60


def test_a_request_the_engine_cut_counts_the_whole_history_for_its_warm_state(monkeypatch: pytest.MonkeyPatch) -> None:
    from tauopt.strategies import gp

    monkeypatch.setattr(gp, "HISTORY_CAP", 40)
    cut = gp.bound_history(_sphere_request(2, 60))
    assert (len(cut.history), cut.seen, cut.history_size) == (40, 60, 60)
    assert gp.bound_history(cut) is cut  # cut once: a second cut changes nothing
    r = propose_gp(cut, np.random.default_rng(0))
    assert r.info.fallback_reason is None
    assert r.state is not None and r.state.fitted_at == 60 and r.state.warp is not None and r.state.warp[1] == 60


@pytest.mark.anyio
async def test_a_pooled_gp_job_carries_the_cut_history_to_its_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    from tauopt.compute import StrategyPool
    from tauopt.strategies import StrategyJob, StrategyOutcome, gp

    class Recording:  # the executor boundary: what would be pickled to a worker
        def __init__(self) -> None:
            self.jobs: list[StrategyJob] = []

        async def submit(self, key: str, job: StrategyJob) -> StrategyOutcome:
            self.jobs.append(job)
            return StrategyOutcome((), "gp")

        def forget(self, key: str) -> None:
            pass

    monkeypatch.setattr(gp, "HISTORY_CAP", 40)
    executor = Recording()
    request = _sphere_request(2, 60)
    await StrategyPool(executor).propose("e", "gp", request)
    (job,) = executor.jobs
    assert (len(job.request.history), job.request.seen) == (40, 60)
    assert {o.id for o in job.request.history} <= {o.id for o in request.history}


def test_past_the_cap_the_model_sees_the_half_nearest_the_incumbent_and_a_draw_of_the_rest() -> None:
    from tauopt.strategies import gp

    x = np.random.default_rng(0).random((400, 2))
    raw = ((x - 0.3) ** 2).sum(1)
    keep = gp._model_subset(x, raw, 100, np.random.default_rng(1))
    assert len(set(keep)) == len(keep) == 100 and list(keep) == sorted(keep)
    order = np.argsort(np.linalg.norm(x - x[np.argmin(raw)], axis=1))
    assert set(order[:50]) <= set(keep)  # the incumbent's neighbourhood, all of it
    assert set(order[200:]) & set(keep)  # and the far half of the space too
    assert list(gp._model_subset(x[:100], raw[:100], 100, np.random.default_rng(1))) == list(range(100))
