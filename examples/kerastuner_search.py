"""A complete KerasTuner search whose chief is tauopt (README: "Distributed KerasTuner").

Run the chief once, then this script on each worker; it is plain KerasTuner code,
unchanged from a single-machine search. With KERASTUNER_* unset it runs locally.

    # the chief: objective="val_loss" (minimized) below means these two options
    KERASTUNER_ORACLE_IP=127.0.0.1 KERASTUNER_ORACLE_PORT=8000 KERASTUNER_TUNER_ID=chief \\
      tauopt kerastuner chief --objective val_loss --direction min --max-trials 6 --workers 2

    # each worker (a unique id without "chief"), e.g. two terminals with tuner0 and tuner1
    KERASTUNER_ORACLE_IP=127.0.0.1 KERASTUNER_ORACLE_PORT=8000 KERASTUNER_TUNER_ID=tuner0 \\
      KERAS_BACKEND=torch python examples/kerastuner_search.py
"""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import keras_tuner as kt  # noqa: E402
import numpy as np  # noqa: E402


def data() -> tuple[np.ndarray, np.ndarray]:
    """A small regression problem: y is a noisy linear function of 8 features."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 8)).astype("float32")
    y = (x @ rng.normal(size=8).astype("float32") + 0.1 * rng.normal(size=512).astype("float32"))[:, None]
    return x, y


def build_model(hp: kt.HyperParameters) -> keras.Model:
    model = keras.Sequential([keras.Input((8,))])
    for i in range(hp.Int("layers", 1, 3)):
        model.add(keras.layers.Dense(hp.Int(f"units_{i}", 8, 64, step=8), activation="relu"))
    model.add(keras.layers.Dense(1))
    model.compile(optimizer=keras.optimizers.Adam(hp.Float("lr", 1e-4, 1e-1, sampling="log")), loss="mse")
    return model


def main() -> None:
    x, y = data()
    tuner = kt.RandomSearch(  # the chief's strategy decides; the tuner class only runs trials
        build_model,
        objective="val_loss",  # the chief: --objective val_loss --direction min
        max_trials=6,  # the chief's --max-trials decides in a distributed search
        directory=os.environ.get("KT_DIR") or tempfile.mkdtemp(prefix="kt-"),
        project_name="example",
        overwrite=True,
    )
    tuner.search(x, y, epochs=3, validation_split=0.25, verbose=0)
    if os.environ.get("KERASTUNER_TUNER_ID", "chief") != "chief" and "KERASTUNER_ORACLE_IP" in os.environ:
        print(f"worker {os.environ['KERASTUNER_TUNER_ID']} done")
    else:
        print("best:", tuner.get_best_hyperparameters(1)[0].values)


if __name__ == "__main__":
    main()
