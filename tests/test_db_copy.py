"""`tauopt db copy`: SQLite -> PostgreSQL -> SQLite keeps every row, verified; a
non-empty target is refused. A real SQLite file and the throwaway PostgreSQL cluster."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tauopt.cli import main
from tauopt.models import Observation, Report
from tauopt.store import PutExperiment, PutObservation, PutReport, PutSuggestion, Snapshot, Store, open_store

from test_store_contract import cred, experiment, suggestion


async def _fill(store: Store) -> None:
    await store.put_credential(cred("c1", "h1", suggestions_per_day=10))
    await store.put_credential(cred("c2", "h2"))
    await store.revoke_credential("c2", revoked_at=60.0)
    for n, eid in enumerate(["b", "a", "c"]):  # listing order is creation order, not ids
        await store.write([PutExperiment(experiment(eid, owner="c1" if n else None, observations=1), drawn=5 + n)])
        await store.write([PutSuggestion(suggestion(f"s{i}", eid, at=1000.0 + i)) for i in (3, 1, 2)])
        await store.write([
            PutObservation(Observation("o2", eid, "s3", {"lr": 0.5, "act": "relu"}, 0.125, False, 1003.5, {"acc": 1.0})),
            PutObservation(Observation("o1", eid, None, {"lr": 0.1, "act": 3}, None, True, 1004.0)),
            PutSuggestion(suggestion("s3", eid, state="observed", at=1003.0)),
            PutReport(eid, Report("s1", 2, 0.75, 1005.0)),
            PutReport(eid, Report("s1", 1, 0.5, 1004.5)),
        ])  # fmt: skip


async def _everything(url: str) -> tuple[list[object], list[Snapshot | None]]:
    async with open_store(url) as store:
        ids = [e.id for e in await store.list_experiments()]
        return [await store.credentials(), ids], [await store.load(i) for i in ids]


def test_sqlite_to_postgresql_and_back_keeps_every_row(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source, back = str(tmp_path / "source.db"), str(tmp_path / "back.db")

    async def fill() -> None:
        async with open_store(source) as store:
            await _fill(store)

    anyio.run(fill)
    assert main(["db", "copy", source, pg_url]) == 0
    assert "3 experiments, 9 suggestions, 6 observations, 6 reports, 2 credentials" in capsys.readouterr().out
    assert main(["db", "copy", pg_url, back]) == 0
    original, on_pg, returned = (anyio.run(_everything, u) for u in (source, pg_url, back))
    assert original == on_pg == returned
    heads, snaps = original
    assert heads[1] == ["b", "a", "c"] and [o.id for o in snaps[0].observations] == ["o2", "o1"]  # type: ignore[index,union-attr]


def test_a_target_that_is_not_empty_is_refused_and_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, target = str(tmp_path / "a.db"), str(tmp_path / "b.db")

    async def fill(url: str) -> None:
        async with open_store(url) as store:
            await _fill(store)

    anyio.run(fill, source)
    anyio.run(fill, target)
    before = anyio.run(_everything, target)
    assert main(["db", "copy", source, target]) == 1
    assert "is not empty" in capsys.readouterr().err
    assert anyio.run(_everything, target) == before
