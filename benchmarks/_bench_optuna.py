"""The same workload through Optuna's ask/tell: what users would pick instead.

    memory   InMemoryStorage, one study shared by N threads (Optuna's own
             recipe for parallelism in one process)
    sqlite   RDBStorage on a SQLite file, N processes (one thread each)
    journal  JournalStorage(JournalFileBackend), N processes

The sampler is RandomSampler for `random` and QMCSampler(sobol) for `sobol`,
so both sides do the same (trivial) amount of sampling work, and GPSampler
for `gp` (the GP row: Optuna's GP against tauopt's); an ask is
`study.ask()` plus one `suggest_*` call per parameter (Optuna samples there), an
observe is `study.tell(trial, value)`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from _bench_common import Recorder, error_type, invariants, objective, summarize
from _bench_procs import run_client_processes


@dataclass(frozen=True)
class OptunaConfig:
    storage: str  # memory | sqlite | journal | postgresql (RDB on --pg-url's server, psycopg)
    workers: int  # threads (memory) or processes (sqlite, journal)
    strategy: str = "random"
    duration_s: float = 3.0
    eval_s: float = 0.0
    space: str = "mixed3"  # mixed3 (lr, layers, act) | float2 (x, y): _bench_common.SPACES

    @property
    def name(self) -> str:
        unit = "threads" if self.storage == "memory" else "procs"
        return f"optuna/{self.storage}/{self.strategy}/{unit}{self.workers}" + ("" if self.space == "mixed3" else f"/{self.space}")

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "optuna",
            "name": self.name,
            "door": "optuna",
            "store": self.storage,
            "strategy": self.strategy,
            "workers": self.workers,
            "procs": 1 if self.storage == "memory" else self.workers,
            "experiments": 1,
            "eval_s": self.eval_s,
            "duration_s": self.duration_s,
            "space": self.space,
        }


def _quiet() -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _sampler(optuna: Any, strategy: str) -> Any:
    if strategy == "gp":  # issue 16's GP row: Optuna's own GP, on the same objective and space
        return optuna.samplers.GPSampler(seed=1)
    if strategy == "sobol":
        return optuna.samplers.QMCSampler(qmc_type="sobol", seed=1)
    return optuna.samplers.RandomSampler(seed=None)


def _storage(optuna: Any, storage: str, url: str) -> Any:
    if storage == "memory":
        return None
    if storage in ("sqlite", "postgresql"):
        return url
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return JournalStorage(JournalFileBackend(url))


def _suggest(trial: Any, space: str) -> dict[str, Any]:
    """The benchmark's space (_bench_common.SPACES) through Optuna's suggest_* calls."""
    if space == "float2":
        return {"x": trial.suggest_float("x", 0.0, 1.0), "y": trial.suggest_float("y", 0.0, 1.0)}
    return {
        "lr": trial.suggest_float("lr", 1e-5, 1.0, log=True),
        "layers": trial.suggest_int("layers", 1, 8),
        "act": trial.suggest_categorical("act", ["relu", "tanh", "gelu"]),
    }


def _loop(study: Any, rec: Recorder, stop_at: float, eval_s: float, lock: threading.Lock, space: str) -> None:
    ask_s, obs_s, n, errors = [], [], 0, {}
    while time.time() < stop_at:
        t0 = time.perf_counter()
        try:
            trial = study.ask()
            a = _suggest(trial, space)
        except Exception as exc:
            errors[error_type(exc)] = errors.get(error_type(exc), 0) + 1
            continue
        t1 = time.perf_counter()
        if eval_s > 0:
            time.sleep(eval_s)
        t2 = time.perf_counter()
        try:
            study.tell(trial, objective(a))
        except Exception as exc:
            errors[error_type(exc)] = errors.get(error_type(exc), 0) + 1
            continue
        ask_s.append(t1 - t0)
        obs_s.append(time.perf_counter() - t2)
        n += 1
    with lock:
        rec.ask_s.extend(ask_s)
        rec.observe_s.extend(obs_s)
        rec.pairs += n
        rec.errors.update(errors)


def run_threads(cfg: OptunaConfig, url: str, start_at: float | None = None) -> Recorder:
    optuna = _quiet()
    if cfg.storage == "memory":
        study = optuna.create_study(sampler=_sampler(optuna, cfg.strategy))
    else:
        study = optuna.load_study(study_name="bench", storage=_storage(optuna, cfg.storage, url), sampler=_sampler(optuna, cfg.strategy))
    threads = cfg.workers if cfg.storage == "memory" else 1
    rec, lock = Recorder(), threading.Lock()
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))
    rec.started = time.time()
    ts = [threading.Thread(target=_loop, args=(study, rec, rec.started + cfg.duration_s, cfg.eval_s, lock, cfg.space)) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    rec.ended = time.time()
    return rec


async def optuna_client_main(spec: tuple[OptunaConfig, str], ready: Callable[[], Awaitable[float]]) -> dict[str, Any]:
    import anyio

    cfg, url = spec
    _quiet()
    start_at = await ready()
    rec = await anyio.to_thread.run_sync(run_threads, cfg, url, start_at)
    return rec.to_dict()


def run_optuna(cfg: OptunaConfig, workdir: Path) -> dict[str, Any]:
    optuna = _quiet()
    if cfg.storage == "memory":
        rec = run_threads(cfg, "")
    else:
        path = workdir / f"optuna-{cfg.storage}-{time.monotonic_ns()}.{'db' if cfg.storage == 'sqlite' else 'log'}"
        url = f"sqlite:///{path}" if cfg.storage == "sqlite" else str(path)
        if cfg.storage == "postgresql":  # a schema of its own; each worker process opens its own connection
            from _bench_doors import pg_store_url

            url = pg_store_url("postgresql+psycopg")
        optuna.create_study(study_name="bench", storage=_storage(optuna, cfg.storage, url), sampler=_sampler(optuna, cfg.strategy))
        rec = Recorder.merge(run_client_processes(optuna_client_main, [(cfg, url)] * cfg.workers))
    return {**cfg.describe(), **summarize(rec), "invariants": invariants([], None, None, "n/a"), "_ask_s": rec.ask_s}
