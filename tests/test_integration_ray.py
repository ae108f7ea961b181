"""`tauopt.integrations.ray.TauoptSearch` on a real local Ray (one per module, 2 CPUs):
Tune trials are suggestions tagged with the trial id, results are reports that
tauopt's rule can stop, ends are observations; a restored Tune run continues the
same experiment over a real `tauopt serve`."""

from __future__ import annotations

import ast
import functools
import signal
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

ray = pytest.importorskip("ray")
from ray import tune  # noqa: E402
from ray.tune.search import ConcurrencyLimiter  # noqa: E402

from tauopt import Client  # noqa: E402
from tauopt.integrations.ray import MissingMetricError, TauoptSearch, parameters_from_ray_space  # noqa: E402
from test_http_daemon import Daemon, token_of  # noqa: E402
from test_readme_programs import marked, run_in_process  # noqa: E402

SPACE = {"x": tune.uniform(-1.0, 1.0), "model": {"layers": tune.randint(1, 4), "act": tune.choice(["relu", "tanh"])}, "seed": 7}
STEPS = 9


def objective(config: dict[str, Any]) -> None:
    """A fast curve: the loss falls with the step towards (x - 0.3)^2."""
    assert config["seed"] == 7 and set(config["model"]) == {"layers", "act"}
    for step in range(1, STEPS + 1):
        tune.report({"loss": (config["x"] - 0.3) ** 2 + 1.0 / step})


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import tests/
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def tuner(search: Any, path: Path, samples: int, stop: Any, callbacks: list[Any]) -> tune.Tuner:
    return tune.Tuner(
        objective,
        tune_config=tune.TuneConfig(search_alg=search, num_samples=samples, reuse_actors=True),
        run_config=tune.RunConfig(name="run", storage_path=str(path), stop=stop, callbacks=callbacks, verbose=0),
    )


def test_the_space_becomes_tauopt_parameters_and_unsupported_entries_say_what_to_use() -> None:
    params = parameters_from_ray_space(SPACE)
    assert {p["name"]: p for p in params} == {
        "x": {"name": "x", "type": "double", "bounds": (-1.0, 1.0), "scale": "linear"},
        "model/layers": {"name": "model/layers", "type": "int", "bounds": (1, 3), "scale": "linear"},
        "model/act": {"name": "model/act", "type": "categorical", "values": ["relu", "tanh"]},
    }
    with pytest.raises(ValueError, match="grid_search"):
        parameters_from_ray_space({"a": tune.grid_search([1, 2])})
    with pytest.raises(ValueError, match="tune.uniform"):
        parameters_from_ray_space({"a": tune.randn(0.0, 1.0)})


def test_trials_map_to_tagged_suggestions_reports_and_one_observation_each() -> None:
    """Without Tune: the searcher's calls, as Tune makes them, on a local client."""
    with Client(driver="local") as client:
        search = TauoptSearch(SPACE, metric="loss", mode="min", client=client, early_stopping={"rule": "asha", "max_step": 9})
        search.set_search_properties(None, None, {})
        config = search.suggest("t1")
        assert config["seed"] == 7 and set(config["model"]) == {"layers", "act"}  # the constants of its own space too
        eid = search.experiment_id
        assert eid is not None and [s.tag for s in client.suggestions(eid)] == ["t1"]
        for step in (1, 2, 2):  # a repeated step (a restarted trial) is not reported twice
            search.on_trial_result("t1", {"loss": 1.0 / step, "training_iteration": step})
        assert [(r.step, r.value) for r in client.reports(eid)] == [(1, 1.0), (2, 0.5)]
        with pytest.raises(MissingMetricError, match="'loss'"):
            search.on_trial_result("t1", {"acc": 1.0, "training_iteration": 3})
        search.on_trial_complete("t1", {"loss": 0.5, "training_iteration": 2})
        search.suggest("t2")
        search.on_trial_complete("t2", error=True)
        obs = client.observations(eid)
        assert [(o.suggestion_id, o.value, o.failed) for o in obs] == [("1", 0.5, False), ("2", None, True)]
        assert client.experiment(eid).metric.objective == "minimize"


