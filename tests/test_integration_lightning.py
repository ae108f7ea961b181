"""`tauopt.integrations.lightning.TauoptCallback` with a real tiny Lightning model on
CPU: a report at each validation end, `trainer.should_stop` when tauopt's rule says
stop, one observation at the end, a failed suggestion when the metric is missing or
the fit raises."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

pl = pytest.importorskip("lightning.pytorch")
torch = pytest.importorskip("torch")

from tauopt import Client  # noqa: E402
from tauopt.integrations.lightning import MissingMetricError, TauoptCallback  # noqa: E402
from test_readme_programs import readme_program_on_a_store  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    # Lightning's advice to use DataLoader workers; worker processes would only slow these tiny runs
    "ignore:.*does not have many workers:UserWarning",
    # lightning 2.6.6 still builds torch's LeafSpec, which torch 2.13 deprecates
    "ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated:FutureWarning",
)
PARAMS = [{"name": "lr", "type": "double", "bounds": (1e-3, 1e-1), "scale": "log"}]
BATCHES = 2  # optimizer steps per epoch: the reports' steps are 2, 4, 6, ...


class Tiny(pl.LightningModule):  # type: ignore[misc]
    def __init__(self, lr: float, log_name: str = "val_loss", fail_at_epoch: int | None = None) -> None:
        super().__init__()
        self.layer, self.lr, self.log_name, self.fail_at_epoch = torch.nn.Linear(4, 1), lr, log_name, fail_at_epoch

    def loss(self, batch: Any) -> Any:
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def training_step(self, batch: Any, _: int) -> Any:
        if self.current_epoch == self.fail_at_epoch:
            raise RuntimeError("out of memory")
        return self.loss(batch)

    def validation_step(self, batch: Any, _: int) -> None:
        self.log(self.log_name, self.loss(batch))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def loader() -> Any:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 4, generator=g)
    data = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True) + 1.0)
    return torch.utils.data.DataLoader(data, batch_size=16 // BATCHES)


def fit(tmp_path: Path, model: Tiny, epochs: int, callback: TauoptCallback) -> pl.Trainer:
    pl.seed_everything(0, verbose=False)
    trainer = pl.Trainer(
        max_epochs=epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, callbacks=[callback], default_root_dir=tmp_path,
    )  # fmt: skip
    trainer.fit(model, loader(), loader())
    return trainer


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with Client(driver="local") as c:
        yield c


def test_each_validation_is_reported_and_the_last_value_is_observed(client: Client, tmp_path: Path) -> None:
    exp = client.create_experiment("lightning", PARAMS, {"name": "val_loss"})
    s = client.suggest(exp.id)
    trainer = fit(tmp_path, Tiny(s.assignments["lr"]), 3, TauoptCallback(client, exp.id, s.id))
    reports = client.reports(exp.id, s.id)
    assert [r.step for r in reports] == [2, 4, 6]
    (obs,) = client.observations(exp.id)
    assert obs.value == pytest.approx(float(trainer.callback_metrics["val_loss"])) == reports[-1].value
    assert obs.stopped_at_step is None


def test_tauopts_rule_stops_the_trainer_and_the_run_is_observed_stopped(client: Client, tmp_path: Path) -> None:
    exp = client.create_experiment("lightning-stop", PARAMS, {"name": "val_loss"}, early_stopping={"rule": "median", "min_trials": 1})
    done = client.suggest(exp.id)  # a finished trial at loss 0 at every step: any real loss is worse
    for step in range(1, 11):
        client.report(exp.id, done.id, step, 0.0)
    client.observe(exp.id, suggestion_id=done.id, value=0.0)
    s = client.suggest(exp.id)
    trainer = fit(tmp_path, Tiny(0.01), 5, TauoptCallback(client, exp.id, s.id))
    assert trainer.current_epoch == 1 and trainer.global_step == BATCHES  # stopped after the first epoch, not 5
    obs = client.observations(exp.id)[-1]
    assert obs.suggestion_id == s.id and obs.stopped_at_step == BATCHES


def test_a_missing_metric_is_a_clear_error_and_the_suggestion_is_failed(client: Client, tmp_path: Path) -> None:
    exp = client.create_experiment("lightning-missing", PARAMS, {"name": "val_loss"})
    s = client.suggest(exp.id)
    with pytest.raises(MissingMetricError, match=r"no 'val_loss' \(it has \['valid_loss'\]\)"):
        fit(tmp_path, Tiny(0.01, log_name="valid_loss"), 2, TauoptCallback(client, exp.id, s.id))
    (obs,) = client.observations(exp.id)
    assert obs.failed and obs.suggestion_id == s.id


def test_a_fit_that_raises_marks_the_suggestion_failed_and_the_error_goes_on(client: Client, tmp_path: Path) -> None:
    exp = client.create_experiment("lightning-raise", PARAMS, {"name": "val_loss"})
    s = client.suggest(exp.id)
    with pytest.raises(RuntimeError, match="out of memory"):
        fit(tmp_path, Tiny(0.01, fail_at_epoch=1), 4, TauoptCallback(client, exp.id, s.id))
    assert [r.step for r in client.reports(exp.id, s.id)] == [BATCHES]
    (obs,) = client.observations(exp.id)
    assert obs.failed


def test_the_readme_lightning_program_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the Trainer's default_root_dir
    db = readme_program_on_a_store("integrations/lightning_fit.py", tmp_path, capsys)
    with Client(driver="local", store=str(db)) as c:
        (exp,) = c.experiments()
        obs = c.observations(exp.id)
        assert len(obs) == 3 and not any(o.failed for o in obs)
        assert [r.step for r in c.reports(exp.id, "1")] == [4, 8, 12, 16, 20]  # 4 batches an epoch, 5 epochs
