"""The actor's collaborators, each on its own: Ledger (state and dedup),
CommitThenReply (a reply leaves after its writes commit), ComputeAhead
(points computed ahead, staleness, waiters) and the counters-only write."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Sequence

import anyio
import pytest

from tauopt import Engine
from tauopt.actors import Reply, Request
from tauopt.engine._ahead import ComputeAhead
from tauopt.engine._ledger import Ledger
from tauopt.engine._messages import ProposalReady
from tauopt.engine._replies import CommitThenReply
from tauopt.models import Experiment, Metric
from tauopt.space import Space
from tauopt.store import Done, MemoryStore, PutCounters, PutExperiment, PutSuggestion, Snapshot, Write

pytestmark = pytest.mark.anyio

X = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}]
M = {"name": "loss", "objective": "minimize"}


def _snapshot() -> Snapshot:
    space = Space.parse(X)
    exp = Experiment(id="e", name="e", parameters=space.parameters, metric=Metric("loss"))
    return Snapshot(exp)


def test_the_ledger_tracks_open_observed_and_freed_points() -> None:
    ledger = Ledger(_snapshot(), Space.parse(X))
    s = ledger.open_suggestion({"x": 0.5}, "w1", now=10.0)
    assert s.id == "1" and ledger.is_used({"x": 0.5}) and ledger.used_count() == 1
    ledger.leave_open(s, "closed", now=11.0)
    assert not ledger.is_used({"x": 0.5}) and ledger.used_count() == 0  # a closed point leaves the set
    t = ledger.open_suggestion({"x": 0.25}, None, now=10.0)
    ledger.observe({"x": 0.25}, t.id, 1.0, False, 11.0, {})
    assert ledger.is_used({"x": 0.25}) and ledger.used_count() == 2 - 1 + 0  # observed and still open: counted once
    assert [e.id for e in ledger.expired(now=100.0, ttl=5.0)] == ["2"] and not ledger.open
    with pytest.raises(Exception, match="not found"):
        ledger.suggestion("99")


class _HeldStore(MemoryStore):
    """Commits only when the test says so: what is answered before cannot have waited."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[tuple[Sequence[Write], Done]] = []

    def submit(self, writes: Sequence[Write], done: Done) -> None:
        self.held.append((writes, done))

    def release(self) -> None:
        held, self.held = self.held, []
        for writes, done in held:
            super().submit(writes, done)


async def test_a_reply_waits_for_its_commit_and_for_earlier_ones() -> None:
    store = _HeldStore()
    replies = CommitThenReply(store, "e", lambda writes: writes.append(PutCounters("e", 1, 0, 0)))
    store.held.append(([PutExperiment(_snapshot().experiment)], lambda exc: None))
    store.release()
    w_reply, r_reply = Reply(), Reply()
    replies.commit(Request("write", w_reply), [PutSuggestion(_suggestion())], "written")
    replies.commit(Request("read", r_reply), [], "read")  # changes nothing, but must not overtake the write
    assert replies.uncommitted == 2 and [len(b) for b, _ in store.held] == [2, 0]  # the read is a barrier
    assert isinstance(store.held[0][0][-1], PutCounters)  # the counters ride along
    for answer in (w_reply, r_reply):
        assert not answer.given
    store.release()
    assert w_reply.given and await w_reply.wait() == "written"
    assert r_reply.given and await r_reply.wait() == "read"
    assert replies.uncommitted == 0


def _suggestion() -> Any:
    from tauopt.models import Suggestion

    return Suggestion("1", "e", {"x": 0.5}, "open", None, 0.0)


def _landed(ahead: ComputeAhead, seconds: float) -> None:
    """A job of `seconds` landed: what start() and the landing do, without a task group."""
    ahead.job_running, ahead._job_t0 = True, time.monotonic() - seconds
    ahead.land(ProposalReady(version=0))


