"""The HTTP door's own cost per ask+observe: the ASGI app called directly (no
socket, no client), memory store, auth on, against the engine called directly.

    .venv/bin/python benchmarks/door_asgi.py
    PYTHONPATH=/path/to/other/checkout .venv/bin/python benchmarks/door_asgi.py   # A/B another version

Prints one JSON line: microseconds per pair through the app and through the
engine alone, wall and CPU time (the process's: on a loaded machine less
inflated than wall time); the door's overhead is the difference.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _progress import progress  # noqa: E402

PAIRS = int(__import__("os").environ.get("PAIRS", "3000"))
X = [{"name": "x", "type": "double", "bounds": [0.0, 1.0]}]


async def _call(app: Any, state: dict[str, Any], method: str, path: str, body: bytes, token: str) -> tuple[int, bytes]:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"", "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 1), "state": dict(state),
        "headers": [(b"host", b"x"), (b"authorization", f"Bearer {token}".encode()),
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }  # fmt: skip
    sent = False
    out: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await anyio.sleep_forever()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            out["status"] = message["status"]
        elif message["type"] == "http.response.body":
            out["body"] = out.get("body", b"") + message.get("body", b"")

    await app(scope, receive, send)
    return out["status"], out["body"]


async def main() -> None:
    from tauopt.engine import Engine
    from tauopt.engine._auth import Limits, new_credential
    from tauopt.transport.http._server import create_app

    async with Engine(pool=None) as engine:
        cred, token = new_credential("bench", suggestions_per_day=10**9)
        await engine.store.put_credential(cred)
        app = create_app(engine, limits=Limits(suggestions_per_day=10**9))
        async with app.router.lifespan_context(app) as state:
            owned = engine.as_owner(cred.id)  # the engine as the door's requests see it
            exp = await owned.create_experiment("b", X, {"name": "y"}, parallel_bandwidth=10, strategy="random")
            path = f"/v1/experiments/{exp.id}"

            async def door_pair() -> None:
                status, data = await _call(app, state, "POST", path + "/suggestions", b"{}", token)
                assert status == 201, data
                sid = json.loads(data)["id"]
                body = json.dumps({"suggestion_id": sid, "value": 0.5}).encode()
                status, data = await _call(app, state, "POST", path + "/observations", body, token)
                assert status == 201, data

            async def engine_pair() -> None:
                s = await owned.suggest(exp.id)
                await owned.observe(exp.id, s.id, value=0.5)

            result = {}
            phases = (("engine", engine_pair), ("door", door_pair), ("engine2", engine_pair), ("door2", door_pair))
            with progress(len(phases), "door_asgi") as step:
                for name, pair in phases:
                    for _ in range(min(200, PAIRS)):
                        await pair()
                    start, cpu = time.perf_counter(), time.process_time()
                    for _ in range(PAIRS):
                        await pair()
                    result[name] = (time.perf_counter() - start) / PAIRS * 1e6
                    result[name + "_cpu"] = (time.process_time() - cpu) / PAIRS * 1e6
                    step(name)
    engine_us = min(result["engine"], result["engine2"])
    door_us = min(result["door"], result["door2"])
    engine_cpu = min(result["engine_cpu"], result["engine2_cpu"])  # CPU time: less inflated by a loaded machine
    door_cpu = min(result["door_cpu"], result["door2_cpu"])
    print(json.dumps({"pairs": PAIRS, "app_us_per_pair": round(door_us), "engine_us_per_pair": round(engine_us),
                      "door_overhead_us": round(door_us - engine_us), "app_cpu_us_per_pair": round(door_cpu),
                      "engine_cpu_us_per_pair": round(engine_cpu), "door_overhead_cpu_us": round(door_cpu - engine_cpu)}))  # fmt: skip


if __name__ == "__main__":
    anyio.run(main)
