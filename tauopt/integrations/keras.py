"""`TauoptCallback` for keras 3's `model.fit` (any backend; set KERAS_BACKEND first).

Each epoch's `logs[monitor]` is a report at step epoch + 1; when tauopt's rule says
stop, `model.stop_training` ends the fit after that epoch; at the end of training
the suggestion is observed once: the last value, or `stopped=True` at the last
reported value. Keras calls no callback when `fit` raises, so use the callback as
a context manager (`with TauoptCallback(...) as cb: model.fit(..., callbacks=[cb])`)
to mark the suggestion failed when training raises; a missing metric is marked
failed and raised by the callback itself.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import keras

from .. import Client
from ._trial import MissingMetricError, TrialRun, metric_value

__all__ = ["MissingMetricError", "TauoptCallback"]


class TauoptCallback(keras.callbacks.Callback):  # type: ignore[misc]
    """Reports `monitor` each epoch to suggestion `suggestion_id` of `experiment_id`,
    stops the fit when tauopt says so, and observes the result at the end."""

    def __init__(self, client: Client, experiment_id: str, suggestion_id: str, monitor: str = "val_loss") -> None:
        super().__init__()
        self.monitor = monitor
        self.run = TrialRun(client, experiment_id, suggestion_id)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        try:
            value = metric_value(logs or {}, self.monitor, f"the logs of epoch {epoch}")
        except MissingMetricError:
            self.run.fail()
            raise
        if self.run.report(epoch + 1, value):
            self.model.stop_training = True

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self.run.finish()

    def __enter__(self) -> TauoptCallback:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is not None:
            self.run.fail()  # a no-op when training ended and was observed
        else:
            self.run.finish()  # fit never reached its end (e.g. epochs=0): failed, not left open
