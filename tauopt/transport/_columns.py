"""Observations as columns: the compact listing a dashboard reads at scale.

A list of 10,000 observation objects repeats every key 10,000 times (3 MB of
JSON for 4 parameters) and costs the server ~175 ms to encode; as one array per
field it is about a third of the size and encodes several times faster
(benchmarks/dashboard_load.py). Same data, same order, nothing dropped:

    {"count": n,
     "id": [...], "suggestion_id": [...], "value": [...], "failed": [...],
     "created_at": [...], "stopped_at_step": [...],
     "assignments": {parameter: [...]},   null where the parameter was inactive
     "metrics": {metric: [...]}}          null where the observation did not carry it

Row i of every array is observation i; `experiment_id` is the path's.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..models import Observation

__all__ = ["observation_columns"]


def observation_columns(observations: Sequence[Observation]) -> dict[str, Any]:
    params: dict[str, None] = {}
    metrics: dict[str, None] = {}
    for o in observations:  # first-seen order, so columns do not reorder as data grows
        params.update(dict.fromkeys(o.assignments))
        if o.metrics:
            metrics.update(dict.fromkeys(o.metrics))
    return {
        "count": len(observations),
        "id": [o.id for o in observations],
        "suggestion_id": [o.suggestion_id for o in observations],
        "value": [o.value for o in observations],
        "failed": [o.failed for o in observations],
        "created_at": [o.created_at for o in observations],
        "stopped_at_step": [o.stopped_at_step for o in observations],
        "assignments": {p: [o.assignments.get(p) for o in observations] for p in params},
        "metrics": {m: [o.metrics.get(m) for o in observations] for m in metrics},
    }
