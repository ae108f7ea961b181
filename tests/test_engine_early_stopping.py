"""Intermediate reports and stopping rules through the engine: decisions on
hand-made curves, step order, the 409s of observe, rule changes, stopped
observations, and the curves replayed from a real SQLite file after a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from tauopt import ApiError, Engine

pytestmark = pytest.mark.anyio

X = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}]
LOSS = {"name": "loss", "objective": "minimize"}
ACC = {"name": "acc", "objective": "maximize"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def raises(coro, status: int, error_type: str, match: str = "") -> ApiError:  # type: ignore[no-untyped-def]
    with pytest.raises(ApiError) as info:
        await coro
    err = info.value
    assert (err.status_code, err.error_type) == (status, error_type), err
    assert match in err.message, err.message
    return err


async def run_curve(engine: Engine, exp_id: str, curve: list[float]) -> None:
    s = await engine.suggest(exp_id)
    for step, value in enumerate(curve, start=1):
        assert not (await engine.report(exp_id, s.id, step, value)).should_stop
    await engine.observe(exp_id, suggestion_id=s.id, value=curve[-1])


async def test_without_a_rule_reports_are_kept_and_never_stop() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("e", X, LOSS, parallel_bandwidth=4, strategy="random")
        assert exp.early_stopping == {"rule": "none"}
        s = await engine.suggest(exp.id)
        for step in range(1, 4):
            decision = await engine.report(exp.id, s.id, step, 100.0)
            assert decision.should_stop is False
            assert decision.reason is not None and "no early-stopping rule" in decision.reason  # says why nothing stops
            assert 'early_stopping={"rule": "median"}' in decision.reason
        assert [(r.step, r.value) for r in await engine.reports(exp.id, s.id)] == [(1, 100.0), (2, 100.0), (3, 100.0)]


async def test_median_rule_stops_a_trial_worse_than_the_completed_median() -> None:
    async with Engine() as engine:
        rule = {"rule": "median", "min_trials": 3, "grace_steps": 1}
        exp = await engine.create_experiment("e", X, LOSS, parallel_bandwidth=4, strategy="random", early_stopping=rule)
        assert exp.early_stopping == rule
        for curve in ([1.0, 0.5], [2.0, 1.0], [3.0, 1.5]):
            await run_curve(engine, exp.id, curve)
        good, bad = await engine.suggest(exp.id), await engine.suggest(exp.id)
        assert not (await engine.report(exp.id, good.id, 1, 1.5)).should_stop
        assert not (await engine.report(exp.id, good.id, 2, 0.9)).should_stop  # median at 2 is 1.0
        assert not (await engine.report(exp.id, bad.id, 0, 9.0)).should_stop  # inside the grace period
        decision = await engine.report(exp.id, bad.id, 2, 1.2)
        assert decision.should_stop and "median 1 of 3 completed trials at step 2" in (decision.reason or "")
        obs = await engine.observe(exp.id, suggestion_id=bad.id, value=1.2, stopped=True)
        assert obs.stopped_at_step == 2 and obs.to_dict()["stopped_at_step"] == 2
        assert (await engine.observations(exp.id))[-1].stopped_at_step == 2


async def test_asha_on_a_maximised_metric_keeps_the_best_third() -> None:
    async with Engine() as engine:
        rule = {"rule": "asha", "min_step": 1, "max_step": 9, "reduction_factor": 3}
        exp = await engine.create_experiment("e", X, ACC, parallel_bandwidth=8, strategy="random", early_stopping=rule)
        a, b, c = [await engine.suggest(exp.id) for _ in range(3)]
        assert not (await engine.report(exp.id, a.id, 1, 0.8)).should_stop
        assert (await engine.report(exp.id, b.id, 1, 0.6)).should_stop  # lower accuracy than the only other
        assert not (await engine.report(exp.id, c.id, 1, 0.9)).should_stop
        assert not (await engine.report(exp.id, a.id, 9, 0.1)).should_stop  # full budget: never stopped


async def test_steps_must_increase_and_bad_reports_are_refused() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("e", X, LOSS, parallel_bandwidth=2, strategy="random")
        s = await engine.suggest(exp.id)
        await engine.report(exp.id, s.id, 5, 1.0)
        await raises(engine.report(exp.id, s.id, 5, 1.0), 400, "invalid_request", "step 5 is not after")
        await raises(engine.report(exp.id, s.id, 3, 1.0), 400, "invalid_request", "increasing order")
        await raises(engine.report(exp.id, s.id, -1, 1.0), 400, "invalid_request", "step: give an integer")
        await raises(engine.report(exp.id, s.id, True, 1.0), 400, "invalid_request", "step: give an integer")
        await raises(engine.report(exp.id, s.id, 6, float("nan")), 400, "invalid_request", "finite number")
        await raises(engine.report(exp.id, "999", 6, 1.0), 404, "not_found")
        assert [r.step for r in await engine.reports(exp.id)] == [5]  # nothing refused was kept


async def test_reports_on_observed_closed_and_expired_suggestions_answer_observes_409s() -> None:
    clock = Clock()
    async with Engine(clock=clock) as engine:
        exp = await engine.create_experiment("e", X, LOSS, parallel_bandwidth=3, strategy="random", suggestion_ttl_s=10)
        observed, closed, expired = [await engine.suggest(exp.id) for _ in range(3)]
        await engine.observe(exp.id, suggestion_id=observed.id, value=1.0)
        await engine.close_suggestion(exp.id, closed.id)
        await raises(engine.report(exp.id, observed.id, 1, 1.0), 409, "suggestion_observed")
        await raises(engine.report(exp.id, closed.id, 1, 1.0), 409, "suggestion_closed")
        clock.now += 11
        await engine.suggest(exp.id)  # expires `expired` (expiry happens at an ask)
        err = await raises(engine.report(exp.id, expired.id, 1, 1.0), 409, "suggestion_expired")
        assert err.details["assignments"] == expired.assignments


async def test_stopped_needs_a_suggestion_that_reported() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("e", X, LOSS, parallel_bandwidth=2, strategy="random")
        s = await engine.suggest(exp.id)
        await raises(engine.observe(exp.id, suggestion_id=s.id, value=1.0, stopped=True), 400, "invalid_request", "report before")
        await raises(engine.observe(exp.id, assignments={"x": 0.5}, value=1.0, stopped=True), 400, "invalid_request", "stopped")
        await raises(engine.observe(exp.id, suggestion_id=s.id, failed=True, stopped=True), 400, "invalid_request", "stopped")
        assert (await engine.suggestion(exp.id, s.id)).state == "open"  # nothing refused changed it


async def test_update_changes_the_rule_and_bad_rules_are_refused() -> None:
    async with Engine() as engine:
        exp = await engine.create_experiment("e", X, LOSS, parallel_bandwidth=4, strategy="random")
        a, b = await engine.suggest(exp.id), await engine.suggest(exp.id)
        await engine.report(exp.id, a.id, 1, 0.1)
        assert not (await engine.report(exp.id, b.id, 1, 0.9)).should_stop
        updated = await engine.update_experiment(exp.id, early_stopping={"rule": "asha", "max_step": 27})
        assert updated.early_stopping["rule"] == "asha"
        c = await engine.suggest(exp.id)
        # The rungs were rebuilt from the curves reported before the change.
        assert (await engine.report(exp.id, c.id, 1, 0.5)).should_stop
        await raises(engine.update_experiment(exp.id, early_stopping={"rule": "asha"}), 400, "invalid_request", "max_step")
        await raises(engine.update_experiment(exp.id, early_stopping={"rule": ["asha"]}), 400, "invalid_request", "early_stopping.rule")
        await raises(
            engine.create_experiment("f", X, LOSS, early_stopping={"rule": "median", "min_trials": 0}),
            400, "invalid_request", "min_trials",
        )
        assert (await engine.experiment(exp.id)).early_stopping["rule"] == "asha"


async def test_reports_rules_and_stops_survive_a_restart_on_sqlite(tmp_path: Path) -> None:
    db = str(tmp_path / "es.db")
    rule = {"rule": "asha", "min_step": 1, "max_step": 9, "reduction_factor": 3}
    async with Engine(store=db, pool=None) as engine:
        exp = await engine.create_experiment("e", X, LOSS, parallel_bandwidth=8, strategy="random", early_stopping=rule)
        a, b, c = [await engine.suggest(exp.id) for _ in range(3)]
        await engine.report(exp.id, a.id, 1, 0.2)
        await engine.report(exp.id, a.id, 2, 0.15)
        assert (await engine.report(exp.id, b.id, 1, 0.4)).should_stop
        await engine.observe(exp.id, suggestion_id=b.id, value=0.4, stopped=True)
        await engine.report(exp.id, c.id, 1, 0.1)
    async with Engine(store=db, pool=None) as engine:
        assert (await engine.experiment(exp.id)).early_stopping == rule
        assert [(r.suggestion_id, r.step, r.value) for r in await engine.reports(exp.id)] == [
            (a.id, 1, 0.2), (a.id, 2, 0.15), (b.id, 1, 0.4), (c.id, 1, 0.1),
        ]
        first = await engine.report_log(exp.id, after=0, limit=3)  # the log, paged, is the replayed one
        rest = await engine.report_log(exp.id, after=first["cursor"], limit=3)
        assert [(r.suggestion_id, r.step) for r in first["reports"] + rest["reports"]] == [
            (a.id, 1), (a.id, 2), (b.id, 1), (c.id, 1),
        ]
        assert (first["cursor"], first["more"], rest["cursor"], rest["more"]) == (3, True, 4, False)
        await raises(engine.report_log(exp.id, limit=0), 400, "invalid_request", "limit")
        (obs,) = await engine.observations(exp.id)
        assert obs.stopped_at_step == 1
        # Step order is kept across the restart, and rung 1 still holds 0.1, 0.2, 0.4:
        await raises(engine.report(exp.id, a.id, 2, 0.1), 400, "invalid_request", "increasing order")
        d = await engine.suggest(exp.id)
        decision = await engine.report(exp.id, d.id, 1, 0.3)  # 4 values -> keep 1: 0.3 stops
        assert decision.should_stop and "best 1 of 4" in (decision.reason or "")