def test_compute_ahead_serves_fresh_points_and_drops_stale_ones() -> None:
    ahead = ComputeAhead("e", pool=None, fit_deadline_s=None, ahead=None)
    ahead.keep(0, [{"x": 0.1}, {"x": 0.2}])
    assert ahead.take(bandwidth=1, is_used=lambda p: p["x"] == 0.1) == {"x": 0.2}  # used points are skipped
    ahead.keep(ahead.version, [{"x": 0.3}])
    for _ in range(2):
        assert not ahead.observed(bandwidth=1)
    assert ahead.observed(bandwidth=1)  # three observations past: stale, dropped, a refill is due
    assert ahead.take(bandwidth=1, is_used=lambda p: False) is None
    want, fresh = ahead.want(bandwidth=4)
    assert want == 4 and fresh == ()  # one per slot until job and evaluation times are measured (ADAPT_AHEAD)
    wide = ComputeAhead("e", pool=None, fit_deadline_s=None, ahead=4)  # an explicit setting: one per slot
    assert wide.want(bandwidth=4) == (4, ())


def test_compute_ahead_computes_as_many_as_asks_are_expected_during_one_job() -> None:
    """ADAPT_AHEAD: bandwidth x job seconds / evaluation seconds, at least one and
    at most min(bandwidth, MAX_AHEAD); the cap until both are measured."""
    from tauopt.engine import _ahead

    ahead = ComputeAhead("e", pool=None, fit_deadline_s=None, ahead=None)
    assert ahead.target(bandwidth=8) == 8  # nothing measured yet: the cap
    _landed(ahead, 0.05)
    assert ahead.target(bandwidth=8) == 8  # no evaluation measured yet
    ahead.evaluated(1.0)  # 1 s evaluations, 50 ms jobs: 8 x 0.05 = 0.4 asks per job
    assert ahead.target(bandwidth=8) == 1
    fast = ComputeAhead("e", pool=None, fit_deadline_s=None, ahead=None)
    _landed(fast, 0.05)
    fast.evaluated(0.0)  # evaluations that take no time: the cap
    assert fast.target(bandwidth=8) == 8 and fast.target(bandwidth=64) == _ahead.MAX_AHEAD
    mid = ComputeAhead("e", pool=None, fit_deadline_s=None, ahead=None)
    _landed(mid, 0.45)
    mid.evaluated(1.0)  # 8 x 0.45 / 1 = 3.6: four
    assert mid.target(bandwidth=8) == 4
    for _ in range(20):
        mid.evaluated(10.0)  # the running mean follows longer evaluations: 8 x 0.45 / 10 -> 1
    assert mid.target(bandwidth=8) == 1
    fixed = ComputeAhead("e", pool=None, fit_deadline_s=None, ahead=2)  # an explicit setting wins
    assert fixed.target(bandwidth=8) == 2


def test_with_short_evaluations_nothing_is_computed_ahead_and_a_job_waits_for_the_round() -> None:
    """ROUND_SHARE: evaluations under a quarter of a job; a job only for parked asks,
    sized for every slot, after the suggestions out are observed (a bounded wait)."""
    from tauopt.engine import _ahead

    ahead = ComputeAhead("e", pool=None, fit_deadline_s=None, ahead=None)
    _landed(ahead, 0.5)  # a job of 0.5 s
    ahead.evaluated(0.01)  # one quick first evaluation (a warm-up, a crash): not judged yet
    assert not ahead.short_evaluations()
    for _ in range(_ahead.ROUND_MIN_EVALUATIONS - 1):
        ahead.evaluated(0.01)  # 0 s evaluations
    assert ahead.short_evaluations()
    assert ahead.want(bandwidth=4, out=3) == (0, ())  # no ask parked: nothing ahead
    assert ahead.round_wait([100.0], now=100.0) == 0.0
    ahead.waiters.append((None, None))  # type: ignore[arg-type]
    assert ahead.want(bandwidth=4, out=3)[0] == 4 and ahead.want(bandwidth=16, out=1)[0] == _ahead.MAX_AHEAD
    # one suggestion out, handed out 10 ms ago: wait until ROUND_MIN_S past its hand-out
    assert math.isclose(ahead.round_wait([99.99], now=100.0), _ahead.ROUND_MIN_S - 0.01)
    assert ahead.round_wait([90.0], now=100.0) == 0.0  # long overdue: start now
    ahead.keep(ahead.version, [{"x": 0.1}])
    ahead.observed(bandwidth=4)
    assert ahead.take(bandwidth=4, is_used=lambda p: False) is None  # one observation behind: not served
    slow = ComputeAhead("e", pool=None, fit_deadline_s=None, ahead=None)
    _landed(slow, 0.5)
    for _ in range(_ahead.ROUND_MIN_EVALUATIONS):
        slow.evaluated(1.0)  # evaluations longer than a job: computed ahead as before
    slow.waiters.append((None, None))  # type: ignore[arg-type]
    assert not slow.short_evaluations() and slow.round_wait([100.0], now=100.0) == 0.0
    slow._job_s = 10.0  # a fit slower than four evaluations of 1 s (a loaded machine): still ahead
    assert not slow.short_evaluations()


