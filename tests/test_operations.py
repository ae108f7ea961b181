"""One Operations protocol: the Engine, every registered driver and both
clients implement it, name by name and parameter by parameter; drivers are
chosen through one registry."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import tauopt
from tauopt import ApiError, AsyncClient, Client, Engine
from tauopt.client import driver_name
from tauopt.operations import OPERATIONS, UNSET, Operations, Unset
from tauopt.client import HttpDriver


def _shape(fn: Any, *, drop_deadline: bool = False) -> list[tuple[str, Any, Any, Any]]:
    params = list(inspect.signature(fn).parameters.values())[1:]  # without self
    if drop_deadline:  # the clients' per-call deadline (issue 10): keyword-only, last, default None
        last = params[-1]
        assert (last.name, last.kind, last.default) == ("deadline_s", inspect.Parameter.KEYWORD_ONLY, None), fn
        params = params[:-1]
    return [(p.name, p.kind, p.default, p.annotation) for p in params]


def _without_last(fn: Any, n: int) -> Any:
    if not n:
        return fn
    sig = inspect.signature(fn)
    shim = lambda: None  # noqa: E731 - carries a trimmed signature only
    shim.__signature__ = sig.replace(parameters=list(sig.parameters.values())[:-n])  # type: ignore[attr-defined]
    return shim


def test_the_protocol_lists_the_twenty_four_operations() -> None:
    # thirteen, plus report/reports (issue 19), pareto_front (issue 18), summary/workers/importance (issue 14),
    # report_log (issue 14's learning curves), unarchive/delete/export/import (issue 41)
    assert OPERATIONS == (
        "create_experiment", "experiment", "experiments", "update_experiment", "archive_experiment",
        "unarchive_experiment", "delete_experiment", "export_experiment", "import_experiment", "suggest",
        "observe", "report", "reports", "suggestions", "suggestion", "close_suggestion", "close_all_suggestions",
        "observations", "best", "pareto_front", "summary", "workers", "importance", "report_log",
    )  # fmt: skip


@pytest.mark.parametrize("impl", [HttpDriver, AsyncClient, Client], ids=lambda c: c.__name__)
def test_every_driver_and_client_has_the_protocols_exact_signatures(impl: type) -> None:
    for name in OPERATIONS:
        ours, theirs = getattr(impl, name), getattr(Operations, name)
        assert _shape(ours, drop_deadline=impl is not HttpDriver) == _shape(theirs), (impl.__name__, name)
        assert inspect.signature(ours).return_annotation == inspect.signature(theirs).return_annotation, name
        assert inspect.iscoroutinefunction(ours) == (impl is not Client), name
        assert ours.__qualname__.startswith(impl.__name__ + "."), f"{impl.__name__}.{name} is inherited or generated"


IMPLEMENTATIONS = [Engine, HttpDriver, AsyncClient, Client]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_every_operation_is_written_in_each_implementation_with_the_protocols_signature(impl: type) -> None:
    """The one check a new operation meets everywhere: written in the class's own body (not
    inherited, not generated), the same parameters (names, kinds, defaults, annotations;
    the clients add only their keyword-only deadline_s), the same return annotation, and
    async everywhere but in the sync Client."""
    for name in OPERATIONS:
        assert name in vars(impl), f"{impl.__name__} does not write out {name}"
        ours, theirs = vars(impl)[name], getattr(Operations, name)
        assert _shape(ours, drop_deadline=impl in (AsyncClient, Client)) == _shape(theirs), (impl.__name__, name)
        assert inspect.signature(ours).return_annotation == inspect.signature(theirs).return_annotation, name
        assert inspect.iscoroutinefunction(ours) == (impl is not Client), (impl.__name__, name)


@pytest.mark.parametrize("impl", [AsyncClient, Client], ids=lambda c: c.__name__)
def test_a_clients_public_methods_are_the_operations_and_its_own_lifecycle(impl: type) -> None:
    lifecycle = {"aclose", "close", "call", "engine"}
    public = {n for n in dir(impl) if not n.startswith("_")} - {"driver"}
    assert public - lifecycle == set(OPERATIONS), "an operation on a client must be in tauopt.operations first"


def test_a_client_that_leaves_an_operation_out_fails_at_import() -> None:
    from tauopt.client._base import BaseClient, operation_docs

    class Partial(BaseClient):
        async def suggest(self, experiment_id: str) -> None: ...

    with pytest.raises(TypeError, match="Partial does not write out the operation 'create_experiment'"):
        operation_docs(Partial)


# Engine-only keywords: none since suggest's wait_s (issue 13) is on every door and
# `owner` left the signatures for Engine.as_owner (issue 20); an entry here names
# one, so any other extra parameter fails the test.
ENGINE_ONLY: dict[str, list[tuple[str, Any]]] = {}


def test_the_engine_implements_the_protocol_exactly() -> None:
    for name in OPERATIONS:
        ours, theirs = getattr(Engine, name), getattr(Operations, name)
        params = list(inspect.signature(ours).parameters.values())
        extra = ENGINE_ONLY.get(name, [])
        assert [(p.name, p.default) for p in params[len(params) - len(extra):]] == extra, name
        ours = _without_last(ours, len(extra))
        assert "owner" not in inspect.signature(ours).parameters, name
        assert _shape(ours) == _shape(theirs), name
        assert inspect.signature(ours).return_annotation == inspect.signature(theirs).return_annotation, name


@pytest.mark.anyio
async def test_a_view_acting_for_an_owner_has_the_engines_operations_and_shares_its_state() -> None:
    async with Engine() as engine:
        alice = engine.as_owner("alice")
        assert isinstance(alice, Operations) and engine.as_owner(None) is engine
        for name in OPERATIONS:  # the Engine's own functions, not a second copy
            assert getattr(type(alice), name) is getattr(Engine, name), name
        exp = await alice.create_experiment("e", [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}], {"name": "y"})
        assert exp.owner == "alice" and engine.live_actors == 0
        s = await alice.suggest(exp.id)
        assert engine.live_actors == alice.live_actors == 1  # the engine's actor, started through the view
        assert (await engine.suggestion(exp.id, s.id)).state == "open"  # the engine itself sees every experiment
        with pytest.raises(ApiError) as info:
            await alice.as_owner("bob").experiment(exp.id)
        assert info.value.error_type == "not_found"
        with pytest.raises(TypeError, match="enter the engine itself"):
            async with alice:
                pass
        for bad in ("", 7):
            with pytest.raises(ApiError) as info:
                engine.as_owner(bad)  # type: ignore[arg-type]
            assert info.value.error_type == "invalid_request" and "credential id" in info.value.message


def test_client_methods_are_written_out_with_docstrings() -> None:
    for cls in (AsyncClient, Client):
        for name in OPERATIONS:
            assert name in vars(cls), f"{cls.__name__}.{name} is not written out in the class body"
            assert vars(cls)[name].__doc__ == getattr(Operations, name).__doc__, name


@pytest.mark.anyio
async def test_opened_drivers_are_operations_at_runtime() -> None:
    async with Engine() as engine:
        assert isinstance(engine, Operations)
    async with HttpDriver(base_url="http://127.0.0.1:9") as driver:  # never connects
        assert isinstance(driver, Operations)
    async with AsyncClient(driver="local") as client:
        assert isinstance(client, Operations) and isinstance(client.engine, Engine)


def test_one_unset_everywhere() -> None:
    from tauopt.engine import UNSET as engine_unset

    assert engine_unset is UNSET and Unset() is UNSET and repr(UNSET) == "UNSET"
    import pickle

    assert pickle.loads(pickle.dumps(UNSET)) is UNSET


def test_drivers_are_chosen_by_name_or_url_through_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAUOPT_BASE_URL", raising=False)
    assert driver_name(None, None) == ("local", None)
    assert driver_name("local", None) == ("local", None)
    assert driver_name("http", "http://h:1") == ("http", "http://h:1")
    assert driver_name("https://example.org:8443", None) == ("http", "https://example.org:8443")
    assert AsyncClient("http://127.0.0.1:9").driver == "http"
    with pytest.raises(ApiError) as info:
        driver_name("carrier-pigeon", None)
    assert info.value.error_type == "invalid_request" and "'local'" in info.value.message


def test_a_url_driver_talks_to_that_url() -> None:
    client = tauopt.AsyncClient("http://127.0.0.1:9")
    assert client._options["base_url"] == "http://127.0.0.1:9"


def test_update_experiment_adds_parameters_through_a_local_client() -> None:
    with Client(driver="local") as c:
        exp = c.create_experiment("p", [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}], {"name": "y"})
        params = [p.to_dict() for p in exp.parameters] + [{"name": "z", "type": "int", "bounds": [1, 3]}]
        assert [p.name for p in c.update_experiment(exp.id, parameters=params).parameters] == ["x", "z"]
