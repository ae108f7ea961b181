"""copy_store: every experiment (with its suggestions, observations, reports and records) and
every credential of one store into another, empty one, then verified row for row.

Through the Store interface only, so any pair works (SQLite -> PostgreSQL to move
to a database server, and back). Each experiment is copied as one batch (one
transaction), in the source's listing order, and its rows keep their order;
credentials first, in creation order, revoked ones included.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._base import (
    PutCredential, PutExperiment, PutObservation, PutRecord, PutReport, PutSuggestion, Store, StoreError, Write,
)  # fmt: skip

__all__ = ["CopyCounts", "copy_store"]


@dataclass(frozen=True)
class CopyCounts:
    experiments: int = 0
    suggestions: int = 0
    observations: int = 0
    reports: int = 0
    credentials: int = 0


async def copy_store(source: Store, target: Store) -> CopyCounts:
    """Copy `source` into the empty `target`, then read everything back from `target`
    and compare it with `source`. Raises StoreError if `target` is not empty or a row differs."""
    if await target.credentials() or await target.list_experiments():
        raise StoreError(
            f"{target!r} is not empty; copy into a new database (or an empty schema), so nothing there is mixed or lost"
        )
    credentials = await source.credentials()
    if credentials:
        await target.write([PutCredential(c) for c in credentials])
    counts = CopyCounts(credentials=len(credentials))
    experiments = await source.list_experiments()
    for experiment in experiments:
        snap = await source.load(experiment.id)
        if snap is None:  # deleted while we copied
            continue
        writes: list[Write] = [PutExperiment(snap.experiment, snap.drawn)]
        writes += [PutSuggestion(s) for s in snap.suggestions]
        writes += [PutObservation(o) for o in snap.observations]
        writes += [PutReport(experiment.id, r) for r in snap.reports]
        writes += [PutRecord(experiment.id, key, body) for key, body in snap.records]
        await target.write(writes)
        counts = CopyCounts(
            counts.experiments + 1, counts.suggestions + len(snap.suggestions),
            counts.observations + len(snap.observations), counts.reports + len(snap.reports), counts.credentials,
        )  # fmt: skip
    await _verify(source, target)
    return counts


async def _verify(source: Store, target: Store) -> None:
    if await target.credentials() != await source.credentials():
        raise StoreError(f"verification failed: the credentials read back from {target!r} differ from the source's")
    listed = [e.id for e in await source.list_experiments()]
    if [e.id for e in await target.list_experiments()] != listed:
        raise StoreError(f"verification failed: {target!r} lists other experiments than the source, or in another order")
    for experiment_id in listed:
        if await target.load(experiment_id) != await source.load(experiment_id):
            raise StoreError(f"verification failed: experiment {experiment_id!r} read back from {target!r} differs")
