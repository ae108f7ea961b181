"""The Gaussian-process strategy: pending-aware log-EI over an exact GP (torch).

    propose(request, rng) -> candidates                  (the pure strategy interface)
    propose_gp(request, rng, warm, deadline_s) -> GPResult  (warm start in and out)

Choices (see the README `gp` section):
- Encoding: `_gp_encode` (unit cube, log scales in log space, integers relaxed
  then rounded, categoricals one-hot, inactive conditionals at a neutral value).
- Model: an exact GP in gpytorch (`_gp_fit`: `ExactGP`, Matern-5/2 ARD under
  a scale kernel, Gaussian likelihood with a noise floor, priors on every
  hyperparameter), fitted by L-BFGS-B on gpytorch's `ExactMarginalLogLikelihood`;
  candidates are scored from a cached Cholesky of the fitted kernel
  (`_gp_model.Posterior`).
- Outputs: value * metric.sign (so smaller is better), then, per fit, either
  standardized or half-rank warped (`_gp_warping.HalfRankWarp`): both models
  are fitted and the one whose leave-one-out means rank the observations better
  is kept (GPConfig.choose_warp, `_choose_warp`; from 8 training points, one
  objective; from GPConfig.large_history = 256 observations the choice stands,
  carried in the warm state, until the history has grown by a quarter:
  `_standing_warp`, and the fit itself until it has grown by a tenth:
  `_standing_fit`; when it chooses again there, both are fitted on WARP_CHOOSE
  points and only the chosen one on all: `_choose_on_subset`).
- Failed observations are kept, imputed with the worst finite value seen, so
  the model steers away from regions that crash; never a crash here.
- Pending points (open suggestions, and points already chosen in this call)
  enter by *kriging believer*: each is added to the posterior at its predicted
  mean with a near-zero noise, and the incumbent becomes min(best, believed
  values). The variance at and around a pending point collapses, so N parallel
  workers get N different points.
- Acquisition: log expected improvement, scored on 256-2,048 scrambled Sobol
  candidates plus perturbations of the best observed points, then a hill-climb
  of the best few over the continuous coordinates; the winners are projected to the space and re-scored,
  and the best unused one is taken. In a batch (the engine's job asks for one
  point per worker) each pick joins as a believer by an in-place variance
  update of every candidate scored so far (`_gp_model.CandidateBatch`); a later
  pick re-scores them and hill-climbs its best few, with no new posterior and
  no new Sobol set.
- Several objectives (GPConfig.multi_objective): two by expected hypervolume
  improvement (`_gp_ehvi`, exact; one GP per objective, pending points believed
  in both and on the front), three or four by ParEGO (`_scalarize`: a random
  Chebyshev scalarization per suggestion, modelled as one output). Constraint
  metrics add log P(feasible) to either (`_Feasibility`).
- Trust region (`_gp_trust_region`, on by default; GPConfig(trust_region=False)) when
  there are >= 10 continuous coordinates: candidates and the optimizer stay in
  a TuRBO box around the incumbent that grows and shrinks with success,
  replayed from the history; one pick of each batch is chosen over the whole
  cube (GPConfig.global_pick, `_wants_global`).
- Bounded cost: hyperparameters come from at most COLD_ITERS L-BFGS-B iterations
  of the marginal likelihood (WARM_ITERS when warm-started), on at most SUBSET_FIT points; the posterior
  conditions on at most SUBSET_POSTERIOR points, so cost stops growing
  cubically. Past SUBSET_POSTERIOR both see a local subset (`_model_subset`:
  the half nearest the incumbent plus the best fifth by value and a uniform
  draw of the rest); below it the fit's points are the best fifth and a
  uniform draw (`_subset`). A history longer than HISTORY_CAP is first cut by
  the best fifth and a uniform draw (`_bounded`; the engine applies it before a
  job leaves for its worker, `bound_history`), so the linear work (pickling,
  encoding, targets, the dedup set) stops growing too.
- Any failure (Cholesky, NaN, a fit past its deadline, anything else) falls
  back to the experiment's Sobol sequence and says why in GPInfo.fallback_reason.
"""

from __future__ import annotations

import importlib.util
import math
import time
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..models import Value
from . import _gp_trust_region as tr
from ._gp_ehvi import log_ehvi
from ._gp_encode import Encoder
from ._gp_model import CandidateBatch, GPState, Hyper, Posterior, fit, log_ei
from ._gp_warping import HalfRankWarp, Standardize
from ._job import StrategyJob, StrategyOutcome, request_rng
from ._registry import design_size
from ._request import SuggestRequest
from ._scalarize import Targets, _value, chebyshev, draw_weights, normalized, targets

__all__ = ["available", "bound_history", "propose", "propose_gp", "run", "sobol_fallback", "GPResult", "GPInfo", "GPState", "GPConfig", "HVTargets"]

