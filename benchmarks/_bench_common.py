"""Shared pieces of the contention benchmark: the workload, the recorder, the
worker loop, percentiles and the invariant checks.

A *pair* is one ask (suggest) and one observe. Every door runs the same loop:
ask, wait `eval_s`, observe, and records both latencies as the worker sees them.
"""

from __future__ import annotations

import math
import socket
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence

import anyio

# The same 3-D space for every door and for Optuna.
PARAMETERS: list[dict[str, Any]] = [
    {"name": "lr", "type": "double", "bounds": [1e-5, 1.0], "scale": "log"},
    {"name": "layers", "type": "int", "bounds": [1, 8]},
    {"name": "act", "type": "categorical", "values": ["relu", "tanh", "gelu"]},
]
METRIC = {"name": "loss", "objective": "minimize"}
# Two floats: the shape of the head-to-head with Optuna in memory (issue 16), where
# per-pair cost is all there is, so both sides sample the simplest space.
FLOAT2: list[dict[str, Any]] = [
    {"name": "x", "type": "double", "bounds": [0.0, 1.0]},
    {"name": "y", "type": "double", "bounds": [0.0, 1.0]},
]
SPACES: dict[str, list[dict[str, Any]]] = {"mixed3": PARAMETERS, "float2": FLOAT2}


def objective(a: Mapping[str, Any]) -> float:
    """A cheap deterministic loss; its value does not matter for coordination."""
    if "x" in a:  # FLOAT2
        return (float(a["x"]) - 0.3) ** 2 + (float(a["y"]) - 0.6) ** 2
    lr = float(a.get("lr", 0.01))
    return (math.log10(lr) + 2.5) ** 2 + 0.1 * int(a.get("layers", 1)) + (0.3 if a.get("act") == "tanh" else 0.0)


def point_key(experiment: str, assignments: Mapping[str, Any]) -> str:
    """One hashable (and picklable) key per assigned point of an experiment."""
    return experiment + "|" + "|".join(f"{k}={assignments[k]!r}" for k in sorted(assignments))


def error_type(exc: BaseException) -> str:
    """A short name for an error: the catalogue type, the gRPC code, or the class."""
    et = getattr(exc, "error_type", None)
    if isinstance(et, str):
        return et
    code = getattr(exc, "code", None)
    if callable(code):
        try:
            return "grpc_" + str(code().name).lower()
        except Exception:
            pass
    return type(exc).__name__


@dataclass
class Recorder:
    """What one process's workers saw. Merged across processes by `merge`."""

    ask_s: list[float] = field(default_factory=list)
    observe_s: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    keys: list[str] = field(default_factory=list)
    pairs: int = 0
    started: float = 0.0
    ended: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ask_s": self.ask_s,
            "observe_s": self.observe_s,
            "errors": dict(self.errors),
            "keys": self.keys,
            "pairs": self.pairs,
            "started": self.started,
            "ended": self.ended,
        }

    @classmethod
    def merge(cls, parts: Iterable[Mapping[str, Any]]) -> "Recorder":
        out = cls()
        starts, ends = [], []
        for p in parts:
            out.ask_s.extend(p["ask_s"])
            out.observe_s.extend(p["observe_s"])
            out.errors.update(p["errors"])
            out.keys.extend(p["keys"])
            out.pairs += p["pairs"]
            starts.append(p["started"])
            ends.append(p["ended"])
        out.started = min(starts, default=0.0)
        out.ended = max(ends, default=0.0)
        return out


Ask = Callable[[int, int], Awaitable[tuple[str, Any, Mapping[str, Any]]]]  # (worker, i) -> (exp, handle, assignments)
Tell = Callable[[str, Any, Mapping[str, Any]], Awaitable[Any]]


async def worker_loop(
    w: int, ask: Ask, tell: Tell, rec: Recorder, stop_at: float, eval_s: float, record_keys: bool = True
) -> None:
    """ask -> evaluate (sleep eval_s) -> observe until `stop_at` (time.time()).
    An error is counted by type and the loop goes on after a short pause."""
    i = 0
    while time.time() < stop_at:
        t0 = time.perf_counter()
        try:
            exp, handle, assignments = await ask(w, i)
        except Exception as exc:
            rec.errors[error_type(exc)] += 1
            await anyio.sleep(0.01)
            i += 1
            continue
        t1 = time.perf_counter()
        rec.ask_s.append(t1 - t0)
        if record_keys:
            rec.keys.append(point_key(exp, assignments))
        if eval_s > 0:
            await anyio.sleep(eval_s)
        t2 = time.perf_counter()
        try:
            await tell(exp, handle, assignments)
        except Exception as exc:
            rec.errors[error_type(exc)] += 1
            i += 1
            continue
        rec.observe_s.append(time.perf_counter() - t2)
        rec.pairs += 1
        i += 1


async def run_workers(workers: int, ask: Ask, tell: Tell, duration_s: float, eval_s: float, start_at: float | None = None) -> Recorder:
    """`workers` concurrent tasks of `worker_loop` for `duration_s` from `start_at`."""
    rec = Recorder()
    start_at = start_at if start_at is not None else time.time()
    delay = start_at - time.time()
    if delay > 0:
        await anyio.sleep(delay)
    rec.started = time.time()
    async with anyio.create_task_group() as tg:
        for w in range(workers):
            tg.start_soon(worker_loop, w, ask, tell, rec, rec.started + duration_s, eval_s)
    rec.ended = time.time()
    return rec


def pick_experiment(ids: Sequence[str], w: int, i: int) -> str:
    """Spread workers over experiments; each worker also walks through them."""
    return ids[(w * 7 + i) % len(ids)]


