"""The engine's admin API (`Engine.admin`, what `tauopt token` / `tauopt
experiments` use): listings and "best" computed by the same functions as the
operations, credentials through the store's credential interface."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tauopt import ApiError, Engine
from tauopt.engine import Admin, open_admin
from tauopt.engine._auth import new_credential
from tauopt.engine._engine import open_store

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]


@pytest.mark.anyio
async def test_admin_reports_the_same_best_and_listing_as_the_operations(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    async with Engine(db) as engine:
        ids = []
        for objective, values in (("minimize", [0.5, 0.2, 0.2, 0.9]), ("maximize", [0.5, 0.7, 0.1])):
            exp = await engine.create_experiment(objective, X, {"name": "y", "objective": objective})
            for v in values:
                s = await engine.suggest(exp.id)
                await engine.observe(exp.id, s.id, value=v)
            await engine.observe(exp.id, assignments={"x": 0.1}, failed=True)
            ids.append(exp.id)
        for eid in ids:
            report = await engine.admin.report(eid)
            assert report.best == await engine.best(eid)
        assert [e.id for e in await engine.admin.experiments()] == [e.id for e in await engine.experiments()]
        live = {e.id: e.observations for e in await engine.experiments()}
    async with open_store(db) as store:  # the CLI's view: the store alone, no owning engine
        admin = Admin(store)
        assert {e.id: e.observations for e in await admin.experiments()} == live
        assert (await admin.report(ids[0])).best.value == 0.2
        assert (await admin.report(ids[1])).best.value == 0.7
        with pytest.raises(ApiError) as info:
            await admin.report("nope")
        assert info.value.error_type == "not_found"


@pytest.mark.anyio
async def test_admin_credentials_create_revoke_by_id_or_unique_name() -> None:
    async with Engine() as engine:
        admin = engine.admin
        a, token = await admin.create_credential("ci", 5)
        assert token.startswith("tau_") and a.suggestions_per_day == 5
        await admin.create_credential("twin")
        with pytest.raises(ApiError) as info:  # names are unique in a store
            await admin.create_credential("twin")
        assert info.value.error_type == "invalid_request" and "already named 'twin'" in info.value.message
        await admin.store.put_credential(new_credential("twin")[0])  # as a store from before that rule may hold
        with pytest.raises(ApiError) as info:
            await admin.revoke_credential("twin")
        assert info.value.error_type == "invalid_request" and "revoke by id" in info.value.message
        with pytest.raises(ApiError) as info:
            await admin.revoke_credential("nobody")
        assert info.value.error_type == "not_found"
        assert (await admin.revoke_credential("ci")).id == a.id
        assert [c.revoked_at is not None for c in await admin.credentials()] == [True, False, False]


def test_experiments_show_prints_the_operations_best(tmp_path: Path) -> None:
    import anyio

    db = tmp_path / "s.db"

    async def fill() -> tuple[str, float]:
        async with Engine(db) as engine:
            exp = await engine.create_experiment("shown", X, {"name": "acc", "objective": "maximize"})
            for v in (0.3, 0.8, 0.5):
                s = await engine.suggest(exp.id)
                await engine.observe(exp.id, s.id, value=v)
            best = await engine.best(exp.id)
            assert best is not None and best.value is not None
            return exp.id, best.value

    eid, best = anyio.run(fill)
    out = subprocess.run(
        [sys.executable, "-m", "tauopt.cli", "experiments", "show", eid, "--db", str(db), "--json"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(out.stdout)["best"]["value"] == best == 0.8


@pytest.mark.anyio
async def test_admin_reports_beside_a_running_engine_list_and_rank_as_its_operations(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    async with Engine(db) as engine:
        for name, values in (("a", [0.4, 0.1]), ("b", [0.3]), ("c", [])):
            exp = await engine.create_experiment(name, X, {"name": "y"})
            for v in values:
                s = await engine.suggest(exp.id)
                await engine.observe(exp.id, s.id, value=v)
        await engine.archive_experiment(exp.id)
        live = await engine.experiments()
        async with open_admin(db) as admin:  # not exclusive: the engine keeps the file
            reports = await admin.reports()
            archived = await admin.reports("archived")
        assert [r.experiment.id for r in reports] == [e.id for e in live]
        assert [r.best for r in reports] == [await engine.best(e.id) for e in live]
        assert [r.best.value if r.best else None for r in reports] == [0.1, 0.3, None]
        assert [r.experiment.name for r in archived] == ["c"]
        summaries = [await engine.summary(e.id) for e in live]
        assert [(r.failed, dict(r.suggestions_by_state)) for r in reports] == [
            (s["failed"], s["suggestions_by_state"]) for s in summaries
        ]
        assert [r.suggestions_by_state for r in reports] == [{"observed": 2}, {"observed": 1}, {}]
        assert [r.observations for r in reports] == [(), (), ()]  # a listing carries no history


@pytest.mark.anyio
async def test_transfer_moves_owned_experiments_only_with_the_store_to_itself(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    async with Engine(db) as engine:
        old, _ = await engine.admin.create_credential("leaked")
        new, _ = await engine.admin.create_credential("fresh")
        await engine.as_owner(old.id).create_experiment("mine", X, {"name": "y"})
        await engine.create_experiment("shared", X, {"name": "y"})
        with pytest.raises(ApiError) as info:  # the engine holds live owners in memory
            await engine.admin.transfer_experiments("leaked", "fresh")
        assert info.value.error_type == "invalid_request" and "stop `tauopt serve`" in info.value.message
        with pytest.raises(ApiError) as info:
            async with open_admin(db, exclusive=True):
                pass
        assert info.value.error_type == "store_in_use"
    async with open_admin(db, exclusive=True) as admin:
        await admin.revoke_credential("leaked")
        with pytest.raises(ApiError) as info:
            await admin.transfer_experiments("fresh", "leaked")
        assert info.value.error_type == "invalid_request" and "is revoked" in info.value.message
        done = await admin.transfer_experiments("leaked", new.id)
        assert (done.moved, done.source.id, done.target.id) == (1, old.id, new.id)
        owners = {e.name: e.owner for e in await admin.experiments()}
        assert owners == {"mine": new.id, "shared": None}  # an unowned experiment stays everyone's
