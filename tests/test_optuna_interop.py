"""Unmodified Optuna programs against a real `tauopt serve --optuna-port`, in several processes.

The daemon is a real process; each worker is a real process whose only tauopt-specific
line is `storage=GrpcStorageProxy(host, port)` (tests/optuna_workers/worker.py).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from test_http_daemon import Daemon, token_of
from test_http_support import free_port

optuna = pytest.importorskip("optuna")
pytest.importorskip("grpc")

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")]

WORKER = Path(__file__).parent / "optuna_workers" / "worker.py"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, int]]:
    port = free_port()
    d = Daemon(tmp_path_factory.mktemp("optuna") / "tauopt.db", "--optuna-port", str(port))
    yield d, port
    if d.proc.poll() is None:
        d.stop()


def storage(port: int) -> Any:
    from optuna.storages import GrpcStorageProxy

    return GrpcStorageProxy(host="127.0.0.1", port=port)


def start(mode: str, port: int, study: str, n: int = 0, seed: int = 0, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    args = [sys.executable, str(WORKER), mode, "127.0.0.1", str(port), study, str(n), str(seed)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_four_tpe_workers_with_pruning_share_one_study_without_duplicate_numbers(served: tuple[Daemon, int]) -> None:
    daemon, port = served
    optuna.create_study(study_name="tpe", storage=storage(port))
    workers = [start("tpe", port, "tpe", 5, seed) for seed in range(4)]
    ran = [result(w)["ran"] for w in workers]
    numbers = sorted(n for r in ran for n in r)
    assert numbers == list(range(20))  # no duplicate, none lost: every worker's trials are its own
    study = optuna.load_study(study_name="tpe", storage=storage(port))
    trials = study.trials
    assert [t.number for t in trials] == list(range(20))
    assert {t.state.name for t in trials} <= {"COMPLETE", "PRUNED"}
    for t in trials:
        assert set(t.params) == {"x", "lr", "kind"} and t.datetime_start is not None and t.datetime_complete is not None
        assert t.intermediate_values and min(t.intermediate_values) == 0
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    assert study.best_value == min(t.value for t in complete)
    # the study is an experiment of the door's credential: the HTTP door lists it
    headers = {"Authorization": f"Bearer {token_of(daemon)}"}
    listed = httpx.get(daemon.url + "/v1/experiments", headers=headers).json()
    exp = next(e for e in listed if e["name"] == "tpe")
    assert [p["name"] for p in exp["parameters"]] == ["x", "lr", "kind"] and exp["observations"] == 20
    observations = httpx.get(f"{daemon.url}/v1/experiments/{exp['id']}/observations", headers=headers).json()
    by_params = {json.dumps(t.params, sort_keys=True): t for t in trials}
    for o in observations:  # each finished trial once: its parameters, and how it ended
        t = by_params.pop(json.dumps(o["assignments"], sort_keys=True))
        if t.state.name == "COMPLETE":
            assert o["value"] == t.value and not o["failed"]
        else:  # pruned: stopped at its last report, no value (never the best, as in Optuna)
            assert o["stopped_at_step"] == max(t.intermediate_values) and o["value"] is None
    assert not by_params
    best = httpx.get(f"{daemon.url}/v1/experiments/{exp['id']}/best", headers=headers).json()
    assert best["value"] == study.best_value
    # each trial is a suggestion (tag "trial"), its intermediate values the suggestion's reports
    suggestions = httpx.get(f"{daemon.url}/v1/experiments/{exp['id']}/suggestions", headers=headers).json()
    assert len(suggestions) == 20 and {(s["state"], s["tag"]) for s in suggestions} == {("observed", "trial")}
    log = httpx.get(f"{daemon.url}/v1/experiments/{exp['id']}/reports", headers=headers, params={"limit": 1000}).json()
    assert len(log["reports"]) == sum(len(t.intermediate_values) for t in trials)


def test_best_trial_read_by_a_fresh_process_is_the_writers(served: tuple[Daemon, int]) -> None:
    _, port = served
    study = optuna.create_study(study_name="fresh", storage=storage(port))
    study.optimize(lambda t: (t.suggest_float("x", -3, 3) - 1) ** 2, n_trials=6)
    best = result(start("best", port, "fresh"))
    assert best == {"number": study.best_trial.number, "value": study.best_value, "params": study.best_params}


def test_a_multi_objective_study_keeps_both_values_and_its_pareto_front(served: tuple[Daemon, int]) -> None:
    _, port = served
    optuna.create_study(study_name="multi", storage=storage(port), directions=["minimize", "maximize"])
    workers = [start("multi", port, "multi", 4, seed) for seed in range(2)]
    outs = [result(w) for w in workers]
    assert sorted(n for o in outs for n in o["ran"]) == list(range(8))
    study = optuna.load_study(study_name="multi", storage=storage(port))
    assert [d.name for d in study.directions] == ["MINIMIZE", "MAXIMIZE"]
    assert all(len(t.values) == 2 for t in study.trials)
    def dominates(a: Any, b: Any) -> bool:  # minimize the first value, maximize the second
        return a.values[0] <= b.values[0] and a.values[1] >= b.values[1] and a.values != b.values

    front = {t.number for t in study.best_trials}
    assert front and front == {t.number for t in study.trials if not any(dominates(o, t) for o in study.trials)}


def test_enqueued_trials_are_claimed_once_and_run_with_their_fixed_params(served: tuple[Daemon, int]) -> None:
    _, port = served
    study = optuna.create_study(study_name="enqueue", storage=storage(port))
    fixed = [{"x": 1.5, "lr": 0.01, "kind": "c"}, {"x": -2.0, "lr": 0.001, "kind": "a"}]
    for params in fixed:
        study.enqueue_trial(params)
    assert [t.state.name for t in study.trials] == ["WAITING", "WAITING"]
    workers = [start("tpe", port, "enqueue", 2, seed) for seed in range(2)]
    assert sorted(n for w in workers for n in result(w)["ran"]) == [0, 1, 2, 3]
    trials = optuna.load_study(study_name="enqueue", storage=storage(port)).trials
    assert [t.params for t in trials[:2]] == fixed
    assert all(t.state.name in ("COMPLETE", "PRUNED") for t in trials)


def test_copy_study_out_to_memory_and_back_keeps_every_trial(served: tuple[Daemon, int]) -> None:
    _, port = served
    study = optuna.create_study(study_name="copy-src", storage=storage(port))
    study.set_user_attr("note", {"nan": math.inf})
    study.optimize(lambda t: t.suggest_int("k", 0, 9) + t.suggest_float("f", 0, 1), n_trials=5)
    memory = optuna.storages.InMemoryStorage()
    optuna.copy_study(from_study_name="copy-src", from_storage=storage(port), to_storage=memory)
    optuna.copy_study(from_study_name="copy-src", from_storage=memory, to_storage=storage(port), to_study_name="copy-back")
    back = optuna.load_study(study_name="copy-back", storage=storage(port))
    keep = ("number", "state", "values", "params", "user_attrs", "datetime_start", "datetime_complete")
    assert [[getattr(t, k) for k in keep] for t in back.trials] == [[getattr(t, k) for k in keep] for t in study.trials]
    assert back.user_attrs == {"note": {"nan": math.inf}}
    assert {s.study_name for s in optuna.get_all_study_summaries(storage(port))} >= {"copy-src", "copy-back"}


def test_a_killed_workers_running_trial_stays_accounted_for_and_can_be_failed(served: tuple[Daemon, int]) -> None:
    """GrpcStorageProxy is no heartbeat storage in Optuna 5.0 (neither with Optuna's own
    proxy server): `fail_stale_trials` through it changes nothing. The dead worker's
    trial stays RUNNING, visible to every process, until a process fails it."""
    _, port = served
    optuna.create_study(study_name="stale", storage=storage(port))
    hang = start("hang", port, "stale")
    assert hang.stdout is not None
    number = json.loads(hang.stdout.readline())["number"]
    hang.send_signal(signal.SIGKILL)
    hang.communicate(timeout=30)
    study = optuna.load_study(study_name="stale", storage=storage(port))
    optuna.storages.fail_stale_trials(study)
    assert [t.state.name for t in study.trials] == ["RUNNING"]
    headers = {"Authorization": f"Bearer {token_of(served[0])}"}
    listed = httpx.get(served[0].url + "/v1/experiments", headers=headers).json()
    exp = next(e for e in listed if e["name"] == "stale")
    assert exp["open_suggestions"] == 1  # the running trial, for every door to see
    study.tell(number, state=optuna.trial.TrialState.FAIL)
    assert [t.state.name for t in study.trials] == ["FAIL"]
    exp = httpx.get(f"{served[0].url}/v1/experiments/{exp['id']}", headers=headers).json()
    assert exp["open_suggestions"] == 0 and exp["observations"] == 1
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        study._storage.set_trial_user_attr(study.trials[0]._trial_id, "late", 1)


def test_tauopt_sampler_workers_over_http_suggest_for_a_door_study(served: tuple[Daemon, int]) -> None:
    """TauoptSampler in two worker processes, asking the daemon over HTTP, storing in the door."""
    daemon, port = served
    optuna.create_study(study_name="sampled", storage=storage(port))
    env = dict(os.environ, TAUOPT_BASE_URL=daemon.url, TAUOPT_TOKEN=token_of(daemon))
    workers = [start("tauopt", port, "sampled", 4, seed, env) for seed in range(2)]
    assert sorted(n for w in workers for n in result(w)["ran"]) == list(range(8))
    trials = optuna.load_study(study_name="sampled", storage=storage(port)).trials
    held = [t for t in trials if "tauopt:suggestion_id" in t.system_attrs]
    assert len(held) >= 6  # all but the first trial of each worker (the space is not known yet)
    headers = {"Authorization": f"Bearer {token_of(daemon)}"}
    for t in held:  # (two first trials at once may each have made an experiment: each trial names its own)
        experiment_id, suggestion_id = t.system_attrs["tauopt:suggestion_id"].split("/")
        s = httpx.get(f"{daemon.url}/v1/experiments/{experiment_id}/suggestions/{suggestion_id}", headers=headers).json()
        assert s["assignments"] == t.params and s["state"] in ("observed", "closed")


def test_a_study_asking_for_served_suggestions_runs_tauopts_points_in_unmodified_workers(served: tuple[Daemon, int]) -> None:
    """Four unmodified TPE workers; the study's user attribute asks tauopt to serve its
    points: WAITING trials carrying `fixed_params`, claimed once each, run as served."""
    _, port = served
    study = optuna.create_study(study_name="served", storage=storage(port))
    study.set_user_attr("tauopt:serve_suggestions", "sobol")
    workers = [start("tpe", port, "served", 4, seed) for seed in range(4)]
    ran = sorted(n for w in workers for n in result(w)["ran"])
    assert len(ran) == len(set(ran)) == 16  # no trial run twice, none lost
    trials = optuna.load_study(study_name="served", storage=storage(port)).trials
    assert [t.number for t in trials] == list(range(len(trials)))
    assert sorted(t.number for t in trials if t.state.name in ("COMPLETE", "PRUNED")) == ran
    assert {t.state.name for t in trials if t.number not in ran} <= {"WAITING"}  # served, not yet claimed
    served_run = [t for t in trials if t.number in ran and "tauopt:served" in t.system_attrs]
    assert len(served_run) >= 8  # every trial after the space is known (the first to finish) can be served
    for t in served_run:
        assert t.params == t.system_attrs["fixed_params"]  # the worker's TPE ran tauopt's point
    import grpc

    with pytest.raises(grpc.RpcError) as err:  # Optuna's client maps no status of this call to an exception of its own
        study.set_user_attr("tauopt:serve_suggestions", "no-such-strategy")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_tauopts_early_stopping_rule_prunes_trials_of_workers_using_tauopt_pruner(served: tuple[Daemon, int]) -> None:
    """The study opts in to tauopt's median rule (a user attribute); the worker's only
    change is `pruner=TauoptPruner()`. Trials worse than the median of the completed
    ones at a step are told so through their system attributes, and prune."""
    daemon, port = served
    study = optuna.create_study(study_name="tauopt-rule", storage=storage(port))
    study.set_user_attr("tauopt:early_stopping", {"rule": "median", "min_trials": 2})
    xs = [1.0, 1.2, -5.0, 0.9, 4.9]  # losses ~1, ~1, ~37, ~1, ~16: the 3rd and 5th are worse than the median
    for x in xs:
        study.enqueue_trial({"x": x, "lr": 0.01, "kind": "a"})
    ran = result(start("pruned", port, "tauopt-rule", len(xs)))["ran"]
    assert ran == [0, 1, 2, 3, 4]
    trials = optuna.load_study(study_name="tauopt-rule", storage=storage(port)).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE", "PRUNED", "COMPLETE", "PRUNED"]
    for t in trials:  # pruned exactly where tauopt's rule said so, at the first step it could
        stop = t.system_attrs.get("tauopt:should_stop")
        assert (stop is not None) == (t.state.name == "PRUNED")
        if stop is not None:
            assert stop["step"] == 0 == max(t.intermediate_values) and "median" in stop["reason"]
    # the rule is the experiment's, for every door
    headers = {"Authorization": f"Bearer {token_of(daemon)}"}
    exp = next(e for e in httpx.get(daemon.url + "/v1/experiments", headers=headers).json() if e["name"] == "tauopt-rule")
    assert exp["early_stopping"] == {"rule": "median", "min_trials": 2, "grace_steps": 0}
    observations = httpx.get(f"{daemon.url}/v1/experiments/{exp['id']}/observations", headers=headers).json()
    assert sorted(o["stopped_at_step"] is not None for o in observations) == [False, False, False, True, True]
