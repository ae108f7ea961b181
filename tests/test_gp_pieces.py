"""The GP's refinements, each pinned on its own: the gradient acquisition
optimizer, the output warp, and the trust region (issue 17)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("gpytorch")

from tauopt.models import Metric, Observation  # noqa: E402
from tauopt.space import Space  # noqa: E402
from tauopt.strategies import _gp_trust_region as tr  # noqa: E402
from tauopt.strategies._gp_acquisition import log_ei_torch, maximize  # noqa: E402
from tauopt.strategies._gp_encode import Encoder  # noqa: E402
from tauopt.strategies._gp_model import log_ei  # noqa: E402
from tauopt.strategies._gp_warping import (  # noqa: E402
    HalfRankWarp,
    OutputWarp,
    box_cox,
    box_cox_inverse,
    yeo_johnson,
    yeo_johnson_inverse,
)
from tauopt.strategies._request import SuggestRequest  # noqa: E402
from tauopt.strategies.gp import GPConfig, propose_gp  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():  # type: ignore[no-untyped-def]
    from tauopt.compute._workers import torch_pinned as _torch_pinned

    with _torch_pinned():
        yield


# -- acquisition optimizer ------------------------------------------------------------


def _quadratic(center: np.ndarray, weights: np.ndarray):  # type: ignore[no-untyped-def]
    import torch

    c, w = torch.as_tensor(center), torch.as_tensor(weights)
    return lambda x: -((x - c) ** 2 * w).sum(1)


def test_maximize_converges_to_the_optimum_of_a_known_quadratic_from_every_start() -> None:
    rng = np.random.default_rng(0)
    center = np.array([0.31, 0.72, 0.5, 0.13, 0.9])
    weights = np.array([1.0, 3.0, 10.0, 30.0, 100.0])  # condition 100
    starts = rng.random((6, 5))
    end, val = maximize(_quadratic(center, weights), starts, np.zeros(5), np.ones(5))
    assert np.abs(end - center).max() < 1e-5
    assert np.all(val > -1e-9)


def test_maximize_stops_at_the_box_when_the_optimum_is_outside_and_never_ends_worse_than_its_start() -> None:
    center = np.array([1.5, 0.4])
    starts = np.array([[0.1, 0.1], [0.9, 0.9]])
    fn = _quadratic(center, np.ones(2))
    end, val = maximize(fn, starts, np.zeros(2), np.array([0.8, 1.0]))
    np.testing.assert_allclose(end, [[0.8, 0.4], [0.8, 0.4]], atol=1e-6)
    import torch

    start_val = fn(torch.as_tensor(starts)).numpy()
    assert np.all(val >= start_val)


def test_log_ei_torch_matches_the_numpy_log_ei_and_keeps_finite_gradients_deep_in_the_tail() -> None:
    import torch

    mu = torch.linspace(-3.0, 60.0, 200, dtype=torch.float64, requires_grad=True)
    sd = torch.full((200,), 0.7, dtype=torch.float64)
    v = log_ei_torch(mu, sd, 0.0)
    np.testing.assert_allclose(v.detach().numpy(), log_ei(mu.detach().numpy(), sd.numpy(), 0.0), rtol=1e-9, atol=1e-9)
    v.sum().backward()
    g = mu.grad.numpy()  # type: ignore[union-attr]
    assert np.all(np.isfinite(g)) and np.all(g < 0)  # a higher mean is always worse


# -- output warping ------------------------------------------------------------------


@pytest.mark.parametrize("lam", [-2.0, -0.5, 0.0, 0.5, 1.0, 1.7, 2.0])
def test_yeo_johnson_is_strictly_increasing_and_inverted_exactly_for_every_lambda(lam: float) -> None:
    x = np.linspace(-5.0, 5.0, 401)
    t = yeo_johnson(x, lam)
    assert np.all(np.diff(t) > 0)
    np.testing.assert_allclose(yeo_johnson_inverse(t, lam), x, atol=1e-9)
    xp = np.geomspace(1e-6, 1e3, 401)
    b = box_cox(xp, lam)
    assert np.all(np.diff(b) > 0)
    np.testing.assert_allclose(box_cox_inverse(b, lam), xp, rtol=1e-9, atol=1e-10)  # (x**2 - 1) / 2 rounds tiny x


def test_output_warp_compresses_a_heavy_tail_keeps_the_order_and_inverts() -> None:
    rng = np.random.default_rng(3)
    raw = np.exp(rng.normal(0.0, 3.0, 200))  # values spanning ~8 orders of magnitude
    w = OutputWarp.fit(raw)
    y = w.forward(raw)
    assert w.kind == "bc" and abs(w.lam) < 0.2  # chosen by the data: ~ a log, for log-normal values
    assert np.array_equal(np.argsort(y, kind="stable"), np.argsort(raw, kind="stable"))
    assert abs(float(y.mean())) < 1e-9 and abs(float(y.std()) - 1.0) < 1e-9
    np.testing.assert_allclose(w.inverse(y), raw, rtol=1e-7)
    # the skew that swamped the signal is gone
    skew = lambda v: float(((v - v.mean()) ** 3).mean() / v.std() ** 3)  # noqa: E731
    assert skew(raw) > 5 and abs(skew(y)) < 1.0


def test_output_warp_of_values_of_any_sign_is_yeo_johnson_and_inverts() -> None:
    rng = np.random.default_rng(5)
    raw = np.exp(rng.normal(0.0, 2.0, 100)) - 3.0  # heavy tail, some values negative
    w = OutputWarp.fit(raw)
    assert w.kind == "yj" and w.lam < 1.0
    y = w.forward(raw)
    assert np.array_equal(np.argsort(y, kind="stable"), np.argsort(raw, kind="stable"))
    np.testing.assert_allclose(w.inverse(y), raw, rtol=1e-7, atol=1e-9)


def test_output_warp_leaves_gaussian_data_almost_alone_and_can_be_switched_off() -> None:
    rng = np.random.default_rng(4)
    raw = rng.normal(10.0, 2.0, 500)
    assert abs(OutputWarp.fit(raw).lam - 1.0) < 0.3
    off = OutputWarp.fit(np.exp(raw), warp=False)
    assert off.lam == 1.0
    np.testing.assert_allclose(off.forward(np.exp(raw)), (np.exp(raw) - np.exp(raw).mean()) / np.exp(raw).std())


def test_output_warp_refuses_non_finite_values_with_a_message() -> None:
    with pytest.raises(ValueError, match="impute failures first"):
        OutputWarp.fit(np.array([1.0, np.nan]))


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


def test_gp_uses_no_trust_region_below_ten_dimensions_or_when_switched_off() -> None:
    on = GPConfig(trust_region=True)
    assert propose_gp(_sphere_request(6, 20), np.random.default_rng(0), config=on).info.tr_length is None
    assert propose_gp(_sphere_request(6, 20), np.random.default_rng(0)).info.tr_length is None
    off = propose_gp(_sphere_request(12, 40), np.random.default_rng(0), config=GPConfig(trust_region=False))
    assert off.info.fallback_reason is None and off.info.tr_length is None


def test_gp_uses_the_trust_region_by_default_from_ten_dimensions() -> None:
    r = propose_gp(_sphere_request(12, 40, pending=3), np.random.default_rng(0))  # on by default: measured (README)
    assert r.info.fallback_reason is None and r.info.tr_length is not None


def test_the_opt_in_refinements_propose_distinct_points_without_falling_back() -> None:
    req = _sphere_request(5, 30, pending=2)
    for config in (GPConfig(gradient=True), GPConfig(output_warp=True), GPConfig(True, True, True)):
        r = propose_gp(req, np.random.default_rng(0), config=config)
        assert r.info.fallback_reason is None, (config, r.info.fallback_reason)
        assert len(r.candidates) == 2 and r.candidates[0] != r.candidates[1]


def test_a_batch_with_exploring_picks_keeps_the_kriging_believer_picks_and_adds_distinct_ones() -> None:
    """The engine's batch of 8 (drawn 32, 2 pending): picks 0 and 4 explore
    (draw index a multiple of 4); the six exploiting picks come first and are
    the kriging believer's own six."""
    req = replace(_sphere_request(5, 30, pending=2), n=8)
    old = propose_gp(req, np.random.default_rng(0))
    mix = propose_gp(req, np.random.default_rng(0), config=GPConfig(believer="median", explore_every=4))
    assert old.info.fallback_reason is None and mix.info.fallback_reason is None
    assert mix.candidates[:6] == old.candidates[:6]
    assert len({tuple(sorted(c.items())) for c in mix.candidates}) == 8


