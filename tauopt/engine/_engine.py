"""Engine: the front door every transport calls. It owns the store, the
strategy pool and one ExperimentActor per experiment, all inside its task group.

Actors are started on an experiment's first message (rebuilt from the store)
and passivate after `passivate_after_s` idle; the next message brings them
back. The engine itself holds no experiment state.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Coroutine, Literal, Mapping, Sequence

import anyio
from anyio.abc import TaskGroup

from ..actors import NOT_NOW, ActorGone, ActorRef
from ..errors import ApiError, api_error, invalid
from ..models import Experiment, Metric, Observation, Parameter, Report, ReportDecision, StrategyOptions, Suggestion, Value
from ..operations import UNSET, ExperimentState, SuggestionState
from ..schema import check_name, check_wait, spec_given
from ..space import is_large_space
from ..store import PutExperiment, PutRecord, Store, Write, open_store
from ..store._base import Sharing, StoreError
from ..store._filewatch import commit_error
from ..strategies import AUTO, MODEL_FREE, grids, uses_pool, warm_up_for
from . import _messages as m
from ._actor import ExperimentActor
from ._admin import Admin, list_experiments
from ._downsample import Downsample, downsample
from ._export import check_document, check_imported_state, imported_writes
from ._history import INLINE_ROWS, RowsLater
from ._importance import ImportanceCache
from ._shared import FrontCache
from ._studies import StudyIndex
from ._trials import STUDY_KEY, DeleteStudy, ReadStudy, Study, TrialChange, check_directions, study_of

if TYPE_CHECKING:
    from ..schema import ExperimentSpec

__all__ = ["Engine", "DaemonStatus", "UNSET", "open_store"]


@dataclass(frozen=True)
class DaemonStatus:
    """`Engine.status()`: whether this engine serves requests now, and its place among
    daemons sharing a database (`sharing` None when its store is its own)."""

    daemon_id: str
    ready: bool
    sharing: Sharing | None

log = logging.getLogger("tauopt.engine")

# Daemons sharing a database: a request that landed on a non-owner is forwarded on this
# answer for this long without asking the database again. Ownership that moved meanwhile
# costs at most this much: the old owner answers not_owner, and the request is retried.
_ELSEWHERE_S = 0.5
_ELSEWHERE_KEPT = 10_000


def _not_owner(experiment_id: str, owner: str) -> ApiError:
    return api_error(
        "not_owner", f"experiment {experiment_id!r} is served by the daemon at {owner}; send the request there",
        owner_url=owner,
    )


class Engine:
    """`async with Engine() as engine:` — the embedded async API.

    Implements `tauopt.operations.Operations` exactly. Its operations act for no
    credential (in process: every experiment); `as_owner(owner)` gives the same
    operations acting for one credential, which is how a door serves a request.

    store: None (memory), a path / sqlite:/// URL (SQLite), or a Store.
    pool: "thread" (default; GP fits on a thread of this process), "process"
        (a pool of worker processes, the daemon's choice), "dask" (a Dask LocalCluster of
        `pool_size` processes; asyncio only), None (threads, one per core),
        or a `tauopt.compute.StrategyPool` over any Executor.
    warm_pool: start the pool's workers in the background at start whenever a pooled
        strategy (gp) can run here, not only when active experiments use one (a daemon
        expecting GP experiments: their first ask finds the pool ready). Nothing waits
        for it; without it the pool starts at the first pooled job.
    """

    def __init__(
        self,
        store: Store | str | None = None,
        *,
        durability: Literal["os", "fsync"] = "os",
        passivate_after_s: float | None = 600.0,
        pool: Any = "thread",
        pool_size: int | None = None,
        clock: Callable[[], float] = time.time,
        mailbox_size: int = 1024,
        fit_deadline_s: float | None = 30.0,
        warm_pool: bool = False,
    ) -> None:
        self.store = open_store(store, durability)
        # the lease's id when daemons share the database, so the logs, /metrics and the dashboard agree
        self.daemon_id = self.store.daemon_id or secrets.token_hex(8)
        self._pool_spec = pool
        self._pool_size = pool_size
        self._warm_pool = warm_pool
        self.pool: Any = None
        self._clock = clock
        self._passivate_after_s = passivate_after_s
        self._mailbox_size = mailbox_size
        self._fit_deadline_s = fit_deadline_s
        self._actors: dict[str, ActorRef] = {}
        self._starting: dict[str, anyio.Event] = {}
        self._warmed: dict[Callable[[], None], anyio.Event] = {}
        self._importance = ImportanceCache()
        self._fronts = FrontCache()
        self._studies = StudyIndex(self.store)
        # experiments another daemon owns, as its URL and until when that answer is used without a read
        self._elsewhere: dict[str, tuple[str, float]] = {}
        self._tg: TaskGroup | None = None
        self._stack: AsyncExitStack | None = None

    # Whom the operations act for: the Engine itself, no one (every experiment); a view from as_owner, one credential.
    _owner: str | None = None

    async def status(self) -> DaemonStatus:
        """Ready: running with its store open and, when daemons share the database, its
        lease live (a fenced or cut-off daemon is not ready)."""
        if self._tg is None:
            return DaemonStatus(self.daemon_id, False, None)
        try:
            sharing = await self.store.sharing()
        except (StoreError, ApiError, OSError):  # the database does not answer: not ready, nothing to count
            return DaemonStatus(self.daemon_id, False, None)
        return DaemonStatus(self.daemon_id, sharing is None or sharing.lease_held, sharing)

    def as_owner(self, owner: str | None) -> "Engine":
        """This engine's operations acting for the credential `owner` (its id): another
        credential's experiments are `not_found`, new ones are `owner`'s. For doors, one
        view per request; it shares this engine's state and lifetime. None: the engine."""
        if owner is None:
            return self
        if not isinstance(owner, str) or not owner:
            raise invalid(f"owner: give a credential id (a non-empty string, e.g. `cred.id`), not {owner!r}")
        return _OwnerView(self, owner)

    # -- lifetime --------------------------------------------------------------

    async def __aenter__(self) -> "Engine":
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            # The store's writer task lives in its own group, left after the store's close.
            store_group = await stack.enter_async_context(anyio.create_task_group())
            await self.store.start(store_group)
            stack.push_async_callback(self._close_store)
            self.pool = await self._open_pool(stack)
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            self._tg.start_soon(self._prewarm_pool)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        assert self._stack is not None and self._tg is not None
        self._tg.cancel_scope.cancel()  # actors stop; queued writes are flushed by the store's close
        try:
            return await self._stack.__aexit__(*exc_info)
        finally:
            self._tg = None
            self._actors.clear()

    async def _close_store(self) -> None:
        with anyio.move_on_after(10, shield=True):
            await self.store.aclose()

    async def _open_pool(self, stack: AsyncExitStack) -> Any:
        from ..compute import StrategyPool  # lazy: `import tauopt` loads no executor

        spec = self._pool_spec
        if spec is None:
            # no pool chosen: threads of this process, one per core (started by the first job)
            spec = StrategyPool("thread", size=self._pool_size or _cores())
        elif isinstance(spec, str):
            spec = StrategyPool(spec, size=self._pool_size)
        return await stack.enter_async_context(spec)

    async def _prewarm_pool(self) -> None:
        """With `warm_pool`, or active experiments that use the pool (a restarted
        daemon), start the pool's workers in the background now, so the first GP ask
        does not wait for torch's imports. With `warm_pool`, the initial design's
        imports (scipy for sobol) come first: every new experiment's first ask needs
        them, and the pool's processes starting meanwhile would slow them."""
        if self._warm_pool:
            try:
                await self._warm_up(AUTO)
            except Exception as exc:  # noqa: BLE001 - the first experiment's start warms it instead
                log.warning("strategies: pre-warming the initial design failed (%s)", exc)
        warm = getattr(self.pool, "warm", None)
        if warm is None:
            return
        try:
            # AUTO stands for every strategy that turns pooled after its initial design
            if await (self._pooled({AUTO}) if self._warm_pool else self._an_active_experiment_is_pooled()):
                await warm()
        except Exception as exc:  # noqa: BLE001 - the first GP job starts the pool instead
            log.warning("GP pool: pre-warming failed (%s); it starts at the first GP ask", exc)

    async def _pooled(self, strategies: set[str]) -> bool:
        return await anyio.to_thread.run_sync(lambda: any(uses_pool(s) for s in strategies))

    async def _an_active_experiment_is_pooled(self) -> bool:
        """Whether an active experiment's strategy uses the pool, read a page at a time (a
        store may hold 100,000 experiments; none is loaded, and the first pooled one ends it).

        Small pages of strategies only: this runs in the background while the daemon
        serves, on the store's reader, where each request's short reads (an experiment's
        index row, a credential) queue behind whatever read is under way; a page of 1,000
        experiments decoded there for ~100 ms, and the first ask of an idle experiment
        waited that long for its index row."""
        after: str | None = None
        seen: set[str] = set()
        while True:
            strategies, after = await self.store.active_strategies(after, limit=_PREWARM_PAGE)
            if after is None:
                return False
            new = set(strategies) - seen
            if new and await self._pooled(new):
                return True
            seen |= new

    # -- plumbing ----------------------------------------------------------------

    async def _ask(self, experiment_id: str, message: m.Msg) -> Any:
        ref = self._actors.get(experiment_id) if isinstance(experiment_id, str) else None
        if ref is not None:  # the usual case, a live actor: straight to its mailbox
            try:
                return await ref.ask(message)
            except ActorGone:
                pass  # passivated between lookup and send: start it again below
        if not isinstance(experiment_id, str) or not experiment_id:
            raise invalid(f"experiment id: give a non-empty string, got {experiment_id!r}")
        owner = self._known_elsewhere(experiment_id)
        if owner is not None:  # the owner checks the credential; asking the database again costs each call
            raise _not_owner(experiment_id, owner)
        if message.owner is not None:
            # whose it is, from the index row: another credential's experiment is answered
            # as a missing one, in the time a missing one takes, without loading its history
            row = await self.store.index_row(experiment_id)
            if row is None or (row.owner is not None and row.owner != message.owner):
                raise api_error("not_found", f"experiment {experiment_id!r} not found")
        for _ in range(5):
            ref = await self._ref(experiment_id)
            try:
                return await ref.ask(message)
            except ActorGone:
                continue  # passivated between lookup and send: start it again
        raise api_error("internal", f"experiment {experiment_id!r} keeps stopping; retry later")

    async def _ref(self, experiment_id: str) -> ActorRef:
        while True:
            ref = self._actors.get(experiment_id)
            if ref is not None:
                return ref
            starting = self._starting.get(experiment_id)
            if starting is None:
                break
            await starting.wait()
        if self._tg is None:
            raise api_error("unavailable", "the engine is not running; use `async with Engine() as engine`")
        event = self._starting[experiment_id] = anyio.Event()
        try:
            owner = await self.store.claim(experiment_id)  # before the load: it then sees every acknowledged write
            if owner is not None:
                self._owned_elsewhere(experiment_id, owner)
                raise _not_owner(experiment_id, owner)
            snapshot = await self.store.load(experiment_id)
            if snapshot is None:
                raise api_error("not_found", f"experiment {experiment_id!r} not found")
            await self._warm_up(snapshot.experiment.strategy)
            build = partial(
                ExperimentActor,
                snapshot,
                self.store,
                clock=self._clock,
                pool=self.pool,
                passivate_after_s=self._passivate_after_s,
                mailbox_size=self._mailbox_size,
                fit_deadline_s=self._fit_deadline_s,
            )
            # a long history's indexes take a good part of a second to build: on a
            # worker thread, so the loop keeps answering every other experiment meanwhile
            rows = len(snapshot.observations) + len(snapshot.suggestions) + len(snapshot.reports)
            actor = build() if rows < INLINE_ROWS else await anyio.to_thread.run_sync(build)
            return await self._tg.start(actor.run, self._actors)
        finally:
            del self._starting[experiment_id]
            event.set()

    async def _warm_up(self, strategy: str) -> None:
        """Run `strategy`'s slow imports (scipy for sobol) once, on a thread, and wait for
        them: the actor's first ask then finds them loaded instead of importing on the
        event loop. Only this experiment's start waits; other experiments' asks go on."""
        fn = warm_up_for(strategy)
        if fn is None:
            return
        done = self._warmed.get(fn)
        if done is not None:
            await done.wait()
            return
        done = self._warmed[fn] = anyio.Event()
        try:
            await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
        except BaseException:
            del self._warmed[fn]  # cancelled or failed: the next start tries again
            raise
        finally:
            done.set()

    async def _commit(self, writes: Sequence[Write]) -> None:
        try:
            await self.store.write(writes)
        except Exception as exc:
            raise commit_error(exc, "nothing was kept, retry") from exc

    # -- experiments ---------------------------------------------------------------

    async def create_experiment(
        self,
        name: str | None = None,
        parameters: Sequence[Parameter | Mapping[str, Any]] | None = None,
        metric: Metric | Mapping[str, Any] | None = None,
        parallel_bandwidth: int = 1,
        suggestion_ttl_s: float | None = None,
        observation_budget: int | None = None,
        strategy: str = AUTO,
        strategy_options: StrategyOptions | Mapping[str, Any] | None = None,
        early_stopping: Mapping[str, Any] | None = None,
        metrics: Sequence[Metric | Mapping[str, Any]] | None = None,
        max_consecutive_failures: int | None = None,
        description: str | None = None,
        *,
        spec: ExperimentSpec | Mapping[str, Any] | None = None,
    ) -> Experiment:
        """Create an active experiment and return it (its id is chosen here).

        parameters: dicts or Parameter (types double, int, categorical, boolean, fixed). `metric=`
        one objective (a dict or Metric: name, objective minimize|maximize), or `metrics=[...]`:
        1-4 objectives ({'name', 'objective'}) and constraint metrics ({'name', 'constraint':
        {'<=': x}}). At most `parallel_bandwidth` suggestions are open at once;
        `suggestion_ttl_s` expires forgotten ones; `observation_budget` completes it.
        `early_stopping`: {"rule": "none"|"median"|"asha", ...options} (see `report`).
        `max_consecutive_failures`: that many failed runs in a row stop the asks
        (`too_many_failures`) until update_experiment sets the cap again; None: no cap.
        `description`: free text for people, at most 4,096 characters (listed and shown
        on the dashboard). `spec`: the whole spec at once (a `tauopt.schema.ExperimentSpec` or a
        dict of its fields, every field of it, `metadata` too), the keywords given beside it
        added (see `schema.spec_given`). Raises ApiError `invalid_request` saying which field to fix."""
        exp = await self._new_experiment(spec_given(spec, dict(
            name=name, parameters=parameters, metric=metric, metrics=metrics, parallel_bandwidth=parallel_bandwidth,
            suggestion_ttl_s=suggestion_ttl_s, observation_budget=observation_budget, strategy=strategy,
            strategy_options=strategy_options, early_stopping=early_stopping,
            max_consecutive_failures=max_consecutive_failures, description=description,
        )))  # fmt: skip
        await self._commit([PutExperiment(exp, 0)])
        return exp

    async def _new_experiment(self, given: Mapping[str, Any]) -> Experiment:
        """A new active experiment of this owner from its spec's fields, every field checked
        (`ExperimentSpec`), claimed but not yet committed (create, import and the Optuna door's studies)."""
        from ..schema import ExperimentSpec  # with pydantic: the first create pays its import, `import tauopt` does not

        if is_large_space(given.get("parameters")):
            # up to 10,000 parameters take a good fraction of a second to check: a worker
            # thread keeps the loop (health, other experiments' asks) answering meanwhile
            spec = await anyio.to_thread.run_sync(ExperimentSpec.judge, given)
        else:
            spec = ExperimentSpec.judge(given)
        if grids(spec.strategy):
            spec.parameters.grid(spec.strategy_options.grid_size)  # refuses continuous parameters without a grid size
        exp = Experiment(
            id=secrets.token_hex(8),
            name=spec.name,
            parameters=spec.parameters.parameters,
            metric=spec.metrics[0],
            metrics=spec.metrics,
            parallel_bandwidth=spec.parallel_bandwidth,
            suggestion_ttl_s=spec.suggestion_ttl_s,
            observation_budget=spec.observation_budget,
            strategy=spec.strategy,
            state="active",
            created_at=self._clock(),
            strategy_options=spec.strategy_options,
            owner=self._owner,
            early_stopping=dict(spec.early_stopping),
            max_consecutive_failures=spec.max_consecutive_failures,
            description=spec.description,
            metadata=spec.metadata,
        )
        try:
            await self.store.claim(exp.id, new=True)  # several daemons: this one owns what it creates
        except Exception as exc:
            raise commit_error(exc, "nothing was kept, retry") from exc
        return exp

    async def experiment(self, experiment_id: str) -> Experiment:
        """One experiment with its counts. Raises ApiError `not_found` if absent."""
        return await self._ask(experiment_id, m.GetExperiment(self._owner))

    async def experiments(
        self, state: ExperimentState | None = None, *, after: str | None = None, limit: int | None = None,
        name: str | None = None,
    ) -> list[Experiment]:
        """The experiments (optionally in one `state`: active, completed, archived; with
        `name` in their name, case-insensitively), in the order they were created or
        imported. Paged: at most `limit`, after the experiment whose id is `after` (the
        last one you have); a page costs its rows, not the number stored."""
        if state is not None and state not in ("active", "completed", "archived"):
            raise invalid(f"state: {state!r} is not one of ['active', 'completed', 'archived']")
        if after is not None and not isinstance(after, str):
            raise invalid(f"after: give the id of the last experiment you have, not {after!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise invalid(f"limit: give a positive integer (how many experiments at most), not {limit!r}")
        if name is not None and not isinstance(name, str):
            raise invalid(f"name: give text to find in experiment names, not {name!r}")
        return await list_experiments(self.store, state, self._owner, after=after, limit=limit, name=name)

    async def _experiments_named(self, name: str, state: ExperimentState) -> list[Experiment]:
        """The experiments of exactly `name` in `state` that this engine's operations see,
        in store order: an index lookup, whatever the store holds (a trial-based door
        resuming its project)."""
        return await list_experiments(self.store, state, self._owner, named=name)

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
    ) -> Experiment:
        """Change the fields given (leave the others out; None unsets ttl, budget, the
        failure cap or the description) and return the experiment. Setting
        `max_consecutive_failures` (even to its value) clears a `too_many_failures` stop and
        counts failures from zero. `metadata` replaces the whole dict (give every key you
        keep; {} or None clears it), judged as at create. Raises ApiError `invalid_request`
        for a bad value."""
        changes = {
            k: v
            for k, v in (
                ("name", name),
                ("parallel_bandwidth", parallel_bandwidth),
                ("suggestion_ttl_s", suggestion_ttl_s),
                ("observation_budget", observation_budget),
                ("parameters", parameters),
                ("early_stopping", early_stopping),
                ("max_consecutive_failures", max_consecutive_failures),
                ("description", description),
                ("metadata", metadata),
            )
            if v is not UNSET
        }
        return await self._ask(experiment_id, m.UpdateExperiment(self._owner, changes))

    async def archive_experiment(self, experiment_id: str) -> Experiment:
        """Archive: no more asks or observations; its open suggestions close. Returns it."""
        return await self._ask(experiment_id, m.ArchiveExperiment(self._owner))

    async def unarchive_experiment(self, experiment_id: str) -> Experiment:
        """Undo an archive: active again (completed if its budget is used up). Returns it."""
        return await self._ask(experiment_id, m.UnarchiveExperiment(self._owner))

    async def delete_experiment(self, experiment_id: str, force: bool = False) -> Experiment:
        """Remove the experiment and its whole history from the store; returns it as it was.
        Refused (409 `suggestions_open`) while suggestions are open, unless `force=True`."""
        if not isinstance(force, bool):
            raise invalid(f"force: give true or false, not {force!r}")
        return await self._ask(experiment_id, m.DeleteExperiment(self._owner, force))

    async def export_experiment(self, experiment_id: str) -> dict[str, Any]:
        """The experiment and its whole history as one JSON-ready document (its spec,
        suggestions, observations with every metric, reports, tags, timestamps), for
        `import_experiment` into this or any other store."""
        out: dict[str, Any] = await self._ask(experiment_id, m.ExportExperiment(self._owner))
        return out

    async def import_experiment(self, data: Mapping[str, Any]) -> Experiment:
        """Recreate an exported experiment: a new id, this credential's, the same history
        (states, values, timestamps). Its strategies start from the imported observations.
        The spec is checked as create_experiment checks it."""
        doc = check_document(data)
        e = doc["experiment"]
        from ..schema import ExperimentSpec

        metrics = e.get("metrics") or None
        given = {k: e[k] for k in ExperimentSpec.model_fields if k in e}
        fresh = await self._new_experiment({**given, "metric": None if metrics else e.get("metric"), "metrics": metrics})
        exp = fresh.evolve(**check_imported_state(e))
        snapshot, writes = imported_writes(doc, exp)
        try:
            ExperimentActor.check_snapshot(snapshot)
        except ApiError:
            raise
        except Exception as exc:
            raise invalid(f"import: the history does not fit the experiment ({type(exc).__name__}: {exc})") from None
        await self._commit(writes)
        return snapshot.experiment

    # -- suggestions and observations -------------------------------------------------

    async def suggest(
        self, experiment_id: str, tag: str | None = None, wait_s: float | None = None
    ) -> Suggestion:
        """A new suggestion. With `wait_s`, an ask that finds the bandwidth full waits
        up to that many seconds for a slot (an observe or close) before answering
        bandwidth_full; waiting asks are served in arrival order."""
        return await self._ask(experiment_id, m.Suggest(self._owner, tag, check_wait(wait_s)))

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
    ) -> Observation:
        """Record a result: of a suggestion (`suggestion_id`) or unsolicited (`assignments`).
        The outcome is exactly one of `value` (the first objective; any number: numpy scalars
        and 0-d arrays are fine), `values={name: number}` (every objective and constraint
        metric, the first too) or `failed=True`; `metrics=` anything else worth keeping.
        `stopped=True`: the worker
        stopped this suggestion early (told by `report`); `value` is its last reported value
        and the observation keeps the step reached (`stopped_at_step`). Returns the
        Observation. Raises ApiError `suggestion_expired` (409, with `details['assignments']`
        to re-post) for an expired one."""
        sid = None if suggestion_id is None else str(suggestion_id)
        return await self._ask(experiment_id, m.Observe(self._owner, sid, assignments, value, failed, metrics, values=values, stopped=stopped))

    async def report(
        self, experiment_id: str, suggestion_id: str, step: int, value: float
    ) -> ReportDecision:
        """Record an intermediate value of an open suggestion's objective at `step`
        (steps increase per suggestion) and answer whether the experiment's stopping
        rule says to stop it. Not open: the same 409s as observe."""
        return await self._ask(experiment_id, m.Report(self._owner, str(suggestion_id), step, value))

    async def reports(self, experiment_id: str, suggestion_id: str | None = None) -> list[Report]:
        """The intermediate reports, in arrival order (of one suggestion, or all)."""
        sid = None if suggestion_id is None else str(suggestion_id)
        return await self._ask(experiment_id, m.ListReports(self._owner, sid))

    async def report_log(
        self, experiment_id: str, after: int = 0, limit: int | None = None
    ) -> dict[str, Any]:
        """Every suggestion's intermediate reports from cursor `after` on (0 = all), in
        arrival order, at most `limit` of them (the oldest first), with the cursor to pass
        next and whether more are waiting: {"cursor": int, "reports": [Report], "more": bool}."""
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise invalid(f"after: give a non-negative integer (the cursor of a previous answer), not {after!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise invalid(f"limit: give a positive integer (how many reports at most in this page), not {limit!r}")
        out: dict[str, Any] = await self._ask(experiment_id, m.ReportLog(self._owner, after, limit))
        return out

    async def suggestions(
        self,
        experiment_id: str,
        state: SuggestionState | None = None,
        tag: str | None = None,
    ) -> list[Suggestion]:
        """The experiment's suggestions in creation order, optionally by `state` and `tag`."""
        return await self._ask(experiment_id, m.ListSuggestions(self._owner, state, tag))

    async def suggestion(self, experiment_id: str, suggestion_id: str) -> Suggestion:
        """One suggestion by id. Raises ApiError `not_found` if absent."""
        return await self._ask(experiment_id, m.GetSuggestion(self._owner, str(suggestion_id)))

    async def close_suggestion(self, experiment_id: str, suggestion_id: str) -> Suggestion:
        """Close an open suggestion without a result: its slot returns, its point may be suggested again."""
        return await self._ask(experiment_id, m.CloseSuggestion(self._owner, str(suggestion_id)))

    async def release_suggestion(
        self, experiment_id: str, suggestion_id: str, max_attempts: int | None = None
    ) -> Suggestion:
        """Declare the holder of an open suggestion dead: the next ask (any worker) gets
        the same suggestion again, with `attempts` + 1 and its TTL restarted. Once it
        was handed out `max_attempts` times it is closed instead (its place returns).
        Durable like every mutation: a restart keeps the queue and the counts."""
        if max_attempts is not None and (isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1):
            raise invalid(f"max_attempts: give an integer >= 1, got {max_attempts!r}")
        return await self._ask(experiment_id, m.ReleaseSuggestion(self._owner, str(suggestion_id), max_attempts))

    async def close_all_suggestions(self, experiment_id: str) -> int:
        """Close every open suggestion (e.g. before resubmitting a failed job array); returns how many."""
        return await self._ask(experiment_id, m.CloseAllSuggestions(self._owner))

    async def observations(
        self, experiment_id: str, after: int | None = None, *, limit: int | None = None, failed: bool | None = None
    ) -> list[Observation]:
        """Every observation, or with `after` only those whose numeric id is above it
        (ids grow with arrival: pass the last id you have to read only what is new); at
        most `limit`; `failed` True or False: only the failed ones, or only the others."""
        if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
            raise invalid(f"after: give a non-negative integer (the last observation id you have), not {after!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise invalid(f"limit: give a positive integer (how many observations at most), not {limit!r}")
        if failed is not None and not isinstance(failed, bool):
            raise invalid(f"failed: give true (only failed observations) or false (only the others), not {failed!r}")
        found: list[Observation] | RowsLater = await self._ask(experiment_id, m.ListObservations(self._owner, after, failed, limit))
        if isinstance(found, RowsLater):
            return await anyio.to_thread.run_sync(found.read)
        return found

    async def summary(self, experiment_id: str) -> dict[str, Any]:
        """The experiment, its failed count, best value, last activity and best-so-far line
        (at most 40 points), kept incrementally by its actor."""
        out: dict[str, Any] = await self._ask(experiment_id, m.Summary(self._owner))
        return out

    async def workers(
        self, experiment_id: str, after: int = 0, limit: int | None = None
    ) -> dict[str, Any]:
        """Per-tag suggestion counts, open suggestions with their age, and the suggestions
        that changed since `after` (a cursor from a previous answer; 0 = all), at most the
        latest `limit` of them when given."""
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise invalid(f"after: give a non-negative integer (the cursor of a previous answer), not {after!r}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise invalid(f"limit: give a positive integer (how many changed suggestions at most), not {limit!r}")
        out: dict[str, Any] = await self._ask(experiment_id, m.Workers(self._owner, after, limit))
        return out

    async def importance(self, experiment_id: str) -> dict[str, Any]:
        """Parameter importance, computed outside the actor and kept until the history
        changes (see _importance.py for the methods: GP length-scales, binned variance)."""
        exp = await self.experiment(experiment_id)
        found = await self.observations(experiment_id)
        return await self._importance.get(exp, found)

    async def plot_sample(self, experiment_id: str, limit: int = 2000) -> Downsample:
        """At most `limit` observations to draw, with the exact best-so-far trace: the best,
        the latest and a stratified sample of the rest (see _downsample.py)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise invalid(f"limit: give a positive integer (how many observations at most), not {limit!r}")
        exp = await self.experiment(experiment_id)
        found: list[Observation] | RowsLater = await self._ask(experiment_id, m.ListObservations(self._owner, None, None, None))
        history = found.view if isinstance(found, RowsLater) else found  # a long one: its columns, only the kept rows made
        return downsample(history, exp.metric.objective or "minimize", limit)

    async def best(self, experiment_id: str) -> Observation | None:
        """The best feasible observation by the (first) objective; None while none is feasible."""
        return await self._ask(experiment_id, m.Best(self._owner))

    async def pareto_front(self, experiment_id: str) -> list[Observation]:
        """The feasible observations no other feasible one dominates, in arrival order;
        kept between reads and grown by what arrived since, outside the actor."""
        exp = await self.experiment(experiment_id)
        found = await self.observations(experiment_id)
        return await self._fronts.get(exp, found)

    async def inspect(self, experiment_id: str) -> dict[str, Any]:
        """Internal counters of a live experiment (max open suggestions ever seen, GP
        proposals and fallbacks). For tests and benchmarks; not a stable API."""
        return await self._ask(experiment_id, m.Inspect())

    # -- studies: the trial-based doors' model (Optuna's), each in an experiment of its own --

    async def create_study(self, name: str, directions: Sequence[str]) -> int:
        """A new study named `name` (unique per credential; `name_taken` otherwise), with one
        direction ("MINIMIZE" or "MAXIMIZE") per objective, in a new experiment; its id.
        Its trials are changed and read with `study_call` and `trial_call`."""
        if not isinstance(name, str) or len(name) > _MAX_STUDY_NAME:
            raise invalid(f"study_name: give a name of at most {_MAX_STUDY_NAME} characters")
        dirs = check_directions(directions)
        index = self._studies
        async with self.store.one_at_a_time():  # several daemons: the id and the name are unique across them
            await index.load(fresh=self._shared)
            study_id = index.reserve(self._owner, name)
            try:
                exp = await self._new_experiment({
                    "name": _experiment_name(name, study_id), "parameters": [], "metrics": _study_metrics(dirs),
                    "strategy": MODEL_FREE, "parallel_bandwidth": _STUDY_BANDWIDTH,
                })  # fmt: skip
                study = Study(study_id, name, dirs)
                await self._commit([PutExperiment(exp, 0), PutRecord(exp.id, STUDY_KEY, study.to_json())])
            except BaseException:
                index.release(study_id)
                raise
            index.placed(study_id, exp.id)
        return study_id

    @property
    def _shared(self) -> bool:
        """Other daemons share the store: what they wrote reaches this engine's indexes only by a read."""
        return self.store.daemon_id is not None

    async def study_id(self, name: str) -> int:
        """The id of the study named `name`; `not_found` if none."""
        await self._studies.load(fresh=self._shared)  # another daemon may have made or deleted it
        return self._studies.id_of(self._owner, name)

    async def studies(self) -> list[Study]:
        """Every study this credential sees, in creation order."""
        if self._shared:  # answered here from the shared store, whichever daemon owns each study
            await self._studies.load(fresh=True)
            return [self._studies.stored[i] for i in self._studies.ids(self._owner) if i in self._studies.stored]
        await self._studies.load()
        out = []
        for study_id in self._studies.ids(self._owner):
            try:
                out.append(await self.study_call(study_id, ReadStudy()))
            except ApiError as exc:
                if exc.error_type != "not_found":  # deleted meanwhile
                    raise
        return out

    async def delete_study(self, study_id: int) -> None:
        """Delete a study: its name is free again, its id never given again; its experiment
        is archived (its history stays readable through the other doors)."""
        await self.study_call(study_id, DeleteStudy())
        experiment_id = self._studies.experiment_of(self._owner, study_id)
        self._studies.release(study_id)
        try:
            await self.archive_experiment(experiment_id)
        except ApiError as exc:
            if exc.error_type != "experiment_archived":
                raise

    async def study_call(self, study_id: int, change: TrialChange) -> Any:
        """Apply a change or read (`tauopt.engine._trials`) to a study, in its experiment's actor."""
        await self._studies.load()
        try:
            experiment_id = self._studies.experiment_of(self._owner, study_id)
        except ApiError:
            if not self._shared:
                raise
            await self._studies.load(fresh=True)  # made by another daemon since this one read the index
            experiment_id = self._studies.experiment_of(self._owner, study_id)
        return await self._ask(experiment_id, m.TrialOp(self._owner, change))

    async def door_state(self, experiment_id: str, key: str) -> str | None:
        """A door's own state of the experiment under `key` (None: never saved)."""
        result: str | None = await self._ask(experiment_id, m.DoorState(self._owner, key))
        return result

    async def save_door_state(self, experiment_id: str, key: str, body: str) -> None:
        """Store a door's own state of the experiment (JSON text), durably before it returns;
        it goes with the experiment (deleted with it)."""
        await self._ask(experiment_id, m.DoorState(self._owner, key, body))

    async def trial_call(self, trial_id: int, change: TrialChange) -> Any:
        """`study_call` on the study the trial id belongs to."""
        try:
            return await self.study_call(study_of(trial_id), change)
        except ApiError as exc:
            if exc.error_type == "not_found":
                raise api_error("not_found", f"trial {trial_id} not found") from None
            raise

    def study_read_now(self, study_id: int, change: TrialChange) -> Any:
        """A study's read (`ReadStudy`, `ReadTrial`, `ReadTrials`, `TrialIdOf`) answered at
        once on the calling thread, which may be any thread, from what the study's live
        actor has committed (`ActorRef.peek`): the answer `study_call` would give, without
        crossing to the engine's loop. NOT_NOW when only `study_call` can answer it: the
        study is not in this engine's index or its actor is not running, the read changes
        something, or it fails (`study_call` words the error)."""
        experiment_id = self._studies.find(self._owner, study_id)
        ref = self._actors.get(experiment_id) if experiment_id is not None else None
        if ref is None:
            return NOT_NOW
        try:
            return ref.peek(m.TrialOp(self._owner, change))
        except ApiError:
            return NOT_NOW

    def trial_read_now(self, trial_id: int, change: TrialChange) -> Any:
        """`study_read_now` on the study the trial id belongs to."""
        return self.study_read_now(study_of(trial_id), change)

    async def advertise_door(self, door: str, host: str, port: int) -> None:
        """A gRPC door (`door`: "optuna", "kerastuner") says where it listens, so daemons
        sharing the store relay its calls for experiments this daemon owns here."""
        await self.store.advertise(door, host, port)

    async def owner_of(self, experiment_id: str) -> str | None:
        """Daemons sharing the store: None if this engine serves the experiment (taking it
        when it has no live owner), else the URL of the daemon that does. A door whose
        calls carry no experiment (the KerasTuner chief's) asks before it translates."""
        if experiment_id in self._actors:
            return None
        owner = self._known_elsewhere(experiment_id)
        if owner is not None:
            return owner
        owner = await self.store.claim(experiment_id)
        if owner is not None:
            self._owned_elsewhere(experiment_id, owner)
        return owner

    def _known_elsewhere(self, experiment_id: str) -> str | None:
        """The owner another daemon was found to be within the last _ELSEWHERE_S, else None."""
        elsewhere = self._elsewhere.get(experiment_id)
        if elsewhere is None:
            return None
        if time.monotonic() < elsewhere[1]:
            return elsewhere[0]
        del self._elsewhere[experiment_id]
        return None

    def _owned_elsewhere(self, experiment_id: str, owner: str) -> None:
        self._elsewhere[experiment_id] = (owner, time.monotonic() + _ELSEWHERE_S)
        if len(self._elsewhere) > _ELSEWHERE_KEPT:
            del self._elsewhere[next(iter(self._elsewhere))]

    async def owner_door(self, owner_url: str, door: str) -> str | None:
        """Where the daemon at `owner_url` (a `not_owner` error's) serves `door`: "host:port", or None."""
        return await self.store.door_of(owner_url, door)

    def study_count(self) -> int:
        """Studies of this credential (deleted ones not counted)."""
        return self._studies.count(self._owner)

    @property
    def admin(self) -> Admin:
        """Credentials and stored-experiment reports (what `tauopt token` / `experiments` use)."""
        return Admin(self.store)

    @property
    def live_actors(self) -> int:
        return len(self._actors)


class _OwnerView(Engine):
    """`Engine.as_owner(owner)`: the Engine's operations, acting for `owner`. The operations
    are the Engine's own (written once, they read `self._owner`); what they reach through
    `self` (store, clock, importance cache, the actors by `_ask`, commits) is the engine's."""

    def __init__(self, engine: Engine, owner: str) -> None:  # not Engine.__init__: a view owns nothing
        self._engine = engine
        self._owner = owner
        self.store = engine.store
        self.daemon_id = engine.daemon_id
        self._clock = engine._clock
        self._importance = engine._importance
        self._fronts = engine._fronts
        self._studies = engine._studies
        self._actors = engine._actors

    def _ask(self, experiment_id: str, message: m.Msg) -> Coroutine[Any, Any, Any]:
        return self._engine._ask(experiment_id, message)  # the engine's coroutine itself: no extra frame per call

    async def _commit(self, writes: Sequence[Write]) -> None:
        await self._engine._commit(writes)

    def as_owner(self, owner: str | None) -> Engine:
        return self._engine.as_owner(owner)

    async def status(self) -> DaemonStatus:
        return await self._engine.status()

    async def __aenter__(self) -> Engine:
        raise TypeError("enter the engine itself (`async with Engine()`); a view from as_owner shares its lifetime")

    @property
    def live_actors(self) -> int:
        return self._engine.live_actors


_PREWARM_PAGE = 100  # active experiments per background read deciding whether to start the pool: each read short
_MAX_STUDY_NAME = 2048
# Every waiting or running trial of a study is an open suggestion of its experiment, and
# Optuna caps none: the bandwidth only bounds asks made through the other doors.
_STUDY_BANDWIDTH = 1_000_000


def _experiment_name(study_name: str, study_id: int) -> str:
    try:
        return check_name(study_name)
    except ApiError:  # "" or too long for an experiment's name: the study keeps its own
        return f"study {study_id}"


def _study_metrics(directions: tuple[str, ...]) -> list[dict[str, str]]:
    """One objective per direction ("value", or "value0", "value1", ...), at most 4 (the rest are not mirrored)."""
    names = ["value"] if len(directions) == 1 else [f"value{i}" for i in range(len(directions))]
    return [{"name": n, "objective": d.lower()} for n, d in list(zip(names, directions))[:4]]


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1
