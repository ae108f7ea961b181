"""What an experiment's history costs in memory once its actor is rebuilt from a
store: an observation of a suggestion shares its suggestion's point and id, the
model objects keep no per-instance dict, and the whole history stays within a
bound per observation (tracemalloc counts allocations, not time: deterministic)."""

from __future__ import annotations

import gc
import random
import sys
from pathlib import Path

import anyio
import pytest

from tauopt.engine import Engine
from tauopt.models import Observation, Suggestion
from tauopt.store import PutCounters, PutObservation, PutSuggestion, open_store

pytestmark = pytest.mark.anyio

SPACE = [
    {"name": "lr", "type": "double", "bounds": [1e-5, 1.0], "scale": "log"},
    {"name": "layers", "type": "int", "bounds": [1, 8]},
    {"name": "act", "type": "categorical", "values": ["relu", "tanh", "gelu"]},
    {"name": "x", "type": "double", "bounds": [0, 1]},
]
N = 2000


async def _seed(db: str) -> str:
    rng = random.Random(0)
    async with Engine(store=db, pool=None) as engine:
        exp = await engine.create_experiment("h", SPACE, {"name": "loss"}, parallel_bandwidth=4, strategy="random")
        writes: list = []
        for i in range(N):
            a = {"lr": 10 ** rng.uniform(-5, 0), "layers": rng.randint(1, 8), "act": rng.choice(["relu", "tanh", "gelu"]), "x": rng.random()}
            writes.append(PutSuggestion(Suggestion(str(i + 1), exp.id, a, "observed", "w0", 1.0 + i)))
            writes.append(PutObservation(Observation(str(i + 1), exp.id, str(i + 1), a, rng.random(), False, 1.5 + i)))
        await engine.store.write([*writes, PutCounters(exp.id, 0, N, 0)])
        return exp.id


async def test_a_reloaded_observation_shares_its_suggestions_point_and_id_and_keeps_no_instance_dict(tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")
    eid = await _seed(db)
    async with open_store(db) as store:
        snap = await store.load(eid)
    assert snap is not None and len(snap.observations) == N
    by_id = {s.id: s for s in snap.suggestions}
    for o in snap.observations[:50]:
        s = by_id[o.suggestion_id]
        assert o.assignments is s.assignments and o.suggestion_id is s.id
    names = {id(k) for s in snap.suggestions for k in s.assignments}
    assert len(names) == len(SPACE)  # one string object per parameter name, not one per row
    assert len({id(s.tag) for s in snap.suggestions}) == 1
    # fields held inline: the instance refers to its values itself, not through a __dict__ of its own
    o = snap.observations[0]
    assert any(r is o.id for r in gc.get_referents(o)) and not any(type(r) is dict and r.get("id") is o.id for r in gc.get_referents(o))


# Run in a process of its own: tracemalloc counts every thread's allocations, and in a
# test worker another test's leftover threads may allocate while the actor is rebuilt.
_REBUILD = """
import anyio, gc, sys, tracemalloc
from tauopt.engine import Engine

async def main(db, eid):
    async with Engine(store=db, pool=None) as engine:
        gc.collect()
        tracemalloc.start()
        try:
            await engine.summary(eid)  # rebuilds the actor from the store
            gc.collect()
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    print(held)

anyio.run(main, sys.argv[1], sys.argv[2])
"""


async def test_an_actor_rebuilt_from_a_long_history_holds_a_bounded_amount_per_observation(tmp_path: Path) -> None:
    db = str(tmp_path / "h.db")
    eid = await _seed(db)
    done = await anyio.run_process([sys.executable, "-c", _REBUILD, db, eid], check=True)
    held = int(done.stdout.decode().split()[-1])
    # ~150 bytes per observed suggestion held: the history keeps columns (ids, values, times,
    # a parameter's values, the dedup hashes), not objects; ~1,250 as objects, ~2,750 before
    # those were shared and compacted
    assert held / N < 400, held / N
