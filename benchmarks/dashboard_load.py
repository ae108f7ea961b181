"""How long an experiment page of the dashboard takes to load and draw, at N observations.

Fills a SQLite file with one experiment of N observations (4 parameters, a few
failed, 4 worker tags) through the engine, starts `tauopt serve` on it, then in
headless Chromium (Debian's, through Playwright) with a browser profile on disk
(so V8 caches Plotly's compiled code, as a user's browser does), signed in,
opens the experiment's URL in a new tab per run and measures from navigation
start to the `tauopt:experiment-drawn` mark the page sets once what is in view
(1360x900: header, history, importance, the workers' tables) is drawn; plots
below the fold are drawn as they scroll into view, so each run then scrolls
to every one of them and adds up their drawing times (`below_fold_draw_ms`).
`first_visit_ms` is the first load of a fresh profile: nothing cached, Plotly
compiled from scratch. `*usable_ms`: until the header (its actions), the
counts and the workers' tables (their Close buttons) are drawn, which does not
wait for Plotly (the `tauopt:experiment-usable` mark).
`history_read_ms`: until the page's last read of observation data ended (a page that
reads a long history page after page goes on after its first paint), with
`history_bytes` of it.
The machine's load average is printed with the figures: on a shared machine
they move with it. Prints JSON.

With `--live SECONDS`, a page scrolled through and back to its top is then
watched while a worker posts an observation every 0.2 s: `live` is the page's
drawing time per second of watching (the main thread's share, in ms/s).

    python benchmarks/dashboard_load.py --observations 10000 --runs 5

With `--against DIR` (a checkout of another commit, e.g. `git worktree add
/tmp/before <rev>`), a second daemon runs that tauopt on a copy of the same
data and the runs alternate between the two, so both see the same machine
load: `against.load_to_drawn_ms` is its page's time to its own "drawn" mark.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bench_common import free_port, wait_health  # noqa: E402
from _progress import progress  # noqa: E402

PARAMS: list[dict[str, Any]] = [
    {"name": "learning_rate", "type": "double", "bounds": [1e-4, 1e-1], "scale": "log"},
    {"name": "dropout", "type": "double", "bounds": [0.0, 0.6]},
    {"name": "layers", "type": "int", "bounds": [1, 6]},
    {"name": "activation", "type": "categorical", "values": ["relu", "gelu", "tanh"]},
]


async def fill(db: str, n: int) -> str:
    from tauopt.engine._engine import Engine

    async with Engine(store=db, pool=None) as engine:
        exp = await engine.create_experiment(
            "bench", PARAMS, {"name": "val_loss", "objective": "minimize"}, parallel_bandwidth=8, strategy="random",
            suggestion_ttl_s=3600,
        )  # fmt: skip
        for i in range(n):
            s = await engine.suggest(exp.id, tag=f"node-{i % 4}/rank-0")
            a = s.assignments
            failed = i % 37 == 5
            lr, dropout = float(a["learning_rate"]), float(a["dropout"])
            value = None if failed else 0.3 + 0.08 * (math.log10(lr) + 2.5) ** 2 + 0.4 * (dropout - 0.2) ** 2
            await engine.observe(exp.id, suggestion_id=s.id, value=value, failed=failed)
        return exp.id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--observations", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", default=None, help="a checkout of another commit to time on the same data, alternating")
    parser.add_argument("--live", type=float, default=0, help="then watch a page this many seconds while a worker posts")
    args = parser.parse_args()
    from browser_support import CHROMIUM_ARGS, browser_skip_reason, chromium_path
    from playwright.sync_api import sync_playwright

    if browser_skip_reason():
        raise SystemExit(browser_skip_reason())
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db")
        t0 = time.perf_counter()
        eid = anyio.run(fill, db, args.observations)
        fill_s = time.perf_counter() - t0
        other_db = str(Path(tmp) / "against.db")
        if args.against:
            shutil.copy(db, other_db)  # its own file: one daemon per database
        procs = []
        try:
            proc, url = serve(db, ROOT)
            procs.append(proc)
            token = Path(db + ".token").read_text().strip()  # the first token, made by serve
            other_url = other_token = None
            if args.against:
                proc, other_url = serve(other_db, Path(args.against).resolve())
                procs.append(proc)
                other_token = Path(other_db + ".token").read_text().strip()
            load_before = round(os.getloadavg()[0], 2)
            times, other = [], []
            rounds = args.runs if other_url else 1
            with progress(rounds + (2 if args.live and other_url else 1 if args.live else 0), "dashboard_load") as step:
                for _ in range(rounds):  # alternate, so both see the same load
                    times += measure(url, token, eid, 1 if other_url else args.runs, chromium_path(), CHROMIUM_ARGS, sync_playwright)
                    if other_url:
                        other += measure(other_url, other_token or "", eid, 1, chromium_path(), CHROMIUM_ARGS, sync_playwright, below_fold=False)
                    step("page loads")
                if args.live:
                    live["this"] = watch(url, token, eid, args.live, chromium_path(), CHROMIUM_ARGS, sync_playwright)
                    step("live")
                    if other_url:
                        live["against"] = watch(other_url, other_token or "", eid, args.live, chromium_path(), CHROMIUM_ARGS, sync_playwright)
                        step("live, against")
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)
    against = {"against": {"checkout": args.against, "load_to_drawn_ms": _stats(other), "first_visit_ms": _stats(other_first_visit),
                           "history_read_ms": _stats(history_read[False]), "history_bytes": _stats(history_bytes[False])}} if other else {}
    print(json.dumps({
        "benchmark": "dashboard_load",
        "observations": args.observations,
        "runs": args.runs,
        "load_to_drawn_ms": _stats(times),
        "load_to_usable_ms": _stats(usable),
        "below_fold_draw_ms": _stats(below),
        "history_read_ms": _stats(history_read[True]),
        "history_bytes": _stats(history_bytes[True]),
        "first_visit_ms": _stats(first_visit),
        "first_visit_plotly_ready_ms": _stats(first_visit_plotly),
        "first_visit_usable_ms": _stats(first_visit_usable),
        "payload_bytes": transfer,
        **({"live": {"seconds": args.live, **live}} if args.live else {}),
        "load_average_1m": {"before": load_before, "after": round(os.getloadavg()[0], 2)},
        "steps_median_ms": {k: round(statistics.median(v), 1) for k, v in steps.items()},
        "fill_seconds": round(fill_s, 1),
        "browser": "headless chromium (Debian), --disable-gpu",
        "cpus": os.cpu_count(),
        **against,
    }, indent=2))  # fmt: skip


def _stats(xs: list[float]) -> dict[str, float]:
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def serve(db: str, root: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`tauopt serve` of the checkout at `root` on `db`; its URL once it answers."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tauopt.cli", "serve", "--db", db, "--port", str(port), "--pool", "thread", "--log-level", "warning",
         "--heavy-read-burst", "1000", "--heavy-read-rate", "1000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=root,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_health(url, proc, timeout_s=30)
    except RuntimeError as exc:
        raise SystemExit(f"from {root}: {exc}") from None
    return proc, url


STEPS = "performance.getEntriesByType('measure').filter(m => m.name.startsWith('tauopt:')).map(m => [m.name.slice(7), m.duration])"
RESOURCES = "performance.getEntriesByType('resource').filter(r => r.name.includes('/v1/')).map(r => [r.name.split('/v1/')[1].split('?')[0], r.encodedBodySize])"
BELOW_FOLD = ["#plot-timeline", "#plot-parcoords", "#plot-slices", "#plot-contour", "#obs-table"]
steps: dict[str, list[float]] = {}
below: list[float] = []
transfer: dict[str, int] = {}
live: dict[str, Any] = {}
first_visit: list[float] = []
first_visit_plotly: list[float] = []
first_visit_usable: list[float] = []
usable: list[float] = []
USABLE = "performance.getEntriesByName('tauopt:experiment-usable').map(m => m.startTime)"
other_first_visit: list[float] = []
# per run: when the page's last read of observation data ended (ms from navigation; a page
# that reads a long history page after page keeps reading after its first paint) and the
# bytes of observation data it read, for this checkout and the one --against
HISTORY = ("(() => { const rs = performance.getEntriesByType('resource').filter(r => r.name.includes('/observations')"
           " && r.encodedBodySize > 1000); return [rs.length ? Math.max(...rs.map(r => r.responseEnd)) : 0,"
           " rs.reduce((n, r) => n + r.encodedBodySize, 0), performance.now()]; })()")
history_read: dict[bool, list[float]] = {True: [], False: []}
history_bytes: dict[bool, list[float]] = {True: [], False: []}
WARM_UP = 2


def watch(url: str, token: str, eid: str, seconds: float, chromium: str | None, chromium_args: list[str], sync_playwright: object) -> dict[str, Any]:
    """A reader who has scrolled through the whole page and is back at its top watches it for
    `seconds` while a worker asks and observes every 0.2 s: the page's drawing time in that
    window (the main thread's, summed from its `tauopt:` measures), in all and per plot."""
    stop = threading.Event()

    def worker() -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
            i = 0
            while not stop.wait(0.2):
                s = http.post(f"/v1/experiments/{eid}/suggestions", json={"tag": "node-0/rank-0"}).json()
                http.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": s["id"], "value": 0.5 + (i % 7) / 10})
                i += 1

    with sync_playwright() as p:  # type: ignore[operator]
        browser = p.chromium.launch(executable_path=chromium, args=chromium_args)
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        context.add_init_script(f"sessionStorage.setItem('tauopt.token', {json.dumps(token)})")
        page = context.new_page()
        page.goto(f"{url}/#/e/{eid}")
        while not page.evaluate("performance.getEntriesByName('tauopt:experiment-drawn').length"):
            page.wait_for_timeout(50)
        for selector in BELOW_FOLD:
            page.locator(selector).scroll_into_view_if_needed()
            page.wait_for_timeout(500)
        page.evaluate("window.scrollTo(0, 0)")
        page.wait_for_timeout(2500)  # a tick with nothing new
        page.evaluate("performance.clearMeasures()")
        feeder = threading.Thread(target=worker)
        feeder.start()
        page.wait_for_timeout(seconds * 1000)
        stop.set()
        feeder.join()
        drawn = page.evaluate(STEPS)
        browser.close()
    per_step: dict[str, float] = {}
    for name, ms in drawn:
        per_step[name] = round(per_step.get(name, 0) + ms, 1)
    return {"draw_ms_per_s": round(sum(per_step.values()) / seconds, 1), "draw_ms_by_step": per_step}


def measure(
    url: str, token: str, eid: str, runs: int, chromium: str | None, chromium_args: list[str], sync_playwright: object,
    below_fold: bool = True,
) -> list[float]:
    """Per run: a new tab of one browser profile, signed in, opens the experiment's URL; ms from
    navigation start to drawn. The profile is a real one on disk (not Playwright's default
    incognito-like context, which keeps no compiled-code cache), as a user's browser is: two
    extra runs first let Chromium cache the assets and V8's compiled Plotly (it caches code
    for a script seen twice); the first of them, a first visit, is kept in `first_visit_ms`."""
    times: list[float] = []
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="tauopt-profile-") as profile:  # type: ignore[operator]
        context = p.chromium.launch_persistent_context(
            profile, executable_path=chromium, args=chromium_args, viewport={"width": 1360, "height": 900}
        )
        # signed in before the page's scripts run, as a tab that has pasted its token is
        context.add_init_script(f"sessionStorage.setItem('tauopt.token', {json.dumps(token)})")
        for run in range(runs + WARM_UP):
            page = context.new_page()
            page.goto(f"{url}/#/e/{eid}")
            deadline = time.monotonic() + 60
            while not page.evaluate("performance.getEntriesByName('tauopt:experiment-drawn').length"):
                if time.monotonic() > deadline:
                    raise SystemExit("the page did not finish drawing within 60 s")
                page.wait_for_timeout(20)
            drawn_at = round(page.evaluate("performance.getEntriesByName('tauopt:experiment-drawn')[0].startTime"), 1)
            usable_at = page.evaluate(USABLE)
            if run == 0:
                (first_visit if below_fold else other_first_visit).append(drawn_at)
                ready = page.evaluate("performance.getEntriesByName('tauopt:plotly-ready').map(m => m.startTime)")
                if below_fold and ready:  # how much of a first visit is Plotly's first compile and run
                    first_visit_plotly.append(round(ready[0], 1))
                if below_fold and usable_at:
                    first_visit_usable.append(round(usable_at[0], 1))
            elif run >= WARM_UP and below_fold and usable_at:
                usable.append(round(usable_at[0], 1))
            if run >= WARM_UP:
                times.append(drawn_at)
                while True:  # until 4 s pass with no read of observation data
                    ended, size, now = page.evaluate(HISTORY)
                    if now - max(ended, drawn_at) > 4000 or time.monotonic() > deadline + 60:
                        break
                    page.wait_for_timeout(200)
                history_read[below_fold].append(round(ended, 1))
                history_bytes[below_fold].append(size)
            if run >= WARM_UP and below_fold:
                first_view = {name for name, _ in page.evaluate(STEPS)}
                for selector in BELOW_FOLD:  # scroll each plot into view; it draws then
                    page.locator(selector).scroll_into_view_if_needed()
                    name = selector[1:].removeprefix("plot-")
                    while name not in {n for n, _ in page.evaluate(STEPS)}:
                        if time.monotonic() > deadline:
                            raise SystemExit(f"{selector} was not drawn within 60 s of scrolling to it")
                        page.wait_for_timeout(20)
                drawn = page.evaluate(STEPS)
                below.append(round(sum(ms for n, ms in drawn if n not in first_view), 1))
                for name, ms in drawn:
                    steps.setdefault(name, []).append(ms)
                for name, size in page.evaluate(RESOURCES):
                    transfer.setdefault(name.split("/", 2)[-1], size)  # the first read of each: the full one
            page.close()
        context.close()
    return times


if __name__ == "__main__":
    main()
