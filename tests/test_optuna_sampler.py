"""TauoptSampler: an Optuna sampler whose relative sampling is a tauopt suggestion."""

from __future__ import annotations

import warnings
from typing import Any, Iterator

import pytest

optuna = pytest.importorskip("optuna")

from tauopt import Client  # noqa: E402
from tauopt.integrations.optuna import TauoptSampler  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")


@pytest.fixture
def client() -> Iterator[Client]:
    with Client(driver="local") as c:
        yield c


def _space(t: Any) -> None:
    t.suggest_float("x", -5.0, 5.0)
    t.suggest_categorical("kind", ["a", "b"])
    t.suggest_int("n", 1, 9, log=True)


def test_relative_params_are_tauopt_suggestions_and_running_trials_are_pending(client: Client) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=TauoptSampler(client, strategy="sobol", seed=3))

    def objective(t: Any) -> float:
        _space(t)
        if t.number == 4:
            raise optuna.TrialPruned()
        return (t.params["x"] - 1) ** 2 + t.params["n"]

    study.optimize(objective, n_trials=8)
    [exp] = client.experiments()
    assert sorted(p.name for p in exp.parameters) == ["kind", "n", "x"]
    held = {t.number: t.system_attrs["tauopt:suggestion_id"].split("/")[1] for t in study.trials[1:]}
    assert 0 not in held  # the first trial teaches the space: independent sampling
    for t in study.trials[1:]:
        assert client.suggestion(exp.id, held[t.number]).assignments == t.params
    states = {s.id: s.state for s in client.suggestions(exp.id)}
    assert states[held[4]] == "closed" and [states[held[n]] for n in (1, 2, 3, 5, 6, 7)] == ["observed"] * 6
    asked = [study.ask() for _ in range(3)]
    for t in asked:
        _space(t)
    assert client.experiment(exp.id).open_suggestions == 3  # every running trial is pending for tauopt
    study.tell(asked[0], 1.0)
    study.tell(asked[1], state=optuna.trial.TrialState.FAIL)
    study.tell(asked[2], 0.5)
    observations = client.observations(exp.id)
    assert client.experiment(exp.id).open_suggestions == 0 and len(observations) == 9
    assert [o.failed for o in observations[-3:]] == [False, True, False]
    assert client.best(exp.id).value == min(t.value for t in study.trials[1:] if t.value is not None)


def test_a_parameter_tauopt_cannot_hold_comes_from_the_independent_sampler(client: Client) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        study = optuna.create_study(sampler=TauoptSampler(client, seed=0))
        study.optimize(lambda t: t.suggest_float("x", 0, 1) + (t.suggest_categorical("c", [None, 1]) or 0), n_trials=4)
    [exp] = client.experiments()
    assert [p.name for p in exp.parameters] == ["x"]
    assert all(set(t.params) == {"x", "c"} for t in study.trials)


def test_tauopt_pruner_prunes_what_the_door_stopped_and_asks_its_fallback_otherwise() -> None:
    from tauopt.integrations.optuna import TauoptPruner

    class Always(optuna.pruners.BasePruner):
        def prune(self, study: Any, trial: Any) -> bool:
            return True

    for pruner, unmarked in ((TauoptPruner(), False), (TauoptPruner(fallback=Always()), True)):
        study = optuna.create_study(pruner=pruner)
        trial = study.ask()
        trial.report(1.0, 0)
        assert trial.should_prune() is unmarked  # no decision of tauopt's: the fallback's, or continue
        study._storage.set_trial_system_attr(trial._trial_id, "tauopt:should_stop", {"step": 0, "reason": "median"})
        assert trial.should_prune() is True
