"""Reads that grow with history, in the engine and at the door's gate: another
credential's experiment is answered as a missing one from its index row, without
loading its history; concurrent importance callers share one computation; a big
listing costs heavy-read tokens by its size."""

from __future__ import annotations

import pytest

import threading

import anyio

from tauopt import ApiError
from tauopt.engine import Engine
from tauopt.engine import _importance
from tauopt.engine._auth import Gate, Limits, new_credential
from tauopt.store import MemoryStore, Snapshot

X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]
M = {"name": "y", "objective": "minimize"}


class _CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []

    async def load(self, experiment_id: str) -> Snapshot | None:
        self.loads.append(experiment_id)
        return await super().load(experiment_id)


@pytest.mark.anyio
async def test_a_foreign_experiment_is_not_found_like_a_missing_one_without_being_loaded() -> None:
    store = _CountingStore()
    async with Engine(store=store) as engine:
        exp = await engine.as_owner("alice").create_experiment("mine", X, M, strategy="random")
        bob = engine.as_owner("bob")
        answers = []
        for eid in (exp.id, "0123456789abcdef"):
            for read in (bob.experiment, bob.observations, bob.pareto_front, bob.importance):
                with pytest.raises(ApiError) as caught:
                    await read(eid)
                answers.append((caught.value.status_code, caught.value.error_type, caught.value.message.replace(eid, "<id>")))
        assert store.loads == [] and engine.live_actors == 0
        assert len(set(answers)) == 1 and answers[0][:2] == (404, "not_found")
        # the owner's own read loads it (once), as before
        assert (await engine.as_owner("alice").experiment(exp.id)).id == exp.id
        assert store.loads == [exp.id]


@pytest.mark.anyio
async def test_six_concurrent_importance_callers_share_one_computation(monkeypatch: pytest.MonkeyPatch) -> None:
    entered, release = threading.Event(), threading.Event()
    runs: list[int] = []
    real = _importance.experiment_importance

    def held(exp, observations):  # type: ignore[no-untyped-def]
        runs.append(len(observations))
        entered.set()
        release.wait(timeout=30)
        return real(exp, observations)

    monkeypatch.setattr(_importance, "experiment_importance", held)
    async with Engine() as engine:
        exp = await engine.create_experiment("e", X, M, strategy="random")
        for i in range(12):
            await engine.observe(exp.id, assignments={"x": i / 12}, value=float(i % 5))
        answers: list[dict] = []

        async def ask() -> None:
            answers.append(await engine.importance(exp.id))

        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(ask)
            await anyio.to_thread.run_sync(entered.wait, 30)
            await anyio.sleep(0.05)  # every caller is waiting by now (each is two actor messages away)
            release.set()
        assert runs == [12] and len(answers) == 6 and all(a == answers[0] for a in answers)


def test_a_listing_costs_heavy_read_tokens_by_its_size() -> None:
    cred, _ = new_credential("alice")
    gate = Gate(store=None, limits=Limits(heavy_read_rate=1.0, heavy_read_burst=30), clock=lambda: 0.0)  # type: ignore[arg-type]
    for _ in range(3):
        gate.heavy_read(cred)
        gate.heavy_read_rows(cred, 4_999)  # small pages: one token each
    gate.heavy_read(cred)
    gate.heavy_read_rows(cred, 100_000)  # 20 more: 30 - 4 - 20 = 6 left
    for _ in range(6):
        gate.heavy_read(cred)
    with pytest.raises(ApiError) as refused:
        gate.heavy_read(cred)
    assert refused.value.error_type == "rate_limited" and refused.value.retry_after == pytest.approx(1.0)
