"""Serve Optuna's StorageService on an engine another command owns (the CLI composes doors).

Optuna's client opens an insecure channel and sends no credentials, so the door
listens on loopback unless told otherwise, and every study it makes belongs to the
credential named at start: the other doors show them to that credential's token.
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from typing import Any, Callable

import anyio
from anyio.abc import TaskGroup

from ...errors import invalid

__all__ = ["OptunaDoor", "is_loopback", "serve_optuna", "MAX_MESSAGE_BYTES", "MAX_STUDIES"]

MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # what a request may carry (gRPC's default)
MAX_STUDIES = 1000  # per credential, unless the server says otherwise
# Calls in flight at once (each waits on its own thread for the engine's answer); more queue.
HANDLER_THREADS = 4

log = logging.getLogger("tauopt.optuna")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class OptunaDoor:
    port: int
    host: str = "127.0.0.1"
    owner: str = "default"  # a credential's name
    allow_remote: bool = False
    max_studies: int = MAX_STUDIES
    threads: int = HANDLER_THREADS

    def check(self) -> None:
        if self.threads < 1:
            raise invalid(f"threads: {self.threads}; give at least 1")
        if not 0 <= self.port <= 65535:
            raise invalid(f"--optuna-port {self.port}: give a port from 0 to 65535")
        if not is_loopback(self.host) and not self.allow_remote:
            raise invalid(
                f"--optuna-host {self.host}: the Optuna door has no authentication (Optuna's client sends none); "
                "to bind beyond this machine anyway, add --optuna-allow-remote"
            )

    async def __call__(self, tg: TaskGroup, engine: Any, host: str) -> tuple[dict[str, Any], Callable[[], None]]:
        """The ExtraDoor contract: start in `tg` on `engine`; (what the ready line adds, stop)."""
        return await serve_optuna(tg, engine, self)


async def serve_optuna(tg: TaskGroup, engine: Any, door: OptunaDoor) -> tuple[dict[str, Any], Callable[[], None]]:
    from .._metrics import Metrics
    from .._relay import relay_for
    from .._rpc import bind_insecure, passing_bytes
    from .._threaded import stop_threaded, threaded_server
    from ._generated import api_pb2_grpc as pb_grpc
    from ._servicer import StorageServicer  # imports grpc: only when the door opens

    door.check()
    creds = [c for c in await engine.store.credentials() if c.name == door.owner and c.revoked_at is None]
    if len(creds) != 1:
        found = "no" if not creds else "more than one"
        raise invalid(
            f"--optuna-owner {door.owner}: {found} active credential has that name; "
            "name one from `tauopt token list` (or create it: `tauopt token create --name NAME`)"
        )
    relay = relay_for(engine, "optuna")  # daemons sharing the store: a study another one owns is served there
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.so_reuseport", 0)]
    servicer = StorageServicer(
        engine.as_owner(creds[0].id), on_rpc=Metrics.for_engine(engine).record_rpc, max_studies=door.max_studies
    )
    server = threaded_server(door.threads, options, relay, servicer.inline())
    passing_bytes(pb_grpc.add_StorageServiceServicer_to_server, servicer, server)
    target = f"[{door.host}]:{door.port}" if ":" in door.host and not door.host.startswith("[") else f"{door.host}:{door.port}"
    bound = bind_insecure(server, target, "--optuna-port: ")
    server.start()
    await engine.advertise_door("optuna", door.host, bound)
    log.info("Optuna storage (GrpcStorageProxy) at %s:%d for credential %r", door.host, bound, door.owner)
    if not is_loopback(door.host):
        log.warning("the Optuna door listens on %s:%d without authentication: anyone who reaches it can "
                    "read and change the studies of %r", door.host, bound, door.owner)  # fmt: skip
    stopped = anyio.Event()

    async def run() -> None:
        try:
            await stopped.wait()
        finally:
            with anyio.move_on_after(5, shield=True):
                await stop_threaded(server, grace=1.0)
                if relay is not None:
                    await relay.close()

    tg.start_soon(run)
    return {"optuna_port": bound, "optuna_owner": door.owner}, stopped.set
