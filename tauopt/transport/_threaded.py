"""A gRPC door on grpc's thread-pool server, its handlers coroutines run on the engine's loop.

The servicers are written for grpc.aio (`async def Method(request, context)`, failing
with `await context.abort(code, details)`); here each call's handler thread hands the
coroutine to the event loop the engine runs on and waits for its answer. A call
crosses to the loop once and back once; grpc's own threads read the requests and
write the replies, outside the GIL, beside the loop.

Why not grpc.aio's server: it polls gRPC's completion queue on a thread of its own and
hands each completion event (several a call) to the loop through a socket (a write, a
wake-up of the loop, a read), and the loop's thread writes every reply (sendmsg, with
the GIL held). The loop's thread is the door's one serial resource; here it only runs
the engine. The measurements are on docs/doors/optuna.md.

A method may also have an inline answer (`inline`, by full method name): a function of
the request run on the handler thread itself, answering the reply or None. A read the
engine can answer at once (from state its actors publish) is answered so, without
crossing to the loop; None sends the call to the loop as any other. Not with a relay:
a relayed call's answer is another daemon's.

A relay (`_relay.RelayToOwner`, daemons sharing a store) chooses each call's handler
(`choose`) before it is bridged, as its grpc.aio interceptor does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, Callable, Coroutine, Mapping, Sequence

import anyio
import grpc

__all__ = ["threaded_server", "stop_threaded"]

_NO_DEADLINE_S = 1e9  # a deadline further than this (about 30 years) is none


class _Abort(Exception):
    """`await context.abort(...)` on the loop: the handler thread aborts the call with it."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, details)
        self.code, self.details = code, details


class _LoopContext:
    """The call's context as a coroutine on the loop sees it: `abort` is awaitable and
    raises; everything else is the thread-pool server's context."""

    __slots__ = ("_context",)

    def __init__(self, context: grpc.ServicerContext) -> None:
        self._context = context

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise _Abort(code, details)

    def time_remaining(self) -> float | None:
        """Seconds to the call's deadline; None without one (grpc.aio's answer; the
        thread-pool server's is an endless float)."""
        remaining = self._context.time_remaining()
        return None if remaining is None or not remaining < _NO_DEADLINE_S else float(remaining)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


Behavior = Callable[[Any, Any], Coroutine[Any, Any, Any]]
Inline = Callable[[Any], Any]  # a request -> its reply, or None: run the call on the loop


def _on_loop(
    loop: asyncio.AbstractEventLoop, behavior: Behavior, inline: Inline | None = None
) -> Callable[[Any, grpc.ServicerContext], Any]:
    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        if inline is not None:
            reply = inline(request)
            if reply is not None:
                return reply
        future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(
            behavior(request, _LoopContext(context)), loop
        )
        context.add_callback(future.cancel)  # the caller went away: cancel it, as grpc.aio does
        try:
            return future.result()
        except _Abort as exc:
            context.abort(exc.code, exc.details)
        except concurrent.futures.CancelledError:
            context.abort(grpc.StatusCode.CANCELLED, "cancelled")

    return handle


class _Bridge(grpc.ServerInterceptor):  # type: ignore[misc]
    """Every unary handler (after the relay's choice, if any) runs on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, relay: Any | None, inline: Mapping[str, Inline]) -> None:
        self._loop = loop
        self._relay = relay
        self._inline = inline if relay is None else {}
        self._bridged: dict[int, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler], details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        if self._relay is not None:
            handler = self._relay.choose(handler, details)
        hit = self._bridged.get(id(handler))
        if hit is not None and hit[0] is handler:
            return hit[1]
        inline = self._inline.get(details.method)
        bridged = handler._replace(unary_unary=_on_loop(self._loop, handler.unary_unary, inline))
        self._bridged[id(handler)] = (handler, bridged)  # the handler kept: its id is not reused
        return bridged


def threaded_server(
    threads: int, options: Sequence[tuple[str, Any]], relay: Any | None = None, inline: Mapping[str, Inline] = {}
) -> grpc.Server:
    """A thread-pool gRPC server (`threads` handler threads) whose async handlers run on
    the running event loop; call from that loop. Register servicers on it as on a
    grpc.aio server; start it with `.start()`, stop it with `stop_threaded`. `inline`:
    answers tried on the handler thread first, by full method name ("/pkg.Service/Method")."""
    loop = asyncio.get_running_loop()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tauopt-grpc")
    return grpc.server(pool, options=list(options), interceptors=(_Bridge(loop, relay, inline),))


async def stop_threaded(server: grpc.Server, grace: float) -> None:
    """Stop taking calls, let those in flight finish for `grace` seconds (the loop keeps
    serving them meanwhile), then cancel the rest."""
    stopped = server.stop(grace)
    await anyio.to_thread.run_sync(stopped.wait)