SUBSET_FIT = 300
SUBSET_POSTERIOR = 1000
HISTORY_CAP = 5000
PENDING_NOISE = 1e-6  # in standardized units: a pending point is "known" to the model
_TOP_K = 5
_ROUNDS = (0.1, 0.03, 0.01, 0.003, 0.001)
_PER_ROUND = 32


@dataclass(frozen=True)
class GPConfig:
    """The GP strategy's choices (README, `gp` section)."""

    # A TuRBO box around the incumbent (`_gp_trust_region`) when there are at least
    # tr.MIN_DIM continuous coordinates; False: the global search at every size.
    trust_region: bool = True
    # Per fit, model both the standardized and the half-rank-warped outputs and keep
    # the model whose leave-one-out means rank the observations better (_choose_warp;
    # one objective only). False: standardized outputs only.
    choose_warp: bool = True
    # When the half-rank model is kept, a new point keeps this far (unit-cube distance,
    # times the search box's mean side) from pending points when the acquisition offers
    # one that does; 0: off. The standardized model's kriging believer spreads its
    # batches alone, so it never applies there.
    min_separation: float = 0.02
    # From this many observations a proposal reuses the previous one's choice of warp
    # (until the history grows by a quarter) and hyperparameters (by a tenth) instead
    # of fitting again (_standing_warp, _standing_fit); below it, every proposal fits.
    large_history: int = 256
    # Several objectives: "ehvi" (expected hypervolume improvement, `_gp_ehvi`; two
    # objectives only, three or four fall back to ParEGO) or "parego" (a random
    # Chebyshev scalarization per suggestion, `_scalarize`). "auto": EHVI for two
    # objectives, ParEGO for three or four.
    multi_objective: str = "auto"
    # With the trust region on, one pick of each batch (a call for several points, as
    # the engine's job for a round of workers) is chosen by the acquisition over the
    # whole cube unless a pending point already lies outside the region: several
    # workers all searching around one incumbent lost more than one exploring gives up.
    # False: every pick in the region.
    global_pick: bool = True

    def __post_init__(self) -> None:
        if self.multi_objective not in ("auto", "ehvi", "parego"):
            raise ValueError(f"GPConfig.multi_objective must be 'auto', 'ehvi' or 'parego', not {self.multi_objective!r}")
        if self.large_history < 1:
            raise ValueError(f"GPConfig.large_history: give an integer >= 1 (a huge one: fit on every proposal), got {self.large_history}")
        if self.min_separation < 0:
            raise ValueError(f"GPConfig.min_separation: give a distance >= 0 (0: off), got {self.min_separation}")

    def mo_mode(self, k: int) -> str:
        """How k objectives are modelled: "single", "parego" or "ehvi"."""
        if k == 1:
            return "single"
        return "ehvi" if k == 2 and self.multi_objective in ("auto", "ehvi") else "parego"


DEFAULT = GPConfig()


@dataclass(frozen=True)
class GPInfo:
    fallback_reason: str | None
    fit_seconds: float
    iterations: int = 0
    n_train: int = 0
    subset: bool = False  # True when the history was larger than SUBSET_POSTERIOR/SUBSET_FIT
    acq_seconds: float = 0.0  # of fit_seconds (the whole call), the acquisition's share
    tr_length: float | None = None  # trust-region side, when one was used
    no_model: bool = False  # nothing to model yet: the Sobol answer is the design, not a failure
    half_rank: bool = False  # the model kept was fitted to half-rank-warped outputs
    warp_reused: bool = False  # the previous fit's choice of warp stood (one fit, not two; _standing_warp)
    hyper_reused: bool = False  # the previous fit's hyperparameters stood (no fit; _standing_fit)


@dataclass(frozen=True)
class GPResult:
    candidates: list[dict[str, Value]]
    state: GPState | None  # hand this back as `warm` on the next call for the same experiment
    info: GPInfo


@lru_cache(maxsize=1)
def available() -> bool:
    """True when torch and gpytorch are installed. Checked without importing them,
    so asking does not load torch into the engine's process."""
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "gpytorch"))


def propose(request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Value]]:
    return propose_gp(request, rng).candidates


class _NoModel(Exception):
    """Nothing to model yet (not a failure, but the answer is still Sobol)."""


def propose_gp(
    request: SuggestRequest,
    rng: np.random.Generator,
    warm: GPState | None = None,
    deadline_s: float | None = None,
    config: GPConfig = DEFAULT,
) -> GPResult:
    t0 = time.monotonic()
    deadline = None if deadline_s is None else t0 + deadline_s
    try:
        cands, state, info = _propose(request, rng, warm, deadline, config)
        return GPResult(cands, state, GPInfo(None, time.monotonic() - t0, *info))
    except _NoModel as exc:
        return GPResult(sobol_fallback(request, rng), warm, GPInfo(str(exc), time.monotonic() - t0, no_model=True))
    except Exception as exc:  # noqa: BLE001 - an ask never fails because the model did
        reason = f"{type(exc).__name__}: {exc}"[:300]
    return GPResult(sobol_fallback(request, rng), warm, GPInfo(reason, time.monotonic() - t0))


