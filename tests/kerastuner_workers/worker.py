"""An unmodified KerasTuner worker for the interop tests (run as a subprocess).

    python worker.py RESULTS.jsonl MODE

Its tuner is a `RandomSearch` whose `run_trial` computes `score` from the
hyperparameters: Int, log Float, Choice, Boolean, Fixed and a conditional
one. Each run appends {tuner_id, trial_id, values, score} to RESULTS.jsonl.
MODE: `normal`; `invalid_once` (each trial raises a plain error on its first
run: INVALID); `fail_all` (FailedTrialError: FAILED); `invalid_fail` (INVALID on
a trial's first run, then FAILED when units/4 is odd); `hang` (sleeps forever inside its first trial, to be killed);
`keras` (fits a tiny real Keras model); `two_objectives` (KerasTuner's objective
list [score:min, size:max]; run_trial returns both in a keras History, as
model.fit would). The environment carries
KERASTUNER_ORACLE_IP/PORT/TUNER_ID and KERAS_BACKEND=torch; WORKER_GO_FILE
makes the worker wait for that file before searching, WORKER_TRIAL_S makes
each normal trial take that long.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time

import keras_tuner as kt
from keras_tuner.src.distribute import oracle_client

# Each call to the chief within a minute (KerasTuner's own deadline is an hour): a call to a chief
# that went away fails here, inside the test's bound on the worker, with the call named.
oracle_client.TIMEOUT = 60

RESULTS, MODE = sys.argv[1], sys.argv[2]
SEEN: set[str] = set()


def record(trial_id: str, values: dict, score: float | None, status: str, **more: float) -> None:
    with open(RESULTS, "a") as f:
        f.write(json.dumps({
            "tuner_id": os.environ["KERASTUNER_TUNER_ID"], "trial_id": trial_id,
            "values": values, "score": score, "status": status, **more,
        }) + "\n")


def declare(hp: kt.HyperParameters) -> None:
    hp.Int("units", 4, 64, step=4)
    hp.Float("lr", 1e-4, 1e-1, sampling="log")
    hp.Choice("optimizer", ["adam", "sgd"])
    hp.Boolean("batchnorm")
    hp.Fixed("epochs", 1)
    with hp.conditional_scope("optimizer", ["sgd"]):
        hp.Float("momentum", 0.0, 0.9, step=0.1)


def score_of(hp: kt.HyperParameters) -> float:
    v = hp.values
    s = abs(v["units"] - 32) / 32 + abs(math.log10(v["lr"]) + 2.5)
    s += 0.3 if v["optimizer"] == "sgd" else 0.0
    s += 0.1 if v["batchnorm"] else 0.0
    if v["optimizer"] == "sgd":
        s += abs(v["momentum"] - 0.5)
    return float(s)


class Search(kt.RandomSearch):
    def run_trial(self, trial, *args, **kwargs):
        hp = trial.hyperparameters
        declare(hp)
        values = dict(hp.values)
        first_run = trial.trial_id not in SEEN
        SEEN.add(trial.trial_id)
        if MODE == "hang":
            record(trial.trial_id, values, None, "STARTED")
            time.sleep(3600)
        if MODE == "invalid_once" and first_run:
            record(trial.trial_id, values, None, "INVALID")
            raise RuntimeError("a transient error")
        if MODE == "invalid_fail" and first_run:
            record(trial.trial_id, values, None, "INVALID")
            raise RuntimeError("a transient error")
        if MODE == "fail_all" or (MODE == "invalid_fail" and (values["units"] // 4) % 2 == 1):
            record(trial.trial_id, values, None, "FAILED")
            raise kt.errors.FailedTrialError("this configuration cannot work")
        if MODE == "keras":
            return self._fit(trial, values)
        score = score_of(hp)
        time.sleep(float(os.environ.get("WORKER_TRIAL_S", "0")))
        if MODE == "two_objectives":
            size = values["units"] / 64
            record(trial.trial_id, values, score, "COMPLETED", size=size)
            # what model.fit returns: KerasTuner then reports its `multi_objective` score too
            import keras

            history = keras.callbacks.History()
            history.history = {"score": [score], "size": [size]}
            return history
        record(trial.trial_id, values, score, "COMPLETED")
        return {"score": score, "aux": score * 2}

    def _fit(self, trial, values):
        import numpy as np
        import keras

        rng = np.random.default_rng(0)
        x = rng.normal(size=(64, 4)).astype("float32")
        y = (x @ np.array([1.0, -2.0, 0.5, 0.0], dtype="float32"))[:, None]
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(values["units"], activation="relu"), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.Adam(values["lr"]), loss="mse")
        history = model.fit(x, y, epochs=2, batch_size=32, verbose=0, validation_data=(x, y))
        record(trial.trial_id, values, min(history.history["val_loss"]), "COMPLETED")
        return history


def main() -> int:
    objective = kt.Objective("val_loss" if MODE == "keras" else "score", "min")
    if MODE == "two_objectives":
        objective = [kt.Objective("score", "min"), kt.Objective("size", "max")]
    tuner = Search(
        objective=objective,
        max_trials=1000,  # the chief decides
        directory=tempfile.mkdtemp(prefix="kt-worker-"),
        project_name="p",
        overwrite=True,
    )
    go = os.environ.get("WORKER_GO_FILE")
    if go:  # the test starts every worker's search at once, after the slow imports
        open(RESULTS + ".ready", "w").close()
        while not os.path.exists(go):
            time.sleep(0.05)
    tuner.search(verbose=0)
    if MODE == "two_objectives":  # what KerasTuner itself ranks by: the chief's scores, as the worker sees them
        best = tuner.oracle.get_best_trials(1)[0]
        with open(RESULTS + ".best", "w") as f:
            json.dump({"trial_id": best.trial_id, "score": best.score}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
