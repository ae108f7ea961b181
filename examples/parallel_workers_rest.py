"""The parallel-workers loop over plain HTTP (httpx), without importing tauopt:
what a worker in any language does.

    TAUOPT_BASE_URL=http://127.0.0.1:8080 TAUOPT_TOKEN=$(cat tauopt.db.token) \
        python examples/parallel_workers_rest.py --workers 4

POST /v1/experiments/{id}/suggestions -> evaluate -> POST .../observations.
A 429 `bandwidth_full` is backpressure: wait Retry-After and ask again. A 409
`suggestion_expired` carries the assignments: re-post them as an unsolicited
observation. Exits 1 on a repeated assignment, 2 when --deadline-s expires
(naming the error it was waiting on).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from collections import Counter

import httpx

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
    """One request, retrying 429s after their Retry-After until the deadline."""
    while True:
        r = http.request(method, path, json=body)
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


def worker(rank: int, exp_id: str, rounds: int, deadline: float, seen: Counter, lock: threading.Lock, errors: list) -> None:
    headers = {"Authorization": f"Bearer {os.environ['TAUOPT_TOKEN']}"}
    base = f"/v1/experiments/{exp_id}"
    timeout = max(0.1, deadline - time.monotonic())
    with httpx.Client(base_url=os.environ["TAUOPT_BASE_URL"], headers=headers, timeout=timeout) as http:
        try:
            for _ in range(rounds):
                r = call(http, "POST", f"{base}/suggestions", deadline, {"tag": f"rest/rank-{rank}"})
                r.raise_for_status()
                s = r.json()
                with lock:
                    seen[tuple(sorted(s["assignments"].items()))] += 1
                value = evaluate(s["assignments"])
                r = call(http, "POST", f"{base}/observations", deadline, {"suggestion_id": s["id"], "value": value})
                if r.status_code == 409 and r.json()["error"]["type"] == "suggestion_expired":
                    body = {"assignments": r.json()["error"]["details"]["assignments"], "value": value}
                    r = call(http, "POST", f"{base}/observations", deadline, body)
                r.raise_for_status()
        except Expired as e:
            errors.append(f"rank {rank}: deadline expired waiting on {e}")
        except httpx.HTTPStatusError as e:
            errors.append(f"rank {rank}: HTTP {e.response.status_code}: {e.response.text[:200]}")
        except httpx.HTTPError as e:
            errors.append(f"rank {rank}: {type(e).__name__}: {e}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--bandwidth", type=int, default=None, help="parallel_bandwidth (default --workers)")
    parser.add_argument("--deadline-s", type=float, default=120.0)
    args = parser.parse_args(argv)
    if not os.environ.get("TAUOPT_BASE_URL") or not os.environ.get("TAUOPT_TOKEN"):
        print("set TAUOPT_BASE_URL and TAUOPT_TOKEN", file=sys.stderr)
        return 2

    start = time.monotonic()
    deadline = start + args.deadline_s
    headers = {"Authorization": f"Bearer {os.environ['TAUOPT_TOKEN']}"}
    with httpx.Client(base_url=os.environ["TAUOPT_BASE_URL"], headers=headers, timeout=args.deadline_s) as http:
        r = http.post("/v1/experiments", json=dict(EXPERIMENT, parallel_bandwidth=args.bandwidth or args.workers))
        r.raise_for_status()
        exp = r.json()

    seen: Counter = Counter()
    lock = threading.Lock()
    errors: list[str] = []
    threads = [
        threading.Thread(target=worker, args=(rank, exp["id"], args.rounds, deadline, seen, lock, errors), daemon=True)
        for rank in range(args.workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + 1.0)
    if any(t.is_alive() for t in threads):
        errors.append(f"workers still running after the deadline of {args.deadline_s} s")
    repeats = sum(1 for n in seen.values() if n > 1)
    print(json.dumps({"experiment_id": exp["id"], "suggestions": sum(seen.values()), "repeats": repeats,
                      "seconds": round(time.monotonic() - start, 2), "errors": errors}))
    if repeats:
        return 1
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
