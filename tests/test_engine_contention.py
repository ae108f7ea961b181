"""64 concurrent workers x 100 ask/observe rounds on one experiment with
parallel_bandwidth=8: no repeated point, never more than 8 open (seen from
inside the engine), every observation stored, no worker hangs."""

from __future__ import annotations

import threading
import time
from collections import Counter

import anyio
import pytest

from tauopt import ApiError, Client, Engine

WORKERS, ROUNDS, BANDWIDTH = 64, 100, 8
PARAMS = [
    {"name": "x", "type": "double", "bounds": (1e-4, 1.0), "scale": "log"},
    {"name": "k", "type": "int", "bounds": (1, 1000)},
    {"name": "c", "type": "categorical", "values": ["a", "b", "c"]},
]
METRIC = {"name": "y", "objective": "minimize"}


def key(assignments: dict) -> tuple:
    return tuple(sorted(assignments.items()))


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend, strategy", [("asyncio", "sobol"), ("asyncio", "random"), ("trio", "sobol")])
async def test_64_tasks_never_repeat_and_never_exceed_bandwidth(anyio_backend, strategy):
    seen: Counter = Counter()
    async with Engine() as engine:
        exp = await engine.create_experiment("contention", PARAMS, METRIC, parallel_bandwidth=BANDWIDTH, strategy=strategy)

        async def worker(i: int) -> None:
            for _ in range(ROUNDS):
                while True:
                    try:
                        s = await engine.suggest(exp.id, tag=f"w{i}")
                        break
                    except ApiError as e:
                        assert e.error_type == "bandwidth_full"
                        await anyio.sleep(0.001)
                seen[key(s.assignments)] += 1
                await anyio.sleep(0)  # let others in while "evaluating"
                await engine.observe(exp.id, suggestion_id=s.id, value=float(s.assignments["k"]))

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for i in range(WORKERS):
                    tg.start_soon(worker, i)

        stats = await engine.inspect(exp.id)
        observations = await engine.observations(exp.id)
        header = await engine.experiment(exp.id)
    assert max(seen.values()) == 1
    assert len(seen) == WORKERS * ROUNDS
    assert stats["max_open_seen"] == BANDWIDTH
    assert len(observations) == header.observations == WORKERS * ROUNDS
    assert header.open_suggestions == 0


def test_64_threads_share_one_sync_client():
    seen: Counter = Counter()
    errors: list[BaseException] = []
    lock = threading.Lock()
    with Client(driver="local") as client:
        exp = client.create_experiment("threads", PARAMS, METRIC, parallel_bandwidth=BANDWIDTH, strategy="sobol")

        def worker(i: int) -> None:
            try:
                for _ in range(ROUNDS // 4):
                    while True:
                        try:
                            s = client.suggest(exp.id, tag=f"t{i}")
                            break
                        except ApiError as e:
                            assert e.error_type == "bandwidth_full"
                            time.sleep(0.001)
                    with lock:
                        seen[key(s.assignments)] += 1
                    client.observe(exp.id, suggestion_id=s.id, value=1.0)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a worker thread hung"
        stats = client.call(client.engine.inspect, exp.id)
        n_obs = len(client.observations(exp.id))
    assert not errors, errors[:3]
    assert max(seen.values()) == 1
    assert stats["max_open_seen"] <= BANDWIDTH
    assert n_obs == WORKERS * (ROUNDS // 4)
