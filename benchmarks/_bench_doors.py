"""tauopt's doors under load: inproc (AsyncClient local), http (a real
`tauopt serve` subprocess, clients in other processes) and kerastuner gRPC (a
real `tauopt kerastuner chief` subprocess, raw grpc.aio clients with the
generated stubs; keras_tuner is never imported).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping

import anyio

from _bench_common import (
    METRIC,
    PARAMETERS,
    SPACES,
    Recorder,
    api_ask_tell,
    free_port,
    invariants,
    max_open_from_records,
    objective,
    pick_experiment,
    run_workers,
    summarize,
    wait_port,
    wait_quiet,
)
from _bench_procs import run_client_processes


@dataclass(frozen=True)
class Config:
    door: str  # inproc | http | kerastuner
    store: str = "memory"  # memory | sqlite
    strategy: str = "random"
    workers: int = 8  # in total
    procs: int = 1  # client processes (http, kerastuner)
    experiments: int = 1
    eval_s: float = 0.0
    duration_s: float = 3.0
    client: str = "httpx"  # http: httpx (one AsyncClient per process) | httpx-per-worker | raw
    pool: str | None = "thread"  # inproc Engine pool
    space: str = "mixed3"  # inproc: a key of SPACES (the other doors run mixed3)

    @property
    def name(self) -> str:
        parts = [self.door, self.store, self.strategy, f"w{self.workers}"]
        if self.procs > 1 or self.door != "inproc":
            parts.append(f"p{self.procs}")
        parts.append(f"e{self.experiments}")
        if self.door == "http" and self.client != "httpx":
            parts.append(self.client)
        if self.eval_s:
            parts.append(f"eval{self.eval_s:g}")
        if self.space != "mixed3":
            parts.append(self.space)
        return "/".join(parts)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "contention",
            "name": self.name,
            "door": self.door,
            "store": self.store,
            "strategy": self.strategy,
            "workers": self.workers,
            "procs": self.procs,
            "experiments": self.experiments,
            "eval_s": self.eval_s,
            "duration_s": self.duration_s,
            "space": self.space,
            **({"client": self.client} if self.door == "http" else {}),
        }


def tauopt_argv(*args: str) -> list[str]:
    script = Path(sys.executable).with_name("tauopt")
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-c", "import sys; from tauopt.cli import main; sys.exit(main())", *args]


async def _records(db: str, ids: list[str]) -> int:
    """The most suggestions ever open in one experiment, from the database the server left."""
    from tauopt import Engine

    peak = 0
    async with Engine(store=db, pool=None) as engine:
        for eid in ids:
            peak = max(peak, max_open_from_records(await engine.suggestions(eid), await engine.observations(eid)))
    return peak


# -- inproc ------------------------------------------------------------------------------


async def run_inproc(cfg: Config, workdir: Path) -> dict[str, Any]:
    from tauopt import AsyncClient

    store = (
        None if cfg.store == "memory"
        else await new_pg_store_url() if cfg.store == "postgresql"
        else str(workdir / f"inproc-{time.monotonic_ns()}.db")
    )  # fmt: skip
    async with AsyncClient(driver="local", store=store, pool=cfg.pool) as client:
        ids = [
            (
                await client.create_experiment(
                    f"bench-{i}", SPACES[cfg.space], METRIC, parallel_bandwidth=cfg.workers, strategy=cfg.strategy
                )
            ).id
            for i in range(cfg.experiments)
        ]

        # warm: gp past the initial Sobol points with torch loaded by a first fit; sobol with
        # scipy imported (once per process, ~0.5-1 s, paid by the first sobol experiment's start)
        warm_pairs = {"gp": 7, "sobol": 1}.get(cfg.strategy, 0)
        for eid in ids:
            for _ in range(warm_pairs):
                s = await client.suggest(eid)
                await client.observe(eid, s.id, value=objective(s.assignments))

        ask, tell = api_ask_tell(lambda w: client, ids)

        n0 = len(await client.observations(ids[0])) if cfg.strategy == "gp" else 0
        rec = await run_workers(cfg.workers, ask, tell, cfg.duration_s, cfg.eval_s)
        peak = max([(await client.engine.inspect(e))["max_open_seen"] for e in ids])
        history = await client.observations(ids[0]) if cfg.strategy == "gp" else []
    out = {
        **cfg.describe(),
        **summarize(rec),
        "invariants": invariants(rec.keys, peak, cfg.workers, "engine.inspect"),
        "_ask_s": rec.ask_s,
    }
    if cfg.strategy == "gp":  # the GP target's yardstick: one fit at the asks' n, same run
        from _bench_gp import gp_yardstick

        out.update(gp_yardstick(history, n0, rec.ask_s))  # on this thread, as the pool pins BLAS (engine closed: nothing waits)
    return out


# -- http ------------------------------------------------------------------------------------


class _ServerProcess:
    """A server subprocess the benchmark started: SIGTERM on exit (a graceful stop), then kill."""

    proc: subprocess.Popen[bytes] | None
    _logf: Any

    def __exit__(self, *exc: Any) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.communicate(timeout=30)  # drains stdout where it is a pipe
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
        self._logf.close()


def pg_store_url(prefix: str = "") -> str:
    return anyio.run(new_pg_store_url, prefix)


async def new_pg_store_url(prefix: str = "") -> str:
    """A fresh schema on the PostgreSQL of `--pg-url` (TAUOPT_BENCH_PG_URL): its URL, with
    `prefix` (e.g. postgresql+psycopg) and the search path as that driver takes it."""
    import asyncpg

    url = os.environ["TAUOPT_BENCH_PG_URL"]
    schema = f"bench_{os.getpid()}_{time.monotonic_ns()}"
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"CREATE SCHEMA {schema}")
    finally:
        await conn.close()
    if prefix:  # SQLAlchemy + psycopg: libpq's options
        return url.replace("postgresql://", prefix + "://", 1) + f"?options=-csearch_path%3D{schema}"
    return f"{url}?search_path={schema}"


class ServeProcess(_ServerProcess):
    """`tauopt serve` on 127.0.0.1 with a fresh database; the token is read from its file."""

    def __init__(self, db: Path | str, log: Path) -> None:
        self.db = db
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.token = ""

    def __enter__(self) -> "ServeProcess":
        argv = tauopt_argv(
            "serve", "--host", "127.0.0.1", "--port", str(self.port), "--db", str(self.db),
            "--log-level", "warning",
            # quotas and rate limits are the door's policy, not coordination: out of the way here
            "--suggestions-per-day", "1000000000", "--max-active-experiments", "100000",
            "--heavy-read-rate", "100000", "--heavy-read-burst", "100000",
        )  # fmt: skip
        self._logf = open(self._log, "ab")
        cwd = self._log.parent / f"serve-{self.port}"  # a postgresql:// store's first token lands in cwd
        cwd.mkdir()
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self._logf, cwd=cwd)
        wait_port(self.port, alive=lambda: self.proc is not None and self.proc.poll() is None)
        token_file = cwd / "tauopt.token" if str(self.db).startswith("postgresql://") else Path(str(self.db) + ".token")
        self.token = token_file.read_text().strip()
        # `tauopt serve` listens before its GP pool's workers finish importing torch:
        # seconds of CPU on a 2-core machine, which would land in the measurement
        self.settle_s = wait_quiet(self.proc.pid)
        return self



@dataclass(frozen=True)
class HttpSpec:
    base_url: str
    token: str
    ids: tuple[str, ...]
    workers: int
    duration_s: float
    eval_s: float
    client: str
    proc: int
    path: str = "/v1/experiments"  # the floor's server answers any path


class RawHttp:
    """A minimal HTTP/1.1 keep-alive client (one connection, one request at a
    time): what the server can do when the client costs almost nothing."""

    def __init__(self, base_url: str, token: str) -> None:
        host_port = base_url.split("//", 1)[1]
        self.host, port = host_port.rsplit(":", 1)
        self.port = int(port)
        self._head = f"Host: {host_port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        self._r: asyncio.StreamReader | None = None
        self._w: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self._r, self._w = await asyncio.open_connection(self.host, self.port)

    async def post(self, path: str, body: Mapping[str, Any]) -> Any:
        assert self._r is not None and self._w is not None
        data = json.dumps(body, separators=(",", ":")).encode()
        self._w.write(f"POST {path} HTTP/1.1\r\n{self._head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
        status = int((await self._r.readline()).split()[1])
        length = 0
        while True:
            line = await self._r.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        payload = json.loads(await self._r.readexactly(length)) if length else None
        if status >= 300:
            err = (payload or {}).get("error", {}) if isinstance(payload, dict) else {}
            raise RawHttpError(str(err.get("type") or f"http_{status}"))
        return payload

    async def aclose(self) -> None:
        if self._w is not None:
            self._w.close()


class RawHttpError(Exception):
    def __init__(self, error_type: str) -> None:
        super().__init__(error_type)
        self.error_type = error_type


async def http_client_main(spec: HttpSpec, ready: Callable[[], Awaitable[float]]) -> dict[str, Any]:
    """One client process: `spec.workers` async workers on tauopt's HTTP API."""
    tag = f"p{spec.proc}"
    if spec.client == "raw":
        conns = [RawHttp(spec.base_url, spec.token) for _ in range(spec.workers)]
        for c in conns:
            await c.connect()

        async def ask(w: int, i: int) -> tuple[str, Any, Mapping[str, Any]]:
            eid = pick_experiment(spec.ids, w, i)
            s = await conns[w].post(f"{spec.path}/{eid}/suggestions", {"tag": f"{tag}-w{w}"})
            return eid, (w, s["id"]), s["assignments"]

        async def tell(eid: str, handle: Any, a: Mapping[str, Any]) -> None:
            w, sid = handle  # the observe goes on the asking worker's connection
            await conns[w].post(f"{spec.path}/{eid}/observations", {"suggestion_id": sid, "value": objective(a)})

        start_at = await ready()
        rec = await run_workers(spec.workers, ask, tell, spec.duration_s, spec.eval_s, start_at)
        for c in conns:
            await c.aclose()
        return rec.to_dict()

    from tauopt import AsyncClient

    n_clients = spec.workers if spec.client == "httpx-per-worker" else 1
    clients = [AsyncClient(driver="http", base_url=spec.base_url, token=spec.token) for _ in range(n_clients)]
    for c in clients:
        await c.__aenter__()
    # warm: as many connections open as there are workers, as the raw client has before it starts
    # (otherwise every worker's first ask pays a connect, which lands in the ask tail)
    async with anyio.create_task_group() as tg:
        for w in range(spec.workers):
            tg.start_soon(clients[w % n_clients]._require().health)

    ask, tell = api_ask_tell(lambda w: clients[w % n_clients], spec.ids, lambda w: f"{tag}-w{w}")

    start_at = await ready()
    rec = await run_workers(spec.workers, ask, tell, spec.duration_s, spec.eval_s, start_at)
    for c in clients:
        await c.aclose()
    return rec.to_dict()


