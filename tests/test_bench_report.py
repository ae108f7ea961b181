"""The contention benchmark's report, as pure functions of result rows: each door's
share of the floor measured in its own shape, the Optuna ratios (a tuple of Optuna
configurations compares with the best of them), and issue 16's targets."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from _bench_report import floor_for, floor_shares, markdown, ratios, targets  # noqa: E402


def _row(name: str, kind: str, pps: float, p99: float = 1.0, **shape: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "name": name,
        "pairs_per_s": pps,
        "ask_ms": {"p50": p99 / 2, "p95": p99, "p99": p99, "max": p99},
        "observe_ms": {"p50": 0.1, "p99": 0.2},
        "errors": {},
        "invariants": {"ok": True, "duplicates": 0, "max_open_seen": 1, "bandwidth": 1, "open_from": "n/a"},
        **shape,
    }


def _door(name: str, pps: float, p99: float = 1.0, **shape: Any) -> dict[str, Any]:
    door, store, _strategy, w = name.split("/")[:4]
    base = {"door": door, "store": store, "workers": int(w[1:]), "procs": 1, "eval_s": 0.0}
    return _row(name, "contention", pps, p99, **{**base, **shape})


def test_each_door_row_is_compared_with_the_floor_of_its_own_shape() -> None:
    assert floor_for(_door("inproc/memory/random/w64/e100", 1)) == "floor/mailbox/w64"
    assert floor_for(_door("http/sqlite/random/w64/p4/e1", 1, procs=4, client="httpx")) == "floor/http/w64/p4"
    assert floor_for(_door("http/sqlite/random/w64/p4/e1/raw", 1, procs=4, client="raw")) == "floor/http/w64/p4/raw"
    assert floor_for(_door("kerastuner/sqlite/random/w8/p2/e1", 1, procs=2)) == "floor/kerastuner/w8/p2"
    # the chief on the memory store is measured against the same floor: the door's cost apart from the store's
    assert floor_for(_door("kerastuner/memory/random/w8/p2/e1", 1, procs=2)) == "floor/kerastuner/w8/p2"
    # evaluation time is not in any floor
    assert floor_for(_door("inproc/sqlite/random/w64/e1/eval0.05", 1, eval_s=0.05)) is None


def test_floor_shares_divide_by_the_floor_that_ran_and_skip_rows_without_one() -> None:
    results = [
        _door("inproc/memory/random/w64/e1", 600.0),
        _door("inproc/memory/random/w1/e1", 100.0),  # no floor/mailbox/w1 in this run
        _row("floor/mailbox/w64", "floor", 1000.0),
    ]
    shares = floor_shares(results)
    assert shares == {"inproc/memory/random/w64/e1": (0.6, "floor/mailbox/w64")}
    report = markdown(results, [], "x", {})
    assert "| inproc/memory/random/w64/e1 | 600.0 | 60% of mailbox/w64 |" in report
    assert "| inproc/memory/random/w1/e1 | 100.0 | – |" in report


def test_a_ratio_against_several_optuna_rows_takes_the_fastest_of_them() -> None:
    results = [
        _door("inproc/memory/random/w8/e1/float2", 9000.0, p99=2.0),
        _row("optuna/memory/random/threads8/float2", "optuna", 4000.0, p99=8.0),
        _row("optuna/memory/random/threads32/float2", "optuna", 4500.0, p99=9.0),
    ]
    (r,) = ratios(results)
    assert r["optuna"] == "optuna/memory/random/threads32/float2"
    assert r["throughput_ratio"] == 2.0
    assert r["ask_p99_ratio"] == round(2.0 / 9.0, 3)


def test_targets_say_which_goals_this_run_met() -> None:
    results = [
        _door("inproc/memory/random/w64/e1", 600.0),
        _door("inproc/sqlite/random/w64/e1", 450.0),  # 0.75 of memory: missed
        _door("inproc/memory/random/w64/e100", 500.0, p99=10.0),
        _door("inproc/sqlite/random/w64/e100", 400.0, p99=29.0),
        _row("floor/mailbox/w64", "floor", 1000.0),
        _door("inproc/memory/random/w1/e1/float2", 7000.0),
        _row("optuna/memory/random/threads1/float2", "optuna", 7100.0),
    ]
    got = {t["name"]: (t["measured"], t["met"]) for t in targets(results, ratios(results))}
    assert got["inproc memory, 64 workers: share of floor/mailbox/w64"] == (0.6, True)
    assert got["inproc SQLite / memory, 64 workers (pairs/s)"] == (0.75, False)
    assert got["100 experiments: SQLite ask p99 / memory ask p99"] == (2.9, True)
    assert got["two floats, 1 worker: inproc / Optuna 1 thread"] == (0.99, False)
    assert not any("http" in name for name in got)  # goals of doors that did not run are left out
