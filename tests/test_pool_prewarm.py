"""Long operations speak (issue 20): the daemon logs one line when its GP pool
starts warming and one when it is ready; `tauopt serve` warms the pool in the
background at start (fresh, or restarted over a database with an active GP
experiment), before any ask, and answers meanwhile."""

from __future__ import annotations

import selectors
import time
from pathlib import Path

import httpx
import pytest

from tauopt import Client
from tauopt.strategies import uses_pool
from test_http_daemon import Daemon

GP = {
    "name": "gp-search",
    "parameters": [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}],
    "metric": {"name": "y", "objective": "minimize"},
    "strategy": "gp",
}


def test_which_strategies_use_the_pool() -> None:
    assert not uses_pool("random") and not uses_pool("sobol") and not uses_pool("grid")
    assert uses_pool("gp") == uses_pool("auto")  # auto turns into gp after its initial design
    assert not uses_pool("no-such-strategy")


def lines_until(daemon: Daemon, needle: str, timeout_s: float) -> list[str]:
    """stderr lines up to the one containing `needle` (bounded: fails after timeout_s)."""
    assert daemon.proc.stderr is not None
    sel = selectors.DefaultSelector()
    sel.register(daemon.proc.stderr, selectors.EVENT_READ)
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sel.select(timeout=1.0):
            line = daemon.proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if needle in line:
                return seen
    raise AssertionError(f"no {needle!r} in the daemon's log:\n{''.join(seen)}")


@pytest.mark.slow
def test_a_restarted_daemon_with_a_gp_experiment_warms_its_pool_before_any_ask(tmp_path: Path) -> None:
    db = tmp_path / "tauopt.db"
    with Client(driver="local", store=str(db), pool="thread") as c:
        exp = c.create_experiment(**GP)
    d = Daemon(db, "--pool", "process", "--log-level", "info")
    try:
        log = lines_until(d, "GP pool: ready", timeout_s=180)
        warming = [line for line in log if "GP pool: warming" in line]
        assert len(warming) == 1 and "INFO" in warming[0], log
        assert not any(exp.id in line for line in log), "no request touched the experiment"
    finally:
        code, _, err = d.stop()
    assert code == 0, err


@pytest.mark.slow
def test_a_fresh_daemon_warms_its_pool_in_the_background_and_answers_meanwhile(tmp_path: Path) -> None:
    # no experiment at all: the first GP experiment a user makes finds the pool warming or ready
    d = Daemon(tmp_path / "fresh.db", "--pool", "process", "--log-level", "info")  # returns once /v1/health answers
    try:
        lines_until(d, "GP pool: warming", timeout_s=60)
        started = time.monotonic()
        health = httpx.get(d.url + "/v1/health", timeout=30)
        answered_s = time.monotonic() - started
        log = lines_until(d, "GP pool: ready", timeout_s=180)
        assert health.status_code == 200 and answered_s < 5.0, answered_s  # not held by the warm-up (seconds of torch imports)
        assert not any("GP pool: warming" in line for line in log), "warmed once"
    finally:
        code, _, err = d.stop()
    assert code == 0, err


def test_no_warm_pool_leaves_the_pool_to_the_first_gp_ask(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "cold.db", "--pool", "process", "--log-level", "info", "--no-warm-pool")
    code, _, err = d.stop()
    assert code == 0 and "GP pool" not in err, err


@pytest.mark.anyio
async def test_the_start_scan_for_pooled_experiments_reads_small_pages_of_strategies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan runs on the store's reader while requests are served: each of its reads
    must be short, or a cold ask's index row waits behind a page of 1,000 decoding."""
    from tauopt import Engine
    from tauopt.store import MemoryStore
    from tauopt.store._sqlite import SqliteStore

    db = str(tmp_path / "t.db")
    async with Engine(store=db, pool=None) as engine:
        for i in range(250):
            await engine.create_experiment(f"e{i}", GP["parameters"], GP["metric"], strategy="gp" if i == 230 else "random")
        await engine.archive_experiment((await engine.experiments())[230].id)  # an archived GP one does not count
        ids = [e.id for e in await engine.experiments("active")]
    limits: list[int] = []
    read = SqliteStore.active_strategies

    async def recorded(self: SqliteStore, after: str | None = None, limit: int = 100) -> tuple[list[str], str | None]:
        limits.append(limit)
        return await read(self, after, limit)

    monkeypatch.setattr(SqliteStore, "list_experiments", None)  # no experiment is decoded
    monkeypatch.setattr(SqliteStore, "active_strategies", recorded)
    async with Engine(store=db, pool=None) as engine:
        assert not await engine._an_active_experiment_is_pooled()  # every page read, none pooled
        assert await engine.store.active_strategies(ids[100], 3) == (["random"] * 3, ids[103])
        assert await engine.store.active_strategies(ids[-1], 3) == ([], None)
    assert limits and all(n <= 100 for n in limits) and len(limits) >= 3, limits
    async with MemoryStore() as memory:  # the fallback: the same answers from a listing
        async with Engine(store=memory, pool=None) as engine:
            made = [await engine.create_experiment(f"m{i}", GP["parameters"], GP["metric"], strategy=s) for i, s in enumerate(("random", "gp", "sobol"))]
            assert await memory.active_strategies(made[0].id, 5) == (["gp", "sobol"], made[2].id)
            assert await engine._an_active_experiment_is_pooled()


@pytest.mark.anyio
async def test_warm_pool_runs_the_initial_designs_imports_before_any_experiment() -> None:
    """Every new experiment's first ask needs the initial design's imports (scipy for
    sobol); with `warm_pool` they run at start, so that ask does not wait for them."""
    import anyio

    from tauopt import Engine
    from tauopt.strategies import AUTO, warm_up_for

    design_warm_up = warm_up_for(AUTO)
    assert design_warm_up is not None
    async with Engine(pool="thread", warm_pool=True) as engine:
        with anyio.fail_after(60):
            while design_warm_up not in engine._warmed:
                await anyio.sleep(0.01)
            await engine._warmed[design_warm_up].wait()
        assert not await engine.experiments()
    async with Engine(pool="thread") as engine:  # without it: nothing runs before an experiment starts
        await anyio.sleep(0.2)
        assert design_warm_up not in engine._warmed
