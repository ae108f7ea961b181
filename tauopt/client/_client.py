"""AsyncClient and Client: the Operations (`tauopt.operations`) over any driver.

    driver="local"  an in-process Engine (memory, or SQLite with store=PATH)
    driver="http"   a tauopt daemon (base_url / TAUOPT_BASE_URL, token / TAUOPT_TOKEN)
    driver="http://host:port"  the same, with that base_url

Both share `BaseClient` (`_base.py`: the driver, the call's deadline). Every
operation is written out in each with its signature, so IDEs and type checkers
see them; its docstring is the protocol's. `tests/test_operations.py` checks
they match the protocol.

The sync Client runs the driver on an event loop in a daemon thread (an anyio
blocking portal); every method is a `portal.call`, so one Client can be shared
by many threads. A Client never closed is closed at interpreter exit and never
holds the exit up.
"""

from __future__ import annotations

import functools
import queue
import threading
import weakref
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, ParamSpec, Sequence, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

from ..models import Experiment, Metric, Observation, Parameter, Report, ReportDecision, StrategyOptions, Suggestion, Value
from ..operations import UNSET, ExperimentState, Operations, SuggestionState
from ._base import BaseClient, operation_docs

if TYPE_CHECKING:
    from ..schema import ExperimentSpec

__all__ = ["AsyncClient", "Client"]

P = ParamSpec("P")
T = TypeVar("T")


