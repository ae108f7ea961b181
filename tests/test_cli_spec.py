"""The CLI speaks the whole spec: `experiments create --spec` takes every keyword of
create_experiment, `update` changes what update_experiment can, `show` shows every
metric and the stopping rule, and `--watch --json` writes JSON lines only.

In process (`tauopt.cli.main`), on a real SQLite file."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

import tauopt._cli_experiments as cli_experiments
from tauopt import Client
from tauopt.cli import main
from tauopt.operations import Operations
from tauopt.schema import ExperimentSpec

SPEC = {
    "name": "multi",
    "parameters": [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}],
    "metrics": [
        {"name": "loss", "objective": "minimize"},
        {"name": "latency", "constraint": {"<=": 0.5}},
    ],
    "early_stopping": {"rule": "median", "min_trials": 1, "grace_steps": 0},
    "strategy": "random",
}
YAML = """\
name: stopped-yaml
parameters:
  - {name: x, type: double, bounds: [0.0, 1.0]}
metrics:
  - {name: acc, objective: maximize}
early_stopping: {rule: asha, min_step: 1, max_step: 9}
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "spec.db"
    with Client(driver="local", store=str(path)):
        pass
    return path


def test_a_spec_takes_every_keyword_of_create_experiment() -> None:
    # a spec file is an ExperimentSpec: every keyword of create_experiment, and the fields reachable only through spec=
    keywords = [p for p in inspect.signature(Operations.create_experiment).parameters if p not in ("self", "spec")]
    assert set(keywords) <= set(cli_experiments.spec_keys()) and "metadata" in cli_experiments.spec_keys()
    assert list(cli_experiments.spec_keys()) == list(ExperimentSpec.model_fields)


def test_create_takes_metrics_and_early_stopping_from_json_and_yaml(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (db.parent / "spec.json").write_text(json.dumps(SPEC))
    (db.parent / "spec.yaml").write_text(YAML)
    code, out, err = run(capsys, "experiments", "create", "--spec", str(db.parent / "spec.json"), "--db", str(db))
    assert code == 0, err
    code, yaml_out, err = run(capsys, "experiments", "create", "--spec", str(db.parent / "spec.yaml"), "--db", str(db))
    assert code == 0, err
    with Client(driver="local", store=str(db)) as c:
        made, from_yaml = c.experiment(out.strip()), c.experiment(yaml_out.strip())
    assert [m.name for m in made.metrics] == ["loss", "latency"] and made.constraints[0].constraint is not None
    assert made.early_stopping["rule"] == "median"
    assert (from_yaml.metric.objective, from_yaml.early_stopping["rule"]) == ("maximize", "asha")


def test_a_bad_spec_field_gets_create_experiments_own_message(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = db.parent / "bad.json"
    bad.write_text(json.dumps(dict(SPEC, early_stopping="median")))
    code, _, err = run(capsys, "experiments", "create", "--spec", str(bad), "--db", str(db))
    with Client(driver="local") as c, pytest.raises(Exception) as direct:
        c.create_experiment(**dict(SPEC, early_stopping="median"))
    assert code == 1 and f"invalid_request: {direct.value.message}" in err  # type: ignore[attr-defined]


def test_update_changes_the_stopping_rule_and_adds_parameters(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (db.parent / "spec.json").write_text(json.dumps(SPEC))
    exp_id = run(capsys, "experiments", "create", "--spec", str(db.parent / "spec.json"), "--db", str(db))[1].strip()
    params = SPEC["parameters"] + [{"name": "k", "type": "int", "bounds": [1, 3], "default": 1}]  # type: ignore[operator]
    (db.parent / "params.json").write_text(json.dumps(params))
    code, out, err = run(
        capsys, "experiments", "update", exp_id, "--db", str(db), "--json",
        "--early-stopping", '{"rule": "asha", "min_step": 1, "max_step": 27}', "--parameters", f"@{db.parent / 'params.json'}",
    )  # fmt: skip
    assert code == 0, err
    updated = json.loads(out)
    assert updated["early_stopping"]["rule"] == "asha" and [p["name"] for p in updated["parameters"]] == ["x", "k"]
    code, _, err = run(capsys, "experiments", "update", exp_id, "--db", str(db), "--early-stopping", '{"rule": "sometimes"}')
    assert code == 1 and "early_stopping.rule" in err


def test_show_lists_every_metric_the_rule_and_how_many_it_stopped(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (db.parent / "spec.json").write_text(json.dumps(SPEC))
    exp_id = run(capsys, "experiments", "create", "--spec", str(db.parent / "spec.json"), "--db", str(db))[1].strip()
    with Client(driver="local", store=str(db)) as c:
        s = c.suggest(exp_id)
        c.report(exp_id, s.id, 1, 0.9)
        c.observe(exp_id, suggestion_id=s.id, stopped=True, values={"loss": 0.9, "latency": 0.1})
    code, out, err = run(capsys, "experiments", "show", exp_id, "--db", str(db))
    assert code == 0, err
    assert "metrics      loss (minimize), latency (constraint <= 0.5), strategy random" in out
    assert 'early stop   median {"grace_steps": 0, "min_trials": 1}: 1 suggestion(s) cut short' in out
    code, out, _ = run(capsys, "experiments", "show", exp_id, "--db", str(db), "--json")
    shown = json.loads(out)
    assert shown["stopped_early"] == 1 and shown["early_stopping"]["rule"] == "median" and len(shown["metrics"]) == 2


def test_watch_json_writes_one_document_per_line_and_the_banner_to_stderr(
    db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    frames: list[float] = []

    def interval(seconds: float) -> None:  # the terminal's Ctrl-C after the third frame
        frames.append(seconds)
        if len(frames) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli_experiments.time, "sleep", interval)
    code, out, err = run(capsys, "experiments", "list", "--db", str(db), "--watch", "--json", "--interval", "0.1")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [[], [], []]
    assert err.count("every 0.1s") == 3 and "Ctrl-C" in err
