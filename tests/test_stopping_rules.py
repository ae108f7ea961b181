"""Early-stopping rules on hand-made curves, and against Optuna's pruners."""

from __future__ import annotations

import random

import pytest

from tauopt.errors import ApiError
from tauopt.strategies.stopping import (
    AshaRule,
    CurveStats,
    MedianRule,
    NoStopping,
    StepOrderError,
    parse_rule,
    rule_to_json,
)


def _complete(stats: CurveStats, trial: str, curve: list[float], stopped: bool = False) -> None:
    for step, value in enumerate(curve, start=1):
        stats.report(trial, step, value)
    stats.complete(trial, stopped=stopped)


def test_no_rule_never_stops() -> None:
    stats = CurveStats(NoStopping())
    for i in range(5):
        _complete(stats, f"t{i}", [0.1, 0.1, 0.1])
    assert not stats.report("bad", 1, 100.0).should_stop


def test_median_stops_a_curve_worse_than_the_median_of_completed_trials() -> None:
    stats = CurveStats(MedianRule(min_trials=3, grace_steps=0))
    _complete(stats, "a", [1.0, 0.5, 0.2])
    _complete(stats, "b", [2.0, 1.0, 0.4])
    # Two completed trials: under min_trials, never stops.
    assert not stats.report("x", 1, 50.0).should_stop
    _complete(stats, "c", [3.0, 2.0, 0.6])
    # Step 1 median of (1, 2, 3) is 2: 1.5 continues, 2.5 stops.
    assert not stats.report("good", 1, 1.5).should_stop
    decision = stats.report("worse", 1, 2.5)
    assert decision.should_stop
    assert decision.reason is not None and "median" in decision.reason and "step 1" in decision.reason


def test_median_judges_the_best_value_so_far_not_the_last() -> None:
    stats = CurveStats(MedianRule(min_trials=3))
    for name, curve in {"a": [1.0, 1.0], "b": [2.0, 2.0], "c": [3.0, 3.0]}.items():
        _complete(stats, name, curve)
    assert not stats.report("t", 1, 0.5).should_stop
    # Its step-2 value (2.5) is worse than the step-2 median (2.0), but its best (0.5) is not.
    assert not stats.report("t", 2, 2.5).should_stop


def test_median_grace_steps_and_maximize() -> None:
    stats = CurveStats(MedianRule(min_trials=1, grace_steps=2), maximize=True)
    _complete(stats, "a", [0.9, 0.9, 0.9])
    assert not stats.report("t", 1, 0.1).should_stop  # inside the grace period
    decision = stats.report("t", 2, 0.2)
    assert decision.should_stop  # maximised: 0.2 < 0.9
    assert "0.2" in (decision.reason or "") and "0.9" in (decision.reason or "")
    assert not stats.report("u", 1, 0.1).should_stop
    assert not stats.report("u", 2, 0.95).should_stop


def test_median_reads_completed_not_stopped_trials_only() -> None:
    stats = CurveStats(MedianRule(min_trials=2))
    _complete(stats, "a", [1.0])
    _complete(stats, "stopped", [100.0], stopped=True)
    stats.report("open", 1, 100.0)  # still running: not counted
    stats.report("closed", 1, 100.0)
    stats.discard("closed")
    assert not stats.report("t", 1, 50.0).should_stop  # only one counted trial
    _complete(stats, "b", [3.0])
    assert stats.report("u", 1, 2.5).should_stop  # median of (1, 3) is 2


def test_asha_keeps_the_top_third_at_each_rung() -> None:
    rule = AshaRule(min_step=1, max_step=9, reduction_factor=3)
    assert rule.rungs() == (1, 3)
    stats = CurveStats(rule)
    # First at a rung is alone and best: continues.
    assert not stats.report("a", 1, 0.5).should_stop
    # n=2 -> keep 1: worse than a stops, better continues.
    assert stats.report("b", 1, 0.7).should_stop
    assert not stats.report("c", 1, 0.4).should_stop
    # n=6 -> keep 2: rung 1 values 0.4 0.5 0.7 0.8 0.9 + 0.45 -> 0.45 is 2nd best.
    stats.report("d", 1, 0.8)
    stats.report("e", 1, 0.9)
    assert not stats.report("f", 1, 0.45).should_stop
    # Steps between rungs never stop; the next rung decides again.
    assert not stats.report("c", 2, 5.0).should_stop
    assert not stats.report("c", 3, 0.3).should_stop
    assert stats.report("a", 3, 0.35).should_stop
    # At or past max_step a trial has its full budget: no decision.
    assert not stats.report("a", 9, 10.0).should_stop


