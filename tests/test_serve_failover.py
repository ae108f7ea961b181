"""Two real `tauopt serve` processes on one PostgreSQL database, worker processes
asking and observing through both URLs; one daemon is SIGKILLed mid-run. Nothing
acknowledged is lost, no suggestion or point is handed out twice, and every
experiment is served again within the lease bound."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tauopt import ApiError, Client
from tauopt.store import open_store

from test_http_daemon import Daemon

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
LEASE_S = 1.5
SPACE = [{"name": "x", "type": "double", "bounds": (0, 1)}, {"name": "k", "type": "int", "bounds": (0, 1000)}]


def start_load(
    urls: str, token: str, tmp_path: Path, pairs: int, experiments: list[str], mid_run: int
) -> tuple[list[Path], list[subprocess.Popen[str]]]:
    """Three worker processes (tests/failover_worker.py) asking and observing `pairs` times
    each; returns once `mid_run` observations are acknowledged, so what follows happens under load."""
    logs = [tmp_path / f"worker{i}.jsonl" for i in range(3)]
    workers = [
        subprocess.Popen([sys.executable, str(HERE / "failover_worker.py"), urls, token, str(log), str(pairs), *experiments],
                         stderr=subprocess.PIPE, text=True)
        for log in logs
    ]  # fmt: skip
    while sum(p.read_text().count("observe") for p in logs if p.exists()) < mid_run:
        assert all(w.poll() is None for w in workers), [w.communicate()[1] for w in workers]
        time.sleep(0.05)
    return logs, workers


def finish_load(workers: list[subprocess.Popen[str]]) -> None:
    try:
        for w in workers:
            _, err = w.communicate(timeout=120)
            assert w.returncode == 0, err
    finally:  # a failed worker leaves none of the others running into the next test
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.communicate(timeout=10)


def logged_events(logs: list[Path]) -> list[dict[str, Any]]:
    return [json.loads(line) for log in logs for line in log.read_text().splitlines()]


def stored(pg_url: str, experiments: list[str]) -> dict[str, Any]:
    """Each experiment's snapshot, read from the database."""

    async def load() -> dict[str, Any]:
        async with open_store(pg_url, exclusive=False) as store:
            return {eid: await store.load(eid) for eid in experiments}

    return anyio.run(load)


def test_a_sigkilled_daemon_loses_no_acknowledged_write_and_its_experiments_move(pg_url: str, tmp_path: Path) -> None:
    a = Daemon.shared(pg_url, LEASE_S, cwd=tmp_path)
    b = Daemon.shared(pg_url, LEASE_S, cwd=tmp_path)
    try:
        token = (tmp_path / "tauopt.token").read_text().strip()
        experiments = []
        for owner in (a, b, a, b):  # each daemon owns the experiments it created
            with Client(base_url=owner.url, token=token) as c:
                experiments.append(c.create_experiment("failover", SPACE, {"name": "y"}, parallel_bandwidth=8).id)
        with Client(base_url=b.url, token=token) as c:  # asked at b, served by a: forwarded
            assert c.experiment(experiments[0]).id == experiments[0]
        who = {d.url: httpx.get(d.url + "/v1/health", timeout=10).json() for d in (a, b)}  # no token
        assert all(h["ready"] and h["shared"] and (h["owned_experiments"], h["live_daemons"]) == (2, 2) for h in who.values())
        assert not any(eid in json.dumps(who) for eid in experiments)  # counts only, unauthenticated
        with Client(base_url=b.url, token=token) as c:  # the dashboard's line: who owns what
            assert c.summary(experiments[0])["served_by"] == who[a.url]["daemon_id"] != who[b.url]["daemon_id"]
        scrape = httpx.get(b.url + "/metrics", timeout=10).text
        assert f'tauopt_daemon_info{{daemon_id="{who[b.url]["daemon_id"]}"}} 1.0' in scrape
        assert "tauopt_daemon_owned_experiments 2.0" in scrape and "tauopt_daemons_live 2.0" in scrape
        assert not any(eid in scrape for eid in experiments)

        logs, workers = start_load(f"{a.url},{b.url}", token, tmp_path, 60, experiments, mid_run=45)
        a.proc.send_signal(signal.SIGKILL)
        killed_at = time.time()
        a.proc.communicate(timeout=10)  # reaps it and closes its pipes
        finish_load(workers)
    finally:
        for d in (a, b):
            if d.proc.poll() is None:
                d.stop()

    events = logged_events(logs)
    suggested = [e for e in events if e["kind"] == "suggest"]
    observed = {(e["e"], e["id"]): e["v"] for e in events if e["kind"] == "observe"}
    assert len(observed) == 180 and len(suggested) == 180
    assert len({(e["e"], e["id"]) for e in suggested}) == 180  # no suggestion id handed out twice

    snaps = stored(pg_url, experiments)
    for eid in experiments:
        snap = snaps[eid]
        rows = {o.suggestion_id: o.value for o in snap.observations}  # type: ignore[attr-defined]
        acked = {sid: v for (e, sid), v in observed.items() if e == eid}
        assert {sid: rows.get(sid) for sid in acked} == acked  # every acknowledged observation is stored
        points = [tuple(sorted(s.assignments.items())) for s in snap.suggestions]  # type: ignore[attr-defined]
        assert len(points) == len(set(points))  # no point handed out twice
        assert len(snap.observations) == len(acked)  # type: ignore[attr-defined]

    # every experiment was served again after the kill, within the lease bound plus a loaded machine's slack
    after = {}
    for e in sorted(events, key=lambda e: e["t"]):
        if e["t"] > killed_at and e["e"] not in after:
            after[e["e"]] = e["t"] - killed_at
    assert set(after) == set(experiments)
    print(f"\nfailover: each experiment served again after the kill within {json.dumps({k[:6]: round(v, 2) for k, v in after.items()})} s")
    assert max(after.values()) < LEASE_S + 30  # bounded: a lapsed owner's experiments do not stay stuck