def api_ask_tell(api_for: Callable[[int], Any], ids: Sequence[str], tag: Callable[[int], str] = lambda w: f"w{w}") -> tuple[Ask, Tell]:
    """Ask/tell through tauopt's own API (an Engine or an AsyncClient): worker w uses
    `api_for(w)` for both its ask and its observe."""

    async def ask(w: int, i: int) -> tuple[str, Any, Mapping[str, Any]]:
        eid = pick_experiment(ids, w, i)
        s = await api_for(w).suggest(eid, tag=tag(w))
        return eid, (w, s.id), s.assignments

    async def tell(eid: str, handle: Any, a: Mapping[str, Any]) -> None:
        w, sid = handle
        await api_for(w).observe(eid, sid, value=objective(a))

    return ask, tell


# -- figures ------------------------------------------------------------------------


def quantile(sorted_xs: Sequence[float], q: float) -> float:
    if not sorted_xs:
        return float("nan")
    k = min(len(sorted_xs) - 1, max(0, int(math.ceil(q * len(sorted_xs))) - 1))
    return sorted_xs[k]


def ms(x: float) -> float | None:
    return None if math.isnan(x) else round(1000 * x, 3)


def latency_ms(xs: Sequence[float], qs: Sequence[tuple[str, float]]) -> dict[str, float | None]:
    s = sorted(xs)
    out = {name: ms(quantile(s, q)) for name, q in qs}
    return out


ASK_QS = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))
OBS_QS = (("p50", 0.5), ("p99", 0.99))


def summarize(rec: Recorder) -> dict[str, Any]:
    window = max(rec.ended - rec.started, 1e-9)
    return {
        "pairs": rec.pairs,
        "window_s": round(window, 3),
        "pairs_per_s": round(rec.pairs / window, 1),
        "ask_ms": latency_ms(rec.ask_s, ASK_QS),
        "observe_ms": latency_ms(rec.observe_s, OBS_QS),
        "errors": dict(sorted(rec.errors.items())),
    }


def duplicates(keys: Iterable[str]) -> int:
    """Assignments handed out more than once (each extra copy counts once)."""
    return sum(n - 1 for n in Counter(keys).values() if n > 1)


def max_open_from_records(suggestions: Iterable[Any], observations: Iterable[Any]) -> int:
    """The most suggestions open at once, rebuilt from the store's own record: a
    suggestion is open from its created_at until its observation's created_at
    (closed or expired ones count as open to the end, which only overestimates)."""
    ended = {o.suggestion_id: o.created_at for o in observations if o.suggestion_id is not None}
    events: list[tuple[float, int]] = []
    for s in suggestions:
        events.append((s.created_at, 1))
        if s.id in ended:
            events.append((ended[s.id], -1))
    events.sort()  # at equal times -1 sorts first: a slot freed then taken is not two open
    now = peak = 0
    for _, d in events:
        now += d
        peak = max(peak, now)
    return peak


def invariants(keys: Sequence[str], max_open: int | None, bandwidth: int | None, how: str) -> dict[str, Any]:
    dup = duplicates(keys)
    ok = dup == 0 and (max_open is None or bandwidth is None or max_open <= bandwidth)
    return {"duplicates": dup, "assignments": len(keys), "max_open_seen": max_open, "bandwidth": bandwidth, "open_from": how, "ok": ok}


# -- sockets ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout_s: float = 60.0, alive: Callable[[], bool] | None = None) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if alive is not None and not alive():
            raise RuntimeError("the server process exited before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def wait_health(url: str, proc: Any = None, timeout_s: float = 60.0) -> None:
    """Return once GET `url`/v1/health answers 200 (a `tauopt serve` started as `proc`);
    RuntimeError, with its stderr when piped, if `proc` exits first or nothing answers in time."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        exited = proc is not None and proc.poll() is not None
        if exited or time.monotonic() > deadline:
            if proc is not None and not exited:
                proc.kill()
            err = proc.communicate(timeout=10)[1] if proc is not None and proc.stderr is not None else ""
            why = f"exited {proc.returncode}" if exited else f"did not answer within {timeout_s:g} s"
            raise RuntimeError(f"tauopt serve at {url} {why}: {(err or '')[-3000:]}")
        time.sleep(0.05)


def _cpu_seconds(pid: int) -> float:
    """CPU seconds used by `pid` and its direct children (Linux /proc; 0 elsewhere)."""
    import os

    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0.0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0.0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid or int(fields[1]) == pid:  # fields[1] is the ppid
            total += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return total


def wait_quiet(pid: int, max_s: float = 30.0, window_s: float = 0.5, busy: float = 0.1) -> float:
    """Wait until a server and its children use under `busy` of a core (e.g. a GP
    pool's workers done importing torch), so start-up is not measured. Returns the wait."""
    t0 = time.time()
    last = _cpu_seconds(pid)
    while time.time() - t0 < max_s:
        time.sleep(window_s)
        now = _cpu_seconds(pid)
        if now - last < busy * window_s:
            break
        last = now
    return time.time() - t0


THROWAWAY = "throwaway"


@contextmanager
def postgresql_server(url: str | None) -> Iterator[str]:
    """`url`, or for None / "throwaway" the URL of a throwaway PostgreSQL cluster of this
    machine (tests/postgres_support.py: Debian's server binaries, fsync on), removed after."""
    if url not in (None, THROWAWAY):
        yield url
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from postgres_support import missing_reason, start_cluster

    reason = missing_reason()
    if reason is not None:
        raise SystemExit(f"a throwaway PostgreSQL cluster cannot start: {reason}; or give --pg-url URL")
    cluster = start_cluster()
    try:
        yield cluster.url()
    finally:
        cluster.destroy()