def test_the_readme_tune_program_runs_real_trials_and_tauopts_rule_stops_some(
    local_ray: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = marked()["integrations/ray_tune.py"]
    db = tmp_path / "tauopt.db"
    for shown, here in (
        ('Client(driver="local")', f'Client(driver="local", store={str(db)!r})'),  # read back below
        ("tune.RunConfig(stop=", f"tune.RunConfig(storage_path={str(tmp_path)!r}, verbose=0, stop="),
        ("num_samples=6)", "num_samples=6, reuse_actors=True)"),  # one worker process per slot, not per trial
    ):
        assert code.count(shown) == 1, shown
        code = code.replace(shown, here)
    ns = run_in_process(code, "integrations/ray_tune.py")
    best = ast.literal_eval(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(best) == {"lr", "layers"}
    trials = {r.metrics["trial_id"]: r.metrics for r in ns["tuner"].get_results()}
    with Client(driver="local", store=str(db)) as client:
        (exp,) = client.experiments()
        assert exp.parallel_bandwidth == 2  # ConcurrencyLimiter's limit is the experiment's bandwidth
        suggestions = {s.tag: s for s in client.suggestions(exp.id)}
        assert set(suggestions) == set(trials) and len(trials) == 6  # tag = trial id
        by_sid = {o.suggestion_id: o for o in client.observations(exp.id)}
        assert len(by_sid) == 6 and not any(o.failed for o in by_sid.values())
        stopped = 0
        for tag, s in suggestions.items():
            o, last = by_sid[s.id], trials[tag]
            assert o.value == pytest.approx(last["loss"]) and o.assignments["lr"] == pytest.approx(last["config"]["lr"])
            assert [r.step for r in client.reports(exp.id, s.id)] == list(range(1, last["training_iteration"] + 1))
            if o.stopped_at_step is not None:  # tauopt said stop: Tune stopped the trial at that step
                stopped += 1
                assert o.stopped_at_step == last["training_iteration"] < STEPS
            else:
                assert last["training_iteration"] == STEPS
        assert stopped >= 1  # ASHA keeps the best of each rung: a later, worse trial stops at step 1


def test_rays_own_scheduler_stops_trials_beside_the_searcher(local_ray: None, tmp_path: Path) -> None:
    """Tune's ASHAScheduler decides alone (the experiment has no rule): a trial it
    stops ends as an observation of its last value, every trial once."""
    from ray.tune.schedulers import ASHAScheduler

    with Client(driver="local") as client:
        search = TauoptSearch(SPACE, metric="loss", mode="min", client=client)
        results = tune.Tuner(
            objective,
            tune_config=tune.TuneConfig(
                search_alg=ConcurrencyLimiter(search, max_concurrent=2), metric="loss", mode="min", num_samples=6,
                scheduler=ASHAScheduler(max_t=STEPS, grace_period=1, reduction_factor=3), reuse_actors=True,
            ),
            run_config=tune.RunConfig(name="asha", storage_path=str(tmp_path), verbose=0),
        ).fit()  # fmt: skip
        eid = search.experiment_id
        assert eid is not None
        trials = {r.metrics["trial_id"]: r.metrics for r in results}
        by_tag = {s.tag: s for s in client.suggestions(eid)}
        assert set(by_tag) == set(trials) and all(s.state == "observed" for s in by_tag.values())
        obs = {o.suggestion_id: o for o in client.observations(eid)}
        for tag, last in trials.items():
            o = obs[by_tag[tag].id]
            assert o.value == pytest.approx(last["loss"]) and o.stopped_at_step is None
        # the scheduler stopped some: none stopped would need each trial to beat the earlier ones at step 1
        assert any(last["training_iteration"] < STEPS for last in trials.values())


class InterruptAfter(tune.Callback):
    """Interrupts the first Tune run once `n` trials completed, as Ctrl-C does (SIGUSR1
    is Tune's other stop signal); the copy Tune pickles with the run, which
    `Tuner.restore` loads, never interrupts."""

    def __init__(self, n: int) -> None:
        self.n = n

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self.n -= 1
        if self.n == 0:
            signal.raise_signal(signal.SIGUSR1)

    def __getstate__(self) -> dict[str, Any]:
        return {"n": -1}


def test_a_restored_tune_run_continues_the_same_experiment_over_http(local_ray: None, tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "served.db")
    try:
        connect = functools.partial(Client, driver="http", base_url=daemon.url, token=token_of(daemon))
        search = TauoptSearch(SPACE, metric="loss", mode="min", client=connect, name="restored")
        first_run = tuner(ConcurrencyLimiter(search, max_concurrent=2), tmp_path, 4, search.stopper(), [InterruptAfter(1)])
        first_run.fit()
        eid = search.experiment_id
        with connect() as client:
            first = client.observations(eid)
            assert 1 <= len(first) < 4  # interrupted with a trial or two on the way
            restored = tune.Tuner.restore(str(tmp_path / "run"), objective, resume_unfinished=True)
            restored.fit()
            exps = client.experiments()
            assert [e.id for e in exps] == [eid]  # no second experiment: the restored searcher rejoined it
            obs = client.observations(eid)
            assert len(obs) == 4 and obs[: len(first)] == first
            observed = [s.tag for s in client.suggestions(eid, state="observed")]
            assert len(set(observed)) == len(observed) == 4  # every trial once, under its Tune trial id
            assert all(s.state == "observed" for s in client.suggestions(eid))
    finally:
        code, _, err = daemon.stop()
    assert code == 0, err


def test_a_joined_experiment_keeps_its_bandwidth_and_a_client_object_is_not_pickled() -> None:
    import pickle

    with Client(driver="local") as client:
        exp = client.create_experiment("joined", parameters_from_ray_space(SPACE), {"name": "score", "objective": "maximize"}, parallel_bandwidth=1)
        search = TauoptSearch(client=client, experiment_id=exp.id)
        limited = ConcurrencyLimiter(search, max_concurrent=3)  # the limiter counts this run's trials
        assert limited._limit_concurrency and client.experiment(exp.id).parallel_bandwidth == 1  # unchanged
        assert search.suggest("a") is not None and search.suggest("b") is None  # bandwidth full: Tune asks later
        assert (search.metric, search.mode) == ("score", "max")
        with pytest.raises(ValueError, match="maximize"):
            TauoptSearch(client=client, experiment_id=exp.id, mode="min").suggest("c")
        copy = pickle.loads(pickle.dumps(search))
        with pytest.raises(RuntimeError, match="client= a function"):
            copy.suggest("c")
        client.close_suggestion(exp.id, "1")
        search.on_trial_complete("a", {"score": 1.0})  # closed meanwhile: re-posted with its point, not lost
        assert [(o.suggestion_id, o.value) for o in client.observations(exp.id)] == [(None, 1.0)]


def test_a_restore_closes_the_suggestions_of_trials_made_after_tunes_last_save(tmp_path: Path) -> None:
    db = tmp_path / "tauopt.db"
    connect = functools.partial(Client, driver="local", store=str(db))
    search = TauoptSearch(SPACE, metric="loss", mode="min", client=connect, parallel_bandwidth=4)
    search.suggest("t1")
    search.save(str(tmp_path / "searcher.pkl"))  # Tune's last save knew t1 only
    search.suggest("t2")
    eid = search.experiment_id
    search.client.close()  # the first driver is gone; the store stays
    restored = TauoptSearch(SPACE, metric="loss", mode="min", client=connect)
    restored.restore(str(tmp_path / "searcher.pkl"))
    with restored.client as client:
        assert restored.experiment_id == eid
        assert [(s.tag, s.state) for s in client.suggestions(eid)] == [("t1", "open"), ("t2", "closed")]
        restored.on_trial_complete("t1", {"loss": 0.25})
        assert [(o.suggestion_id, o.value) for o in client.observations(eid)] == [("1", 0.25)]
