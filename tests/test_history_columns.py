"""The ledger's columnar history: every observation reads back exactly as it was
appended (fields, types, key order), rows that do not fit the columns are kept
whole, "is this point observed?" compares keys (not only their hashes), and an
observed suggestion held by its row reads back as the suggestion it was."""

from __future__ import annotations

import pickle
import threading
from dataclasses import replace

import pytest

from tauopt import Engine
from tauopt.engine._downsample import downsample
from tauopt.engine._history import INLINE_ROWS, History
from tauopt.engine._ledger import Ledger
from tauopt.models import Experiment, Metric, Observation, Suggestion
from tauopt.space import Space
from tauopt.store import Snapshot

SPACE = Space.parse([
    {"name": "x", "type": "double", "bounds": [0, 1]},
    {"name": "n", "type": "int", "bounds": [1, 8]},
    {"name": "c", "type": "categorical", "values": ["a", "b"]},
])  # fmt: skip


def _obs(i: int, a: dict, value: float | None = 1.5, sid: str | None = None, **kw) -> Observation:
    failed = value is None
    return Observation(str(i), "e", sid, a, value, failed, 10.0 + i, kw.pop("metrics", {}), kw.pop("stopped", None),
                       {} if value is None else {"loss": value})  # fmt: skip


def test_rows_read_back_exactly_and_odd_rows_stay_whole() -> None:
    h = History("e", "loss", SPACE.key)
    rows = [
        _obs(1, {"x": 0.25, "n": 3, "c": "a"}, 0.5, sid="1"),
        _obs(2, {"c": "b", "x": 0.75, "n": 1}, None),  # another key order; failed
        _obs(3, {"x": 0.5, "n": 2}, 2.0, stopped=4),  # a parameter absent
        _obs(4, {"x": 1, "n": 2, "c": "a"}, 1.0),  # an int where the column holds doubles: kept whole
        _obs(5, {"x": 0.1, "n": 2, "c": "a"}, 1.0, metrics={"t": 3.0}),  # other metrics: kept whole
        Observation("07", "e", None, {"x": 0.2, "n": 2, "c": "b"}, 1.0, False, 1.0, {}, None, {"loss": 1.0}),  # id not plain
        _obs(8, {"x": 0.3, "n": True, "c": "a"}, 3.0),  # a bool in an int column
    ]
    for o in rows:
        h.append(o)
    assert list(h) == rows and len(h) == len(rows) and len(h._whole) == 4  # read: the tail's rows settled
    got = list(h)
    assert got == rows
    for a, b in zip(got, rows):
        assert list(a.assignments.items()) == list(b.assignments.items())
        assert [type(v) for v in a.assignments.values()] == [type(v) for v in b.assignments.values()]
    assert h[-1] == rows[-1] and h[1:3] == rows[1:3]
    assert pickle.loads(pickle.dumps(h.view())) == tuple(rows)
    assert h.rows(0, failed=True) == [rows[1]] and h.rows(1, failed=False, limit=2) == [rows[2], rows[3]]
    assert h.after(2) == 2 and h.rows(h.after(3)) == rows[3:]
    h.set_last(replace(rows[-1], stopped_at_step=9))
    assert h[-1].stopped_at_step == 9 and h[2].stopped_at_step == 4


def test_observed_compares_keys_not_only_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    h = History("e", "loss", SPACE.key)
    a, b = {"x": 0.25, "n": 3, "c": "a"}, {"x": 0.5, "n": 3, "c": "a"}
    h.append(_obs(1, a))
    assert h.observed(SPACE.key(a)) and not h.observed(SPACE.key(b))
    for i in range(5000):  # past the small set: merged into the sorted hashes
        h.append(_obs(i + 2, {"x": i / 5000, "n": 1, "c": "b"}))
    assert h.observed(SPACE.key({"x": 1 / 5000, "n": 1, "c": "b"})) and not h.observed(SPACE.key({"x": 1 / 5000, "n": 2, "c": "b"}))
    assert h.distinct_points() == 5001
    # two points whose hashes collide: the second is still not observed
    monkeypatch.setattr("tauopt.engine._history.hash", lambda key: 7, raising=False)
    h2 = History("e", "loss", SPACE.key)
    h2.append(_obs(1, a))
    assert h2.observed(SPACE.key(a)) and not h2.observed(SPACE.key(b))


def test_a_ledger_lets_its_rows_hold_observed_suggestions() -> None:
    exp = Experiment(id="e", name="e", parameters=SPACE.parameters, metric=Metric("loss"))
    ledger = Ledger(Snapshot(exp), SPACE)
    s = ledger.open_suggestion({"x": 0.5, "n": 2, "c": "a"}, "w1", now=1.0)
    t = ledger.open_suggestion({"x": 0.25, "n": 2, "c": "b"}, None, now=1.5)
    left = ledger.leave_open(s, "observed", 2.0)
    o = ledger.observe(left.assignments, left.id, 0.5, False, 2.0, {})
    assert s.id in ledger._live  # until the row leaves the tail for the columns
    assert ledger.observations[0] == o and s.id not in ledger._live  # then its row holds it
    assert ledger.suggestion(s.id) == left and ledger.suggestions[s.id] == left
    assert [x.id for x in ledger.suggestions.values()] == [s.id, t.id] and len(ledger.suggestions) == 2
    assert ledger.timeline([s.id, t.id, "99"]) == {s.id: (left, 2.0), t.id: (t, None)}
    assert list(ledger.observations) == [o] and ledger.is_used(o.assignments) and ledger.used_count() == 2
    # rebuilt from what a store holds: the same answers
    again = Ledger(Snapshot(exp, (left, t), (o,)), SPACE)
    assert again.suggestion(s.id) == left and list(again.observations) == [o] and again._live == {t.id: t}
    rows = [x.activity.workers(0, x.timeline, 3.0, None)["changes"] for x in (again, ledger)]
    assert sorted(rows[0], key=lambda r: r["id"]) == sorted(rows[1], key=lambda r: r["id"])
    assert {r["id"]: r["ended_at"] for r in rows[0]} == {s.id: 2.0, t.id: None}


