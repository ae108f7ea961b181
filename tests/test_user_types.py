"""Types and reference where users are: the public names (`Report`, `ReportDecision`
included) import from `tauopt`; `help(Client)` documents the driver options and
`create_experiment` the formats; a user's `mypy --strict` program finds `tauopt`
after `make venv` (an editable install mode type checkers can follow) and is clean."""

from __future__ import annotations

import inspect
import pydoc
import subprocess
import sys
from pathlib import Path

import pytest

import tauopt

USER_PROGRAM = '''\
from __future__ import annotations

from tauopt import ApiError, Client, Experiment, Observation, Report, ReportDecision, Suggestion


def main() -> float | None:
    with Client(driver="local") as client:
        exp: Experiment = client.create_experiment(
            "user", [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}], {"name": "loss"},
            early_stopping={"rule": "median", "min_trials": 2},
        )
        s: Suggestion = client.suggest(exp.id)
        x = s.assignments["x"]
        assert isinstance(x, float)
        decision: ReportDecision = client.report(exp.id, s.id, 1, x)
        reports: list[Report] = client.reports(exp.id, s.id)
        obs: Observation = client.observe(exp.id, suggestion_id=s.id, value=(x - 0.3) ** 2)
        copy = client.import_experiment(client.export_experiment(exp.id))
        try:
            client.delete_experiment(copy.id)
        except ApiError as e:
            print(e.error_type, e.retry_after)
        best = client.best(exp.id)
        print(decision.should_stop, len(reports), obs.id)
        return None if best is None else best.value
'''


def test_the_public_names_are_pinned_and_report_types_among_them() -> None:
    assert tauopt.__all__ == [
        "ApiError", "AsyncClient", "Client", "Condition", "Engine", "Experiment", "Metric", "Observation",
        "Parameter", "Report", "ReportDecision", "StrategyOptions", "Suggestion",
    ]  # fmt: skip
    from tauopt import Report, ReportDecision

    assert ReportDecision(False).should_stop is False and Report("1", 1, 0.5).step == 1


def test_help_client_documents_the_driver_options() -> None:
    page = pydoc.render_doc(tauopt.Client, renderer=pydoc.plaintext)
    for option in ("store", "durability", "pool", "passivate_after_s", "base_url", "token", "timeout", "deadline_s",
                   "max_connections", "verify"):  # fmt: skip
        assert f"{option}:" in page, option


def test_create_experiments_docstring_shows_the_formats() -> None:
    for cls in (tauopt.Client, tauopt.AsyncClient):
        doc = " ".join((inspect.getdoc(cls.create_experiment) or "").split())
        for shown in ('"type": "double"', '"type": "categorical"', 'metric={"name": "loss"}', '"constraint": {"<=":',
                      'early_stopping={"rule": "median"', '"rule": "asha"', "strategy_options="):  # fmt: skip
            assert shown in doc, (cls.__name__, shown)


@pytest.mark.slow
def test_a_users_strict_program_finds_tauopt_and_type_checks_clean(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    (tmp_path / "train.py").write_text(USER_PROGRAM)
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), "train.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert "import-not-found" not in r.stdout, "mypy cannot find tauopt: install it with `make venv` (editable_mode=compat)"
    assert r.returncode == 0, r.stdout[-3000:]
