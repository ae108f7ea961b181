"""A worker of tests/test_serve_failover.py: asks and observes on several experiments
through a client given every daemon's URL, riding through a daemon's death with a
worker's retry loop; logs every acknowledged suggestion and observation as JSON lines.

    python failover_worker.py BASE_URLS TOKEN LOG PAIRS EXP_ID [EXP_ID ...]
"""

from __future__ import annotations

import json
import sys
import time

import httpx

from tauopt import ApiError, Client

RETRY = {"unavailable", "store_unavailable", "not_owner", "internal", "bandwidth_full"}


def call(log: object, fn: object, *args: object, **kw: object) -> object:
    deadline = time.monotonic() + 60
    while True:
        try:
            return fn(*args, **kw)  # type: ignore[operator]
        except ApiError as exc:
            if exc.error_type not in RETRY or time.monotonic() > deadline:
                raise
        except httpx.TransportError:  # the daemon died with our request in flight
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def main() -> None:
    urls, token, path, pairs, *experiments = sys.argv[1:]
    with Client(base_url=urls, token=token) as client, open(path, "a") as log:
        for i in range(int(pairs)):
            eid = experiments[i % len(experiments)]
            s = call(log, client.suggest, eid)
            log.write(json.dumps({"kind": "suggest", "e": eid, "id": s.id, "a": s.assignments, "t": time.time()}) + "\n")
            log.flush()
            value = float(i)
            try:
                call(log, client.observe, eid, suggestion_id=s.id, value=value)
            except ApiError as exc:
                if exc.error_type != "suggestion_observed":  # our observe landed before its reply was lost
                    raise
            log.write(json.dumps({"kind": "observe", "e": eid, "id": s.id, "v": value, "t": time.time()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
