"""`tauopt kerastuner chief`: serve keras_tuner.Oracle from a tauopt experiment.

Binds exactly KERASTUNER_ORACLE_IP:KERASTUNER_ORACLE_PORT (like KerasTuner's
chief), runs until the search is done and the workers were told, then exits:
0 when the search completed, 1 when it ended in failures, 2 on bad
configuration. One JSON line on stdout says where it listens.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, Sequence

import anyio
from anyio.abc import TaskGroup

from ...errors import ApiError, invalid
from ...models import Parameter
from ...space import Space
from ._env import check_env
from ._oracle import ChiefConfig, HyperbandConfig, KerasTunerOracle
from ._sharing import SharedChief

__all__ = ["ChiefOptions", "ExtraDoor", "serve_chief", "run_chief_from_args", "load_space", "parse_objectives"]

log = logging.getLogger("tauopt.kerastuner")

TICK_S = 0.1  # expiry and exit checks; the exit is at most this late


@dataclass(frozen=True)
class ChiefOptions:
    config: ChiefConfig
    ip: str
    port: int
    db: str | None = None
    advertise_url: str | None = None  # share a postgresql:// --db with other chiefs of the search
    lease_s: float = 3.0


# Another door served on the chief's engine (the CLI composes them; this door
# never imports another): started in the chief's task group with the engine and
# the chief's host, it returns what it adds to the ready line and how to stop it.
ExtraDoor = Callable[[TaskGroup, Any, str], Awaitable[tuple[dict[str, Any], Callable[[], None]]]]


def parse_objectives(raw: list[str] | str, direction: str | None) -> tuple[tuple[str, Any], ...]:
    """`--objective` values: one NAME with --direction (today's form), or NAME:min|max, repeatable."""
    items = [raw] if isinstance(raw, str) else list(raw)
    if len(items) == 1 and ":" not in items[0]:
        if direction is None:
            raise invalid(f"--objective {items[0]}: give --direction min|max, or write {items[0]}:min|max")
        return ((items[0], direction),)
    out = []
    for item in items:
        name, sep, d = item.rpartition(":")
        if not sep or not name or d not in ("min", "max"):
            raise invalid(f"--objective {item!r}: with several objectives write each as NAME:min or NAME:max")
        out.append((name, d))
    if direction is not None:
        raise invalid("--direction: give it with a single bare --objective NAME only; NAME:min|max carries its own")
    return tuple(out)


def load_space(path: str) -> tuple[Parameter, ...]:
    from ._convert import check_kerastuner_space

    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise invalid(f"--space {path}: cannot read a JSON list of parameters ({exc})") from exc
    if isinstance(raw, dict) and "parameters" in raw:
        raw = raw["parameters"]
    space = Space.parse(raw)
    check_kerastuner_space(space)
    return space.parameters


async def serve_chief(
    options: ChiefOptions,
    on_ready: Callable[[dict[str, Any]], None] | None = None,
    doors: Sequence[ExtraDoor] = (),
) -> int:
    import grpc

    from ...engine import Engine
    from .._metrics import Metrics
    from .._relay import relay_for
    from .._rpc import bind_insecure
    from ._generated import service_pb2_grpc as pb_grpc
    from ._servicer import MAX_MESSAGE_BYTES, OracleServicer

    stop = anyio.Event()
    async with Engine(store=_store(options)) as engine:
        oracle = KerasTunerOracle(engine, options.config)
        sharing = SharedChief(engine, oracle) if options.advertise_url is not None else None
        lost: list[str] = []
        leases = getattr(engine.store, "shared", None)
        if leases is not None:  # a lapsed lease: stop, to be restarted fresh; the other chiefs serve meanwhile

            def _lost(why: str) -> None:
                lost.append(why)
                stop.set()

            leases.on_lost = _lost
        exp = await oracle.start() if sharing is None else await sharing.start()
        relay = None if sharing is None else relay_for(engine, "kerastuner", options.config.hold_s, sharing.owner)
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
            interceptors=() if relay is None else (relay,),
        )
        # counted into the engine's metrics, which the HTTP door (--http-port) renders at /metrics
        recorder = Metrics.for_engine(engine).record_rpc
        pb_grpc.add_OracleServicer_to_server(OracleServicer(oracle, on_rpc=recorder), server)
        bound = bind_insecure(server, f"{options.ip}:{options.port}")
        await server.start()
        await engine.advertise_door("kerastuner", options.ip, bound)
        try:
            async with anyio.create_task_group() as tg:
                ready = {
                    "event": "ready",
                    "endpoint": f"{options.ip}:{bound}",
                    "port": bound,
                    "experiment_id": exp.id,
                    "project": exp.name,
                }
                stops = []
                for door in doors:
                    info, stop_door = await door(tg, engine, options.ip)
                    ready.update(info)
                    stops.append(stop_door)
                if on_ready is not None:
                    on_ready(ready)
                _install_signal_handlers(stop)
                while not stop.is_set():
                    if sharing is None or sharing.serving:
                        await oracle.maintain()
                        if oracle.should_exit():
                            break
                    elif await sharing.ended():  # a follower: the owner completed the search
                        break
                    with anyio.move_on_after(TICK_S):
                        await stop.wait()
                for stop_door in stops:
                    stop_door()
        finally:
            with anyio.move_on_after(5, shield=True):
                await server.stop(grace=1.0)
                if relay is not None:
                    await relay.close()
        if lost:
            print(f"tauopt kerastuner chief: stopped: {lost[0]}", file=sys.stderr, flush=True)
            return 1
        if sharing is not None and not sharing.serving:
            print(json.dumps({"event": "exit", "followed": True, "exit_code": 130 if stop.is_set() else 0}), flush=True)
            return 130 if stop.is_set() else 0
        if oracle.done and not oracle.failure and not stop.is_set():
            await _mark_completed(engine, exp.id)
        summary = oracle.summary()
        summary["best"] = await _best_summary(engine, exp.id, oracle)
        summary["event"] = "exit"
        summary["exit_code"] = oracle.exit_code if not stop.is_set() else 130
        print(json.dumps(summary), flush=True)
        if oracle.failure:
            print(oracle.failure, file=sys.stderr, flush=True)
        return summary["exit_code"]