def test_leftover_asks_wait_for_the_next_job_when_evaluations_are_long_next_to_a_job() -> None:
    """PARK_LONG: off until job and evaluation times are measured (from
    ROUND_MIN_EVALUATIONS evaluations), on for evaluations PARK_LONG jobs long or
    more, off for shorter ones and under an explicit `ahead` setting."""
    from tauopt.engine import _ahead

    def measured(job_s: float, eval_s: float, evaluations: int, ahead: int | None = None) -> ComputeAhead:
        a = ComputeAhead("e", pool=None, fit_deadline_s=None, ahead=ahead)
        _landed(a, job_s)
        for _ in range(evaluations):
            a.evaluated(eval_s)
        return a

    assert not ComputeAhead("e", pool=None, fit_deadline_s=None, ahead=None).parks_leftovers()  # nothing measured
    n = _ahead.ROUND_MIN_EVALUATIONS
    assert not measured(0.05, 1.0, n - 1).parks_leftovers()  # too few evaluations to judge
    assert measured(0.05, 1.0, n).parks_leftovers()  # 1 s evaluations, 50 ms jobs: 20 jobs long
    assert not measured(0.5, 1.0, n).parks_leftovers()  # two jobs long: a wait would be half an evaluation
    assert not measured(0.5, 0.0, n).parks_leftovers()  # 0 s evaluations (the round's regime)
    assert not measured(0.05, 1.0, n, ahead=1).parks_leftovers()  # an explicit setting: as configured
    eps = 0.01  # the job's wall time is measured (a little over 0.1 s): the boundary with a margin
    assert measured(0.1, _ahead.PARK_LONG * 0.1 + eps, n).parks_leftovers()


async def test_asks_and_observes_write_counters_not_the_whole_header(tmp_path: Path) -> None:
    class Recording(MemoryStore):
        batches: list[Sequence[Write]] = []

        def submit(self, writes: Sequence[Write], done: Done) -> None:
            self.batches.append(list(writes))
            super().submit(writes, done)

    store = Recording()
    async with Engine(store=store) as engine:
        exp = await engine.create_experiment("e", X, M, strategy="random", observation_budget=2)
        store.batches.clear()
        s = await engine.suggest(exp.id)
        await engine.observe(exp.id, suggestion_id=s.id, value=1.0)
        kinds = [[type(w).__name__ for w in b] for b in store.batches]
        assert kinds == [["PutSuggestion", "PutCounters"], ["PutSuggestion", "PutObservation", "PutCounters"]]
        store.batches.clear()
        await engine.observe(exp.id, assignments={"x": 0.5}, value=2.0)  # reaches the budget: the state changes
        assert any(isinstance(w, PutExperiment) and w.experiment.state == "completed" for w in store.batches[0])
        got = await engine.experiment(exp.id)
    assert got.observations == 2 and got.open_suggestions == 0


