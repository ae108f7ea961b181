"""What users see (issue 20): `help(tauopt.Client.suggest)` and IDE completion show
a real signature and a docstring for every operation on Client, AsyncClient and
Engine; `owner` (a door's concern, `Engine.as_owner`) is in none of their signatures."""

from __future__ import annotations

import inspect

import pytest

import tauopt
from tauopt.operations import OPERATIONS  # every operation, issue 12's protocol (was 13 names written here)


@pytest.mark.parametrize(
    "cls",
    [tauopt.Client, tauopt.AsyncClient, tauopt.Engine],  # issue 12 wrote the client methods out: no xfail
    ids=lambda c: c.__name__,
)
@pytest.mark.parametrize("name", OPERATIONS)
def test_every_operation_has_a_real_signature_and_a_docstring(cls: type, name: str) -> None:
    method = getattr(cls, name)
    params = inspect.signature(method).parameters
    kinds = {p.kind for p in params.values()}
    assert inspect.Parameter.VAR_POSITIONAL not in kinds, f"{cls.__name__}.{name}{inspect.signature(method)}"
    assert "experiment_id" in params or name in ("create_experiment", "experiments", "import_experiment")
    doc = inspect.getdoc(method)
    assert doc and len(doc) > 20, f"{cls.__name__}.{name} has no docstring"
    assert "owner" not in params, f"{cls.__name__}.{name} shows the door's `owner`"


def test_the_suggest_help_page_names_the_errors_a_worker_handles() -> None:
    doc = inspect.getdoc(tauopt.Engine.suggest) or ""
    assert "wait_s" in doc
    doc = inspect.getdoc(tauopt.Engine.observe) or ""
    assert "suggestion_expired" in doc and "numpy" in doc