def test_the_gp_cut_of_a_columnar_history_is_the_cut_of_its_objects() -> None:
    from tauopt.strategies import SuggestRequest
    from tauopt.strategies.gp import HISTORY_CAP, bound_history

    h = History("e", "loss", SPACE.key)
    for i in range(HISTORY_CAP + 50):
        h.append(_obs(i + 1, {"x": (i * 0.618) % 1, "n": 1 + i % 8, "c": "ab"[i % 2]}, None if i % 7 == 3 else float(i % 97)))
    view = h.view()
    assert view.objective_values() is not None
    cut = [bound_history(SuggestRequest(SPACE, Metric("loss"), history, (), 1, 3, 9)) for history in (view, tuple(h))]
    assert list(cut[0].history) == list(cut[1].history) and cut[0].seen == cut[1].seen == len(h)


def test_a_views_reads_leave_the_history_alone() -> None:
    """A strategy may read its view on a worker thread while the actor appends: the view
    reads the rows it was made with and does not move the history's tail."""
    h = History("e", "loss", SPACE.key)
    for i in range(10):
        h.append(_obs(i + 1, {"x": i / 10, "n": 1, "c": "a"}, float(i)))
    view = h.view()
    h.append(_obs(11, {"x": 0.95, "n": 1, "c": "a"}, 0.5))
    values = view.objective_values()
    assert values is not None and list(values) == [float(i) for i in range(10)] and len(view) == 10
    assert len(h._tail) == 1  # still waiting: only the actor's own reads settle it
    assert list(view) == list(h)[:10] and len(h) == 11


def test_a_views_rows_read_in_a_thread_are_those_it_was_made_with() -> None:
    """A long listing is made into objects in a worker thread from a view while the actor
    appends (and settles) rows: the view's rows, its failed filter and its limit read what
    the history held when the view was made, and the appends go on."""
    h = History("e", "loss", SPACE.key)
    for i in range(300):
        h.append(_obs(i + 1, {"x": i / 1000, "n": 1 + i % 8, "c": "ab"[i % 2]}, None if i % 7 == 0 else float(i)))
    before = list(h)
    view = h.view()
    stop = threading.Event()

    def append() -> None:
        i = 300
        while not stop.is_set() and i < 20_000:
            h.append(_obs(i + 1, {"x": (i % 1000) / 1000, "n": 2, "c": "b"}, float(i)))
            if i % 50 == 0:
                list(h.rows(h.after(i - 10)))  # the actor's own reads settle the tail
            i += 1

    writer = threading.Thread(target=append)
    writer.start()
    try:
        for _ in range(20):
            assert view.rows() == before
            assert view.rows(5, failed=True) == [o for o in before[5:] if o.failed]
            assert view.rows(0, failed=False, limit=10) == [o for o in before if not o.failed][:10]
    finally:
        stop.set()
        writer.join()
    assert len(h) > 300 and list(h)[:300] == before


@pytest.mark.anyio
async def test_a_long_listing_through_the_engine_is_the_same_as_a_short_one() -> None:
    n = INLINE_ROWS + 50
    async with Engine() as engine:
        exp = await engine.create_experiment("e", [{"name": "x", "type": "double", "bounds": [0, 1]}], {"name": "loss", "objective": "minimize"})
        for i in range(n):
            await engine.observe(exp.id, assignments={"x": i / n}, **({"failed": True} if i % 9 == 0 else {"value": float(i)}))
        everything = await engine.observations(exp.id)
        assert [o.assignments["x"] for o in everything] == [i / n for i in range(n)]
        failed = await engine.observations(exp.id, failed=True)
        assert failed == [o for o in everything if o.failed]
        page = await engine.observations(exp.id, after=int(everything[9].id), limit=INLINE_ROWS + 10)
        assert page == everything[10 : 20 + INLINE_ROWS]
        assert await engine.observations(exp.id, limit=5) == everything[:5]


@pytest.mark.parametrize("objective", ["minimize", "maximize"])
def test_a_plot_sample_from_the_columns_is_the_sample_from_the_objects(objective: str) -> None:
    """The dashboard's sample of a long history reads the objective's column and makes only
    the kept rows and the improvements into objects: the same sample as from the objects."""
    h = History("e", "loss", SPACE.key)
    for i in range(5000):
        value = None if i % 11 == 0 else float((i * 7919) % 1009) - (i % 3) * 0.5
        h.append(_obs(i + 1, {"x": i / 5000, "n": 1 + i % 8, "c": "ab"[i % 2]}, value))
    assert h.view().objective_values() is not None  # the column path
    from_columns = downsample(h.view(), objective, 300)
    assert from_columns == downsample(list(h), objective, 300)
    assert len(from_columns.best_trace) > 3 and from_columns.total == 5000
