"""The thread-pool gRPC server the doors run on (`transport/_threaded.py`): a call runs on
the engine's loop, unless the method's inline answer (run on the handler thread) gives
one; never inline behind a relay (the call's answer may be another daemon's)."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

grpc = pytest.importorskip("grpc")

from tauopt.transport._threaded import stop_threaded, threaded_server  # noqa: E402

METHOD = "/t.Echo/Say"


class _Handlers(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(self, loop_threads: list[int]) -> None:
        self.loop_threads = loop_threads
        self.cancelled = anyio.Event()

    def service(self, details: Any) -> Any:
        if details.method != METHOD:
            return None

        async def say(request: bytes, context: Any) -> bytes:
            self.loop_threads.append(threading.get_ident())
            if request == b"bad":
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad")
            if request == b"slow":
                try:
                    await anyio.sleep(30)
                except anyio.get_cancelled_exc_class():
                    self.cancelled.set()
                    raise
            return b"loop:" + request

        return grpc.unary_unary_rpc_method_handler(say)  # bytes in, bytes out


def _inline(request: bytes) -> bytes | None:
    return b"inline:" + request if request.startswith(b"read") else None


class _Relay:
    """A relay that serves every call here (the door's own handler)."""

    def choose(self, handler: Any, details: Any) -> Any:
        return handler


async def _calls(relay: Any, requests: list[bytes], handlers: _Handlers | None = None) -> tuple[list[Any], list[int]]:
    handlers = handlers or _Handlers([])
    loop_threads = handlers.loop_threads
    server = threaded_server(2, [], relay, {METHOD: _inline})
    server.add_generic_rpc_handlers((handlers,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:

        def call() -> list[Any]:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                say = channel.unary_unary(METHOD)
                out: list[Any] = []
                for r in requests:
                    try:
                        out.append(say(r, timeout=1 if r == b"slow" else 10))
                    except grpc.RpcError as exc:
                        out.append(exc.code())
                return out

        return await anyio.to_thread.run_sync(call), loop_threads
    finally:
        await stop_threaded(server, grace=0.5)


@pytest.mark.anyio
async def test_a_call_with_an_inline_answer_never_reaches_the_loop_and_the_others_run_there() -> None:
    answers, loop_threads = await _calls(None, [b"read 1", b"write", b"read 2", b"bad"])
    assert answers == [b"inline:read 1", b"loop:write", b"inline:read 2", grpc.StatusCode.INVALID_ARGUMENT]
    assert loop_threads == [threading.get_ident()] * 2  # only the write and the bad call ran on the loop's thread


@pytest.mark.anyio
async def test_behind_a_relay_every_call_runs_on_the_loop() -> None:
    answers, loop_threads = await _calls(_Relay(), [b"read 1", b"write"])
    assert answers == [b"loop:read 1", b"loop:write"]
    assert len(loop_threads) == 2


@pytest.mark.anyio
async def test_a_call_whose_caller_went_away_is_cancelled_on_the_loop() -> None:
    handlers = _Handlers([])
    answers, _ = await _calls(None, [b"slow", b"write"], handlers)
    assert answers == [grpc.StatusCode.DEADLINE_EXCEEDED, b"loop:write"]
    with anyio.fail_after(10):
        await handlers.cancelled.wait()  # the slow call's coroutine was cancelled, not left to run 30 s
