"""The compute executor interface: where pooled strategy jobs run.

    async with LocalExecutor("process") as executor:
        outcome = await executor.submit("exp-1", job)      # StrategyOutcome, or raises JobFailed

An Executor is small on purpose, so a cluster backend (Dask) is one module:

- `submit(key, job)`: run one `StrategyJob` (picklable: the strategy's run
  function, the request, warm state, deadline) and return its StrategyOutcome,
  or raise JobFailed with a reason (the job raised, its worker died, the
  executor closed, no answer in time). Never hangs on a dead worker.
- Routing: jobs of one key (an experiment id) run one at a time, in submission
  order, and each gets the warm state (`outcome.state`) of that key's previous
  job. A local executor keeps the state and ships it with the job; a cluster
  pins a key to one worker so the state can stay there.
- `forget(key)`: drop the key's warm state (the experiment went away).
- `aclose()` / `async with`: stop; queued and running jobs fail with JobFailed.

Choosing inline vs pooled, the Sobol fallback and the counters live above this
interface, in `tauopt.compute.propose`, once for every backend.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..strategies import StrategyJob, StrategyOutcome

__all__ = ["Executor", "JobFailed"]


class JobFailed(Exception):
    """A job produced no outcome; the message says why (shown as the fallback reason)."""


@runtime_checkable
class Executor(Protocol):
    async def submit(self, key: str, job: StrategyJob) -> StrategyOutcome: ...

    def forget(self, key: str) -> None: ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc_info: Any) -> bool | None: ...
