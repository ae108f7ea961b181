"""Reads that grow with an experiment's history, computed once and off the event loop.

`SharedRuns`: callers asking for the same key while its computation runs wait for
that one run instead of starting their own (six open tabs asking for a GP importance
fit once, not six times). The computation runs on a worker thread, shielded from the
first caller's cancellation (a hung-up tab), so the others still get its answer.

`FrontCache`: each experiment's Pareto front (`pareto.GrowingFront`), kept between
reads and grown by what arrived since (on a worker thread, one reader of an experiment
at a time), so a read costs the new observations, not the history.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Hashable, Sequence

import anyio

from ..models import Experiment, Observation
from ..pareto import GrowingFront

__all__ = ["SharedRuns", "FrontCache"]


class _Run:
    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class SharedRuns:
    """One run per key at a time of a blocking function on a worker thread."""

    def __init__(self) -> None:
        self._running: dict[Hashable, _Run] = {}

    async def run(self, key: Hashable, fn: Callable[..., Any], *args: Any) -> Any:
        run = self._running.get(key)
        if run is not None:
            await run.done.wait()
        else:
            run = self._running[key] = _Run()
            try:
                with anyio.CancelScope(shield=True):  # others may be waiting for this answer
                    run.result = await anyio.to_thread.run_sync(fn, *args)
            except Exception as exc:  # noqa: BLE001 - every waiter hears it
                run.error = exc
            finally:
                del self._running[key]
                run.done.set()
        if run.error is not None:
            raise run.error
        return run.result


class FrontCache:
    """The Pareto front per experiment, kept for the `size` experiments read last."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._fronts: OrderedDict[str, tuple[GrowingFront, anyio.Lock]] = OrderedDict()

    async def get(self, exp: Experiment, observations: Sequence[Observation]) -> list[Observation]:
        held = self._fronts.pop(exp.id, None)
        if held is None or held[0].experiment.metrics != exp.metrics:
            held = (GrowingFront(exp), anyio.Lock())
        self._fronts[exp.id] = held
        while len(self._fronts) > self._size:
            self._fronts.popitem(last=False)
        front, lock = held
        async with lock:  # a GrowingFront grows under one caller at a time
            with anyio.CancelScope(shield=True):  # a hung-up caller leaves the front consistent
                out: list[Observation] = await anyio.to_thread.run_sync(front.front, observations)
        return out
