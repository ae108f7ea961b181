"""Transport floors: the same request/reply with no engine behind it.

    http      the same uvicorn + FastAPI/Starlette stack as `tauopt serve`, with
              handlers that answer a canned suggestion/observation at once;
              driven by the same client processes (httpx, or the raw client)
    kerastuner  a grpc.aio server with the Oracle service answering canned
              trials at once, on uvloop where installed (as the chief);
              driven by the same raw grpc.aio clients
    mailbox   an in-process actor (tauopt.actors) that replies at once: the
              round trip every engine call pays

Run as a script, this module is the floor server: `_bench_floor.py http PORT`
or `_bench_floor.py grpc PORT`.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import anyio

from _bench_common import Recorder, invariants, summarize, wait_port


def http_app() -> Any:
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI()
    ids = itertools.count(1)

    # no `request` parameter and `-> Any`: the annotations of these nested handlers
    # are strings (postponed), which FastAPI would fail to resolve
    @app.get("/v1/health", response_model=None)
    async def health() -> Any:
        return JSONResponse({"status": "ok"})

    @app.post("/v1/experiments/{eid}/suggestions", response_model=None)
    async def suggest(eid: str) -> Any:
        n = next(ids)
        return JSONResponse(
            {"id": str(n), "experiment_id": eid, "assignments": {"lr": n / 1e9, "layers": 1, "act": "relu"},
             "state": "open", "tag": None, "created_at": 0.0},
            status_code=201,
        )  # fmt: skip

    @app.post("/v1/experiments/{eid}/observations", response_model=None)
    async def observe(eid: str) -> Any:
        return JSONResponse(
            {"id": "1", "experiment_id": eid, "suggestion_id": "1", "assignments": {"lr": 0.1, "layers": 1, "act": "relu"},
             "value": 0.5, "failed": False, "created_at": 0.0, "metrics": {}},
            status_code=201,
        )  # fmt: skip

    return app


def serve_http(port: int) -> None:
    import uvicorn

    # the same defaults as `tauopt serve`: uvloop and httptools where installed, no Server header
    uvicorn.run(http_app(), host="127.0.0.1", port=port, log_level="warning", server_header=False)


def serve_grpc(port: int) -> None:
    import grpc

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tauopt.transport.grpc._convert import hyperparameters_to_proto
    from tauopt.transport.grpc._generated import keras_tuner_pb2 as kt
    from tauopt.transport.grpc._generated import service_pb2 as pb
    from tauopt.transport.grpc._generated import service_pb2_grpc as pb_grpc

    ids = itertools.count(1)

    class Canned(pb_grpc.OracleServicer):
        async def GetSpace(self, request: Any, context: Any) -> Any:
            return pb.GetSpaceResponse()

        async def CreateTrial(self, request: Any, context: Any) -> Any:
            n = next(ids)
            hp = hyperparameters_to_proto({"lr": n / 1e9, "layers": 1, "act": "relu"}, None)
            return pb.CreateTrialResponse(trial=kt.Trial(trial_id=str(n), status=kt.RUNNING, hyperparameters=hp))

        async def UpdateTrial(self, request: Any, context: Any) -> Any:
            return pb.UpdateTrialResponse(trial=kt.Trial(trial_id=request.trial_id, status=kt.RUNNING))

        async def EndTrial(self, request: Any, context: Any) -> Any:
            return pb.EndTrialResponse()

    async def main() -> None:
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        pb_grpc.add_OracleServicer_to_server(Canned(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await server.wait_for_termination()

    import asyncio

    try:  # the loop the chief runs on (uvloop where installed), so the floor is the same transport
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())


class FloorServer:
    def __init__(self, kind: str, port: int, log: Path) -> None:
        self.kind, self.port, self._log = kind, port, log

    def __enter__(self) -> "FloorServer":
        self._logf = open(self._log, "ab")
        self.proc = subprocess.Popen([sys.executable, __file__, self.kind, str(self.port)], stdout=subprocess.DEVNULL, stderr=self._logf)
        wait_port(self.port, alive=lambda: self.proc.poll() is None)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._logf.close()


def _floor_result(name: str, door: str, workers: int, procs: int, duration_s: float, rec: Recorder, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "floor",
        "name": name,
        "door": door,
        "store": "none",
        "strategy": "none",
        "workers": workers,
        "procs": procs,
        "experiments": 1,
        "eval_s": 0.0,
        "duration_s": duration_s,
        **extra,
        **summarize(rec),
        "invariants": invariants([], None, None, "n/a"),
        "_ask_s": rec.ask_s,
    }


def run_http_floor(workers: int, procs: int, duration_s: float, client: str, workdir: Path) -> dict[str, Any]:
    from _bench_common import free_port
    from _bench_doors import HttpSpec, http_client_main, split_workers
    from _bench_procs import run_client_processes

    port = free_port()
    with FloorServer("http", port, workdir / "floor.log"):
        specs = [
            HttpSpec(f"http://127.0.0.1:{port}", "x", ("floor",), n, duration_s, 0.0, client, p)
            for p, n in enumerate(split_workers(workers, procs))
        ]
        rec = Recorder.merge(run_client_processes(http_client_main, specs))
    name = f"floor/http/w{workers}/p{procs}" + ("" if client == "httpx" else f"/{client}")
    return _floor_result(name, "http", workers, procs, duration_s, rec, client=client)


def run_grpc_floor(workers: int, procs: int, duration_s: float, workdir: Path) -> dict[str, Any]:
    from _bench_common import free_port
    from _bench_doors import GrpcSpec, grpc_client_main, split_workers
    from _bench_procs import run_client_processes

    port = free_port()
    with FloorServer("grpc", port, workdir / "floor.log"):
        specs = [GrpcSpec(f"127.0.0.1:{port}", "floor", n, duration_s, 0.0, p) for p, n in enumerate(split_workers(workers, procs))]
        rec = Recorder.merge(run_client_processes(grpc_client_main, specs))
    return _floor_result(f"floor/kerastuner/w{workers}/p{procs}", "kerastuner", workers, procs, duration_s, rec)


async def _mailbox(workers: int, duration_s: float) -> Recorder:
    from tauopt.actors import ActorRef, mailbox, reply, serve

    send, receive = mailbox(1024)
    ref = ActorRef(send)

    async def handle(request: Any) -> None:
        reply(request, request.message)

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve, receive, handle)

        async def ask(w: int, i: int) -> tuple[str, Any, Mapping[str, Any]]:
            await ref.ask(i)
            return "floor", None, {}

        async def tell(eid: str, handle_: Any, a: Mapping[str, Any]) -> None:
            await ref.ask(None)

        from _bench_common import run_workers

        rec = await run_workers(workers, ask, tell, duration_s, 0.0)
        send.close()
    return rec


def run_mailbox_floor(workers: int, duration_s: float) -> dict[str, Any]:
    rec = anyio.run(_mailbox, workers, duration_s)
    return _floor_result(f"floor/mailbox/w{workers}", "inproc", workers, 1, duration_s, rec)


if __name__ == "__main__":
    kind, port = sys.argv[1], int(sys.argv[2])
    (serve_http if kind == "http" else serve_grpc)(port)
    time.sleep(0)
