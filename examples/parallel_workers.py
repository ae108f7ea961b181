"""N worker threads, each with its own tauopt Client, on one experiment.

    TAUOPT_BASE_URL=http://127.0.0.1:8080 TAUOPT_TOKEN=$(cat tauopt.db.token) \
        python examples/parallel_workers.py --workers 4

Creates an experiment with parallel_bandwidth=N (or joins --experiment-id, for
a batch job array), then every worker loops: suggest (tagged
`{job_id}-worker-{rank}`, see _workers.py) -> evaluate -> observe. Checks, and
exits 1 naming the error type when broken: no assignment is ever suggested
twice (`repeated_assignment`), and no more than `parallel_bandwidth`
suggestions were ever open at once (`bandwidth_exceeded`). Every call is
bounded by --deadline-s (the client's `deadline_s=`, retries included); when it
expires the program exits 2 and names the error it was waiting on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import threading
import time
from typing import Any

from _workers import Tally, violations, worker_tags
from tauopt import ApiError, Client

PARAMETERS: list[dict[str, Any]] = [
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


def left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def suggest_within(client: Client, exp_id: str, tag: str, deadline: float):
    """Suggest, waiting out 429s (bandwidth_full is backpressure) until the deadline.

    The client already retries a 429 after its Retry-After, but at most 5
    times and never past `deadline_s`; this loop keeps waiting while time is left.
    """
    while True:
        try:
            return client.suggest(exp_id, tag=tag, deadline_s=left(deadline))
        except ApiError as e:
            if e.status_code != 429:
                raise
            wait = e.retry_after if e.retry_after is not None else 1.0
            if e.error_type == "active_experiment_cap" or time.monotonic() + wait > deadline:
                raise DeadlineExpired(e.error_type) from e
            time.sleep(wait)


def worker(tag: str, exp_id: str, rounds: int, deadline: float, tally: Tally, timeout: float) -> None:
    with Client(driver="http", timeout=timeout) as client:
        for _ in range(rounds):
            s = suggest_within(client, exp_id, tag, deadline)
            tally.opened(s.assignments)
            value = evaluate(s.assignments)
            tally.closing()
            try:
                client.observe(exp_id, suggestion_id=s.id, value=value, deadline_s=left(deadline))
            except ApiError as e:
                if e.error_type != "suggestion_expired":
                    raise
                client.observe(exp_id, assignments=e.details["assignments"], value=value, deadline_s=left(deadline))
            tally.observed_one()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10, help="suggestions per worker")
    parser.add_argument("--experiment-id", default=None, help="join this experiment (job arrays) instead of creating one")
    parser.add_argument("--bandwidth", type=int, default=None, help="parallel_bandwidth of a new experiment (default --workers)")
    parser.add_argument("--strategy", default="auto", help="strategy of a new experiment: auto, sobol, random, gp")
    parser.add_argument("--deadline-s", type=float, default=120.0, help="bounds every call, retries included")
    parser.add_argument("--job-id", default=None, help="tags are {job_id}-worker-{rank} (default: the scheduler's job id)")
    args = parser.parse_args(argv)

    start = time.monotonic()
    deadline = start + args.deadline_s
    with Client(driver="http", timeout=args.deadline_s, deadline_s=args.deadline_s) as client:
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
    tally = Tally()
    errors: list[str] = []
    tags = worker_tags(args.workers, os.environ, args.job_id)

    def run(tag: str) -> None:
        try:
            worker(tag, exp.id, args.rounds, deadline, tally, max(0.1, left(deadline)))
        except DeadlineExpired as e:
            errors.append(f"{tag}: {e.error_type}: deadline of {args.deadline_s} s expired waiting on it")
        except ApiError as e:
            errors.append(f"{tag}: {e.error_type}: {e.message}")
        except Exception as e:  # a transport error (e.g. httpx.ReadTimeout) names itself
            errors.append(f"{tag}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(tag,), daemon=True) for tag in tags]
    for t in threads:
        t.start()
    for t in threads:
        t.join(left(deadline) + 1.0)
    hung = sum(t.is_alive() for t in threads)
    if hung:
        errors.append(f"deadline_expired: {hung} worker(s) still running after the deadline of {args.deadline_s} s")

    broken = violations(tally, exp.parallel_bandwidth)
    report = {
        "experiment_id": exp.id,
        "workers": args.workers,
        "tags": tags,
        "parallel_bandwidth": exp.parallel_bandwidth,
        "suggestions": sum(tally.seen.values()),
        "observations": tally.observed,
        "repeats": len(tally.repeats()),
        "max_open": tally.max_open,
        "seconds": round(time.monotonic() - start, 2),
        "errors": errors,
    }
    print(json.dumps(report))
    if broken:
        print("FAIL " + "; ".join(broken), file=sys.stderr)
        return 1
    if errors:
        print("FAIL " + "; ".join(errors), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