@operation_docs
class AsyncClient(BaseClient):
    """`async with AsyncClient(driver="local") as client:` then `await client.suggest(...)`.

    Local options: store (None = memory, a path or sqlite:/// URL), durability,
    and any other Engine keyword. HTTP options: base_url, token, and any
    HttpDriver keyword (timeout, deadline_s: bounds every call, retries included,
    max_connections, verify). Each option is described in `help(tauopt.Client)`.
    Every operation also takes `deadline_s=` for that call alone.
    """

    _cm: AbstractAsyncContextManager[Operations] | None = None

    async def __aenter__(self) -> "AsyncClient":
        cm = self._open_driver()
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

    # -- operations (tauopt.operations.Operations; docstrings from there) ----------------

    async def create_experiment(
        self,
        name: str | None = None,
        parameters: Sequence[Parameter | Mapping[str, Any]] | None = None,
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
        spec: ExperimentSpec | Mapping[str, Any] | None = None,
        deadline_s: float | None = None,
    ) -> Experiment:
        return await self._call(
            deadline_s, self._require().create_experiment, name, parameters, metric, parallel_bandwidth,
            suggestion_ttl_s, observation_budget, strategy, strategy_options, early_stopping, metrics,
            max_consecutive_failures, description, spec=spec,
        )  # fmt: skip

    async def experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        return await self._call(deadline_s, self._require().experiment, experiment_id)

    async def experiments(
        self, state: ExperimentState | None = None, *, after: str | None = None, limit: int | None = None,
        name: str | None = None, deadline_s: float | None = None,
    ) -> list[Experiment]:  # fmt: skip
        return await self._call(deadline_s, self._require().experiments, state, after=after, limit=limit, name=name)

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
        description: str | None = UNSET,
        metadata: Mapping[str, Value] | None = UNSET,
        deadline_s: float | None = None,
    ) -> Experiment:
        return await self._call(
            deadline_s, self._require().update_experiment, experiment_id, name=name,
            parallel_bandwidth=parallel_bandwidth, suggestion_ttl_s=suggestion_ttl_s,
            observation_budget=observation_budget, parameters=parameters, early_stopping=early_stopping,
            max_consecutive_failures=max_consecutive_failures, description=description, metadata=metadata,
        )  # fmt: skip

    async def archive_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        return await self._call(deadline_s, self._require().archive_experiment, experiment_id)

    async def unarchive_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        return await self._call(deadline_s, self._require().unarchive_experiment, experiment_id)

    async def delete_experiment(self, experiment_id: str, force: bool = False, *, deadline_s: float | None = None) -> Experiment:
        return await self._call(deadline_s, self._require().delete_experiment, experiment_id, force)

    async def export_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        return await self._call(deadline_s, self._require().export_experiment, experiment_id)

    async def import_experiment(self, data: Mapping[str, Any], *, deadline_s: float | None = None) -> Experiment:
        return await self._call(deadline_s, self._require().import_experiment, data)

    async def suggest(
        self, experiment_id: str, tag: str | None = None, wait_s: float | None = None, *, deadline_s: float | None = None
    ) -> Suggestion:
        return await self._call(deadline_s, self._require().suggest, experiment_id, tag, wait_s)

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
        return await self._call(
            deadline_s, self._require().observe, experiment_id, suggestion_id, assignments, value, failed, metrics,
            values, stopped,
        )  # fmt: skip

    async def report(
        self, experiment_id: str, suggestion_id: str, step: int, value: float, *, deadline_s: float | None = None
    ) -> ReportDecision:
        return await self._call(deadline_s, self._require().report, experiment_id, suggestion_id, step, value)

    async def reports(
        self, experiment_id: str, suggestion_id: str | None = None, *, deadline_s: float | None = None
    ) -> list[Report]:
        return await self._call(deadline_s, self._require().reports, experiment_id, suggestion_id)

    async def suggestions(
        self, experiment_id: str, state: SuggestionState | None = None, tag: str | None = None, *, deadline_s: float | None = None
    ) -> list[Suggestion]:
        return await self._call(deadline_s, self._require().suggestions, experiment_id, state, tag)

    async def suggestion(self, experiment_id: str, suggestion_id: str, *, deadline_s: float | None = None) -> Suggestion:
        return await self._call(deadline_s, self._require().suggestion, experiment_id, suggestion_id)

    async def close_suggestion(self, experiment_id: str, suggestion_id: str, *, deadline_s: float | None = None) -> Suggestion:
        return await self._call(deadline_s, self._require().close_suggestion, experiment_id, suggestion_id)

    async def close_all_suggestions(self, experiment_id: str, *, deadline_s: float | None = None) -> int:
        return await self._call(deadline_s, self._require().close_all_suggestions, experiment_id)

    async def observations(
        self, experiment_id: str, after: int | None = None, *, limit: int | None = None, failed: bool | None = None,
        deadline_s: float | None = None,
    ) -> list[Observation]:  # fmt: skip
        return await self._call(deadline_s, self._require().observations, experiment_id, after, limit=limit, failed=failed)

    async def best(self, experiment_id: str, *, deadline_s: float | None = None) -> Observation | None:
        return await self._call(deadline_s, self._require().best, experiment_id)

    async def pareto_front(self, experiment_id: str, *, deadline_s: float | None = None) -> list[Observation]:
        return await self._call(deadline_s, self._require().pareto_front, experiment_id)

    async def summary(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        return await self._call(deadline_s, self._require().summary, experiment_id)

    async def workers(
        self, experiment_id: str, after: int = 0, limit: int | None = None, *, deadline_s: float | None = None
    ) -> dict[str, Any]:
        return await self._call(deadline_s, self._require().workers, experiment_id, after, limit)

    async def importance(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        return await self._call(deadline_s, self._require().importance, experiment_id)

    async def report_log(
        self, experiment_id: str, after: int = 0, limit: int | None = None, *, deadline_s: float | None = None
    ) -> dict[str, Any]:
        return await self._call(deadline_s, self._require().report_log, experiment_id, after, limit)


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


@operation_docs
class Client(BaseClient):
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
        super().__init__(driver, base_url=base_url, token=token, **options)
        self._portal, thread = _start_portal()
        cm = self._portal.wrap_async_context_manager(self._open_driver())
        try:
            self._ops = cm.__enter__()
        except BaseException:  # Ctrl-C while opening included: the opening is cancelled, not waited for
            self._portal.call(self._portal.stop, True)
            thread.join(timeout=10)
            raise
        self._finalizer = weakref.finalize(self, _shutdown, self._portal, cm, thread)

    def _open_portal(self) -> BlockingPortal:
        if not self._finalizer.alive:
            raise RuntimeError("this Client is closed")
        return self._portal

    def _require(self) -> Operations:
        if self._ops is None:
            raise RuntimeError("this Client is closed")
        return self._ops

    def close(self) -> None:
        self._finalizer()
        self._ops = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run an async callable on the client's event loop (e.g. `client.call(client.engine.inspect, id)`)."""
        return self._open_portal().call(fn, *args)

    def _run(self, deadline_s: float | None, op: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """`BaseClient._call` on the client's event loop, from the calling thread."""
        portal = self._open_portal()
        return portal.call(functools.partial(self._call, deadline_s, op, *args, **kwargs))

    # -- operations (the same as AsyncClient's, blocking) ------------------------------

    def create_experiment(
        self,
        name: str | None = None,
        parameters: Sequence[Parameter | Mapping[str, Any]] | None = None,
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
        spec: ExperimentSpec | Mapping[str, Any] | None = None,
        deadline_s: float | None = None,
    ) -> Experiment:
        return self._run(
            deadline_s, self._require().create_experiment, name, parameters, metric, parallel_bandwidth,
            suggestion_ttl_s, observation_budget, strategy, strategy_options, early_stopping, metrics,
            max_consecutive_failures, description, spec=spec,
        )  # fmt: skip

    def experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        return self._run(deadline_s, self._require().experiment, experiment_id)

    def experiments(
        self, state: ExperimentState | None = None, *, after: str | None = None, limit: int | None = None,
        name: str | None = None, deadline_s: float | None = None,
    ) -> list[Experiment]:  # fmt: skip
        return self._run(deadline_s, self._require().experiments, state, after=after, limit=limit, name=name)

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
        description: str | None = UNSET,
        metadata: Mapping[str, Value] | None = UNSET,
        deadline_s: float | None = None,
    ) -> Experiment:
        return self._run(
            deadline_s, self._require().update_experiment, experiment_id, name=name,
            parallel_bandwidth=parallel_bandwidth, suggestion_ttl_s=suggestion_ttl_s,
            observation_budget=observation_budget, parameters=parameters, early_stopping=early_stopping,
            max_consecutive_failures=max_consecutive_failures, description=description, metadata=metadata,
        )  # fmt: skip

    def archive_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        return self._run(deadline_s, self._require().archive_experiment, experiment_id)

    def unarchive_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> Experiment:
        return self._run(deadline_s, self._require().unarchive_experiment, experiment_id)

    def delete_experiment(self, experiment_id: str, force: bool = False, *, deadline_s: float | None = None) -> Experiment:
        return self._run(deadline_s, self._require().delete_experiment, experiment_id, force)

    def export_experiment(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        return self._run(deadline_s, self._require().export_experiment, experiment_id)

    def import_experiment(self, data: Mapping[str, Any], *, deadline_s: float | None = None) -> Experiment:
        return self._run(deadline_s, self._require().import_experiment, data)

    def suggest(
        self, experiment_id: str, tag: str | None = None, wait_s: float | None = None, *, deadline_s: float | None = None
    ) -> Suggestion:
        return self._run(deadline_s, self._require().suggest, experiment_id, tag, wait_s)

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
        return self._run(
            deadline_s, self._require().observe, experiment_id, suggestion_id, assignments, value, failed, metrics,
            values, stopped,
        )  # fmt: skip

    def report(
        self, experiment_id: str, suggestion_id: str, step: int, value: float, *, deadline_s: float | None = None
    ) -> ReportDecision:
        return self._run(deadline_s, self._require().report, experiment_id, suggestion_id, step, value)

    def reports(self, experiment_id: str, suggestion_id: str | None = None, *, deadline_s: float | None = None) -> list[Report]:
        return self._run(deadline_s, self._require().reports, experiment_id, suggestion_id)

    def suggestions(
        self, experiment_id: str, state: SuggestionState | None = None, tag: str | None = None, *, deadline_s: float | None = None
    ) -> list[Suggestion]:
        return self._run(deadline_s, self._require().suggestions, experiment_id, state, tag)

    def suggestion(self, experiment_id: str, suggestion_id: str, *, deadline_s: float | None = None) -> Suggestion:
        return self._run(deadline_s, self._require().suggestion, experiment_id, suggestion_id)

    def close_suggestion(self, experiment_id: str, suggestion_id: str, *, deadline_s: float | None = None) -> Suggestion:
        return self._run(deadline_s, self._require().close_suggestion, experiment_id, suggestion_id)

    def close_all_suggestions(self, experiment_id: str, *, deadline_s: float | None = None) -> int:
        return self._run(deadline_s, self._require().close_all_suggestions, experiment_id)

    def observations(
        self, experiment_id: str, after: int | None = None, *, limit: int | None = None, failed: bool | None = None,
        deadline_s: float | None = None,
    ) -> list[Observation]:  # fmt: skip
        return self._run(deadline_s, self._require().observations, experiment_id, after, limit=limit, failed=failed)

    def best(self, experiment_id: str, *, deadline_s: float | None = None) -> Observation | None:
        return self._run(deadline_s, self._require().best, experiment_id)

    def pareto_front(self, experiment_id: str, *, deadline_s: float | None = None) -> list[Observation]:
        return self._run(deadline_s, self._require().pareto_front, experiment_id)

    def summary(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        return self._run(deadline_s, self._require().summary, experiment_id)

    def workers(
        self, experiment_id: str, after: int = 0, limit: int | None = None, *, deadline_s: float | None = None
    ) -> dict[str, Any]:
        return self._run(deadline_s, self._require().workers, experiment_id, after, limit)

    def importance(self, experiment_id: str, *, deadline_s: float | None = None) -> dict[str, Any]:
        return self._run(deadline_s, self._require().importance, experiment_id)

    def report_log(
        self, experiment_id: str, after: int = 0, limit: int | None = None, *, deadline_s: float | None = None
    ) -> dict[str, Any]:
        return self._run(deadline_s, self._require().report_log, experiment_id, after, limit)
