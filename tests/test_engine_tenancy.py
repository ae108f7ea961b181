"""Another credential's experiment is answered as a missing one from the experiment's
index row (owner, state), without loading its history."""

from __future__ import annotations

import pytest

from tauopt import ApiError
from tauopt.engine import Engine
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