def sobol_fallback(request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Value]]:
    """The experiment's own Sobol sequence (continuing from `drawn`)."""
    from ._sobol import propose as sobol

    return sobol(request, rng)


def _subset(y: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """Indices: all when len(y) <= cap, else the best cap//5 plus a random draw of the rest."""
    if len(y) <= cap:
        return np.arange(len(y))
    order = np.argsort(y, kind="stable")
    best = order[: cap // 5]
    rest = rng.choice(order[cap // 5 :], size=cap - len(best), replace=False)
    return np.sort(np.concatenate([best, rest]))


def _model_subset(x: np.ndarray, raw: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the observations (features x, values raw) a model sees past cap: the
    half nearest the incumbent (unit-cube distance over the features), plus the best
    fifth and a uniform draw of the rest (`_subset`), so the model is sharp where the
    next point is sought and still sees the whole space. Chosen over `_subset` alone by
    search quality at n = 2,000 (benchmarks/gp_bounded_model.py)."""
    if len(raw) <= cap:
        return np.arange(len(raw))
    dist = np.linalg.norm(x - x[int(np.argmin(raw))], axis=1)
    near = np.argsort(dist, kind="stable")[: cap // 2]
    rest = np.setdiff1d(np.arange(len(raw)), near)
    return np.sort(np.concatenate([near, rest[_subset(raw[rest], cap - len(near), rng)]]))


def _bounded(request: SuggestRequest, rng: np.random.Generator) -> SuggestRequest:
    """The request with at most HISTORY_CAP observations, so a proposal's cost stops
    growing with the history: beyond it, the best fifth (by rank in any objective, so
    each objective's best and the front's ends stay) plus a uniform random draw of the
    rest, in arrival order. The model conditions on at most SUBSET_POSTERIOR of them
    anyway, drawn the same way; what the cap drops is the rest of the dedup set (the
    engine still refuses a used point) and, with a trust region, the replay of its
    successes over the whole history."""
    history = request.history
    if len(history) <= HISTORY_CAP:
        return request
    objectives = [m for m in request.all_metrics if m.objective is not None]
    rank = np.full(len(history), len(history))
    # a history held as columns hands over the first objective's values without an object per row
    columns = getattr(history, "objective_values", None)
    first = columns() if columns is not None and len(objectives) == 1 else None
    for m in objectives:
        v = m.sign * first if first is not None else np.fromiter((m.sign * _value(m, objectives[0].name, o) for o in history), float, len(history))
        v[~np.isfinite(v)] = np.inf  # failed or missing: the worst
        rank = np.minimum(rank, np.argsort(np.argsort(v, kind="stable"), kind="stable"))
    keep = _subset(rank.astype(float), HISTORY_CAP, rng)
    return replace(request, history=tuple(history[i] for i in keep), seen=request.history_size)


def bound_history(request: SuggestRequest) -> SuggestRequest:
    """The engine's cut (the registry's `bound_history`): `_bounded` before a job crosses
    to its worker, with a draw of its own reproducible from (seed, drawn)."""
    return _bounded(request, np.random.default_rng([request.seed, request.drawn, 0xB0]))


def _n_candidates(n_train: int) -> int:
    # The variance solve costs n_train^2 per candidate: keep it near 4e8 flops.
    raw = 4e5 / max(n_train, 1)
    return int(min(2048, max(256, 2 ** round(math.log2(max(raw, 1.0))))))


def _sobol_unit(d: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n scrambled Sobol points with a fresh scramble (a one-off engine, not the
    experiments' cached ones); n is drawn up to a power of two, as scipy prefers."""
    from scipy.stats import qmc

    engine = qmc.Sobol(d, scramble=True, rng=int(rng.integers(2**31 - 1)))
    return np.asarray(engine.random_base2(max(0, (n - 1).bit_length()))[:n], dtype=float)


def _targets(t: Targets, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(raw, y): values to minimize with failures imputed as the worst seen, and
    the GP's targets (standardized). Several objectives: a fresh ParEGO
    scalarization (see _scalarize) on every call."""
    k = t.objectives.shape[1]
    raw = t.objectives[:, 0].copy() if k == 1 else chebyshev(t.objectives, draw_weights(k, rng))
    raw[~np.isfinite(raw)] = np.nanmax(raw)  # failures: the worst value seen
    if not (math.isfinite(float(raw.mean())) and math.isfinite(float(raw.std()))):
        raise FloatingPointError("observed values overflow when standardized")
    return raw, Standardize.fit(raw).forward(raw)


WARP_MIN_TRAIN = 8  # below this the leave-one-out ranks are too few to choose by: standardize


def _choose_warp(x: np.ndarray, raw: np.ndarray, plain: tuple[np.ndarray, Hyper], warped: tuple[np.ndarray, Hyper]) -> bool:
    """True when the half-rank model's leave-one-out means rank the observed
    values better than the standardized model's (Kendall's tau against raw; both
    warps keep the order, so the ranks compare where likelihoods of differently
    warped targets would not). A tie keeps the standardized model."""
    if len(raw) < WARP_MIN_TRAIN:
        return False
    from scipy.stats import kendalltau

    taus = []
    for y, h in (plain, warped):
        loo = Posterior(x, y, np.full(len(y), h.noise), h).loo_mean()
        tau = kendalltau(loo, raw).statistic
        taus.append(float(tau) if math.isfinite(tau) else -1.0)
    return taus[1] > taus[0]


# From GPConfig.large_history observations on, the warp is chosen on this many of the
# fit's points (both models fitted there), and only the chosen model is fitted on all
# of them, warm-started from its fit on the subset: one full fit instead of two.
WARP_CHOOSE = 100


def _choose_on_subset(
    x: np.ndarray, raw: np.ndarray, plain: np.ndarray, warped: np.ndarray, fit_idx: np.ndarray,
    warm: GPState | None, deadline: float | None, rng: np.random.Generator,
) -> tuple[bool, Hyper, int]:
    """(half-rank kept, the kept model's hyperparameters on the subset, iterations):
    _choose_warp on WARP_CHOOSE of the fit's points, drawn as the fit's are."""
    sub = fit_idx[_subset(raw[fit_idx], WARP_CHOOSE, rng)]
    h_plain, it_plain = fit(x[sub], plain[sub], warm, deadline)
    h_warped, it_warped = fit(x[sub], warped[sub], warm, deadline)
    half_rank = _choose_warp(x[sub], raw[sub], (plain[sub], h_plain), (warped[sub], h_warped))
    return half_rank, h_warped if half_rank else h_plain, it_plain + it_warped


# From GPConfig.large_history observations on, a proposal reuses what the previous
# one settled when the history has grown little since (the warm state carries it):
# the choice of warp (a second fit) until it has grown by REWARP_GROWTH, the
# hyperparameters (the fit itself; the posterior still conditions on every point)
# until it has grown by REFIT_GROWTH. At n=1,000, 8 workers and 1 s evaluations,
# fitting twice per job made the 8-point job 1.1 s, longer than an evaluation.
REWARP_GROWTH = 1.25
REFIT_GROWTH = 1.1


def _grown_less(since: int, n: int, growth: float) -> bool:
    return since <= n < since * growth


def _reusable(warm: GPState | None, n_features: int, n: int, config: GPConfig) -> GPState | None:
    """The warm state when what it settled may stand for a history of n observations:
    the same feature layout and a large history (config.large_history); else None."""
    return warm if warm is not None and warm.n_features == n_features and n >= config.large_history else None


def _standing_warp(warm: GPState | None, n_features: int, n: int, config: GPConfig) -> tuple[bool, int] | None:
    """The warm state's choice of warp, (half-rank kept, history size when chosen),
    when it still stands for a history of n observations; None: choose again."""
    w = _reusable(warm, n_features, n, config)
    return w.warp if w is not None and w.warp is not None and _grown_less(w.warp[1], n, REWARP_GROWTH) else None


def _standing_fit(warm: GPState | None, n_features: int, n: int, config: GPConfig) -> bool:
    """True when the warm state's hyperparameters stand for a history of n observations
    (one modelled output: EHVI's second objective is always fitted again)."""
    w = _reusable(warm, n_features, n, config)
    return w is not None and not w.others and _grown_less(w.fitted_at, n, REFIT_GROWTH)


def _propose(
    request: SuggestRequest, rng: np.random.Generator, warm: GPState | None, deadline: float | None, config: GPConfig
) -> tuple[list[dict[str, Value]], GPState, tuple[int, int, bool, float, float | None, bool, bool, bool, bool]]:
    space = request.space
    enc = Encoder(space)
    if enc.n_features == 0:
        raise _NoModel("no tunable parameter: nothing to model")
    n_seen = request.history_size  # what the warm state's "has the history grown?" counts
    request = _bounded(request, rng)
    finite = [o for o in request.history if not o.failed and o.value is not None and math.isfinite(o.value)]
    if not finite:
        raise _NoModel("no successful observation yet")
    points = [o.assignments for o in request.history]
    t = targets(request.all_metrics, request.history)
    mode = config.mo_mode(t.objectives.shape[1])
    if mode == "ehvi":
        hv = HVTargets.of(t, rng)
        raw, ys = hv.rank, hv.y
    else:
        raw, y = _targets(t, rng)
        ys = y[:, None]
    x_all = enc.features(enc.latent(points))
    keep = _model_subset(x_all, raw, SUBSET_POSTERIOR, rng)
    x, ys = x_all[keep], ys[keep]
    # the fit's points drawn the same way once the posterior's are (where the local
    # subset was measured); below, the best fifth and a uniform draw, as before
    local = len(keep) < len(raw)
    fit_idx = _model_subset(x, raw[keep], SUBSET_FIT, rng) if local else _subset(raw[keep], SUBSET_FIT, rng)
    half_rank = False
    choosing = mode == "single" and config.choose_warp
    choosing = choosing and len(fit_idx) >= WARP_MIN_TRAIN  # fewer: no choice, so no second fit
    standing = _standing_warp(warm, enc.n_features, n_seen, config) if choosing else None
    if standing is not None and standing[0]:  # the half-rank model stands: fit it alone
        ys = HalfRankWarp.fit(raw).forward(raw)[keep][:, None]
    # the last fit stands too (one modelled output, the same model as that fit's)
    hyper_reused = mode == "single" and (standing is not None or not choosing)
    hyper_reused = hyper_reused and _standing_fit(warm, enc.n_features, n_seen, config)
    ys_hr = HalfRankWarp.fit(raw).forward(raw)[keep][:, None] if choosing and standing is None else None
    hypers, iters, prechosen = [], 0, None
    if ys_hr is not None and n_seen >= config.large_history and len(fit_idx) > WARP_CHOOSE:
        prechosen = _choose_on_subset(x, raw[keep], ys[:, 0], ys_hr[:, 0], fit_idx, _warm_for(warm, 0), deadline, rng)
        iters += prechosen[2]
    if hyper_reused and warm is not None:
        hypers.append(warm.hyper)
    elif prechosen is not None:  # only the chosen model is fitted on every point, from its fit on the subset
        if prechosen[0] and ys_hr is not None:
            ys = ys_hr
        h, it = fit(x[fit_idx], ys[fit_idx, 0], GPState(enc.n_features, prechosen[1], WARP_CHOOSE), deadline)
        hypers.append(h)
        iters += it
    else:
        for j in range(ys.shape[1]):  # one GP per modelled output (two with EHVI)
            h, it = fit(x[fit_idx], ys[fit_idx, j], _warm_for(warm, j), deadline)
            hypers.append(h)
            iters += it
    warp_state = standing
    if standing is not None:  # one fit: the model chosen before
        half_rank = standing[0]
    elif prechosen is not None:
        half_rank = prechosen[0]
        warp_state = (half_rank, n_seen)
    elif ys_hr is not None:
        h_hr, it = fit(x[fit_idx], ys_hr[fit_idx, 0], _warm_for(warm, 0), deadline)
        iters += it
        half_rank = _choose_warp(x[fit_idx], raw[keep][fit_idx], (ys[fit_idx, 0], hypers[0]), (ys_hr[fit_idx, 0], h_hr))
        if half_rank:
            ys, hypers = ys_hr, [h_hr]
        warp_state = (half_rank, n_seen)
    if not half_rank and config.min_separation:  # the plain model's believers spread its batches alone
        config = replace(config, min_separation=0.0)
    hyper = hypers[0]
    fitted_at = warm.fitted_at if hyper_reused and warm is not None else n_seen
    state = GPState(enc.n_features, hyper, len(fit_idx), tuple(hypers[1:]), warp_state, fitted_at)
    feas = _Feasibility.fit(t, x_all, deadline) if t.violations.shape[1] else None
    t_acq = time.monotonic()
    feasible = t.feasible[keep] if feas is not None else np.ones(len(ys), dtype=bool)

    def model(believed: np.ndarray | None) -> tuple[Posterior, float | None, "_EHVI | None"]:
        """The posterior (pending points believed), the incumbent and, with EHVI, the acquisition."""
        if mode == "ehvi":
            return _EHVI.build(x, ys, hv, t.feasible, hypers, believed)
        return (*_posterior(x, ys[:, 0], feasible, hyper, believed), None)

    believed = enc.features(enc.latent(list(request.pending))) if request.pending else None
    used = {space.key(a) for a in points} | {space.key(a) for a in request.pending}
    lo, hi, length = _region(enc, request, points, raw, hyper, config)
    z_cand = _initial_candidates(enc, points, raw, len(ys), rng, lo, hi)
    if mode == "single" or (mode == "parego" and request.n == 1):
        post, best = _posterior(x, ys[:, 0], feasible, hyper, believed)
        out = []
        if _wants_global(enc, request, lo, hi, length, config):
            cube = np.zeros_like(lo), np.ones_like(hi)
            z_all = _initial_candidates(enc, points, raw, len(ys), rng, *cube)
            out = _select(replace(request, n=1), enc, post, best, used, z_all, rng, *cube, deadline, config, feas)
            if out and request.n > 1:
                mine = enc.features(enc.latent(out))
                post, best = _posterior(x, ys[:, 0], feasible, hyper, mine if believed is None else np.vstack([believed, mine]))
        if len(out) < request.n:
            rest = replace(request, n=request.n - len(out), pending=tuple(request.pending) + tuple(out))
            out += _select(rest, enc, post, best, used, z_cand, rng, lo, hi, deadline, config, feas)
    else:  # each pick of the batch gets its own model: ParEGO a fresh scalarization, EHVI the pick believed
        post, best, acq = model(believed)
        out = []
        for _ in range(request.n):
            picked = _select(replace(request, n=1), enc, post, best, used, z_cand, rng, lo, hi, deadline, config, feas, acq=acq)
            if not picked:
                break
            out += picked
            if len(out) < request.n:
                if mode == "parego":
                    _, y_next = _targets(t, rng)
                    ys = y_next[keep][:, None]
                mine = enc.features(enc.latent(out))
                believed = mine if believed is None else np.vstack([believed, mine])
                post, best, acq = model(believed)
    info = (iters, len(fit_idx), len(request.history) > SUBSET_FIT, time.monotonic() - t_acq, length, False, half_rank,
            standing is not None, hyper_reused)
    return out, state, info


def _warm_for(warm: GPState | None, j: int) -> GPState | None:
    """The warm start of modelled output j: the first output's fit is `warm.hyper`, the others' `warm.others`."""
    if warm is None or j == 0:
        return warm
    if j - 1 < len(warm.others):
        return replace(warm, hyper=warm.others[j - 1], others=())
    return None


@dataclass(frozen=True)
class HVTargets:
    """Two objectives as EHVI models them: normalized as ParEGO's are (to [0, 1] over
    the history, failures at the worst, 1), then standardized per objective for its
    GP; the hypervolume reference point is 1.1 (10% of the range past the worst
    seen) in each. `rank` orders observations for the pieces that want one number
    (the subset, the local candidates, the trust region): how many feasible
    observations dominate it (infeasible or failed: all of them), ties broken at random."""

    y: np.ndarray  # (n, 2) standardized
    center: np.ndarray  # (2,) y = (normalized - center) / scale
    scale: np.ndarray
    rank: np.ndarray  # (n,)

    REF = 1.1

    @classmethod
    def of(cls, t: Targets, rng: np.random.Generator) -> "HVTargets":
        norm = normalized(t.objectives)
        norm[~np.isfinite(norm)] = 1.0
        center = norm.mean(axis=0)
        scale = np.where(norm.std(axis=0) > 0, norm.std(axis=0), 1.0)
        feas = norm[t.feasible]
        dominated_by = (np.all(feas[None, :, :] <= norm[:, None, :], axis=2) & np.any(feas[None, :, :] < norm[:, None, :], axis=2)).sum(1)
        rank = np.where(t.feasible, dominated_by, len(norm)) + rng.uniform(0.0, 0.5, len(norm))
        return cls((norm - center) / scale, center, scale, rank)

    def ref(self) -> np.ndarray:
        return (self.REF - self.center) / self.scale


class _EHVI:
    """log EHVI of two independent objective GPs over the feasible front, with
    pending points as kriging believers: in both posteriors at their predicted
    means, and on the front at those means (so a batch spreads along it)."""

    def __init__(self, posts: list[Posterior], front: np.ndarray, ref: np.ndarray) -> None:
        self.posts, self.front, self.ref = posts, front, ref

    @classmethod
    def build(
        cls, x: np.ndarray, ys: np.ndarray, hv: HVTargets, feasible: np.ndarray, hypers: list[Hyper], believed: np.ndarray | None
    ) -> tuple[Posterior, float | None, "_EHVI"]:
        posts = [Posterior(x, ys[:, j], np.full(len(ys), h.noise), h) for j, h in enumerate(hypers)]
        front = hv.y[feasible]
        if believed is not None and len(believed):
            mus = [p.predict(believed)[0] for p in posts]
            posts = [p.with_points(believed, m, PENDING_NOISE) for p, m in zip(posts, mus)]
            front = np.vstack([front, np.column_stack(mus)])
        # `best` only says whether anything is feasible: while nothing is, P(feasible) alone is maximized
        return posts[0], (0.0 if feasible.any() else None), cls(posts, front, hv.ref())

    def __call__(self, feats: np.ndarray) -> np.ndarray:
        pred = [p.predict(feats) for p in self.posts]
        mu = np.column_stack([m for m, _ in pred])
        sd = np.column_stack([s for _, s in pred])
        return log_ehvi(mu, sd, self.front, self.ref)


def _posterior(
    x: np.ndarray, y: np.ndarray, feasible: np.ndarray, hyper: Hyper, believed: np.ndarray | None
) -> tuple[Posterior, float | None]:
    """The objective posterior with pending points as believers (each at its
    mean), and the incumbent: the best feasible target, or a lower believed
    value (None while nothing is feasible)."""
    post = Posterior(x, y, np.full(len(y), hyper.noise), hyper)
    best = float(y[feasible].min()) if feasible.any() else None
    if believed is not None and len(believed):
        y_p, _ = post.predict(believed)
        post = post.with_points(believed, y_p, PENDING_NOISE)
        best = None if best is None else min(best, float(y_p.min()))
    return post, best


def _select(  # type: ignore[no-untyped-def]
    request: SuggestRequest, enc: Encoder, post: Posterior, best: float | None, used: set, z_cand: np.ndarray,
    rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray, deadline: float | None, config: GPConfig,
    feas: "_Feasibility | None" = None, acq: "_EHVI | None" = None,
) -> list[dict[str, Value]]:
    """Pick request.n points one at a time; each pick joins the posterior as a
    pending point (kriging believer) before the next is chosen. Every candidate
    scored stays in one CandidateBatch, whose variances each pick updates in place:
    a later pick re-scores them and hill-climbs its own best few without a new
    posterior (a Cholesky) or a new scoring of the Sobol set, which every ask
    waited for when evaluations take no time.

    With `acq` (EHVI; request.n must be 1) candidates are scored by it instead of
    log EI, and `best` only says whether anything is feasible yet."""
    out: list[dict[str, Value]] = []
    assert acq is None or request.n == 1, "an acquisition other than log EI picks one point per call"
    near = enc.latent(list(request.pending)) if request.pending else np.zeros((0, len(enc.dims)))
    batch, z_all, pof = None, z_cand[:0], np.zeros(0)

    def batch_scores() -> np.ndarray:
        """The acquisition of every candidate in the batch, pof added."""
        if best is None:
            return pof
        assert batch is not None, "scored after the first pick has filled the batch"
        return log_ei(batch.mu, batch.sd, best) + pof
    for i in range(request.n):
        if deadline is not None and time.monotonic() > deadline:
            if out:
                break  # return what is ready rather than nothing
            raise TimeoutError("acquisition passed the deadline")

        def score(z: np.ndarray, project: bool) -> np.ndarray:
            feats = enc.features(z, project=project)
            pof = 0.0 if feas is None else feas.log_pof(feats)
            if best is None:
                return np.zeros(len(feats)) + pof  # nothing feasible yet: find the feasible region first
            if acq is not None:
                return acq(feats) + pof
            mu, sd = (post if batch is None else batch).predict(feats)
            return log_ei(mu, sd, best) + pof

        if i == 0:  # the first pick: the whole candidate set, as scored unprojected
            z_new, s = z_cand, score(z_cand, False)
        else:  # later picks climb from the best of the same set, under the believers
            z_new, s = z_cand[:0], batch_scores()[: len(z_cand)]
        refined = _refine(enc, z_cand, s, score, rng, lo, hi)
        feats = enc.features(np.vstack([z_new, refined]), project=True)
        if acq is not None:
            acq_proj = acq(feats) if best is not None else np.zeros(len(feats))
        elif batch is None:
            batch = post.candidates(feats)
        else:
            batch.add(feats)
        z_all = np.vstack([z_all, z_new, refined])
        pof = np.concatenate([pof, np.zeros(len(feats)) + (0.0 if feas is None else feas.log_pof(feats))])
        # a pick chooses from the set and its own climb (earlier climbs stay in the batch for their believers)
        own = np.r_[: len(z_cand), len(z_all) - len(refined) : len(z_all)]
        s_proj = (acq_proj + pof)[own] if acq is not None else batch_scores()[own]
        if not np.all(np.isfinite(s_proj)):
            s_proj = np.where(np.isfinite(s_proj), s_proj, -np.inf)
            if not np.any(np.isfinite(s_proj)):
                raise FloatingPointError("acquisition is not finite anywhere")
        pick = _pick(request, enc, z_all[own], s_proj, used, near, np.mean(hi - lo) * config.min_separation)
        if pick is None:
            break  # every candidate is used: the engine answers from what it has
        j, a, k = pick
        j = int(own[j])
        out.append(a)
        used.add(k)
        near = np.vstack([near, enc.latent([a])])
        if len(out) < request.n and batch is not None:
            mu_j = batch.believe(j, PENDING_NOISE)
            best = None if best is None else min(best, mu_j)
    return out


def _pick(  # type: ignore[no-untyped-def]
    request: SuggestRequest, enc: Encoder, z_all: np.ndarray, s: np.ndarray, used: set, near: np.ndarray, radius: float
):
    """The best-scored candidate not already used, preferring one at least
    `radius` (unit-cube distance) from every pending point: two open
    suggestions closer than that evaluate nearly the same point and waste a
    worker. When every unused candidate is that close, the best unused one."""
    fallback = None
    for j in np.argsort(-s, kind="stable"):
        a = enc.assignments(z_all[j : j + 1])[0]
        k = request.space.key(a)
        if k in used:
            continue
        if len(near) == 0 or np.sqrt(((near - enc.latent([a])[0]) ** 2).sum(1)).min() >= radius:
            return j, a, k
        fallback = fallback or (j, a, k)
    return fallback


class _Feasibility:
    """One GP per constraint metric on its signed violation; log P(all satisfied)."""

    def __init__(self, models: list[tuple[Posterior, float]]) -> None:
        self.models = models

    @classmethod
    def fit(cls, t: Targets, x: np.ndarray, deadline: float | None) -> "_Feasibility":
        models = []
        for c in range(t.violations.shape[1]):
            v = t.violations[:, c]
            ok = np.isfinite(v)
            if ok.sum() < 2:
                continue  # nothing to learn yet: feasibility is not modelled for it
            mean, std = float(v[ok].mean()), float(v[ok].std()) or 1.0
            yc = (v[ok] - mean) / std
            h, _ = fit(x[ok], yc, None, deadline)
            models.append((Posterior(x[ok], yc, np.full(len(yc), h.noise), h), -mean / std))
        return cls(models)

    def log_pof(self, feats: np.ndarray) -> np.ndarray:
        from scipy.special import log_ndtr

        out = np.zeros(len(feats))
        for post, threshold in self.models:
            mu, sd = post.predict(feats)
            out += log_ndtr((threshold - mu) / sd)
        return out



def _region(
    enc: Encoder, request: SuggestRequest, points: list, raw: np.ndarray, hyper: Hyper, config: GPConfig
) -> tuple[np.ndarray, np.ndarray, float | None]:
    """Latent bounds the search stays in: the unit cube, or the trust region's
    box around the incumbent over the continuous coordinates."""
    n_lat = len(enc.dims)
    lo, hi = np.zeros(n_lat), np.ones(n_lat)
    num = enc.numeric_latent
    if not config.trust_region or len(num) < tr.MIN_DIM:
        return lo, hi, None
    n_init = design_size(len(request.space.dims), request.options, request.budget)
    values = np.array([np.nan if (o.failed or o.value is None) else raw[i] for i, o in enumerate(request.history)])
    region = tr.replay(values, n_init, len(num), len(request.pending) + request.n)
    center = enc.latent([points[int(np.argmin(raw))]])[0]
    ls = hyper.lengthscale[[enc.dims[i].col for i in num]]
    lo[num], hi[num] = tr.box(center[num], ls, region.length)
    return lo, hi, region.length


def _wants_global(
    enc: Encoder, request: SuggestRequest, lo: np.ndarray, hi: np.ndarray, length: float | None, config: GPConfig
) -> bool:
    """GPConfig.global_pick: a trust region, a batch (several points asked), none of
    the pending outside the region (continuous coordinates)."""
    if not config.global_pick or length is None or request.n < 2:
        return False
    if not request.pending:
        return True
    num = enc.numeric_latent
    z = enc.latent(list(request.pending))[:, num]
    outside = (z < lo[num] - 1e-9) | (z > hi[num] + 1e-9)
    return not bool(outside.any())


def _initial_candidates(
    enc: Encoder, points: list, raw: np.ndarray, n_train: int, rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    d = len(enc.dims)
    m = _n_candidates(n_train)
    z = lo + _sobol_unit(d, m, rng) * (hi - lo)
    # Local candidates around the best observed points (exploitation the Sobol set
    # would only hit by luck), perturbing continuous coordinates.
    num = enc.numeric_latent
    order = np.argsort(raw, kind="stable")[:_TOP_K]
    if len(num) and len(order):
        base = enc.latent([points[i] for i in order])
        local = np.repeat(base, 32, axis=0)
        scale = np.repeat([0.05, 0.005], 16)[np.arange(len(local)) % 32][:, None]  # two radii
        local[:, num] += scale * rng.normal(0.0, 1.0, size=(len(local), len(num)))
        z = np.vstack([z, np.clip(local, lo, hi)])
    return z


def _refine(  # type: ignore[no-untyped-def]
    enc: Encoder, z: np.ndarray, s: np.ndarray, score, rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Hill-climb the best few candidates over the continuous (relaxed) coordinates."""
    num = enc.numeric_latent
    if len(num) == 0:
        return z[:0]
    cur = z[np.argsort(-s, kind="stable")[:_TOP_K]].copy()
    cur_s = score(cur, False)
    k = len(cur)
    for sigma in _ROUNDS:
        trial = np.repeat(cur, _PER_ROUND, axis=0)
        trial[:, num] = np.clip(trial[:, num] + rng.normal(0.0, sigma, size=(len(trial), len(num))), lo[num], hi[num])
        ts = score(trial, False).reshape(k, _PER_ROUND)
        j = ts.argmax(1)
        better = ts[np.arange(k), j] > cur_s
        cur[better] = trial.reshape(k, _PER_ROUND, -1)[np.arange(k), j][better]
        cur_s = np.where(better, ts[np.arange(k), j], cur_s)
    return cur


def run(job: StrategyJob) -> StrategyOutcome:
    """The registry's pooled entry point: warm state and deadline in, outcome (with state) out."""
    r = propose_gp(job.request, request_rng(job.request), job.warm, job.deadline_s)
    if r.info.no_model:  # the initial design, not a failure: no fallback reason
        return StrategyOutcome(tuple(r.candidates), "sobol", None, r.info.fit_seconds, r.state)
    used = "gp" if r.info.fallback_reason is None else "sobol"
    return StrategyOutcome(tuple(r.candidates), used, r.info.fallback_reason, r.info.fit_seconds, r.state)