def split_workers(workers: int, procs: int) -> list[int]:
    base, extra = divmod(workers, procs)
    return [base + (1 if i < extra else 0) for i in range(procs) if base + (1 if i < extra else 0) > 0]


_SERVERS: dict[tuple[Path, str], ServeProcess] = {}


def shared_server(workdir: Path, store: str = "sqlite") -> ServeProcess:
    """One `tauopt serve` per run and store (fresh database in the run's temp dir, or a
    fresh PostgreSQL schema), shared by the http configurations, each on its own new
    experiments: start-up is paid once."""
    server = _SERVERS.get((workdir, store))
    if server is None or server.proc is None or server.proc.poll() is not None:
        db: Path | str = pg_store_url() if store == "postgresql" else workdir / "serve.db"
        server = _SERVERS[(workdir, store)] = ServeProcess(db, workdir / f"serve-{store}.log").__enter__()
    return server


def close_servers() -> None:
    while _SERVERS:
        _, server = _SERVERS.popitem()
        server.__exit__(None, None, None)


async def _http_records(server: ServeProcess, ids: list[str]) -> int:
    """The most suggestions ever open in one experiment, rebuilt from the server's
    own record (its listings), so it holds across client processes."""
    from tauopt import AsyncClient

    peak = 0
    async with AsyncClient(driver="http", base_url=server.base_url, token=server.token) as c:
        for eid in ids:
            peak = max(peak, max_open_from_records(await c.suggestions(eid), await c.observations(eid)))
    return peak


