"""AsyncClient and Client: the Operations (`tauopt.operations`) over any driver.

    driver="local"  an in-process Engine (memory, or SQLite with store=PATH)
    driver="http"   a tauopt daemon (base_url / TAUOPT_BASE_URL, token / TAUOPT_TOKEN)
    driver="http://host:port"  the same, with that base_url

Drivers come from one registry (`tauopt._drivers`). Every method is written
out with its signature, so IDEs and type checkers see them;
`tests/test_operations.py` checks they match the protocol.

The sync Client runs an AsyncClient on an event loop in a daemon thread (an
anyio blocking portal); every method is a `portal.call`, so one Client can be
shared by many threads. A Client never closed is closed at interpreter exit
and never holds the exit up.
"""

from __future__ import annotations

import functools
import logging
import math
import queue
import threading
import weakref
from contextlib import AbstractAsyncContextManager, AbstractContextManager, nullcontext
from typing import Any, Awaitable, Callable, Mapping, Sequence, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

from ._drivers import driver_name, open_driver
from .errors import invalid
from .models import Experiment, Metric, Observation, Parameter, Report, ReportDecision, StrategyOptions, Suggestion
from .operations import UNSET, ExperimentState, Operations, SuggestionState

__all__ = ["AsyncClient", "Client"]

T = TypeVar("T")

log = logging.getLogger("tauopt.client")
_said_private: list[bool] = []  # the private-engine notice is logged once per process


def _say_private_engine() -> None:
    """Client() with no driver and no TAUOPT_BASE_URL: say once that it is not a daemon."""
    if not _said_private:
        _said_private.append(True)
        log.warning(
            "Client() without a driver and without TAUOPT_BASE_URL runs a private in-process engine; "
            "set TAUOPT_BASE_URL (and TAUOPT_TOKEN) to reach a `tauopt serve` daemon, "
            "or pass driver='local' to say this is what you want"
        )


_NO_DEADLINE: AbstractContextManager[None] = nullcontext()  # reusable: one for every call without a deadline


def check_deadline_s(deadline_s: Any) -> float | None:
    """deadline_s as a float (None: no deadline), or an invalid_request ApiError saying what is accepted."""
    if deadline_s is None:
        return None
    if isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float)) or not math.isfinite(deadline_s) or deadline_s < 0:
        raise invalid(
            f"deadline_s: {deadline_s!r} is not a finite number of seconds >= 0; "
            "pass e.g. deadline_s=30, or None for no deadline"
        )
    return float(deadline_s)


