"""Two real `tauopt serve` daemons on one PostgreSQL database, each with its Optuna
door: unmodified Optuna programs (GrpcStorageProxy) pointed at the daemon that does
not own their study are served by the owner through the relay; study ids are unique
across daemons; the owner SIGKILLed mid-run, a worker on the other daemon rides
through with nothing acknowledged lost and no trial twice."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from test_http_daemon import Daemon
from test_http_support import free_port

optuna = pytest.importorskip("optuna")
pytest.importorskip("grpc")

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")]

HERE = Path(__file__).parent
LEASE_S = 1.5


class Pair:
    """Two daemons sharing `pg_url`, each serving HTTP and the Optuna door."""

    def __init__(self, pg_url: str, cwd: Path) -> None:
        self.daemons: list[Daemon] = []
        self.optuna: list[int] = []
        for name in ("a", "b"):
            port, door = free_port(), free_port()
            self.daemons.append(Daemon(
                pg_url, "--advertise-url", f"http://127.0.0.1:{port}", "--lease-s", str(LEASE_S),
                "--optuna-port", str(door), cwd=cwd, port=port, log=cwd / f"{name}.log",
            ))  # fmt: skip
            self.optuna.append(door)

    def storage(self, i: int) -> Any:
        from optuna.storages import GrpcStorageProxy

        return GrpcStorageProxy(host="127.0.0.1", port=self.optuna[i])

    def owned(self, i: int) -> int:
        health = httpx.get(self.daemons[i].url + "/v1/health", timeout=10).json()
        return int(health["owned_experiments"])

    def stop(self) -> None:
        for d in self.daemons:
            if d.proc.poll() is None:
                d.stop()


@pytest.fixture(scope="module")
def pair(pg_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """One pair for the file: the failover test, which kills daemon a, runs last."""
    served = Pair(pg_cluster.url(search_path=pg_cluster.new_schema()), tmp_path_factory.mktemp("relay"))
    yield served
    served.stop()


def test_optuna_workers_at_a_daemon_that_does_not_own_the_study_are_served_by_its_owner(pair: Pair) -> None:
    created = [optuna.create_study(study_name=f"s{i}", storage=pair.storage(i % 2)) for i in range(4)]
    ids = [s._study_id for s in created]
    assert len(set(ids)) == 4  # made at both daemons: ids unique across them
    assert (pair.owned(0), pair.owned(1)) == (2, 2)
    with pytest.raises(optuna.exceptions.DuplicatedStudyError):  # a name taken at the other daemon
        optuna.create_study(study_name="s0", storage=pair.storage(1))
    for i in (0, 1):  # every study listed at each daemon, answered from the shared store
        listed = {s.study_name: s._study_id for s in pair.storage(i).get_all_studies()}
        assert listed == {f"s{k}": ids[k] for k in range(4)}

    # two unmodified Optuna programs at b, on s0 (made at a, so a's): served by a through b
    workers = [
        subprocess.Popen([sys.executable, str(HERE / "optuna_workers" / "worker.py"), "tpe", "127.0.0.1",
                          str(pair.optuna[1]), "s0", "4", str(seed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for seed in (1, 2)
    ]  # fmt: skip
    ran = []
    for w in workers:
        out, err = w.communicate(timeout=120)
        assert w.returncode == 0, err[-3000:]
        ran += json.loads(out.strip().splitlines()[-1])["ran"]
    assert sorted(ran) == list(range(8))  # no number twice
    trials = pair.storage(0).get_all_trials(ids[0])
    assert len(trials) == 8 and all(t.state.is_finished() for t in trials)
    assert (pair.owned(0), pair.owned(1)) == (2, 2)  # still a's: b relayed, it took nothing

    optuna.delete_study(study_name="s1", storage=pair.storage(0))  # b's study, deleted through a
    assert {s.study_name for s in pair.storage(1).get_all_studies()} == {"s0", "s2", "s3"}
    again = optuna.create_study(study_name="s1", storage=pair.storage(1))  # its name is free again
    assert again._study_id not in ids  # its id never given again


def test_the_owner_sigkilled_a_worker_at_the_other_daemon_rides_through(pair: Pair) -> None:
    study = optuna.create_study(study_name="failover", storage=pair.storage(0))  # a's
    owned_by_b = pair.owned(1)
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "optuna_workers" / "failover.py"), "127.0.0.1", str(pair.optuna[1]), "failover", "24", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert worker.stdout is not None
    told = [json.loads(worker.stdout.readline()) for _ in range(8)]  # under way, through b, served by a
    a = pair.daemons[0]
    a.proc.send_signal(signal.SIGKILL)
    killed_at = time.time()
    a.proc.communicate(timeout=10)
    out, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err[-3000:]
    told += [json.loads(line) for line in out.splitlines()]
    assert pair.owned(1) == owned_by_b + 1  # b took the study once a's lease lapsed

    assert len(told) == 24
    trials = {t.number: t for t in pair.storage(1).get_all_trials(study._study_id)}
    for t in told:  # every acknowledged tell is stored, with its value
        assert trials[t["number"]].state == optuna.trial.TrialState.COMPLETE
        assert trials[t["number"]].value == pytest.approx(t["value"])
        assert trials[t["number"]]._trial_id == t["trial_id"]
    assert len({t["number"] for t in told}) == 24  # no trial told twice
    complete = [n for n, t in trials.items() if t.state == optuna.trial.TrialState.COMPLETE]
    assert sorted(complete) == sorted(t["number"] for t in told)  # nothing completed that was not told
    assert sorted(trials) == list(range(len(trials)))  # numbers dense, none twice
    after = [t["t"] - killed_at for t in told if t["t"] > killed_at]
    assert after and after[0] < LEASE_S + 10  # served again within the lease bound plus a loaded machine's slack
    print(f"\nOptuna door failover: first tell acknowledged {after[0]:.2f} s after the kill")
