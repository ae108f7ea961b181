"""An unmodified `keras_tuner.Hyperband` worker for the interop test (run as a subprocess).

    python hyperband_worker.py RESULTS.jsonl PROJECT_DIR

It fits a tiny Keras model. Workers share PROJECT_DIR, as a distributed
KerasTuner search must: a promoted trial loads its parent's checkpoint from
there. Each fit appends {tuner_id, trial_id, values, initial_epoch, epochs,
start, ends, score} to RESULTS.jsonl, where `start` is a fingerprint of the
weights when fit begins and `ends` the fingerprints after each epoch, so the
test can see a promoted trial start from its parent's saved weights.
"""

from __future__ import annotations

import json
import os
import sys

import keras
import keras_tuner as kt
import numpy as np

RESULTS, PROJECT_DIR = sys.argv[1], sys.argv[2]


def fingerprint(model: keras.Model) -> float:
    return float(sum(float(np.sum(np.asarray(w, dtype="float64") * (i + 1))) for i, w in enumerate(model.get_weights())))


class Fingerprints(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.ends: list[float] = []

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.ends.append(fingerprint(self.model))


class Tiny(kt.HyperModel):
    def build(self, hp: kt.HyperParameters) -> keras.Model:
        units = hp.Int("units", 2, 16, step=2)
        lr = hp.Float("lr", 1e-3, 1e-1, sampling="log")
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(units, activation="relu"), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(lr), loss="mse")
        return model

    def fit(self, hp: kt.HyperParameters, model: keras.Model, *args, **kwargs):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(64, 4)).astype("float32")
        y = (x @ np.array([1.0, -2.0, 0.5, 0.0], dtype="float32"))[:, None]
        start = fingerprint(model)
        # KerasTuner's own checkpoint callback names the trial: .../trial_<id>/checkpoint...
        saved = [str(cb.filepath) for cb in kwargs.get("callbacks", []) if hasattr(cb, "filepath")]
        prints = Fingerprints()
        kwargs["callbacks"] = [*kwargs.get("callbacks", []), prints]
        kwargs["verbose"] = 0
        history = model.fit(x, y, batch_size=32, validation_data=(x, y), **kwargs)
        with open(RESULTS, "a") as f:
            f.write(json.dumps({
                "tuner_id": os.environ["KERASTUNER_TUNER_ID"],
                "values": dict(hp.values),
                "checkpoint": saved[0] if saved else None,
                "initial_epoch": kwargs.get("initial_epoch"),
                "epochs": kwargs.get("epochs"),
                "start": start,
                "ends": prints.ends,
                "score": min(history.history["val_loss"]),
            }) + "\n")
        return history


def main() -> int:
    tuner = kt.Hyperband(
        Tiny(),
        objective=kt.Objective("val_loss", "min"),
        max_epochs=1000,  # the chief decides every trial's epochs
        directory=PROJECT_DIR,
        project_name="p",
    )
    tuner.search(verbose=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
