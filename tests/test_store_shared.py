"""Several engines (daemons) on one PostgreSQL database: one owner per experiment by a
lease row, takeover after a lapsed lease, fencing of a holder that wakes up late.
In process, on the throwaway cluster; the two-process failover is in
tests/test_serve_failover.py."""

from __future__ import annotations

import anyio
import pytest

from tauopt import ApiError, Engine
from tauopt.store._leases import Leases
from tauopt.store._postgresql import PostgresStore

pytestmark = pytest.mark.anyio

SPACE = [{"name": "x", "type": "double", "bounds": (0, 1)}]


def daemon(pg_url: str, name: str, lease_s: float = 0.6, renew_s: float = 0.2) -> Engine:
    return Engine(store=PostgresStore(pg_url, shared=Leases(f"http://{name}", lease_s=lease_s, renew_s=renew_s)))


# Both engines share this process's loop: on a loaded machine a renewal every 0.2 s of a
# 0.6 s lease can come late and lapse a lease the test means to keep (b's, then a's).
TAKEOVER_LEASE_S, TAKEOVER_RENEW_S = 2.0, 0.4


async def test_one_owner_per_experiment_and_a_lapsed_owner_is_taken_over_and_fenced(pg_url: str) -> None:
    lease = dict(lease_s=TAKEOVER_LEASE_S, renew_s=TAKEOVER_RENEW_S)
    async with daemon(pg_url, "a", **lease) as a, daemon(pg_url, "b", **lease) as b:
        exp = await a.create_experiment("shared", SPACE, {"name": "y"}, parallel_bandwidth=8)
        first = await a.suggest(exp.id)
        with pytest.raises(ApiError) as err:
            await b.suggest(exp.id)
        assert (err.value.error_type, err.value.status_code, err.value.details["owner_url"]) == ("not_owner", 421, "http://a")
        await anyio.sleep(TAKEOVER_LEASE_S + 0.1)  # a renews: still a's
        with pytest.raises(ApiError, match="served by the daemon at http://a"):
            await b.experiment(exp.id)

        a_store = a.store
        assert isinstance(a_store, PostgresStore) and a_store._renewing is not None
        a_store._renewing.cancel()  # a freezes: its lease is no longer renewed
        await anyio.sleep(TAKEOVER_LEASE_S + 0.3)
        assert not (await a.status()).ready  # its lease lapsed: not ready, before anyone takes over
        second = await b.suggest(exp.id)  # b takes it, rebuilt from the database
        assert second.id != first.id
        assert {s.id for s in await b.suggestions(exp.id, state="open")} == {first.id, second.id}
        await b.observe(exp.id, first.id, value=0.5)

        # a wakes up with its actor still in memory: its write is fenced, nothing of it kept
        with pytest.raises(ApiError) as err:
            await a.suggest(exp.id)
        assert err.value.error_type == "store_unavailable" and "no longer owns" in err.value.message
        with pytest.raises(ApiError):
            await a.suggest(exp.id)  # the actor that saw the failure stops
        with pytest.raises(ApiError) as err:
            await a.suggest(exp.id)  # rebuilt? no: b owns it now
        assert err.value.error_type == "not_owner" and err.value.details["owner_url"] == "http://b"
        again = await b.experiment(exp.id)
        assert (again.observations, again.open_suggestions) == (1, 1)


async def test_a_clean_stop_hands_experiments_over_at_once(pg_url: str) -> None:
    async with daemon(pg_url, "b", lease_s=30) as b:
        async with daemon(pg_url, "a", lease_s=30) as a:
            exp = await a.create_experiment("handover", SPACE, {"name": "y"})
            await a.suggest(exp.id)
        assert (await b.experiment(exp.id)).open_suggestions == 1  # no wait for the 30 s lease


async def test_each_daemon_says_it_is_ready_and_counts_what_it_owns_and_the_live_daemons(pg_url: str) -> None:
    async with daemon(pg_url, "b", lease_s=30) as b:
        async with daemon(pg_url, "a", lease_s=30) as a:
            for _ in range(2):
                await a.create_experiment("mine", SPACE, {"name": "y"})
            await b.create_experiment("yours", SPACE, {"name": "y"})
            sa, sb = await a.status(), await b.status()
            assert sa.ready and sb.ready and sa.daemon_id != sb.daemon_id
            assert sa.sharing is not None and sb.sharing is not None
            assert sa.daemon_id == sa.sharing.daemon_id and sa.sharing.url == "http://a"
            assert (sa.sharing.owned, sa.sharing.daemons, sb.sharing.owned, sb.sharing.daemons) == (2, 2, 1, 2)
        after = (await b.status()).sharing  # a stopped cleanly: its lease ended
        assert after is not None and after.daemons == 1
    assert not (await b.status()).ready  # stopped


async def test_a_deleted_experiment_leaves_no_owner_row(pg_url: str) -> None:
    async with daemon(pg_url, "a", lease_s=30) as a:
        keep = await a.create_experiment("keep", SPACE, {"name": "y"})
        gone = await a.create_experiment("gone", SPACE, {"name": "y"})
        await a.suggest(gone.id)
        before = (await a.status()).sharing
        await a.delete_experiment(gone.id, force=True)
        after = (await a.status()).sharing
        assert before is not None and after is not None and (before.owned, after.owned) == (2, 1)
        assert (await a.experiment(keep.id)).id == keep.id


async def test_studies_made_at_once_at_two_daemons_get_ids_and_names_unique_across_them(pg_url: str) -> None:
    async with daemon(pg_url, "a", lease_s=30) as a, daemon(pg_url, "b", lease_s=30) as b:
        ids: list[int] = []
        taken: list[str] = []

        async def make(engine: Engine, name: str) -> None:
            try:
                ids.append(await engine.create_study(name, ["MINIMIZE"]))
            except ApiError as exc:
                taken.append(exc.error_type)

        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(make, a, f"a{i}")
                tg.start_soon(make, b, f"b{i}")
                tg.start_soon(make, (a, b)[i % 2], "same")  # one name raced at both daemons: one wins
        assert len(ids) == 13 and len(set(ids)) == 13 and taken == ["name_taken"] * 5
        assert await b.study_id("a3") == await a.study_id("a3")  # made at a, found at b
        assert [s.study_id for s in await a.studies()] == [s.study_id for s in await b.studies()] == sorted(ids)