class AsyncClient:
    """`async with AsyncClient(driver="local") as client:` then `await client.suggest(...)`.

    Local options: store (None = memory, a path or sqlite:/// URL), durability,
    and any other Engine keyword. HTTP options: base_url, token, and any
    HttpDriver keyword (timeout, deadline_s: bounds every call, retries included,
    max_connections, verify). Each option is described in `help(tauopt.Client)`.
    Every operation also takes `deadline_s=` for that call alone.
    """

    def __init__(self, driver: str | None = None, *, base_url: str | None = None, token: str | None = None, **options: Any) -> None:
        self.driver, base_url = driver_name(driver, base_url)
        if driver is None and self.driver == "local":
            _say_private_engine()
        if self.driver != "local":
            options = dict(options, base_url=base_url, token=token)
        self._options = options
        self._cm: AbstractAsyncContextManager[Operations] | None = None
        self._ops: Operations | None = None

    async def __aenter__(self) -> "AsyncClient":
        cm = open_driver(self.driver, self._options)
        self._ops = await cm.__aenter__()
        self._cm = cm
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        cm, self._cm, self._ops = self._cm, None, None
        if cm is not None:
            await cm.__aexit__(None, None, None)

    close = aclose

    @property
    def engine(self) -> Any:
        """The in-process Engine of a local client (None for http)."""
        return self._ops if self.driver == "local" else None

    def _require(self) -> Operations:
        if self._ops is None:
            raise RuntimeError("use the client as `async with AsyncClient(...) as client:` (it is not open)")
        return self._ops

    def _bounded(self, deadline_s: float | None) -> AbstractContextManager[None]:
        """The call's deadline over the HTTP driver's retries; in process there is no retry to bound."""
        if deadline_s is None:
            return _NO_DEADLINE
        if self.driver == "local":
            check_deadline_s(deadline_s)
            return _NO_DEADLINE
        return self._require().deadline(deadline_s)  # type: ignore[attr-defined]

    # -- operations (tauopt.operations.Operations) ------------------------------------

    async def create_experiment(
        self,
        name: str,
        parameters: Sequence[Parameter | Mapping[str, Any]],
        metric: Metric | Mapping[str, Any] | None = None,
        parallel_bandwidth: int = 1,
        suggestion_ttl_s: float | None = None,
        observation_budget: int | None = None,
        strategy: str = "auto",
        strategy_options: StrategyOptions | Mapping[str, Any] | None = None,
        early_stopping: Mapping[str, Any] | None = None,
        metrics: Sequence[Metric | Mapping[str, Any]] | None = None,
        max_consecutive_failures: int | None = None,
        description: str | None = None,
        *,
        deadline_s: float | None = None,
    ) -> Experiment:
        """Create an active experiment; its id is chosen by the engine. `metric`: one
        objective, or `metrics=[...]`: 1-4 objectives and constraint metrics;
        `early_stopping`: {"rule": "none"|"median"|"asha", ...options} (see `report`);
        `max_consecutive_failures`: that many failed runs in a row stop the asks
        (`too_many_failures`) until update_experiment sets it again (None: no cap);
        `description`: free text for people (at most 4,096 characters).
        E.g. parameters=[{"name": "lr", "type": "double", "bounds": [1e-4, 0.1], "scale": "log"}, {"name": "n",
        "type": "int", "bounds": [1, 4]}, {"name": "act", "type": "categorical", "values": ["relu", "tanh"]}],
        metric={"name": "loss"} (objective "minimize" by default), metrics=[{"name": "acc", "objective": "maximize"},
        {"name": "mem_mb", "constraint": {"<=": 512}}], early_stopping={"rule": "median", "min_trials": 5} or
        {"rule": "asha", "max_step": 81}, strategy_options={"seed": 0, "initial_points": 10, "grid_size": 5}."""
        with self._bounded(deadline_s):
            return await self._require().create_experiment(
                name, parameters, metric, parallel_bandwidth, suggestion_ttl_s, observation_budget, strategy,
                strategy_options, early_stopping, metrics, max_consecutive_failures, description,
            )  # fmt: skip

    async def experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        """One experiment with its counts; `not_found` if absent (or another credential's)."""
        with self._bounded(deadline_s):
            return await self._require().experiment(experiment_id)

    async def experiments(self, state: ExperimentState | None = None, *, deadline_s: float | None = None) -> list[Experiment]:
        """Experiments, oldest first, optionally in one state."""
        with self._bounded(deadline_s):
            return await self._require().experiments(state)

    async def update_experiment(
        self,
        experiment_id: str,
        *,
        name: str = UNSET,
        parallel_bandwidth: int = UNSET,
        suggestion_ttl_s: float | None = UNSET,
        observation_budget: int | None = UNSET,
        parameters: Sequence[Parameter | Mapping[str, Any]] = UNSET,
        early_stopping: Mapping[str, Any] = UNSET,
        max_consecutive_failures: int | None = UNSET,
        deadline_s: float | None = None,
    ) -> Experiment:
        """Change the given fields (UNSET leaves one as it is; None unsets ttl, budget or
        the failure cap). Setting max_consecutive_failures, even to its value, clears a
        `too_many_failures` stop and counts failures from zero."""
        with self._bounded(deadline_s):
            return await self._require().update_experiment(
                experiment_id, name=name, parallel_bandwidth=parallel_bandwidth, suggestion_ttl_s=suggestion_ttl_s,
                observation_budget=observation_budget, parameters=parameters, early_stopping=early_stopping,
                max_consecutive_failures=max_consecutive_failures,
            )  # fmt: skip

    async def archive_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        """Archive: no more asks or observations; open suggestions close."""
        with self._bounded(deadline_s):
            return await self._require().archive_experiment(experiment_id)

    async def unarchive_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        """Undo an archive: active again (completed if its budget is used up)."""
        with self._bounded(deadline_s):
            return await self._require().unarchive_experiment(experiment_id)

    async def delete_experiment(self, experiment_id: str, force: bool = False, *, deadline_s: float | None = None) -> Experiment:
        """Remove it and its history from the store; returns it as it was. Refused with
        `suggestions_open` while suggestions are open, unless force=True."""
        with self._bounded(deadline_s):
            return await self._require().delete_experiment(experiment_id, force)

    async def export_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        """The experiment and its whole history as one JSON document, for import_experiment."""
        with self._bounded(deadline_s):
            return await self._require().export_experiment(experiment_id)

    async def import_experiment(self, data: Mapping[str, Any], *, deadline_s: float | None = None) -> Experiment:
        """Recreate an exported experiment (a new id, the caller's) with the same history."""
        with self._bounded(deadline_s):
            return await self._require().import_experiment(data)

    async def suggest(
        self, experiment_id: str, tag: str | None = None, wait_s: float | None = None, *, deadline_s: float | None = None
    ) -> Suggestion:
        """A new open suggestion; `bandwidth_full` when parallel_bandwidth are open, or,
        with `wait_s` (0-300 s), when none returned within that wait."""
        with self._bounded(deadline_s):
            return await self._require().suggest(experiment_id, tag, wait_s)

    async def observe(
        self,
        experiment_id: str,
        suggestion_id: str | None = None,
        assignments: Mapping[str, Any] | None = None,
        value: float | None = None,
        failed: bool = False,
        metrics: Mapping[str, float] | None = None,
        values: Mapping[str, float] | None = None,
        stopped: bool = False,
        *,
        deadline_s: float | None = None,
    ) -> Observation:
        """Record a result, of a suggestion (suggestion_id) or unsolicited (assignments).
        One of `value` (the first objective), `values` (every objective and constraint metric
        by name) or `failed=True`; `stopped=True`: the
        suggestion was stopped early (told by `report`), `value` its last reported value."""
        with self._bounded(deadline_s):
            return await self._require().observe(
                experiment_id, suggestion_id, assignments, value, failed, metrics, values, stopped
            )

    async def report(
        self, experiment_id: str, suggestion_id: str, step: int, value: float, *, deadline_s: float | None = None
    ) -> ReportDecision:
        """An intermediate value of an open suggestion at `step` (increasing); answers
        whether the experiment's early-stopping rule says to stop it."""
        with self._bounded(deadline_s):
            return await self._require().report(experiment_id, suggestion_id, step, value)

    async def reports(
        self, experiment_id: str, suggestion_id: str | None = None, *, deadline_s: float | None = None
    ) -> list[Report]:
        """The intermediate reports in arrival order, of one suggestion (None: all; in process only)."""
        with self._bounded(deadline_s):
            return await self._require().reports(experiment_id, suggestion_id)

    async def suggestions(
        self, experiment_id: str, state: SuggestionState | None = None, tag: str | None = None, *, deadline_s: float | None = None
    ) -> list[Suggestion]:
        """The experiment's suggestions, optionally filtered by state and tag."""
        with self._bounded(deadline_s):
            return await self._require().suggestions(experiment_id, state, tag)

    async def suggestion(self, experiment_id: str, suggestion_id: str, *, deadline_s: float | None = None) -> Suggestion:
        """One suggestion by id."""
        with self._bounded(deadline_s):
            return await self._require().suggestion(experiment_id, suggestion_id)

    async def close_suggestion(self, experiment_id: str, suggestion_id: str, *, deadline_s: float | None = None) -> Suggestion:
        """Close an open suggestion without an observation (its point may be suggested again)."""
        with self._bounded(deadline_s):
            return await self._require().close_suggestion(experiment_id, suggestion_id)

    async def close_all_suggestions(self, experiment_id: str, *, deadline_s: float | None = None) -> int:
        """Close every open suggestion; the number closed."""
        with self._bounded(deadline_s):
            return await self._require().close_all_suggestions(experiment_id)

    async def observations(
        self, experiment_id: str, after: int | None = None, *, deadline_s: float | None = None
    ) -> list[Observation]:
        """Every observation, in the order recorded; with `after` (the last id you have) only the newer ones."""
        with self._bounded(deadline_s):
            return await self._require().observations(experiment_id, after)

    async def best(self, experiment_id: str, *, deadline_s: float | None = None) -> Observation | None:
        """The best feasible observation by the (first) objective, or None."""
        with self._bounded(deadline_s):
            return await self._require().best(experiment_id)

    async def pareto_front(self, experiment_id: str, *, deadline_s: float | None = None) -> list[Observation]:
        """The feasible observations no other feasible one dominates, in arrival order."""
        with self._bounded(deadline_s):
            return await self._require().pareto_front(experiment_id)

    async def summary(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        """The experiment, its counts, best value, last activity and best-so-far line."""
        with self._bounded(deadline_s):
            return await self._require().summary(experiment_id)

    async def workers(
        self, experiment_id: str, after: int = 0, limit: int | None = None, *, deadline_s: float | None = None
    ) -> dict[str, Any]:
        """Per-tag counts, open suggestions with their age, suggestions changed since the cursor `after` (with `limit`, the latest `limit` of them)."""
        with self._bounded(deadline_s):
            return await self._require().workers(experiment_id, after, limit)

    async def importance(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        """Parameter importance over the observations, with the method named."""
        with self._bounded(deadline_s):
            return await self._require().importance(experiment_id)

    async def report_log(
        self, experiment_id: str, after: int = 0, limit: int | None = None, *, deadline_s: float | None = None
    ) -> dict[str, Any]:
        """Every suggestion's intermediate reports since the cursor `after` (0: all), arrival order,
        at most `limit` (the oldest first): {"cursor", "reports", "more"}; pass `cursor` back while `more`."""
        with self._bounded(deadline_s):
            return await self._require().report_log(experiment_id, after, limit)


def _start_portal() -> tuple[BlockingPortal, threading.Thread]:
    ready: queue.Queue[BlockingPortal | BaseException] = queue.Queue()

    async def main() -> None:
        async with BlockingPortal() as portal:
            ready.put(portal)
            await portal.sleep_until_stopped()

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:  # pragma: no cover - surfaced to the constructor
            ready.put(exc)

    thread = threading.Thread(target=run, name="tauopt-client-loop", daemon=True)
    thread.start()
    got = ready.get()
    if isinstance(got, BaseException):
        raise got
    return got, thread


def _shutdown(portal: BlockingPortal, cm: Any, thread: threading.Thread) -> None:
    try:
        cm.__exit__(None, None, None)
    except Exception:
        pass
    try:
        portal.call(portal.stop, True)  # cancel what is still running (a call Ctrl-C abandoned) rather than wait on it
    except Exception:
        pass
    thread.join(timeout=10)


class Client:
    """The sync client: `Client(driver="local")` or `Client(driver="http", base_url=..., token=...)`.
    Same operations and errors as AsyncClient; safe to share between threads.

    driver: "local" (an in-process Engine), "http" (a `tauopt serve` daemon), an
        http(s):// URL (the http driver with that base_url), or None: "http" when
        base_url or $TAUOPT_BASE_URL is set, else "local".

    Local options (any `tauopt.Engine` keyword):
        store: None (memory), a path or sqlite:/// URL (a SQLite file), or a Store.
        durability: "os" (default; survives a killed process) or "fsync" (also power loss).
        pool: where GP fits run: "thread" (default), "process", "dask", or a StrategyPool;
            pool_size: its workers.
        passivate_after_s: idle seconds before an experiment's actor leaves memory (600).
        fit_deadline_s: a GP fit slower than this falls back to Sobol (30).

    HTTP options (any `HttpDriver` keyword):
        base_url: the daemon, e.g. "http://127.0.0.1:8080" (default $TAUOPT_BASE_URL).
        token: the bearer token (default $TAUOPT_TOKEN).
        timeout: httpx's per-request network timeout in seconds (60).
        deadline_s: bounds every call, retries included (None: no bound).
        max_connections: the keep-alive pool's size (64).
        verify: https only: True, a CA bundle path, an ssl.SSLContext, or False.

    Every operation also takes `deadline_s=` for that call alone.
    """

    def __init__(self, driver: str | None = None, *, base_url: str | None = None, token: str | None = None, **options: Any) -> None:
        self._client = AsyncClient(driver, base_url=base_url, token=token, **options)
        self.driver = self._client.driver
        self._portal, thread = _start_portal()
        cm = self._portal.wrap_async_context_manager(self._client)
        try:
            cm.__enter__()
        except BaseException:  # Ctrl-C while opening included: the opening is cancelled, not waited for
            self._portal.call(self._portal.stop, True)
            thread.join(timeout=10)
            raise
        self._finalizer = weakref.finalize(self, _shutdown, self._portal, cm, thread)

    def _open_portal(self) -> BlockingPortal:
        if not self._finalizer.alive:
            raise RuntimeError("this Client is closed")
        return self._portal

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    @property
    def engine(self) -> Any:
        return self._client.engine

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run an async callable on the client's event loop (e.g. `client.call(client.engine.inspect, id)`)."""
        return self._open_portal().call(fn, *args)

    def _run(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        portal = self._open_portal()
        return portal.call(functools.partial(fn, *args, **kwargs))

    # -- operations (the same as AsyncClient's, blocking) ------------------------------

    def create_experiment(
        self,
        name: str,
        parameters: Sequence[Parameter | Mapping[str, Any]],
        metric: Metric | Mapping[str, Any] | None = None,
        parallel_bandwidth: int = 1,
        suggestion_ttl_s: float | None = None,
        observation_budget: int | None = None,
        strategy: str = "auto",
        strategy_options: StrategyOptions | Mapping[str, Any] | None = None,
        early_stopping: Mapping[str, Any] | None = None,
        metrics: Sequence[Metric | Mapping[str, Any]] | None = None,
        max_consecutive_failures: int | None = None,
        description: str | None = None,
        *,
        deadline_s: float | None = None,
    ) -> Experiment:
        """Create an active experiment; its id is chosen by the engine. `metric`: one
        objective, or `metrics=[...]`: 1-4 objectives and constraint metrics;
        `early_stopping`: {"rule": "none"|"median"|"asha", ...options} (see `report`);
        `max_consecutive_failures`: that many failed runs in a row stop the asks
        (`too_many_failures`) until update_experiment sets it again (None: no cap);
        `description`: free text for people (at most 4,096 characters).
        E.g. parameters=[{"name": "lr", "type": "double", "bounds": [1e-4, 0.1], "scale": "log"}, {"name": "n",
        "type": "int", "bounds": [1, 4]}, {"name": "act", "type": "categorical", "values": ["relu", "tanh"]}],
        metric={"name": "loss"} (objective "minimize" by default), metrics=[{"name": "acc", "objective": "maximize"},
        {"name": "mem_mb", "constraint": {"<=": 512}}], early_stopping={"rule": "median", "min_trials": 5} or
        {"rule": "asha", "max_step": 81}, strategy_options={"seed": 0, "initial_points": 10, "grid_size": 5}."""
        return self._run(
            self._client.create_experiment, name, parameters, metric, parallel_bandwidth, suggestion_ttl_s,
            observation_budget, strategy, strategy_options, early_stopping, metrics, max_consecutive_failures,
            description, deadline_s=deadline_s,
        )  # fmt: skip

    def experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        """One experiment with its counts; `not_found` if absent (or another credential's)."""
        return self._run(self._client.experiment, experiment_id, deadline_s=deadline_s)

    def experiments(self, state: ExperimentState | None = None, *, deadline_s: float | None = None) -> list[Experiment]:
        """Experiments, oldest first, optionally in one state."""
        return self._run(self._client.experiments, state, deadline_s=deadline_s)

    def update_experiment(
        self,
        experiment_id: str,
        *,
        name: str = UNSET,
        parallel_bandwidth: int = UNSET,
        suggestion_ttl_s: float | None = UNSET,
        observation_budget: int | None = UNSET,
        parameters: Sequence[Parameter | Mapping[str, Any]] = UNSET,
        early_stopping: Mapping[str, Any] = UNSET,
        max_consecutive_failures: int | None = UNSET,
        deadline_s: float | None = None,
    ) -> Experiment:
        """Change the given fields (UNSET leaves one as it is; None unsets ttl, budget or
        the failure cap). Setting max_consecutive_failures, even to its value, clears a
        `too_many_failures` stop and counts failures from zero."""
        return self._run(
            self._client.update_experiment, experiment_id, name=name, parallel_bandwidth=parallel_bandwidth,
            suggestion_ttl_s=suggestion_ttl_s, observation_budget=observation_budget, parameters=parameters,
            early_stopping=early_stopping, max_consecutive_failures=max_consecutive_failures, deadline_s=deadline_s,
        )  # fmt: skip

    def archive_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        """Archive: no more asks or observations; open suggestions close."""
        return self._run(self._client.archive_experiment, experiment_id, deadline_s=deadline_s)

    def unarchive_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        """Undo an archive: active again (completed if its budget is used up)."""
        return self._run(self._client.unarchive_experiment, experiment_id, deadline_s=deadline_s)

    def delete_experiment(self, experiment_id: str, force: bool = False, *, deadline_s: float | None = None) -> Experiment:
        """Remove it and its history from the store; returns it as it was. Refused with
        `suggestions_open` while suggestions are open, unless force=True."""
        return self._run(self._client.delete_experiment, experiment_id, force, deadline_s=deadline_s)

    def export_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        """The experiment and its whole history as one JSON document, for import_experiment."""
        return self._run(self._client.export_experiment, experiment_id, deadline_s=deadline_s)

    def import_experiment(self, data: Mapping[str, Any], *, deadline_s: float | None = None) -> Experiment:
        """Recreate an exported experiment (a new id, the caller's) with the same history."""
        return self._run(self._client.import_experiment, data, deadline_s=deadline_s)

    def suggest(
        self, experiment_id: str, tag: str | None = None, wait_s: float | None = None, *, deadline_s: float | None = None
    ) -> Suggestion:
        """A new open suggestion; `bandwidth_full` when parallel_bandwidth are open, or,
        with `wait_s` (0-300 s), when none returned within that wait."""
        return self._run(self._client.suggest, experiment_id, tag, wait_s, deadline_s=deadline_s)

    def observe(
        self,
        experiment_id: str,
        suggestion_id: str | None = None,
        assignments: Mapping[str, Any] | None = None,
        value: float | None = None,
        failed: bool = False,
        metrics: Mapping[str, float] | None = None,
        values: Mapping[str, float] | None = None,
        stopped: bool = False,
        *,
        deadline_s: float | None = None,
    ) -> Observation:
        """Record a result, of a suggestion (suggestion_id) or unsolicited (assignments).
        One of `value` (the first objective), `values` (every objective and constraint metric
        by name) or `failed=True`; `stopped=True`: the
        suggestion was stopped early (told by `report`), `value` its last reported value."""
        return self._run(
            self._client.observe, experiment_id, suggestion_id, assignments, value, failed, metrics, values, stopped,
            deadline_s=deadline_s,
        )  # fmt: skip

    def report(
        self, experiment_id: str, suggestion_id: str, step: int, value: float, *, deadline_s: float | None = None
    ) -> ReportDecision:
        """An intermediate value of an open suggestion at `step` (increasing); answers
        whether the experiment's early-stopping rule says to stop it."""
        return self._run(self._client.report, experiment_id, suggestion_id, step, value, deadline_s=deadline_s)

    def reports(self, experiment_id: str, suggestion_id: str | None = None, *, deadline_s: float | None = None) -> list[Report]:
        """The intermediate reports in arrival order, of one suggestion (None: all; in process only)."""
        return self._run(self._client.reports, experiment_id, suggestion_id, deadline_s=deadline_s)

    def suggestions(
        self, experiment_id: str, state: SuggestionState | None = None, tag: str | None = None, *, deadline_s: float | None = None
    ) -> list[Suggestion]:
        """The experiment's suggestions, optionally filtered by state and tag."""
        return self._run(self._client.suggestions, experiment_id, state, tag, deadline_s=deadline_s)

    def suggestion(self, experiment_id: str, suggestion_id: str, *, deadline_s: float | None = None) -> Suggestion:
        """One suggestion by id."""
        return self._run(self._client.suggestion, experiment_id, suggestion_id, deadline_s=deadline_s)

    def close_suggestion(self, experiment_id: str, suggestion_id: str, *, deadline_s: float | None = None) -> Suggestion:
        """Close an open suggestion without an observation (its point may be suggested again)."""
        return self._run(self._client.close_suggestion, experiment_id, suggestion_id, deadline_s=deadline_s)

    def close_all_suggestions(self, experiment_id: str, *, deadline_s: float | None = None) -> int:
        """Close every open suggestion; the number closed."""
        return self._run(self._client.close_all_suggestions, experiment_id, deadline_s=deadline_s)

    def observations(self, experiment_id: str, after: int | None = None, *, deadline_s: float | None = None) -> list[Observation]:
        """Every observation, in the order recorded; with `after` (the last id you have) only the newer ones."""
        return self._run(self._client.observations, experiment_id, after, deadline_s=deadline_s)

    def best(self, experiment_id: str, *, deadline_s: float | None = None) -> Observation | None:
        """The best feasible observation by the (first) objective, or None."""
        return self._run(self._client.best, experiment_id, deadline_s=deadline_s)

    def pareto_front(self, experiment_id: str, *, deadline_s: float | None = None) -> list[Observation]:
        """The feasible observations no other feasible one dominates, in arrival order."""
        return self._run(self._client.pareto_front, experiment_id, deadline_s=deadline_s)

    def summary(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        """The experiment, its counts, best value, last activity and best-so-far line."""
        return self._run(self._client.summary, experiment_id, deadline_s=deadline_s)

    def workers(
        self, experiment_id: str, after: int = 0, limit: int | None = None, *, deadline_s: float | None = None
    ) -> dict[str, Any]:
        """Per-tag counts, open suggestions with their age, suggestions changed since the cursor `after` (with `limit`, the latest `limit` of them)."""
        return self._run(self._client.workers, experiment_id, after, limit, deadline_s=deadline_s)

    def importance(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        """Parameter importance over the observations, with the method named."""
        return self._run(self._client.importance, experiment_id, deadline_s=deadline_s)

    def report_log(
        self, experiment_id: str, after: int = 0, limit: int | None = None, *, deadline_s: float | None = None
    ) -> dict[str, Any]:
        """Every suggestion's intermediate reports since the cursor `after` (0: all), arrival order,
        at most `limit` (the oldest first): {"cursor", "reports", "more"}; pass `cursor` back while `more`."""
        return self._run(self._client.report_log, experiment_id, after, limit, deadline_s=deadline_s)
