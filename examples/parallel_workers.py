"""N worker threads, each with its own tauopt Client, on one experiment.

    TAUOPT_BASE_URL=http://127.0.0.1:8080 TAUOPT_TOKEN=$(cat tauopt.db.token) \
        python examples/parallel_workers.py --workers 4

Creates an experiment with parallel_bandwidth=N (or joins --experiment-id, for
a batch job array), then every worker loops: suggest (tagged with its name)
-> evaluate -> observe. Checks, and exits 1 when broken: no assignment is ever
suggested twice, and no more than `parallel_bandwidth` suggestions were ever
open at once. Every wait is bounded by --deadline-s; when it expires the
program exits 2 and names the error it was waiting on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import socket
import sys
import threading
import time
from collections import Counter

from tauopt import ApiError, Client

PARAMETERS = [
    {"name": "lr", "type": "double", "bounds": [1e-4, 1e-1], "scale": "log"},
    {"name": "layers", "type": "int", "bounds": [1, 8]},
    {"name": "act", "type": "categorical", "values": ["relu", "gelu", "tanh"]},
]


def evaluate(a: dict) -> float:
    """A stand-in for training: a smooth function of the assignments, plus a short nap."""
    time.sleep(random.uniform(0.0, 0.01))
    return (math.log10(a["lr"]) + 2.5) ** 2 + 0.1 * (a["layers"] - 4) ** 2 + {"relu": 0.0, "gelu": -0.1, "tanh": 0.2}[a["act"]]


class DeadlineExpired(Exception):
    def __init__(self, error_type: str) -> None:
        super().__init__(error_type)
        self.error_type = error_type


class Shared:
    """What the workers check together, under one lock."""

    def __init__(self, bandwidth: int) -> None:
        self.lock = threading.Lock()
        self.seen: Counter[tuple] = Counter()
        self.bandwidth = bandwidth
        self.open_now = 0
        self.max_open = 0
        self.observed = 0
        self.errors: list[str] = []


def suggest_within(client: Client, exp_id: str, tag: str, deadline: float):
    """Suggest, waiting out 429s (bandwidth_full is backpressure) until the deadline."""
    while True:
        try:
            return client.suggest(exp_id, tag=tag)
        except ApiError as e:
            if e.status_code != 429:
                raise
            wait = e.retry_after if e.retry_after is not None else 1.0
            if e.error_type == "active_experiment_cap" or time.monotonic() + wait > deadline:
                raise DeadlineExpired(e.error_type) from e
            time.sleep(wait)


def worker(name: str, exp_id: str, rounds: int, deadline: float, shared: Shared, timeout: float) -> None:
    with Client(driver="http", timeout=timeout) as client:
        for _ in range(rounds):
            s = suggest_within(client, exp_id, name, deadline)
            key = tuple(sorted(s.assignments.items()))
            with shared.lock:
                shared.seen[key] += 1
                shared.open_now += 1
                shared.max_open = max(shared.max_open, shared.open_now)
            value = evaluate(s.assignments)
            with shared.lock:
                # Before the observe leaves: a slot can only be reused once the server has it.
                shared.open_now -= 1
            try:
                client.observe(exp_id, suggestion_id=s.id, value=value)
            except ApiError as e:
                if e.error_type != "suggestion_expired":
                    raise
                client.observe(exp_id, assignments=e.details["assignments"], value=value)
            with shared.lock:
                shared.observed += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10, help="suggestions per worker")
    parser.add_argument("--experiment-id", default=None, help="join this experiment (job arrays) instead of creating one")
    parser.add_argument("--bandwidth", type=int, default=None, help="parallel_bandwidth of a new experiment (default --workers)")
    parser.add_argument("--strategy", default="auto", help="strategy of a new experiment: auto, sobol, random, gp")
    parser.add_argument("--deadline-s", type=float, default=120.0)
    parser.add_argument("--tag-prefix", default=os.environ.get("SLURM_ARRAY_TASK_ID") and f"job-{os.environ['SLURM_ARRAY_TASK_ID']}" or socket.gethostname())
    args = parser.parse_args(argv)

    start = time.monotonic()
    deadline = start + args.deadline_s
    with Client(driver="http", timeout=args.deadline_s) as client:
        if args.experiment_id is None:
            exp = client.create_experiment(
                name="parallel-workers",
                parameters=PARAMETERS,
                metric={"name": "loss", "objective": "minimize"},
                parallel_bandwidth=args.bandwidth or args.workers,
                strategy=args.strategy,
            )
        else:
            exp = client.experiment(args.experiment_id)
    shared = Shared(exp.parallel_bandwidth)

    def run(rank: int) -> None:
        try:
            remaining = max(0.1, deadline - time.monotonic())
            worker(f"{args.tag_prefix}/rank-{rank}", exp.id, args.rounds, deadline, shared, remaining)
        except DeadlineExpired as e:
            shared.errors.append(f"rank {rank}: deadline of {args.deadline_s} s expired waiting on {e.error_type}")
        except ApiError as e:
            shared.errors.append(f"rank {rank}: {e.error_type}: {e.message}")
        except Exception as e:  # a transport error (e.g. httpx.ReadTimeout) names itself
            shared.errors.append(f"rank {rank}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + 1.0)
    hung = sum(t.is_alive() for t in threads)
    if hung:
        shared.errors.append(f"{hung} worker(s) still running after the deadline of {args.deadline_s} s")

    repeats = {k: n for k, n in shared.seen.items() if n > 1}
    report = {
        "experiment_id": exp.id,
        "workers": args.workers,
        "parallel_bandwidth": exp.parallel_bandwidth,
        "suggestions": sum(shared.seen.values()),
        "observations": shared.observed,
        "repeats": len(repeats),
        "max_open": shared.max_open,
        "seconds": round(time.monotonic() - start, 2),
        "errors": shared.errors,
    }
    print(json.dumps(report))
    if repeats or shared.max_open > exp.parallel_bandwidth:
        print(f"FAIL: {len(repeats)} repeated assignment(s), max open {shared.max_open} > {exp.parallel_bandwidth}", file=sys.stderr)
        return 1
    if shared.errors:
        print("FAIL: " + "; ".join(shared.errors), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
