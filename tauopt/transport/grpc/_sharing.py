"""Several chiefs of one search on one PostgreSQL database (`--advertise-url`): one serves.

The chief whose engine owns the project's experiment runs the trial queue; another
chief of the same `--project` starts as a follower: it relays every worker's call to
the owner's KerasTuner door (`transport/_relay.py`), so a worker may connect to any
chief. When the owner dies, its lease lapses and the follower's next call takes the
experiment: the follower starts its trial queue from the database (running trials
stay with their workers, as after a restart) and serves from then on. A follower
exits once the search is no longer active (the owner completed it).
"""

from __future__ import annotations

from typing import Any

import anyio

from ...errors import api_error
from ...models import Experiment
from ._oracle import KerasTunerOracle

__all__ = ["SharedChief"]


class SharedChief:
    def __init__(self, engine: Any, oracle: KerasTunerOracle) -> None:
        self.engine = engine
        self.oracle = oracle
        self.serving = False  # this chief runs the trial queue
        self.experiment_id = ""
        self._taking = anyio.Lock()

    async def start(self) -> Experiment:
        """Start serving, or follow the chief that owns the project's active experiment."""
        project = self.oracle.config.project
        async with self.engine.store.one_at_a_time():  # two chiefs starting at once make one experiment
            found = [e for e in await self.engine.experiments(state="active") if e.name == project]
            if found and await self.engine.owner_of(found[-1].id) is not None:
                self.experiment_id = found[-1].id
                return found[-1]
            exp: Experiment = await self.oracle.start()
        self.experiment_id, self.serving = exp.id, True
        return exp

    async def owner(self) -> str | None:
        """Before each call: None to serve it here (taking the search over if its owner is
        gone), else the owner's URL to relay it to."""
        if self.serving:
            return None
        url: str | None = await self.engine.owner_of(self.experiment_id)
        if url is None:
            await self._take_over()
        return url

    async def _take_over(self) -> None:
        async with self._taking:
            if self.serving:
                return
            row = await self.engine.store.index_row(self.experiment_id)
            if row is None or row.state != "active":
                raise api_error("unavailable", "the search has ended; this chief is stopping")
            await self.oracle.start()  # the project's active experiment: this one, now this chief's
            self.serving = True

    async def ended(self) -> bool:
        """A follower's check: the owner completed (or someone archived) the search."""
        row = await self.engine.store.index_row(self.experiment_id)
        return row is None or row.state != "active"