def run_http(cfg: Config, workdir: Path) -> dict[str, Any]:
    from tauopt import AsyncClient

    server = shared_server(workdir, "postgresql" if cfg.store == "postgresql" else "sqlite")

    async def create() -> list[str]:
        async with AsyncClient(driver="http", base_url=server.base_url, token=server.token) as c:
            return [
                (
                    await c.create_experiment(
                        f"bench-{i}", PARAMETERS, METRIC, parallel_bandwidth=cfg.workers, strategy=cfg.strategy
                    )
                ).id
                for i in range(cfg.experiments)
            ]

    ids = anyio.run(create)
    specs = [
        HttpSpec(server.base_url, server.token, tuple(ids), n, cfg.duration_s, cfg.eval_s, cfg.client, p)
        for p, n in enumerate(split_workers(cfg.workers, cfg.procs))
    ]
    rec = Recorder.merge(run_client_processes(http_client_main, specs))
    peak = anyio.run(_http_records, server, ids)
    return {
        **cfg.describe(),
        **summarize(rec),
        "invariants": invariants(rec.keys, peak, cfg.workers, "server listings"),
        "server_settle_s": round(server.settle_s, 1),
        "_ask_s": rec.ask_s,
    }


# -- kerastuner gRPC ----------------------------------------------------------------------