def test_gp_config_refuses_an_unknown_believer_or_share_with_what_to_give() -> None:
    with pytest.raises(ValueError, match="give 'mean', 'fantasy', 'incumbent', 'median' or 'max'"):
        GPConfig(believer="optimistic")
    with pytest.raises(ValueError, match="integer >= 1"):
        GPConfig(explore_every=0)
    with pytest.raises(ValueError, match="large_history: give an integer >= 1"):
        GPConfig(large_history=0)


def test_the_gradient_ascent_ends_no_lower_than_the_candidate_search_on_the_same_posterior() -> None:
    from tauopt.strategies import gp

    req = _sphere_request(2, 15)
    enc = Encoder(req.space)
    rng = np.random.default_rng(0)
    pts = [o.assignments for o in req.history]
    raw = np.array([o.value for o in req.history], dtype=float)
    y = (raw - raw.mean()) / raw.std()
    x = enc.features(enc.latent(pts))
    hyper, _ = gp.fit(x, y)
    post = gp.Posterior(x, y, np.full(len(y), hyper.noise), hyper)
    best = float(y.min())
    lo, hi = np.zeros(2), np.ones(2)
    z = gp._initial_candidates(enc, pts, raw, len(y), rng, lo, hi)
    mu, sd = post.predict(enc.features(z, project=False))
    s = log_ei(mu, sd, best)
    up = gp._ascend(enc, post, best, z, s, lo, hi)
    mu2, sd2 = post.predict(enc.features(up, project=False))
    assert float(log_ei(mu2, sd2, best).max()) >= float(s.max()) - 1e-12


