"""`tauopt.integrations.keras.TauoptCallback` with a real tiny keras 3 model (torch
backend, as the KerasTuner tests use): a report per epoch, `stop_training` when
tauopt's rule says stop, one observation at the end, and a failed suggestion when
the metric is missing or the fit raises."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")
np = pytest.importorskip("numpy")

from tauopt import Client  # noqa: E402
from tauopt.integrations.keras import MissingMetricError, TauoptCallback  # noqa: E402
from test_readme_programs import readme_program_on_a_store  # noqa: E402

PARAMS = [{"name": "lr", "type": "double", "bounds": (1e-3, 1e-1), "scale": "log"}]
rng = np.random.default_rng(0)
X, Y = rng.normal(size=(32, 4)).astype("float32"), rng.normal(size=(32, 1)).astype("float32")


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    assert keras.backend.backend() == "torch", "KERAS_BACKEND was set before this module imported keras"
    with Client(driver="local") as c:
        yield c


def fit(lr: float, epochs: int, callbacks: list[Any]) -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=lr), loss="mse")
    return model.fit(X, Y, validation_data=(X, Y), epochs=epochs, batch_size=16, verbose=0, callbacks=callbacks)


def test_each_epoch_is_reported_and_the_last_value_is_observed(client: Client) -> None:
    exp = client.create_experiment("keras", PARAMS, {"name": "val_loss"})
    s = client.suggest(exp.id)
    history = fit(s.assignments["lr"], 3, [TauoptCallback(client, exp.id, s.id)])
    losses = history.history["val_loss"]
    assert [(r.step, r.value) for r in client.reports(exp.id, s.id)] == [(i + 1, pytest.approx(v)) for i, v in enumerate(losses)]
    (obs,) = client.observations(exp.id)
    assert obs.value == pytest.approx(losses[-1]) and obs.stopped_at_step is None


def test_tauopts_rule_stops_the_fit_and_the_run_is_observed_stopped(client: Client) -> None:
    exp = client.create_experiment("keras-stop", PARAMS, {"name": "val_loss"}, early_stopping={"rule": "median", "min_trials": 1})
    done = client.suggest(exp.id)  # a finished trial at loss 0 at every step: any real loss is worse
    for step in range(1, 6):
        client.report(exp.id, done.id, step, 0.0)
    client.observe(exp.id, suggestion_id=done.id, value=0.0)
    s = client.suggest(exp.id)
    with TauoptCallback(client, exp.id, s.id) as cb:
        history = fit(0.01, 5, [cb])
    assert len(history.history["val_loss"]) == 1  # stopped after the first epoch, not 5
    obs = client.observations(exp.id)[-1]
    assert obs.suggestion_id == s.id and obs.stopped_at_step == 1 and obs.value == pytest.approx(history.history["val_loss"][0])


def test_a_missing_metric_is_a_clear_error_and_the_suggestion_is_failed(client: Client) -> None:
    exp = client.create_experiment("keras-missing", PARAMS, {"name": "val_acc"})
    s = client.suggest(exp.id)
    with pytest.raises(MissingMetricError, match=r"no 'val_acc' \(it has \['loss', 'val_loss'\]\)"):
        fit(0.01, 2, [TauoptCallback(client, exp.id, s.id, monitor="val_acc")])
    (obs,) = client.observations(exp.id)
    assert obs.failed and client.suggestion(exp.id, s.id).state == "observed"


class Boom(keras.callbacks.Callback):  # type: ignore[misc]
    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        if epoch == 1:
            raise RuntimeError("out of memory")


def test_a_fit_that_raises_marks_the_suggestion_failed_and_the_error_goes_on(client: Client) -> None:
    exp = client.create_experiment("keras-raise", PARAMS, {"name": "val_loss"})
    s = client.suggest(exp.id)
    with pytest.raises(RuntimeError, match="out of memory"):
        with TauoptCallback(client, exp.id, s.id) as cb:
            fit(0.01, 4, [cb, Boom()])
    assert [r.step for r in client.reports(exp.id, s.id)] == [1, 2]
    (obs,) = client.observations(exp.id)
    assert obs.failed and obs.suggestion_id == s.id



def test_the_readme_keras_program_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = readme_program_on_a_store("integrations/keras_fit.py", tmp_path, capsys)
    with Client(driver="local", store=str(db)) as c:
        (exp,) = c.experiments()
        obs = c.observations(exp.id)
        assert len(obs) == 3 and not any(o.failed for o in obs)
        assert all(c.reports(exp.id, o.suggestion_id) for o in obs if o.suggestion_id)
