"""One training run of one suggestion: its reports, the stop decision, its one observation.

The integrations only translate their library's events into calls on a `TrialRun`;
what to report, when the run counts as stopped and how the final observation is
made (once, never lost) is decided here, over the public client API only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .. import ApiError, Client, Observation  # the public API only

# the suggestion is gone, but its result is not: observed again without it (README, "Too late")
_REPOST = ("suggestion_expired", "suggestion_closed")


class MissingMetricError(ValueError):
    """The training loop logged no value under the monitored metric's name."""


def metric_value(values: Mapping[str, Any], monitor: str, where: str) -> float:
    """`values[monitor]` as a float, or a `MissingMetricError` naming what was logged instead."""
    if monitor not in values:
        raise MissingMetricError(
            f"{where} has no {monitor!r} (it has {sorted(values)}); log {monitor!r} "
            f"or pass monitor= the name of the value to minimize or maximize"
        )
    return float(values[monitor])


class TrialRun:
    """Reports of one suggestion and its single final observation.

    `report(step, value)` forwards an intermediate value (steps not past the last
    reported one are skipped: a restarted run repeats its steps) and answers whether
    tauopt says stop. `finish(value)` observes once: a run told to stop is observed
    `stopped=True` at its last reported value; a run with no value at all is failed.
    `fail()` marks the suggestion failed. After the first `finish`/`fail`, both are
    no-ops, so an error path can always call `fail()` without double-observing.
    """

    def __init__(self, client: Client, experiment_id: str, suggestion_id: str) -> None:
        self.client = client
        self.experiment_id = experiment_id
        self.suggestion_id = suggestion_id
        self.last_step: int | None = None
        self.last_value: float | None = None
        self.stop_told = False
        self.done = False
        self.observation: Observation | None = None

    def report(self, step: int, value: float) -> bool:
        if self.done or (self.last_step is not None and step <= self.last_step):
            return self.stop_told
        if not math.isfinite(value):
            return self.stop_told  # tauopt stores finite values only; the final observe decides
        decision = self.client.report(self.experiment_id, self.suggestion_id, step, value)
        self.last_step, self.last_value = step, value
        self.stop_told = self.stop_told or decision.should_stop
        return self.stop_told

    def finish(self, value: float | None = None) -> Observation | None:
        if self.done:
            return self.observation
        if self.stop_told:
            return self._observe(value=self.last_value, stopped=True)
        if value is None or not math.isfinite(value):
            value = self.last_value
        if value is None:
            return self._observe(failed=True)
        return self._observe(value=value)

    def fail(self) -> Observation | None:
        if self.done:
            return self.observation
        return self._observe(failed=True)

    def _observe(self, *, value: float | None = None, failed: bool = False, stopped: bool = False) -> Observation | None:
        eid = self.experiment_id
        try:
            self.observation = self.client.observe(eid, suggestion_id=self.suggestion_id, value=value, failed=failed, stopped=stopped)
        except ApiError as e:
            if e.error_type not in (*_REPOST, "suggestion_observed"):
                raise  # not done: a later fail() tries again
            if e.error_type in _REPOST:
                self.observation = self.client.observe(eid, assignments=e.details["assignments"], value=value, failed=failed)
            # suggestion_observed: someone else finished it; theirs stands
        self.done = True
        return self.observation
