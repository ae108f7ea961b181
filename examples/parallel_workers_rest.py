"""The parallel-workers loop over plain HTTP (httpx), without importing tauopt:
what a worker in any language does.

    TAUOPT_BASE_URL=http://127.0.0.1:8080 TAUOPT_TOKEN=$(cat tauopt.db.token) \
        python examples/parallel_workers_rest.py --workers 4

POST /v1/experiments/{id}/suggestions -> evaluate -> POST .../observations.
A 429 `bandwidth_full` is backpressure: wait Retry-After and ask again. A 409
`suggestion_expired` carries the assignments: re-post them as an unsolicited
observation. Joins --experiment-id (created once outside a job array) or
creates one; tags every worker `{job_id}-worker-{rank}` (see _workers.py).
Exits 1 naming the error type on a repeated assignment (`repeated_assignment`)
or more than parallel_bandwidth open at once (`bandwidth_exceeded`), 2 on any
other error or when --deadline-s expires (naming the error it was waiting on).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time

import httpx

from _workers import Tally, violations, worker_tags

EXPERIMENT = {
    "name": "parallel-workers-rest",
    "parameters": [
        {"name": "x", "type": "double", "bounds": [-2.0, 2.0]},
        {"name": "n", "type": "int", "bounds": [1, 64], "scale": "log"},
    ],
    "metric": {"name": "loss", "objective": "minimize"},
}


def evaluate(a: dict) -> float:
    time.sleep(0.005)
    return (a["x"] - 0.5) ** 2 + 0.01 * abs(math.log2(a["n"]) - 3)


class Expired(Exception):
    pass


def call(http: httpx.Client, method: str, path: str, deadline: float, body: dict | None = None) -> httpx.Response:
    """One request, retrying 429s after their Retry-After until the deadline (no wait runs past it)."""
    while True:
        r = http.request(method, path, json=body, timeout=max(0.1, deadline - time.monotonic()))
        if r.status_code != 429:
            return r
        error_type = r.json()["error"]["type"]
        try:
            wait = float(r.headers.get("Retry-After", "1"))
        except ValueError:
            wait = 1.0
        if time.monotonic() + wait > deadline:
            raise Expired(error_type)
        time.sleep(wait)


def error_type(r: httpx.Response) -> str:
    try:
        return r.json()["error"]["type"]
    except (ValueError, KeyError, TypeError):
        return f"http_{r.status_code}"


def worker(tag: str, exp_id: str, rounds: int, deadline: float, tally: Tally, errors: list) -> None:
    headers = {"Authorization": f"Bearer {os.environ['TAUOPT_TOKEN']}"}
    base = f"/v1/experiments/{exp_id}"
    with httpx.Client(base_url=os.environ["TAUOPT_BASE_URL"], headers=headers) as http:
        try:
            for _ in range(rounds):
                r = call(http, "POST", f"{base}/suggestions", deadline, {"tag": tag})
                if r.status_code != 201 and r.status_code != 200:
                    errors.append(f"{tag}: {error_type(r)}: {r.text[:200]}")
                    return
                s = r.json()
                tally.opened(s["assignments"])
                value = evaluate(s["assignments"])
                tally.closing()
                r = call(http, "POST", f"{base}/observations", deadline, {"suggestion_id": s["id"], "value": value})
                if r.status_code == 409 and error_type(r) == "suggestion_expired":
                    body = {"assignments": r.json()["error"]["details"]["assignments"], "value": value}
                    r = call(http, "POST", f"{base}/observations", deadline, body)
                if not r.is_success:
                    errors.append(f"{tag}: {error_type(r)}: {r.text[:200]}")
                    return
                tally.observed_one()
        except Expired as e:
            errors.append(f"{tag}: {e}: deadline expired waiting on it")
        except httpx.HTTPError as e:
            errors.append(f"{tag}: {type(e).__name__}: {e}")


def open_experiment(http: httpx.Client, args: argparse.Namespace, deadline: float) -> dict:
    """Join --experiment-id (created once outside the array), or create one."""
    if args.experiment_id is not None:
        r = call(http, "GET", f"/v1/experiments/{args.experiment_id}", deadline)
    else:
        r = call(http, "POST", "/v1/experiments", deadline, dict(EXPERIMENT, parallel_bandwidth=args.bandwidth or args.workers))
    if not r.is_success:
        raise SystemExit(f"FAIL {error_type(r)}: {r.text[:200]}")
    return r.json()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--experiment-id", default=None, help="join this experiment (job arrays) instead of creating one")
    parser.add_argument("--bandwidth", type=int, default=None, help="parallel_bandwidth of a new experiment (default --workers)")
    parser.add_argument("--deadline-s", type=float, default=120.0, help="bounds every request and every wait")
    parser.add_argument("--job-id", default=None, help="tags are {job_id}-worker-{rank} (default: the scheduler's job id)")
    args = parser.parse_args(argv)
    if not os.environ.get("TAUOPT_BASE_URL") or not os.environ.get("TAUOPT_TOKEN"):
        print("FAIL configuration: set TAUOPT_BASE_URL and TAUOPT_TOKEN", file=sys.stderr)
        return 2

    start = time.monotonic()
    deadline = start + args.deadline_s
    headers = {"Authorization": f"Bearer {os.environ['TAUOPT_TOKEN']}"}
    with httpx.Client(base_url=os.environ["TAUOPT_BASE_URL"], headers=headers) as http:
        exp = open_experiment(http, args, deadline)

    tally = Tally()
    errors: list[str] = []
    tags = worker_tags(args.workers, os.environ, args.job_id)
    threads = [
        threading.Thread(target=worker, args=(tag, exp["id"], args.rounds, deadline, tally, errors), daemon=True)
        for tag in tags
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + 1.0)
    if any(t.is_alive() for t in threads):
        errors.append(f"deadline_expired: workers still running after the deadline of {args.deadline_s} s")
    broken = violations(tally, exp["parallel_bandwidth"])
    print(json.dumps({"experiment_id": exp["id"], "tags": tags, "suggestions": sum(tally.seen.values()),
                      "observations": tally.observed, "repeats": len(tally.repeats()), "max_open": tally.max_open,
                      "seconds": round(time.monotonic() - start, 2), "errors": errors}))
    if broken:
        print("FAIL " + "; ".join(broken), file=sys.stderr)
        return 1
    if errors:
        print("FAIL " + "; ".join(errors), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
