"""One way for every gRPC door to answer a call: run it, render an ApiError from the
catalogue (`errors.CATALOGUE`'s gRPC status), a bug as INTERNAL, and count the answer.
Imported by the gRPC doors only (it imports grpc)."""

from __future__ import annotations

import logging
import time
from typing import Any, Awaitable, Callable, Mapping, TypeVar

import grpc

from ..errors import ApiError, invalid

__all__ = ["OnRpc", "OwnerElsewhere", "answer_rpc", "bind_insecure", "length_delimited", "passing_bytes"]

T = TypeVar("T")


class OwnerElsewhere(Exception):
    """Another daemon owns the call's experiment (`not_owner`), and the call's context
    relays (`_relay.RelayToOwner`): the relay sends the call there instead of an error."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error

# Told of every answered RPC: (method, grpc status code name, outcome, seconds), where
# outcome is "ok" or the error type. The CLI passes the engine's metrics recorder.
OnRpc = Callable[[str, str, str, float], None]


async def answer_rpc(
    context: Any,
    rpc: str,
    fn: Callable[[], Awaitable[T]],
    *,
    on_rpc: OnRpc | None,
    log: logging.Logger,
    error_level: int = logging.INFO,
    other: Mapping[type[Exception], tuple[str, str]] = {},
) -> T:
    """`await fn()`, or abort with the status its error maps to. `other`: exception types
    that are not ApiErrors, each with its (status code name, outcome)."""
    t0 = time.perf_counter()
    code, outcome = "OK", "ok"
    try:
        return await fn()
    except ApiError as exc:
        if exc.error_type == "not_owner" and getattr(context, "relays", False):
            code, outcome = "OK", "relayed"
            raise OwnerElsewhere(exc) from None
        code, outcome = grpc.StatusCode[exc.kind.grpc_code].name, exc.error_type
        log.log(error_level, "%s: %s %s", rpc, code, exc.message)
        await context.abort(grpc.StatusCode[code], f"{exc.error_type}: {exc.message}")
    except Exception as exc:
        known = next((v for k, v in other.items() if isinstance(exc, k)), None)
        if known is not None:
            code, outcome = known
            await context.abort(grpc.StatusCode[code], str(exc))
        code, outcome = "INTERNAL", "internal"  # a bug: say so rather than hang the caller
        log.exception("%s failed", rpc)
        await context.abort(grpc.StatusCode.INTERNAL, f"internal: {exc!r}; see the server's log")
    except BaseException:  # cancelled: the caller went away
        code, outcome = "CANCELLED", "cancelled"
        raise
    finally:
        if on_rpc is not None:
            on_rpc(rpc, code, outcome, time.perf_counter() - t0)
    raise AssertionError("unreachable")  # abort raises


def bind_insecure(server: Any, target: str, flag: str = "") -> int:
    """Bind `target` ("host:port") on a grpc.aio server; the bound port. A port that
    cannot be bound is an `invalid_request` naming `flag` (e.g. "--optuna-port: ")."""
    try:
        bound: int = server.add_insecure_port(target)
    except RuntimeError as exc:
        raise invalid(f"{flag}cannot bind {target}: {exc}; is the port in use?") from exc
    if not bound:
        raise invalid(f"{flag}cannot bind {target}; is the port in use?")
    return bound


def length_delimited(field: int, payload: bytes) -> bytes:
    """`payload` (an encoded message) as field `field` of a protobuf message: the tag, the
    length as a varint, the bytes. Joined, such fields are the message that holds them."""
    out = bytearray()
    out.append(field << 3 | 2)  # wire type 2: length-delimited
    n = len(payload)
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    out += payload
    return bytes(out)


def passing_bytes(add: Callable[[Any, Any], None], servicer: Any, server: Any) -> None:
    """`add(servicer, server)` (a generated add_*Servicer_to_server) with every method's
    reply serializer passing `bytes` through as they are: a handler may answer its reply
    already encoded (e.g. joined from cached parts)."""

    class Capture:
        def add_generic_rpc_handlers(self, handlers: Any) -> None:
            pass  # rebuilt below from the registered handlers

        def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
            self.service, self.handlers = service, handlers

    capture = Capture()
    add(servicer, capture)

    def passing(serialize: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
        return lambda reply: reply if type(reply) is bytes else serialize(reply)

    handlers = {name: h._replace(response_serializer=passing(h.response_serializer)) for name, h in capture.handlers.items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(capture.service, handlers),))
    server.add_registered_method_handlers(capture.service, handlers)