# -- input warping (Kumaraswamy) -------------------------------------------------------


def test_input_warp_is_monotone_and_invertible_for_every_shape_in_its_bounds() -> None:
    from tauopt.strategies._gp_input_warp import BOUNDS, unwarp, warp

    x = np.linspace(0.0, 1.0, 2001)
    for a in (BOUNDS[0], 0.5, 1.0, 2.0, BOUNDS[1]):
        for b in (BOUNDS[0], 0.7, 1.0, 3.0, BOUNDS[1]):
            u = warp(x, a, b)
            assert np.all(np.diff(u) >= 0), (a, b)  # never decreasing, even where float64 saturates
            inner = (u > 1e-12) & (u < 1.0 - 1e-12)  # strictly increasing and invertible wherever float64 resolves it
            assert inner.mean() > 0.97, (a, b)
            assert np.all(np.diff(u[inner]) > 0), (a, b)
            assert u[0] >= 0.0 and u[-1] <= 1.0
            np.testing.assert_allclose(unwarp(u[inner], a, b), x[inner], atol=1e-4)
    np.testing.assert_allclose(warp(x, 1.0, 1.0), x, atol=3e-6)  # a = b = 1: the identity


def test_input_warp_in_torch_matches_numpy_and_has_finite_gradients_at_the_edges() -> None:
    import torch

    from tauopt.strategies._gp_input_warp import warp, warp_torch

    x = torch.tensor([[0.0, 1.0], [0.3, 0.999999], [1.0, 0.0]], dtype=torch.float64, requires_grad=True)
    a = torch.tensor([0.2, 5.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([5.0, 0.2], dtype=torch.float64, requires_grad=True)
    u = warp_torch(x, a, b)
    np.testing.assert_allclose(u.detach().numpy(), warp(x.detach().numpy(), a.detach().numpy(), b.detach().numpy()))
    u.sum().backward()
    for g in (x.grad, a.grad, b.grad):
        assert torch.isfinite(g).all()  # type: ignore[union-attr]


def test_fitted_input_warp_stretches_the_coordinate_where_the_function_moves_fast_and_leaves_a_linear_one() -> None:
    from tauopt.strategies._gp_model import fit

    rng = np.random.default_rng(1)
    x = rng.random((40, 2))
    y = np.sin(1.0 / (x[:, 0] + 0.08)) + 0.3 * x[:, 1]  # fast near x0 = 0, linear in x1
    y = (y - y.mean()) / y.std()
    h, _ = fit(x, y, input_warp=True, max_iters=200)
    assert h.warp_a is not None and h.warp_b is not None
    assert h.warp_a[0] < 0.5  # a < 1: a steep warp near 0 gives that end more room
    assert abs(math.log(h.warp_a[1])) < 0.1 and abs(math.log(h.warp_b[1])) < 0.1
    plain, _ = fit(x, y, max_iters=200)
    assert plain.warp_a is None


def test_posterior_with_input_warp_interpolates_its_training_points() -> None:
    from tauopt.strategies._gp_model import Hyper, Posterior

    rng = np.random.default_rng(2)
    x = rng.random((12, 3))
    y = rng.normal(size=12)
    h = Hyper(np.full(3, 0.3), 1.0, 1e-6, 0.0, np.array([0.3, 1.0, 3.0]), np.array([2.0, 1.0, 0.5]))
    mu, sd = Posterior(x, y, np.full(12, h.noise), h).predict(x)
    np.testing.assert_allclose(mu, y, atol=1e-3)
    assert np.all(sd < 1e-2)


# -- the hyperparameter fit ------------------------------------------------------------


def _bowl(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.random((n, d))
    y = ((x - 0.3) ** 2).sum(1)
    return x, (y - y.mean()) / y.std()


def test_lbfgs_fit_converges_to_a_lower_loss_than_the_adam_steps_it_replaced() -> None:
    import torch

    from tauopt.strategies import _gp_mll
    from tauopt.strategies._gp_model import fit

    x, y = _bowl(30, 5, 0)

    def loss_of(h) -> float:  # type: ignore[no-untyped-def]
        theta = _gp_mll.initial(5, h, False)
        return float(_gp_mll.loss(torch.as_tensor(theta), torch.as_tensor(x), torch.as_tensor(y), False, "lognormal"))

    lb, _ = fit(x, y, optimizer="lbfgs", noise_prior="lognormal", max_iters=500)
    ad, _ = fit(x, y, optimizer="adam", noise_prior="lognormal")
    assert loss_of(lb) < loss_of(ad) - 1e-3
    theta = torch.as_tensor(_gp_mll.initial(5, lb, False)).requires_grad_(True)
    _gp_mll.loss(theta, torch.as_tensor(x), torch.as_tensor(y), False, "lognormal").backward()
    assert float(theta.grad.abs().max()) < 1e-3  # type: ignore[union-attr]  # a stationary point


def test_noise_prior_lets_a_noiseless_smooth_function_be_fitted_nearly_noiseless() -> None:
    from tauopt.strategies._gp_model import fit

    x, y = _bowl(30, 5, 0)
    gamma, _ = fit(x, y, noise_prior="gamma")
    lognormal, _ = fit(x, y, noise_prior="lognormal")
    # the old prior held the noise at ~2e-3 of unit variance: blur near the optimum
    assert lognormal.noise > 1e-3
    assert gamma.noise < 3e-4


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


def test_half_rank_targets_reach_the_gp_when_switched_on() -> None:
    space = Space.parse([{"name": f"x{i}", "type": "double", "bounds": [0, 1]} for i in range(2)])
    rng = np.random.default_rng(3)
    hist = []
    for i in range(12):
        u = rng.random(2)
        hist.append(Observation(str(i), "e", None, space.from_unit(u), float(10 ** (6 * u[0]) + u[1])))
    req = SuggestRequest(space, Metric("y"), tuple(hist))
    r = propose_gp(req, np.random.default_rng(0), config=GPConfig(half_rank=True))
    assert r.info.fallback_reason is None and len(r.candidates) == 1


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
    plain = OutputWarp.fit(raw, warp=False).forward(raw)
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


def test_min_separation_keeps_half_rank_batches_of_pending_points_apart() -> None:
    from tauopt.strategies._gp_encode import Encoder as _Enc

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

    assert min_gap(GPConfig(half_rank=True, min_separation=0.0)) < 0.02  # the sharper model alone clusters the batch here
    assert min_gap(GPConfig(half_rank=True, min_separation=0.02)) >= 0.02


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


def test_a_candidate_batch_with_pessimistic_believers_equals_the_rebuilt_posterior() -> None:
    """A believer above its mean (GPConfig(believer="median")) moves the means
    around it: CandidateBatch's in-place update equals the posterior rebuilt
    with the believers at those values, on the set, on points added later and
    on new points."""
    y, post, cands, extra, probe = _toy_posterior(1)
    batch, rebuilt, every = post.candidates(cands), post, cands
    lie = float(np.median(y))
    for step, j in enumerate((3, 77, 310, 12)):
        if step == 2:
            batch.add(extra)
            every = np.vstack([cands, extra])
        before = float(batch.mu[j])
        assert batch.believe(j, 1e-6, max(before, lie)) == before
        rebuilt = rebuilt.with_points(every[j : j + 1], np.array([max(before, lie)]), 1e-6)
        mu, sd = rebuilt.predict(every)
        np.testing.assert_allclose(batch.mu, mu, atol=1e-8)
        np.testing.assert_allclose(batch.sd, sd, atol=1e-8)
        np.testing.assert_allclose(np.vstack(batch.predict(probe)), np.vstack(rebuilt.predict(probe)), atol=1e-8)


def test_fantasy_draws_of_the_believers_have_the_joint_posterior_covariance() -> None:
    """CandidateBatch.believer_draws turns standard-normal draws into the
    believers' values: their mean and covariance are the posterior's (without
    the believers) at those points."""
    _, post, cands, _, _ = _toy_posterior(2)
    pend = cands[[5, 40, 41, 200]]
    batch = post.candidates(pend)
    for j in range(len(pend)):
        batch.believe(j, 1e-6)
    z = np.random.default_rng(0).standard_normal((200_000, len(pend)))
    draws = batch.believer_draws(z)
    mu, _ = post.predict(pend)
    np.testing.assert_allclose(draws.mean(0), mu, atol=0.01)
    np.testing.assert_allclose(np.cov(draws.T), _posterior_cov(post, pend), atol=0.01)


def test_fantasy_ei_is_the_mean_ei_over_posteriors_rebuilt_with_each_draw() -> None:
    """Fantasies.log_ei at a point equals, draw by draw, the EI of the posterior
    rebuilt with the pending points at that draw's values, against the incumbent
    lowered to the draw's best pending value, averaged over the draws: q-EI's gain
    for one more point, computed without a posterior per draw."""
    from scipy.special import logsumexp

    from tauopt.strategies._gp_model import Fantasies

    y, post, cands, _, probe = _toy_posterior(3)
    pend = cands[[7, 8, 120]]
    batch = post.candidates(pend)
    for j in range(len(pend)):
        batch.believe(j, 1e-6)
    fz = Fantasies(len(pend), np.random.default_rng(0), draws=16)
    best = float(y.min())
    mu, var, u = batch.predict_u(probe)
    got = fz.log_ei(batch, mu, var, u, best)
    values = batch.believer_draws(fz.z)
    want = []
    for q in range(len(fz.z)):
        m, sd = post.with_points(pend, values[q], 1e-6).predict(probe)
        want.append(log_ei(m, sd, min(best, float(values[q].min()))))
    np.testing.assert_allclose(got, logsumexp(want, axis=0) - math.log(len(want)), rtol=1e-6, atol=1e-6)
    # no pending point: the plain log EI
    plain = post.candidates(probe)
    m0, v0, u0 = plain.moments()
    np.testing.assert_allclose(fz.log_ei(plain, m0, v0, u0, best), log_ei(*post.predict(probe), best), atol=1e-12)


def test_a_fantasy_batch_proposes_distinct_points_away_from_the_pending_ones() -> None:
    """GPConfig(believer="fantasy"), the engine's batch of 8 with 2 pending:
    eight distinct points, none a pending one, no fallback; one pick without a
    pending point is the kriging believer's own (no believer to draw)."""
    req = replace(_sphere_request(5, 30, pending=2), n=8)
    r = propose_gp(req, np.random.default_rng(0), config=GPConfig(believer="fantasy"))
    assert r.info.fallback_reason is None
    keys = {tuple(sorted(c.items())) for c in r.candidates}
    assert len(keys) == 8 and not keys & {tuple(sorted(p.items())) for p in req.pending}
    one = replace(_sphere_request(5, 30), n=1)
    assert propose_gp(one, np.random.default_rng(0), config=GPConfig(believer="fantasy")).candidates == \
        propose_gp(one, np.random.default_rng(0)).candidates


def _posterior_cov(post, pts: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The joint posterior covariance at pts: k(P, P) - v'v with v = L^-1 k(X, P)."""
    import torch

    from tauopt.strategies._gp_model import matern52

    with torch.no_grad():
        wp = post.h.warp_inputs(torch.as_tensor(pts, dtype=torch.float64))
        _, _, v = post._moments(wp)
        return (matern52(wp, wp, post.h) - v.T @ v).numpy()


def _crowded_incumbent(seed: int):  # type: ignore[no-untyped-def]
    """Two separated wells, the deeper one at A holding the incumbent and 7
    pending points (a batch that collapsed onto one basin, as 8 workers' kriging
    believers did on Hartmann-6: open points within 0.008 of each other)."""
    from scipy.stats import qmc

    a, b = np.array([0.25, 0.3]), np.array([0.75, 0.7])

    def wells(u: np.ndarray) -> float:
        return float(-math.exp(-((u - a) ** 2).sum() / 0.005) - 0.8 * math.exp(-((u - b) ** 2).sum() / 0.005))

    space = Space.parse([{"name": f"x{i}", "type": "double", "bounds": [0, 1]} for i in range(2)])
    u0 = np.vstack([qmc.Sobol(2, scramble=True, rng=seed).random(16), a + [0.02, -0.015], b + [-0.02, 0.02]])
    hist = tuple(Observation(str(i), "e", None, space.from_unit(u), wells(u)) for i, u in enumerate(u0))
    rng = np.random.default_rng(seed)
    pending = tuple(space.from_unit(a + 0.02 * rng.normal(size=2)) for _ in range(7))
    return space, hist, pending


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_exploring_pick_keeps_away_from_a_crowded_basin_and_the_others_exploit_as_before(seed: int) -> None:
    space, hist, pending = _crowded_incumbent(seed)
    crowd = np.array([[p["x0"], p["x1"]] for p in pending])
    # the standardized model, where the kriging believer crowds this basin (the
    # default's chosen half-rank model leaves it by itself here)
    plain = GPConfig(choose_warp=False)
    mix = replace(plain, believer="median", explore_every=4)

    def pick(config: GPConfig, drawn: int, pend: tuple = pending) -> np.ndarray:
        r = propose_gp(SuggestRequest(space, Metric("y"), hist, pend, 1, 0, drawn), np.random.default_rng(0), config=config)
        assert r.info.fallback_reason is None
        return np.array([r.candidates[0]["x0"], r.candidates[0]["x1"]])

    def gap(z: np.ndarray) -> float:
        return float(np.sqrt(((crowd - z) ** 2).sum(1)).min())

    old = pick(plain, 24)
    assert gap(pick(mix, 24)) > gap(old) + 0.01  # drawn 24: a multiple of 4, the exploring pick
    np.testing.assert_array_equal(pick(mix, 25), old)  # the other picks: the kriging believer's
    np.testing.assert_array_equal(pick(mix, 24, ()), pick(plain, 24, ()))  # one worker: unchanged


def test_from_a_large_history_the_warp_choice_and_the_fit_stand_until_the_history_grows(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from tauopt.strategies import gp

    n = GPConfig().large_history
    grown = math.ceil(n * gp.REWARP_GROWTH)
    space = Space.parse([{"name": f"x{i}", "type": "double", "bounds": [0, 1]} for i in range(3)])
    units = np.random.default_rng(0).random((grown, 3))
    hist = [Observation(str(i), "e", None, space.from_unit(u), float(np.exp(8 * u.sum()))) for i, u in enumerate(units)]
    fits: list[int] = []
    real_fit = gp.fit
    monkeypatch.setattr(gp, "fit", lambda *a, **k: fits.append(1) or real_fit(*a, **k))

    def ask(m: int, warm, config: GPConfig = GPConfig()):  # type: ignore[no-untyped-def]
        fits.clear()
        r = propose_gp(SuggestRequest(space, Metric("y"), tuple(hist[:m])), np.random.default_rng(m), warm, config=config)
        assert r.info.fallback_reason is None and len(r.candidates) == 1
        return r, len(fits), (r.info.half_rank, r.info.warp_reused, r.info.hyper_reused)

    first, n_fits, how = ask(n, None)  # chosen: both models fitted, the half-rank one kept
    assert (how, n_fits, first.state.warp, first.state.fitted_at) == ((True, False, False), 2, (True, n), n)
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
    assert (how, n_fits, again.state.warp, again.state.fitted_at) == ((True, False, False), 2, (True, grown), grown)
    small, n_fits, how = ask(100, replace(planted, warp=(False, 100), fitted_at=100))  # below it: every proposal
    assert (how, n_fits) == ((True, False, False), 2)
    always, n_fits, how = ask(n + 8, first.state, GPConfig(large_history=10**9))  # switched off
    assert (how, n_fits) == ((True, False, False), 2)