def test_a_frozen_daemon_loses_its_experiments_and_exits_when_it_wakes(pg_url: str, tmp_path: Path) -> None:
    a = Daemon.shared(pg_url, LEASE_S, cwd=tmp_path)
    b = Daemon.shared(pg_url, LEASE_S, cwd=tmp_path)
    try:
        token = (tmp_path / "tauopt.token").read_text().strip()
        with Client(base_url=a.url, token=token) as c:
            exp = c.create_experiment("frozen", SPACE, {"name": "y"}, parallel_bandwidth=4)
            first = c.suggest(exp.id)
        a.proc.send_signal(signal.SIGSTOP)  # a keeps its connections, not its lease
        try:
            with Client(base_url=b.url, token=token) as c:
                deadline = time.monotonic() + 30
                while True:  # forwarded to a frozen daemon: 503 after 2 leases, until b takes the experiment
                    try:
                        second = c.suggest(exp.id)
                        break
                    except ApiError as exc:
                        assert exc.error_type == "unavailable" and time.monotonic() < deadline, exc
                c.observe(exp.id, suggestion_id=first.id, value=1.0)
        finally:
            a.proc.send_signal(signal.SIGCONT)
        _, err = a.proc.communicate(timeout=30)  # it finds its lease lapsed and stops by itself
        assert a.proc.returncode == 1 and "lease" in err and "lapsed" in err, err
        with Client(base_url=b.url, token=token) as c:
            assert c.experiment(exp.id).observations == 1
            assert {s.id for s in c.suggestions(exp.id, state="open")} == {second.id}
    finally:
        for d in (a, b):
            if d.proc.poll() is None:
                d.stop()


def test_the_database_restarted_under_load_loses_no_acknowledged_write(
    pg_url: str, pg_cluster: Any, tmp_path: Path
) -> None:
    d = Daemon(pg_url, cwd=tmp_path, log=tmp_path / "daemon.log")
    try:
        token = (tmp_path / "tauopt.token").read_text().strip()
        with Client(base_url=d.url, token=token) as c:
            experiments = [c.create_experiment("restart", SPACE, {"name": "y"}, parallel_bandwidth=8).id for _ in range(3)]
        logs, workers = start_load(d.url, token, tmp_path, 40, experiments, mid_run=30)
        pg_cluster.stop()  # fast shutdown: every connection of the daemon ends
        time.sleep(1.0)  # the workers meet store_unavailable meanwhile, and retry
        pg_cluster.start()
        finish_load(workers)
        assert d.proc.poll() is None  # the daemon reconnected by itself
    finally:
        if d.proc.poll() is None:
            d.stop()

    events = logged_events(logs)
    observed = {(e["e"], e["id"]): e["v"] for e in events if e["kind"] == "observe"}
    suggested = [(e["e"], e["id"]) for e in events if e["kind"] == "suggest"]
    assert len(observed) == 120 and len(suggested) == len(set(suggested)) == 120

    for eid, snap in stored(pg_url, experiments).items():
        acked = {sid: v for (e, sid), v in observed.items() if e == eid}
        assert {o.suggestion_id: o.value for o in snap.observations} == acked  # all kept, nothing extra
        points = [tuple(sorted(s.assignments.items())) for s in snap.suggestions]
        assert len(points) == len(set(points))