async def test_counters_survive_a_restart_of_a_sqlite_store(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    async with Engine(store=db) as engine:
        exp = await engine.create_experiment("e", X, M, strategy="sobol", parallel_bandwidth=3)
        for _ in range(3):
            await engine.suggest(exp.id)
        s = (await engine.suggestions(exp.id, state="open"))[0]
        await engine.observe(exp.id, suggestion_id=s.id, value=1.0)
    async with Engine(store=db) as engine:
        listed = [e for e in await engine.experiments() if e.id == exp.id][0]
        got = await engine.experiment(exp.id)
        nxt = await engine.suggest(exp.id)
    assert (listed.open_suggestions, listed.observations) == (2, 1)
    assert (got.open_suggestions, got.observations) == (2, 1)
    assert nxt.id == "4"


async def test_requests_queued_behind_a_failed_commit_are_answered_not_dropped() -> None:
    """A failed commit stops the actor; the asks already in its mailbox, or sent while it
    settles its writes, each get an answer (a retryable error, or a point from the rebuilt
    actor). Dropped with the closed mailbox, they waited for an answer forever."""
    from tauopt import ApiError, Suggestion
    from tauopt.store import StoreError

    class FailingOnce(MemoryStore):
        fail_next = False

        def submit(self, writes: Sequence[Write], done: Done) -> None:
            if self.fail_next and writes:
                self.fail_next = False
                done(StoreError("the disk went away"))
                return
            super().submit(writes, done)

    store = FailingOnce()
    async with Engine(store=store) as engine:
        exp = await engine.create_experiment("e", X, M, strategy="random", parallel_bandwidth=16)
        store.fail_next = True
        with pytest.raises(ApiError):
            await engine.suggest(exp.id)  # its commit failed: nothing of it kept
        outcomes: list[Any] = []

        async def ask() -> None:
            try:
                outcomes.append(await engine.suggest(exp.id))
            except ApiError as exc:
                outcomes.append(exc.error_type)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(ask)
        assert len(outcomes) == 5 and "internal" in outcomes  # the actor that saw the failure answered
        assert all(o == "internal" or isinstance(o, Suggestion) for o in outcomes), outcomes
        assert isinstance(await engine.suggest(exp.id), Suggestion)  # rebuilt and serving


async def test_a_trials_parameters_write_no_counters_and_the_stored_counters_stay_right(tmp_path: Path) -> None:
    """A write that leaves the counters as they were (a trial's parameter, an attribute)
    carries none; those that move them do, and after a restart the listing's counters are
    the actor's, including after a finished trial added its parameters to the space (a
    header built before the trial's observation, followed by the counters it lacks)."""
    from tauopt.engine import NewTrial, SetParam, SetState, SetTrialAttr

    dist = '{"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0, "log": false, "step": null}}'

    class Recording(MemoryStore):
        batches: list[list[str]] = []

        def submit(self, writes: Sequence[Write], done: Done) -> None:
            self.batches.append([type(w).__name__ for w in writes])
            super().submit(writes, done)

    store = Recording()
    async with Engine(store=store) as engine:
        study = await engine.create_study("s", ["MINIMIZE"])
        for i in range(2):
            store.batches.clear()
            trial = await engine.study_call(study, NewTrial())
            await engine.trial_call(trial, SetParam(trial, "x", 0.5, dist))
            await engine.trial_call(trial, SetTrialAttr(trial, True, "k", "1"))
            await engine.trial_call(trial, SetState(trial, "COMPLETE", (float(i),)))
            new, param, attr, end = store.batches
            assert "PutCounters" in new and "PutCounters" not in param and "PutCounters" not in attr
            assert "PutCounters" in end or "PutExperiment" in end
        running = await engine.study_call(study, NewTrial())
        await engine.trial_call(running, SetParam(running, "x", 0.25, dist))
    db = tmp_path / "c.db"
    async with Engine(store=db) as engine:
        study = await engine.create_study("s", ["MINIMIZE"])
        await engine.study_call(study, NewTrial())  # stays running
        trial = await engine.study_call(study, NewTrial())
        await engine.trial_call(trial, SetParam(trial, "x", 0.5, dist))
        await engine.trial_call(trial, SetState(trial, "COMPLETE", (1.0,)))  # the last write; adds x to the space
    async with Engine(store=db) as engine:
        (listed,) = await engine.experiments()
        got = await engine.experiment(listed.id)
    assert (listed.open_suggestions, listed.observations) == (1, 1)
    assert (got.open_suggestions, got.observations) == (1, 1)
    assert [p.name for p in got.parameters] == ["x"]
