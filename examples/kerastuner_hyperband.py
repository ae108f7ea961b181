"""A KerasTuner Hyperband worker whose chief is tauopt (README: "Hyperband workers").

Plain `keras_tuner.Hyperband` code. Every worker must use the same project
directory (KT_DIR, e.g. a shared filesystem): a promoted trial loads its parent's
checkpoint from there, as in any distributed KerasTuner search.

    # the chief: 27 epochs at most, factor 3 = 70 trials (promotions included), 450 epochs in all
    # (two workers: 468 s on a busy 2-core machine; README, "Hyperband workers")
    KERASTUNER_ORACLE_IP=127.0.0.1 KERASTUNER_ORACLE_PORT=8000 KERASTUNER_TUNER_ID=chief \\
      tauopt kerastuner chief --objective val_loss --direction min \\
        --algorithm hyperband --max-epochs 27 --factor 3 --workers 2

    # each worker, with the same KT_DIR and its own id
    KERASTUNER_ORACLE_IP=127.0.0.1 KERASTUNER_ORACLE_PORT=8000 KERASTUNER_TUNER_ID=tuner0 \\
      KT_DIR=/shared/kt KERAS_BACKEND=torch python examples/kerastuner_hyperband.py
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import keras_tuner as kt  # noqa: E402
from kerastuner_search import data  # noqa: E402  (this directory's RandomSearch example: the same data)

MAX_EPOCHS, FACTOR = 27, 3  # must match the chief's --max-epochs and --factor


def build_model(hp: kt.HyperParameters) -> keras.Model:
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(hp.Int("units", 8, 64, step=8), activation="relu")])
    model.add(keras.layers.Dense(1))
    model.compile(optimizer=keras.optimizers.Adam(hp.Float("lr", 1e-4, 1e-1, sampling="log")), loss="mse")
    return model


def main() -> None:
    directory = os.environ.get("KT_DIR")
    if not directory:
        raise SystemExit("set KT_DIR to the project directory every worker shares (promoted trials load checkpoints there)")
    x, y = data()
    tuner = kt.Hyperband(
        build_model,
        objective="val_loss",  # the chief: --objective val_loss --direction min
        max_epochs=MAX_EPOCHS,
        factor=FACTOR,
        directory=directory,
        project_name="hyperband-example",
    )
    tuner.search(x, y, validation_split=0.25, verbose=0)
    print(f"worker {os.environ.get('KERASTUNER_TUNER_ID', 'chief')} done")


if __name__ == "__main__":
    main()