class ChiefProcess(_ServerProcess):
    """`tauopt kerastuner chief` on 127.0.0.1 with a --space and a fresh database (or,
    for `cfg.store == "memory"`, no --db: the memory store). `python_argv` runs the
    chief under other Python options: `-c CODE` that calls `tauopt.cli.main(sys.argv[1:])`."""

    def __init__(self, workdir: Path, cfg: Config, python_argv: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.db = workdir / f"chief-{time.monotonic_ns()}.db" if cfg.store == "sqlite" else None
        self._python_argv = python_argv
        self._space = workdir / "kt-space.json"
        self._space.write_text(json.dumps(PARAMETERS))
        self._log = workdir / "chief.log"
        self._cfg = cfg
        self.proc: subprocess.Popen[bytes] | None = None
        self.experiment_id = ""

    def __enter__(self) -> "ChiefProcess":
        env = dict(os.environ, KERASTUNER_ORACLE_IP="127.0.0.1", KERASTUNER_ORACLE_PORT=str(self.port), KERASTUNER_TUNER_ID="chief")
        argv = tauopt_argv(
            "kerastuner", "chief", "--objective", "loss", "--direction", "min", "--max-trials", "100000000",
            "--strategy", self._cfg.strategy, "--space", str(self._space), *(("--db", str(self.db)) if self.db else ()),
            "--parallel-bandwidth", str(self._cfg.workers), "--hold-s", "5", "--linger-s", "0", "--seed", "1",
        )  # fmt: skip
        if self._python_argv:
            argv = [sys.executable, *self._python_argv, *argv[argv.index("kerastuner"):]]
        self._logf = open(self._log, "ab")
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=self._logf)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the chief exited before listening; see {self._log}")
        self.experiment_id = json.loads(line)["experiment_id"]
        self.settle_s = wait_quiet(self.proc.pid)
        return self



@dataclass(frozen=True)
class GrpcSpec:
    target: str
    experiment_id: str
    workers: int
    duration_s: float
    eval_s: float
    proc: int


class NotRunning(Exception):
    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.error_type = "trial_" + status.lower()


async def grpc_client_main(spec: GrpcSpec, ready: Callable[[], Awaitable[float]]) -> dict[str, Any]:
    """One client process: `spec.workers` KerasTuner-like workers (CreateTrial ->
    UpdateTrial + EndTrial) on one grpc.aio channel."""
    import grpc

    from tauopt.transport.grpc._convert import values_from_proto
    from tauopt.transport.grpc._generated import keras_tuner_pb2 as kt
    from tauopt.transport.grpc._generated import service_pb2 as pb
    from tauopt.transport.grpc._generated import service_pb2_grpc as pb_grpc

    async with grpc.aio.insecure_channel(spec.target) as channel:
        stub = pb_grpc.OracleStub(channel)
        await stub.GetSpace(pb.GetSpaceRequest())

        async def ask(w: int, i: int) -> tuple[str, Any, Mapping[str, Any]]:
            r = await stub.CreateTrial(pb.CreateTrialRequest(tuner_id=f"p{spec.proc}-w{w}"))
            if r.trial.status != kt.RUNNING:
                raise NotRunning(kt.TrialStatus.Name(r.trial.status))
            return spec.experiment_id, r.trial, values_from_proto(r.trial.hyperparameters.values)

        async def tell(eid: str, trial: Any, a: Mapping[str, Any]) -> None:
            await stub.UpdateTrial(pb.UpdateTrialRequest(trial_id=trial.trial_id, metrics={"loss": objective(a)}, step=0))
            trial.status = kt.COMPLETED
            await stub.EndTrial(pb.EndTrialRequest(trial=trial))

        start_at = await ready()
        rec = await run_workers(spec.workers, ask, tell, spec.duration_s, spec.eval_s, start_at)
    return rec.to_dict()


def run_kerastuner(cfg: Config, workdir: Path) -> dict[str, Any]:
    with ChiefProcess(workdir, cfg) as chief:
        specs = [
            GrpcSpec(f"127.0.0.1:{chief.port}", chief.experiment_id, n, cfg.duration_s, cfg.eval_s, p)
            for p, n in enumerate(split_workers(cfg.workers, cfg.procs))
        ]
        rec = Recorder.merge(run_client_processes(grpc_client_main, specs))
    if chief.db is not None:
        peak, how = anyio.run(_records, str(chief.db), [chief.experiment_id]), "store records"
    else:  # the memory store is gone with the chief: duplicates are still checked, across clients
        peak, how = None, "n/a (memory store)"
    return {
        **cfg.describe(),
        **summarize(rec),
        "invariants": invariants(rec.keys, peak, cfg.workers, how),
        "_ask_s": rec.ask_s,
    }


def run_config(cfg: Config, workdir: Path) -> dict[str, Any]:
    if cfg.door == "inproc":
        return anyio.run(run_inproc, cfg, workdir)
    if cfg.door == "http":
        return run_http(cfg, workdir)
    if cfg.door == "kerastuner":
        return run_kerastuner(cfg, workdir)
    raise ValueError(f"unknown door {cfg.door!r}")
