"""tauopt's Hyperband schedule against KerasTuner's own HyperbandOracle, decision for decision."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tauopt.strategies.hyperband import Finished, HyperbandSchedule, Idle, NewTrial, Promote


# KerasTuner runs in a child process: keras_tuner registers protobuf descriptors that
# clash with tauopt's generated gRPC code if both load in one process.
_KT_SCRIPT = r"""
import json, os, random, sys, tempfile
os.environ.setdefault("KERAS_BACKEND", "torch")
import keras_tuner as kt

def events(max_epochs, factor, iterations, seed):
    hp = kt.HyperParameters()
    hp.Float("x", 0.0, 1.0)
    oracle = kt.oracles.HyperbandOracle(objective=kt.Objective("loss", "min"), max_epochs=max_epochs, factor=factor,
                                        hyperband_iterations=iterations, hyperparameters=hp, seed=seed)
    oracle._set_project_dir(tempfile.mkdtemp(), "p")
    rng = random.Random(seed)
    running, events, calls = [], [], 0
    while True:
        if running and (len(running) >= 4 or rng.random() < 0.5):
            trial = running.pop(rng.randrange(len(running)))
            loss = round(rng.random(), 2)  # ties happen: the stable order must match too
            oracle.update_trial(trial.trial_id, {"loss": loss}, step=0)
            trial.status = "COMPLETED"
            oracle.end_trial(trial)
            events.append(["end", trial.trial_id, loss])
            continue
        calls += 1  # a fresh tuner id: KerasTuner hands a busy tuner its running trial again
        trial = oracle.create_trial(f"tuner{calls}")
        values = {k: v for k, v in trial.hyperparameters.values.items() if k.startswith("tuner/")}
        events.append(["create", trial.trial_id, trial.status, values, bool(running)])
        if trial.status == "STOPPED":
            return events
        if trial.status == "RUNNING":
            running.append(trial)

print(json.dumps([events(*config) for config in json.loads(sys.argv[1])]))
"""


CONFIGS = [(10, 3, 2), (27, 3, 1), (5, 4, 2)]  # (max_epochs, factor, iterations)


@pytest.fixture(scope="module")
def keras_tuner_events() -> dict[tuple[int, int, int], list[list[Any]]]:
    """KerasTuner's oracle on one random interleaving of starts and ends (up to 4 at once) per
    configuration, seeded by it; all in one child process (keras_tuner's import is most of its time)."""
    if importlib.util.find_spec("keras_tuner") is None:
        pytest.skip("keras-tuner is not installed")
    runs = [(*config, config[0] * 7 + config[1]) for config in CONFIGS]
    proc = subprocess.run(
        [sys.executable, "-c", _KT_SCRIPT, json.dumps(runs)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "KERAS_BACKEND": "torch"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(zip(CONFIGS, json.loads(proc.stdout.strip().splitlines()[-1])))


def _replay(events: list[list[Any]], ours: HyperbandSchedule) -> int:
    """Our schedule on the same interleaving; every answer must match. Returns the trial count."""
    scores: dict[str, float] = {}
    created = 0
    for event in events:
        if event[0] == "end":
            scores[event[1]] = event[2]
            continue
        _, trial_id, status, values, ongoing = event
        step = ours.next(trial_id, scores.get, ongoing=ongoing)
        if status == "STOPPED":
            assert step == Finished()
            return created
        if status == "IDLE":
            assert step == Idle()
            continue
        created += 1
        expected: object
        if "tuner/trial_id" in values:
            expected = Promote(values["tuner/trial_id"], values["tuner/epochs"], values["tuner/initial_epoch"],
                               values["tuner/bracket"], values["tuner/round"])
        else:
            assert values["tuner/initial_epoch"] == 0 and values["tuner/round"] == 0
            expected = NewTrial(values["tuner/epochs"], values["tuner/bracket"])
        assert step == expected, f"trial {created}"
    raise AssertionError("KerasTuner's run did not end with STOPPED")


@pytest.mark.parametrize("max_epochs, factor, iterations", CONFIGS)
def test_the_schedule_matches_keras_tuners_hyperband_oracle(
    keras_tuner_events: dict[tuple[int, int, int], list[list[Any]]], max_epochs: int, factor: int, iterations: int
) -> None:
    events = keras_tuner_events[max_epochs, factor, iterations]
    assert any(e[0] == "create" and "tuner/trial_id" in e[3] for e in events), "promotions are compared too"
    total = _replay(events, HyperbandSchedule(max_epochs, factor, iterations))
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
