"""`TauoptCallback` for a `lightning` Trainer (extra `lightning`).

At each validation end (sanity checks excluded) `trainer.callback_metrics[monitor]`
is a report at step `trainer.global_step` (optimizer steps so far: it grows even
when validation runs several times an epoch); when tauopt's rule says stop,
`trainer.should_stop` ends the fit. The suggestion is observed once at the end of
training (`stopped=True` at the last reported value when told to stop), and marked
failed when the fit raises (Lightning's `on_exception`), a missing metric included.
"""

from __future__ import annotations

import lightning.pytorch as pl

from .. import Client
from ._trial import MissingMetricError, TrialRun, metric_value

__all__ = ["MissingMetricError", "TauoptCallback"]


class TauoptCallback(pl.Callback):
    """Reports `monitor` after each validation to suggestion `suggestion_id` of
    `experiment_id`, stops the Trainer when tauopt says so, and observes the result."""

    def __init__(self, client: Client, experiment_id: str, suggestion_id: str, monitor: str = "val_loss") -> None:
        super().__init__()
        self.monitor = monitor
        self.run = TrialRun(client, experiment_id, suggestion_id)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        value = metric_value(trainer.callback_metrics, self.monitor, f"trainer.callback_metrics after step {trainer.global_step}")
        if self.run.report(trainer.global_step, value):
            trainer.should_stop = True

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.run.finish()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self.run.fail()
