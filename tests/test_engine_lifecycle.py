"""Actor lifetimes: a failing handler does not kill its actor; passivation
frees an idle experiment and revives it unchanged; the sync client never
holds up interpreter exit; the two issue examples print exactly their text."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import anyio
import pytest

from tauopt import ApiError, Engine
from tauopt.actors import ActorRef, mailbox, reply, serve

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

X = [{"name": "x", "type": "double", "bounds": (0.0, 1.0)}, {"name": "c", "type": "categorical", "values": ["a", "b"]}]
Y = {"name": "y", "objective": "maximize"}


@pytest.mark.anyio
async def test_a_failing_handler_answers_internal_and_the_actor_goes_on():
    async def handle(request):
        if request.message == "boom":
            raise ZeroDivisionError("bad message")
        reply(request, request.message * 2)

    send, receive = mailbox(8)
    ref = ActorRef(send)
    with receive:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve, receive, handle)
            assert await ref.ask(21) == 42
            with pytest.raises(ApiError) as info:
                await ref.ask("boom")
            assert info.value.error_type == "internal" and info.value.status_code == 500
            assert await ref.ask(4) == 8
            ref.close()


@pytest.mark.anyio
async def test_passivated_experiment_revives_and_answers_exactly_as_before():
    async with Engine(passivate_after_s=0.05) as engine:
        exp = await engine.create_experiment("p", X, Y, parallel_bandwidth=3, suggestion_ttl_s=3600)
        a = await engine.suggest(exp.id, tag="w1")
        b = await engine.suggest(exp.id, tag="w2")
        await engine.observe(exp.id, suggestion_id=a.id, value=3.0)
        await engine.observe(exp.id, assignments={"x": 0.25, "c": "b"}, failed=True)
        before = (
            await engine.experiment(exp.id),
            await engine.suggestions(exp.id),
            await engine.observations(exp.id),
            await engine.best(exp.id),
        )
        with anyio.fail_after(5):
            while engine.live_actors:
                await anyio.sleep(0.02)
        after = (
            await engine.experiment(exp.id),
            await engine.suggestions(exp.id),
            await engine.observations(exp.id),
            await engine.best(exp.id),
        )
        assert after == before
        assert engine.live_actors == 1
        # the revived actor keeps the sequence and the dedup set
        c = await engine.suggest(exp.id)
        assert int(c.id) == 3 and c.assignments not in (a.assignments, b.assignments)
        assert [s.id for s in await engine.suggestions(exp.id, state="open", tag="w2")] == [b.id]


@pytest.mark.anyio
async def test_messages_racing_passivation_are_all_answered():
    async with Engine(passivate_after_s=0.001) as engine:
        exp = await engine.create_experiment("race", X, Y, parallel_bandwidth=1000)
        got = []

        async def worker():
            for _ in range(30):
                got.append(await engine.suggest(exp.id))
                await anyio.sleep(0.002)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(worker)
        assert len({s.id for s in got}) == 240
        assert (await engine.experiment(exp.id)).open_suggestions == 240


def run_example(name: str) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_tagged_workers_example_prints_exactly():
    assert run_example("tagged_workers.py") == "worker-1 1\n"


def test_backoff_example_prints_exactly():
    assert run_example("backoff.py") == textwrap.dedent(
        """\
        429 bandwidth_full - 1 open suggestions >= parallel_bandwidth=1; observe or close one first
        retry_after: None headers: {}
        gave up on bandwidth_full after 1.0 s | cause: bandwidth_full
        after observe: open
        """
    )


def test_an_unclosed_sync_client_does_not_hold_up_exit():
    code = "from tauopt import Client\nc = Client(driver='local')\nc.create_experiment('e', [{'name':'x','type':'double','bounds':(0,1)}], {'name':'y'})\nprint('bye')\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout == "bye\n", out.stderr


def test_import_tauopt_loads_no_heavy_dependency():
    code = (
        "import sys, tauopt\n"
        "from tauopt import Client, AsyncClient, Engine\n"
        "heavy = [m for m in ('torch', 'gpytorch', 'grpc', 'aiosqlite', 'asyncpg', 'fastapi') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.anyio
async def test_a_sobol_experiments_first_ask_waits_off_loop_for_the_warm_up_while_others_are_served(monkeypatch):
    """The slow import (scipy) runs on a thread and the first sobol ask waits for it, so
    the ask never imports on the event loop; meanwhile another experiment is served."""
    import threading

    import tauopt.engine._engine as engine_module
    from tauopt.strategies import warm_up_for

    release = threading.Event()
    calls: list[str] = []

    def gated_warm_up() -> None:
        calls.append("started")
        assert release.wait(30), "the test never released the warm-up"

    real = warm_up_for("sobol")
    assert real is not None and warm_up_for("auto") is real and warm_up_for("gp") is real
    monkeypatch.setattr(engine_module, "warm_up_for", lambda s: gated_warm_up if s == "sobol" else None)
    async with Engine() as engine:
        slow = await engine.create_experiment(name="s", parameters=X, metric=Y, strategy="sobol")
        other = await engine.create_experiment(name="r", parameters=X, metric=Y, strategy="random")
        answered: list[str] = []

        async def first_sobol_ask() -> None:
            await engine.suggest(slow.id)
            answered.append("sobol")

        async with anyio.create_task_group() as tg:
            tg.start_soon(first_sobol_ask)
            with anyio.fail_after(30):
                while not calls:
                    await anyio.sleep(0.01)
            # the warm-up holds: the random experiment is served, the sobol ask waits
            for _ in range(3):
                s = await engine.suggest(other.id)
                await engine.observe(other.id, s.id, value=1.0)
            assert answered == []
            release.set()
        assert answered == ["sobol"]
        # a second sobol experiment starts without running the warm-up again
        again = await engine.create_experiment(name="s2", parameters=X, metric=Y, strategy="sobol")
        await engine.suggest(again.id)
        assert calls == ["started"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_mailbox_is_bounded_ends_with_its_senders_and_refuses_once_closed(anyio_backend: str) -> None:
    from tauopt.actors import Reply, Request

    def req(n: int) -> Request[int]:
        return Request(n, Reply())

    send, receive = mailbox(2)
    with anyio.fail_after(10):
        assert await receive.receive(0.01) is None  # nothing came within the bound
        send.send_nowait(req(1))
        send.send_nowait(req(2))
        with pytest.raises(anyio.WouldBlock):
            send.send_nowait(req(3))  # full
        assert receive.pending == 2
        async with anyio.create_task_group() as tg:
            tg.start_soon(send.send, req(3))  # waits for room
            await anyio.wait_all_tasks_blocked()
            assert receive.pending == 2
            first = await receive.receive()
        assert first is not None and first.message == 1
        assert [receive.receive_nowait().message for _ in range(2)] == [2, 3]
        other = send.clone()
        send.close()
        with pytest.raises(anyio.ClosedResourceError):
            send.send_nowait(req(4))
        with pytest.raises(anyio.WouldBlock):
            receive.receive_nowait()  # a sender is still open
        ended: list[bool] = []

        async def wait_for_the_end() -> None:
            with pytest.raises(anyio.EndOfStream):
                await receive.receive()
            ended.append(True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_for_the_end)  # woken by the last sender's close: the end
            await anyio.wait_all_tasks_blocked()
            assert not ended
            other.close()
        assert ended
    send2, receive2 = mailbox(1)
    receive2.close()
    with pytest.raises(anyio.BrokenResourceError):
        send2.send_nowait(req(5))
