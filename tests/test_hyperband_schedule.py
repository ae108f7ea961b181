"""tauopt's Hyperband schedule against KerasTuner's own HyperbandOracle, decision for decision."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from tauopt.strategies.hyperband import Finished, HyperbandSchedule, Idle, NewTrial, Promote


def _kt() -> Any:
    os.environ.setdefault("KERAS_BACKEND", "torch")
    return pytest.importorskip("keras_tuner")


def _drive(max_epochs: int, factor: int, iterations: int, seed: int, tmp_path: Path) -> int:
    """Run KerasTuner's oracle and ours on one random interleaving of starts and
    ends (up to 4 trials at once); every answer must match. Returns the trial count."""
    kt = _kt()
    hp = kt.HyperParameters()
    hp.Float("x", 0.0, 1.0)
    oracle = kt.oracles.HyperbandOracle(
        objective=kt.Objective("loss", "min"), max_epochs=max_epochs, factor=factor,
        hyperband_iterations=iterations, hyperparameters=hp, seed=seed,
    )
    oracle._set_project_dir(str(tmp_path), f"p{max_epochs}-{factor}-{iterations}-{seed}")
    ours = HyperbandSchedule(max_epochs, factor, iterations)
    rng = random.Random(seed)
    running: list[Any] = []
    scores: dict[str, float] = {}
    created = calls = 0
    while True:
        if running and (len(running) >= 4 or rng.random() < 0.5):
            trial = running.pop(rng.randrange(len(running)))
            loss = round(rng.random(), 2)  # ties happen: the stable order must match too
            oracle.update_trial(trial.trial_id, {"loss": loss}, step=0)
            trial.status = "COMPLETED"
            oracle.end_trial(trial)
            scores[trial.trial_id] = loss
            continue
        calls += 1  # a fresh tuner id: KerasTuner hands a busy tuner its running trial again
        trial = oracle.create_trial(f"tuner{calls}")
        step = ours.next(trial.trial_id, scores.get, ongoing=bool(running))
        if trial.status == "STOPPED":
            assert step == Finished()
            return created
        if trial.status == "IDLE":
            assert step == Idle()
            assert running
            continue
        created += 1
        values = trial.hyperparameters.values
        expected: object
        if "tuner/trial_id" in values:
            expected = Promote(values["tuner/trial_id"], values["tuner/epochs"], values["tuner/initial_epoch"],
                               values["tuner/bracket"], values["tuner/round"])
        else:
            assert values["tuner/initial_epoch"] == 0 and values["tuner/round"] == 0
            expected = NewTrial(values["tuner/epochs"], values["tuner/bracket"])
        assert step == expected, f"trial {created}"
        running.append(trial)


@pytest.mark.parametrize("max_epochs, factor, iterations", [(9, 3, 1), (10, 3, 2), (27, 3, 1), (8, 2, 1), (5, 4, 2)])
def test_the_schedule_matches_keras_tuners_hyperband_oracle(
    max_epochs: int, factor: int, iterations: int, tmp_path: Path
) -> None:
    total = _drive(max_epochs, factor, iterations, seed=max_epochs * 7 + factor, tmp_path=tmp_path)
    schedule = HyperbandSchedule(max_epochs, factor, iterations)
    expected = iterations * sum(
        schedule.size(b, r) for b in range(schedule.num_brackets()) for r in range(b + 1)
    )
    assert total == expected


def test_sizes_and_epochs_of_a_small_schedule() -> None:
    s = HyperbandSchedule(max_epochs=9, factor=3)
    assert s.num_brackets() == 3
    assert [s.size(2, r) for r in range(3)] == [9, 3, 1]
    assert [s.epochs(2, r) for r in range(3)] == [1, 3, 9]
    assert [s.size(0, 0)] == [3] and s.epochs(0, 0) == 9


def test_a_new_trial_the_caller_cannot_fill_is_forgotten() -> None:
    s = HyperbandSchedule(max_epochs=3, factor=3)
    first = s.next("a", lambda _: None, ongoing=False)
    assert isinstance(first, NewTrial)
    s.cancel("a")
    assert s.next("b", lambda _: None, ongoing=False) == first  # the place is offered again


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="factor"):
        HyperbandSchedule(9, factor=1)
    with pytest.raises(ValueError, match="max_epochs"):
        HyperbandSchedule(0)