def _store(options: ChiefOptions) -> Any:
    """The chief's store: its --db, shared with the search's other chiefs with --advertise-url."""
    if options.advertise_url is None:
        return options.db
    from ...store import is_url_of_server, open_store

    if options.db is None or not is_url_of_server(options.db) or not options.lease_s > 0:
        raise invalid("--advertise-url goes with a postgresql:// --db and a positive --lease-s")
    return open_store(options.db, shared_as=options.advertise_url, lease_s=options.lease_s)


async def _mark_completed(engine: Any, experiment_id: str) -> None:
    """A finished search reads `completed` in `tauopt experiments list` and over HTTP,
    not `active` forever: its budget becomes the observations it has. Trials still
    open (a straggler past max_trials) are closed first; their results are not wanted."""
    await engine.close_all_suggestions(experiment_id)
    observed = len(await engine.observations(experiment_id))
    if observed:
        await engine.update_experiment(experiment_id, observation_budget=observed)
    log.info("experiment %s marked completed after %d observations", experiment_id, observed)


async def _best_summary(engine: Any, experiment_id: str, oracle: KerasTunerOracle) -> dict[str, Any] | None:
    """The best trial as KerasTuner ranks it: by the objective, or by `multi_objective` for a list."""
    if oracle.config.objectives:
        top = [t for t in await oracle.best_trials(1) if t.status == "COMPLETED" and t.score is not None]
        return {"value": top[0].score, "assignments": top[0].values} if top else None
    best = await engine.best(experiment_id)
    return None if best is None else {"value": best.value, "assignments": best.assignments}


def _install_signal_handlers(stop: anyio.Event) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
            pass


def options_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> ChiefOptions:
    env = check_env(environ)
    if not env.valid or env.mode != "distributed":
        reason = env.describe() if not env.valid else "local mode: the chief needs KERASTUNER_ORACLE_IP, KERASTUNER_ORACLE_PORT and KERASTUNER_TUNER_ID"
        raise invalid(reason)
    if env.role != "chief":
        raise invalid(
            f"KERASTUNER_TUNER_ID={env.tuner_id!r} is a worker id; the chief's id must contain 'chief' (e.g. chief)"
        )
    space = load_space(args.space) if args.space else None
    hyperband = None
    if getattr(args, "algorithm", "tauopt") == "hyperband":
        if args.max_epochs is None:
            raise invalid("--algorithm hyperband needs --max-epochs N (and optionally --factor F)")
        hyperband = HyperbandConfig(args.max_epochs, args.factor, args.hyperband_iterations)
    if hyperband is None and args.max_trials is None:
        raise invalid("--max-trials N is required (Hyperband computes it from --max-epochs)")
    config = ChiefConfig.for_objectives(
        parse_objectives(args.objective, args.direction),
        max_trials=args.max_trials if args.max_trials is not None else hyperband.total_trials(),  # type: ignore[union-attr]
        hyperband=hyperband,
        project=args.project,
        strategy=args.strategy,
        trial_ttl_s=args.trial_ttl_s,
        max_retries_per_trial=args.max_retries_per_trial,
        max_consecutive_failures=args.max_consecutive_failures,
        parallel_bandwidth=args.parallel_bandwidth,
        workers=args.workers,
        linger_s=args.linger_s,
        hold_s=args.hold_s,
        seed=args.seed,
        space=space,
    )
    assert env.ip is not None and env.port is not None
    advertise = getattr(args, "advertise_url", None)
    return ChiefOptions(config, env.ip, env.port, args.db, advertise, getattr(args, "lease_s", 3.0))


def _uvloop_installed() -> bool:
    """uvloop where installed, as `tauopt serve` (uvicorn) has it: grpc.aio runs on it, and
    its loop costs less a callback than asyncio's, which a trial's RPCs make ~50 of."""
    import importlib.util

    return importlib.util.find_spec("uvloop") is not None


def run_chief_from_args(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    try:
        options = options_from_args(args, os.environ)
    except ApiError as exc:
        print(f"tauopt kerastuner chief: {exc.message}", file=sys.stderr)
        return 2

    def ready(info: dict[str, Any]) -> None:
        print(json.dumps(info), flush=True)

    try:
        return anyio.run(
            serve_chief, options, ready, tuple(getattr(args, "doors", ())),
            backend="asyncio", backend_options={"use_uvloop": _uvloop_installed()},
        )  # fmt: skip
    except ApiError as exc:
        print(f"tauopt kerastuner chief: {exc.message}", file=sys.stderr)
        return 2