def test_asha_records_a_jump_over_rungs_at_every_rung_passed() -> None:
    stats = CurveStats(AshaRule(min_step=1, max_step=27, reduction_factor=3))
    stats.report("a", 1, 0.1)
    stats.report("a", 3, 0.1)
    decision = stats.report("b", 5, 0.2)  # passes rungs 1 and 3 in one report
    assert decision.should_stop and "rung step 3" in (decision.reason or "")


def test_rule_change_rebuilds_the_rungs_from_the_curves() -> None:
    stats = CurveStats(NoStopping())
    stats.report("a", 1, 0.1)
    stats.report("b", 1, 0.2)
    stats.set_rule(AshaRule(min_step=1, max_step=9))
    # Rung 1 already holds 0.1 and 0.2 -> with 0.3, n=3, keep 1.
    assert stats.report("c", 1, 0.3).should_stop
    assert stats.curve("a") == [(1, 0.1)]


def test_steps_must_increase_per_trial() -> None:
    stats = CurveStats(MedianRule())
    stats.report("a", 3, 1.0)
    with pytest.raises(StepOrderError, match="step 3 is not after .* last reported step 3"):
        stats.report("a", 3, 1.0)
    with pytest.raises(StepOrderError):
        stats.report("a", 2, 1.0)
    stats.report("b", 1, 1.0)  # another trial has its own order
    assert stats.last_step("a") == 3


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"rule": "bogus"}, "give one of none, median, asha"),
        ({"rule": "median", "min_trials": 0}, "min_trials: give an integer >= 1"),
        ({"rule": "median", "max_step": 3}, "remove max_step"),
        ({"rule": "asha"}, "max_step"),
        ({"rule": "asha", "max_step": 9, "reduction_factor": 1}, "reduction_factor: give an integer >= 2"),
        ({"rule": "asha", "min_step": 4, "max_step": 4}, "max_step: 4 must be above min_step (4)"),
        ({"rule": "median", "grace_steps": True}, "grace_steps"),
        ([1, 2], "give an object"),
    ],
)
def test_bad_rules_are_refused_with_what_to_do(spec: object, message: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_rule(spec)  # type: ignore[arg-type]
    assert info.value.error_type == "invalid_request"
    assert message in info.value.message


def test_rules_round_trip_through_json() -> None:
    for spec in ({"rule": "none"}, {"rule": "median", "min_trials": 3, "grace_steps": 2},
                 {"rule": "asha", "min_step": 2, "max_step": 50, "reduction_factor": 4}):
        assert rule_to_json(parse_rule(spec)) == spec
    assert parse_rule(None) == NoStopping()
    assert parse_rule({"rule": "median"}) == MedianRule(min_trials=5, grace_steps=0)


def _curves(seed: int, n: int, steps: int) -> list[list[float]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        floor, gap, rate = rng.random(), rng.random() * 2, 0.2 + rng.random()
        out.append([floor + gap * t ** -rate + rng.gauss(0, 0.05) for t in range(1, steps + 1)])
    return out


def _run_sequential(stats: CurveStats, curves: list[list[float]]) -> list[int]:
    """Trials one after another; the step each stopped at (or its last step)."""
    stops = []
    for i, curve in enumerate(curves):
        stopped_at = len(curve)
        for step, value in enumerate(curve, start=1):
            if stats.report(str(i), step, value).should_stop:
                stopped_at = step
                break
        stats.complete(str(i), stopped=stopped_at < len(curve))
        stops.append(stopped_at)
    return stops


def _run_optuna(pruner: object, curves: list[list[float]]) -> list[int]:
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=0))
    stops = []
    for curve in curves:
        trial = study.ask()
        stopped_at = len(curve)
        for step, value in enumerate(curve, start=1):
            trial.report(value, step)
            if trial.should_prune():
                stopped_at = step
                break
        if stopped_at < len(curve):
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, curve[-1])
        stops.append(stopped_at)
    return stops


def test_median_decides_like_optunas_median_pruner() -> None:
    optuna = pytest.importorskip("optuna")
    curves = _curves(1, 40, 12)
    ours = _run_sequential(CurveStats(MedianRule(min_trials=3, grace_steps=2)), curves)
    theirs = _run_optuna(optuna.pruners.MedianPruner(n_startup_trials=0, n_warmup_steps=2, n_min_trials=3), curves)
    assert ours == theirs
    assert any(s < 12 for s in ours)  # the comparison is not vacuous


def test_asha_decides_like_optunas_successive_halving_pruner() -> None:
    optuna = pytest.importorskip("optuna")
    curves = _curves(2, 40, 27)
    ours = _run_sequential(CurveStats(AshaRule(min_step=1, max_step=28, reduction_factor=3)), curves)
    theirs = _run_optuna(
        optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3, min_early_stopping_rate=0), curves
    )
    assert ours == theirs
    assert sum(ours) < 0.6 * 40 * 27
