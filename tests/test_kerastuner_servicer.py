"""The chief's gRPC service on a real grpc.aio server (127.0.0.1) over a real Engine,
called through our own stub the way a KerasTuner worker calls it."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import grpc
import pytest

from tauopt.engine import Engine
from tauopt.transport.grpc._generated import keras_tuner_pb2 as kt
from tauopt.transport.grpc._generated import service_pb2 as pb
from tauopt.transport.grpc._generated import service_pb2_grpc as pb_grpc
from tauopt.transport.grpc._oracle import ChiefConfig, KerasTunerOracle
from tauopt.transport.grpc._servicer import OracleServicer
from tauopt.schema import parse_parameter

SPACE = [
    {"name": "units", "type": "int", "bounds": [4, 64], "step": 4},
    {"name": "optimizer", "type": "categorical", "values": ["adam", "sgd"]},
    {"name": "momentum", "type": "double", "bounds": [0.0, 0.9], "conditions": [{"parent": "optimizer", "values": ["sgd"]}]},
]


@asynccontextmanager
async def chief(db: Path | None = None, **config: Any) -> AsyncIterator[tuple[pb_grpc.OracleStub, KerasTunerOracle]]:
    config.setdefault("space", tuple(parse_parameter(p) for p in SPACE))
    async with Engine(store=str(db) if db else None, pool=None) as engine:
        oracle = KerasTunerOracle(engine, ChiefConfig(objective="score", direction="min", **config))
        await oracle.start()
        server = grpc.aio.server()
        pb_grpc.add_OracleServicer_to_server(OracleServicer(oracle), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                yield pb_grpc.OracleStub(channel), oracle
        finally:
            await server.stop(grace=None)


def run(fn: Any) -> Any:
    return anyio.run(fn, backend="asyncio")


def end(trial_id: str, status: int, values: kt.HyperParameters.Values | None = None) -> pb.EndTrialRequest:
    trial = kt.Trial(trial_id=trial_id, status=status)
    if values is not None:
        trial.hyperparameters.values.CopyFrom(values)
    return pb.EndTrialRequest(trial=trial)


def test_a_trial_lists_a_value_for_every_active_parameter_in_its_oneof() -> None:
    async def main() -> None:
        async with chief(max_trials=5) as (stub, _):
            for i in range(5):
                trial = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=f"t{i}"))).trial
                assert trial.status == kt.RUNNING
                v = trial.hyperparameters.values.values
                assert v["units"].WhichOneof("kind") == "int_value" and v["units"].int_value % 4 == 0
                assert v["optimizer"].WhichOneof("kind") == "string_value"
                assert ("momentum" in v) == (v["optimizer"].string_value == "sgd")
                if "momentum" in v:
                    assert v["momentum"].WhichOneof("kind") == "float_value"

    run(main)


def test_the_same_tuner_gets_its_ongoing_trial_back() -> None:
    async def main() -> None:
        async with chief(max_trials=5) as (stub, _):
            a = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w"))).trial
            b = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w"))).trial
            assert a.trial_id == b.trial_id

    run(main)


def test_get_trial_hides_the_objective_until_reported_and_update_requires_it() -> None:
    async def main() -> None:
        async with chief(max_trials=5) as (stub, _):
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w"))).trial
            got = (await stub.GetTrial(pb.GetTrialRequest(trial_id=t.trial_id))).trial
            assert "score" not in got.metrics.metrics
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"loss": 1.0}))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "score" in err.value.details()
            up = (await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": 0.1610269409738878, "acc": 0.5}, step=3))).trial
            assert up.metrics.metrics["score"].observations[0].step == 3
            assert up.metrics.metrics["acc"].maximize and not up.metrics.metrics["score"].maximize
            await stub.EndTrial(end(t.trial_id, kt.COMPLETED))
            best = (await stub.GetBestTrials(pb.GetBestTrialsRequest(num_trials=1))).trials[0]
            assert best.trial_id == t.trial_id and best.status == kt.COMPLETED
            assert best.score.value == pytest.approx(0.1610269409738878, rel=1e-7) and best.score.step == 3

    run(main)


def test_best_trials_are_sorted_by_score_and_padded_like_the_reference() -> None:
    async def main() -> None:
        async with chief(max_trials=5, max_consecutive_failures=5) as (stub, _):
            scores = {}
            for i, s in enumerate([3.0, 1.0, 2.0]):
                t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=f"w{i}"))).trial
                await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": s}))
                await stub.EndTrial(end(t.trial_id, kt.COMPLETED))
                scores[t.trial_id] = s
            f = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="wf"))).trial
            await stub.EndTrial(end(f.trial_id, kt.FAILED))
            best = (await stub.GetBestTrials(pb.GetBestTrialsRequest(num_trials=10))).trials
            assert [scores.get(t.trial_id) for t in best[:3]] == [1.0, 2.0, 3.0]
            assert best[3].trial_id == f.trial_id and best[3].status == kt.FAILED and not best[3].HasField("score")

    run(main)


def test_create_trial_is_held_instead_of_answering_idle_when_all_places_are_taken() -> None:
    async def main() -> None:
        async with chief(max_trials=1, hold_s=0.6) as (stub, oracle):
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="a"))).trial
            t0 = time.monotonic()
            idle = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="b"))).trial
            assert idle.status == kt.IDLE and time.monotonic() - t0 >= 0.55  # held, not a hot loop

            async def finish_soon() -> None:
                await anyio.sleep(0.2)
                await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": 1.0}))
                await stub.EndTrial(end(t.trial_id, kt.COMPLETED))

            async with anyio.create_task_group() as tg:
                tg.start_soon(finish_soon)
                stopped = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="b"))).trial
            assert stopped.status == kt.STOPPED  # released by the EndTrial, not by the timeout
            assert oracle.done

    run(main)


def test_an_invalid_trial_is_retried_with_the_same_id_without_its_old_metrics() -> None:
    async def main() -> None:
        async with chief(max_trials=2, max_retries_per_trial=1) as (stub, _):
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="a"))).trial
            await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": 1.0}))
            await stub.EndTrial(end(t.trial_id, kt.INVALID))
            again = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="b"))).trial
            assert again.trial_id == t.trial_id and again.hyperparameters.values == t.hyperparameters.values
            got = (await stub.GetTrial(pb.GetTrialRequest(trial_id=t.trial_id))).trial
            assert "score" not in got.metrics.metrics

    run(main)


def test_bad_input_gets_a_status_and_changes_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        async with chief(tmp_path / "c.db", max_trials=3) as (stub, oracle):
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="a"))).trial
            await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": 1.0}))
            cases = [
                (stub.GetTrial(pb.GetTrialRequest(trial_id="nope")), grpc.StatusCode.NOT_FOUND),
                (stub.GetTrial(pb.GetTrialRequest(trial_id="../etc")), grpc.StatusCode.INVALID_ARGUMENT),
                (stub.EndTrial(end("nope", kt.COMPLETED)), grpc.StatusCode.NOT_FOUND),
                (stub.EndTrial(end(t.trial_id, kt.RUNNING)), grpc.StatusCode.INVALID_ARGUMENT),
                (stub.EndTrial(end(t.trial_id, kt.COMPLETED, kt.HyperParameters.Values(values={"units": kt.Value()}))), grpc.StatusCode.INVALID_ARGUMENT),
                (stub.CreateTrial(pb.CreateTrialRequest(tuner_id="")), grpc.StatusCode.INVALID_ARGUMENT),
                (stub.UpdateSpace(pb.UpdateSpaceRequest(hyperparameters=kt.HyperParameters(space=kt.HyperParameters.Space(
                    int_space=[kt.Int(name="z", min_value=0, max_value=3, sampling=kt.NONE)])))), grpc.StatusCode.INVALID_ARGUMENT),
            ]
            bad_space = kt.Trial(trial_id=t.trial_id, status=kt.COMPLETED)
            bad_space.hyperparameters.space.fixed_space.add(name="x")  # a Fixed without its value
            cases.append((stub.EndTrial(pb.EndTrialRequest(trial=bad_space)), grpc.StatusCode.INVALID_ARGUMENT))
            for call, code in cases:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await call
                assert err.value.code() == code and err.value.details()
            huge = pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": 1.0, "x" * (5 * 1024 * 1024): 1.0})
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.UpdateTrial(huge)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            engine, exp_id = oracle.engine, oracle.experiment.id
            assert await engine.observations(exp_id) == []
            assert [p.name for p in (await engine.experiment(exp_id)).parameters] == ["units", "optimizer", "momentum"]
            # The trial is intact: it still completes.
            await stub.EndTrial(end(t.trial_id, kt.COMPLETED))
            assert len(await engine.observations(exp_id)) == 1

    run(main)


def test_get_space_obeys_the_parsing_traps() -> None:
    async def main() -> None:
        async with chief(max_trials=3) as (stub, _):
            hp = (await stub.GetSpace(pb.GetSpaceRequest())).hyperparameters
            assert [i.sampling for i in hp.space.int_space] == [kt.LINEAR]
            assert all(c.HasField("default") for c in hp.space.choice_space)
            assert set(hp.values.values) == {"units", "optimizer"}  # the active ones, at their defaults

    run(main)


def test_without_a_space_one_baseline_runs_and_the_others_wait_for_its_space() -> None:
    async def main() -> None:
        async with chief(max_trials=3, space=None, hold_s=0.3) as (stub, oracle):
            base = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="a"))).trial
            assert base.status == kt.RUNNING and len(base.hyperparameters.values.values) == 0
            held = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="b"))).trial
            assert held.status == kt.IDLE  # after the hold
            await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=base.trial_id, metrics={"score": 2.0}))
            done = kt.Trial(trial_id=base.trial_id, status=kt.COMPLETED)
            done.hyperparameters.space.boolean_space.add(name="flag")
            done.hyperparameters.space.int_space.add(name="n", min_value=1, max_value=9, step=1, sampling=kt.LINEAR, default=1)
            done.hyperparameters.values.values["flag"].boolean_value = False
            done.hyperparameters.values.values["n"].int_value = 1
            await stub.EndTrial(pb.EndTrialRequest(trial=done))
            nxt = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="b"))).trial
            assert set(nxt.hyperparameters.values.values) == {"flag", "n"}
            (obs,) = await oracle.engine.observations(oracle.experiment.id)
            assert obs.assignments == {"flag": False, "n": 1} and obs.value == 2.0

    run(main)


def test_a_silent_trial_expires_and_is_handed_out_again() -> None:
    async def main() -> None:
        async with chief(max_trials=1, trial_ttl_s=0.2, hold_s=2.0) as (stub, oracle):
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="dead"))).trial

            async def tick() -> None:
                while True:
                    await anyio.sleep(0.05)
                    await oracle.maintain()

            async with anyio.create_task_group() as tg:
                tg.start_soon(tick)
                again = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="alive"))).trial
                tg.cancel_scope.cancel()
            assert again.trial_id == t.trial_id

    run(main)


def test_a_restarted_chief_gives_a_running_trial_back_to_its_worker(tmp_path: Path) -> None:
    async def main() -> None:
        async with chief(tmp_path / "c.db", max_trials=3) as (stub, _):
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w"))).trial
        async with chief(tmp_path / "c.db", max_trials=3) as (stub, _):
            other = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="x"))).trial
            mine = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w"))).trial
            assert mine.trial_id == t.trial_id and other.trial_id != t.trial_id
            await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": 1.0}))
            await stub.EndTrial(end(t.trial_id, kt.COMPLETED))

    run(main)


def test_a_wide_seed_int_is_sampled_without_enumeration_and_a_tiny_log_step_is_refused() -> None:
    """KerasTuner's ordinary hp.Int("seed", 0, 2**31 - 1): trials are created in normal time;
    a log step of 1 + 1e-9 (billions of grid values) is INVALID_ARGUMENT, not INTERNAL."""

    async def main() -> None:
        async with chief(max_trials=10) as (stub, oracle):
            seed = kt.HyperParameters.Space(int_space=[kt.Int(name="seed", min_value=0, max_value=2**31 - 1, step=1, sampling=kt.LINEAR, default=0)])
            await stub.UpdateSpace(pb.UpdateSpaceRequest(hyperparameters=kt.HyperParameters(space=seed)))
            seeds = set()
            for i in range(3):
                trial = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=f"w{i}"))).trial
                assert trial.status == kt.RUNNING
                seeds.add(trial.hyperparameters.values.values["seed"].int_value)
            assert len(seeds) == 3 and all(0 <= s <= 2**31 - 1 for s in seeds)
            tiny = kt.HyperParameters.Space(float_space=[kt.Float(name="lr", min_value=1e-6, max_value=1.0, step=1 + 1e-9, sampling=kt.LOG, default=1e-3)])
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.UpdateSpace(pb.UpdateSpaceRequest(hyperparameters=kt.HyperParameters(space=tiny)))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "limit of 10000" in (err.value.details() or "")
            assert "lr" not in [p.name for p in (await oracle.engine.experiment(oracle.experiment.id)).parameters]

    run(main)


def test_an_end_trial_being_written_holds_up_neither_asks_nor_updates_and_a_duplicate_waits_for_it() -> None:
    async def main() -> None:
        async with chief(max_trials=10, parallel_bandwidth=3) as (stub, oracle):
            write = anyio.Event()
            real_observe = oracle.engine.observe

            async def slow_observe(*args: Any, **kw: Any) -> Any:
                await write.wait()  # the observation's commit, held open
                return await real_observe(*args, **kw)

            oracle.engine.observe = slow_observe
            a = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="a"))).trial
            b = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="b"))).trial
            await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=a.trial_id, metrics={"score": 0.5}))
            ended: list[str] = []

            async def end_a(who: str) -> None:
                await stub.EndTrial(end(a.trial_id, kt.COMPLETED))
                ended.append(who)

            async with anyio.create_task_group() as tg:
                tg.start_soon(end_a, "first")
                await anyio.sleep(0.2)
                tg.start_soon(end_a, "duplicate")
                with anyio.fail_after(2):  # answered while A's write is still open
                    c = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="c"))).trial
                    await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=b.trial_id, metrics={"score": 0.7}))
                    running = (await stub.GetTrial(pb.GetTrialRequest(trial_id=a.trial_id))).trial
                assert c.status == kt.RUNNING and c.trial_id not in (a.trial_id, b.trial_id)
                assert running.status == kt.RUNNING and ended == []  # no reply before the write
                write.set()
            assert sorted(ended) == ["duplicate", "first"]
            done = (await stub.GetTrial(pb.GetTrialRequest(trial_id=a.trial_id))).trial
            assert done.status == kt.COMPLETED and done.score.value == 0.5
            assert oracle.experiment is not None
            observed = await oracle.engine.observations(oracle.experiment.id)
            assert [o.suggestion_id for o in observed] == [a.trial_id]

    run(main)


def test_an_end_trial_whose_write_fails_leaves_the_trial_running_for_the_retry() -> None:
    async def main() -> None:
        async with chief(max_trials=10) as (stub, oracle):
            real_observe = oracle.engine.observe
            failures = [RuntimeError("the disk is full")]

            async def failing_observe(*args: Any, **kw: Any) -> Any:
                if failures:
                    raise failures.pop()
                return await real_observe(*args, **kw)

            oracle.engine.observe = failing_observe
            a = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="a"))).trial
            await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=a.trial_id, metrics={"score": 0.25}))
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.EndTrial(end(a.trial_id, kt.COMPLETED))
            assert (await stub.GetTrial(pb.GetTrialRequest(trial_id=a.trial_id))).trial.status == kt.RUNNING
            await stub.EndTrial(end(a.trial_id, kt.COMPLETED))
            assert (await stub.GetTrial(pb.GetTrialRequest(trial_id=a.trial_id))).trial.status == kt.COMPLETED

    run(main)


def _with_space(trial_id: str, extra: str | None = None) -> pb.EndTrialRequest:
    """A COMPLETED EndTrial as a real worker sends it: the whole space with the values."""
    trial = kt.Trial(trial_id=trial_id, status=kt.COMPLETED)
    trial.hyperparameters.space.int_space.add(name="units", min_value=4, max_value=64, step=4, sampling=kt.LINEAR, default=4)
    if extra is not None:
        trial.hyperparameters.space.boolean_space.add(name=extra)
    return pb.EndTrialRequest(trial=trial)


def test_a_space_sent_with_every_end_trial_is_parsed_once_and_a_grown_one_is_learned() -> None:
    async def main() -> None:
        space = (parse_parameter({"name": "units", "type": "int", "bounds": [4, 64], "step": 4}),)
        async with chief(max_trials=6, space=space) as (stub, oracle):
            servicer_learned = []
            for i in range(3):
                t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=f"w{i}"))).trial
                await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": float(i)}))
                await stub.EndTrial(_with_space(t.trial_id))
                servicer_learned.append(oracle.trials._merged[0] if oracle.trials._merged else None)
            assert servicer_learned[0] is servicer_learned[1] is servicer_learned[2]  # one parse, reused
            assert oracle.experiment is not None
            names = [p.name for p in (await oracle.engine.experiment(oracle.experiment.id)).parameters]
            assert names == ["units"]
            bad = _with_space("0")  # malformed: answered INVALID_ARGUMENT every time, never cached
            bad.trial.hyperparameters.space.fixed_space.add(name="x")
            for _ in range(2):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.EndTrial(bad)
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w9"))).trial
            await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": 9.0}))
            await stub.EndTrial(_with_space(t.trial_id, extra="flag"))  # the space grew: learned
            names = [p.name for p in (await oracle.engine.experiment(oracle.experiment.id)).parameters]
            assert names == ["units", "flag"]
            nxt = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w10"))).trial
            assert set(nxt.hyperparameters.values.values) == {"units", "flag"}
            assert len(await oracle.engine.observations(oracle.experiment.id)) == 4

    run(main)


def test_finished_trials_leave_the_index_every_rpc_scans() -> None:
    async def main() -> None:
        async with chief(max_trials=50, parallel_bandwidth=4) as (stub, oracle):
            for i in range(20):
                t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=f"w{i % 4}"))).trial
                await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": float(i)}))
                await stub.EndTrial(end(t.trial_id, kt.COMPLETED if i % 5 else kt.FAILED))
            running = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w0"))).trial
            assert [t.trial_id for t in oracle.trials.trials.live()] == [running.trial_id]
            assert len(oracle.trials.trials.trials) == 21 and oracle.trials.trials.in_progress() == 1
            again = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w0"))).trial
            assert again.trial_id == running.trial_id  # its ongoing trial, found in the index

    run(main)


def test_the_chief_answers_a_workers_calls_after_its_last_stopped_then_exits() -> None:
    """With --workers 1, the one worker told STOPPED: a call it makes after its search returned (KerasTuner's
    get_best_trials, here half a second later) is still answered, and the chief exits soon after, well
    inside its linger. A chief that went at once left that call waiting for a server that was gone."""
    from tauopt.transport.grpc._chief import ChiefOptions, serve_chief
    from tauopt.transport.grpc._oracle import LAST_CALLS_S

    config = ChiefConfig(objective="score", direction="min", max_trials=1, workers=1, linger_s=60,
                         space=tuple(parse_parameter(p) for p in SPACE))  # fmt: skip

    async def main() -> None:
        ready: list[int] = []
        exited: list[tuple[int, float]] = []

        async def serve() -> None:
            exited.append((await serve_chief(ChiefOptions(config, "127.0.0.1", 0), lambda r: ready.append(r["port"])), time.monotonic()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            with anyio.fail_after(30):
                while not ready:
                    await anyio.sleep(0.01)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{ready[0]}") as channel:
                stub = pb_grpc.OracleStub(channel)
                t = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w"))).trial
                await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=t.trial_id, metrics={"score": 1.5}))
                await stub.EndTrial(end(t.trial_id, kt.COMPLETED))
                assert (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id="w"))).trial.status == kt.STOPPED
                await anyio.sleep(0.5)  # the worker's program between its search's end and its next call
                best = await stub.GetBestTrials(pb.GetBestTrialsRequest(num_trials=1), timeout=10, wait_for_ready=True)
                answered = time.monotonic()
            assert [b.trial_id for b in best.trials] == [t.trial_id] and best.trials[0].score.value == 1.5
        (code, at), = exited
        assert code == 0 and at - answered < LAST_CALLS_S + 5, "the chief exits soon after the last call, not at its linger"

    run(main)


def test_a_create_trial_waiting_for_a_proposal_hears_stopped_when_the_search_ends_meanwhile() -> None:
    """Two workers ask at once for the last place; one gets it, the other's ask waits in the engine for
    the strategy's next proposal (a slow fit). When the one trial completes the search is done: the
    waiting worker hears STOPPED then, not when the fit lands (a chief whose linger ran out first went
    away, cancelling that call)."""
    import threading

    import numpy as np

    from tauopt.strategies import Strategy, SuggestRequest, register, unregister

    first, second = threading.Event(), threading.Event()
    calls: list[int] = []

    def held_propose(request: SuggestRequest, rng: np.random.Generator) -> list[dict[str, Any]]:
        calls.append(request.n)
        (first if len(calls) == 1 else second).wait(30)
        return [request.space.from_unit([float(rng.random()) for _ in request.space.parameters])]  # one point per call

    async def main() -> None:
        async with Engine(pool="thread") as engine:
            config = ChiefConfig(objective="score", direction="min", max_trials=1, workers=2, strategy="held",
                                 space=tuple(parse_parameter(p) for p in SPACE[:2]))  # fmt: skip
            oracle = KerasTunerOracle(engine, config)
            exp = await oracle.start()
            server = grpc.aio.server()
            pb_grpc.add_OracleServicer_to_server(OracleServicer(oracle), server)
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            answers: dict[str, Any] = {}
            try:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel, anyio.create_task_group() as tg:
                    stub = pb_grpc.OracleStub(channel)

                    async def create(worker: str) -> None:
                        answers[worker] = (await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=worker), timeout=20)).trial

                    tg.start_soon(create, "w1")
                    with anyio.fail_after(20):
                        while not calls:  # w1's proposal is being made
                            await anyio.sleep(0.01)
                        tg.start_soon(create, "w2")
                        while not (await engine.inspect(exp.id))["slot_waiters"]:  # w2 waits in the engine for a place
                            await anyio.sleep(0.01)
                    first.set()
                    with anyio.fail_after(20):
                        while not answers:
                            await anyio.sleep(0.01)
                    (worker, trial), = answers.items()
                    other = "w2" if worker == "w1" else "w1"
                    await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=trial.trial_id, metrics={"score": 1.0}))
                    await stub.EndTrial(end(trial.trial_id, kt.COMPLETED))
                    assert oracle.done
                    with anyio.fail_after(5):  # the held proposal is still unanswered
                        while other not in answers:
                            await anyio.sleep(0.01)
                    assert answers[other].status == kt.STOPPED and not second.is_set()
                    second.set()  # the abandoned proposal lands, and its ask is answered to nobody
                    with anyio.fail_after(20):
                        while (stats := await engine.inspect(exp.id))["waiters"] or stats["slot_waiters"]:
                            await anyio.sleep(0.01)
            finally:
                first.set()
                second.set()
                await server.stop(grace=None)

    register(Strategy("held", held_propose, pooled=True))
    try:
        run(main)
    finally:
        unregister("held")
