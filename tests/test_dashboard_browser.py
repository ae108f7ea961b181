"""The dashboard in a real headless Chromium, against a real `tauopt serve` process
filled by real workers (threads using tauopt's HTTP client). Any console error
(a CSP violation included) fails the test that caused it.

Skipped, with one line in the summary saying how to enable them, without Chromium.
Screenshots land in docs/img/ when TAUOPT_SCREENSHOTS=1 (else a temp dir).
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from browser_support import CHROMIUM_ARGS, browser_skip_reason, chromium_path, shrink_png
from tauopt import Client
from test_http_daemon import Daemon, token_of

if browser_skip_reason() is not None:  # the module as one skip: one line in the summary, not one per test
    pytest.skip(browser_skip_reason() or "", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
PARAMS = [
    {"name": "learning_rate", "type": "double", "bounds": [1e-4, 1e-1], "scale": "log"},
    {"name": "dropout", "type": "double", "bounds": [0.0, 0.6]},
    {"name": "layers", "type": "int", "bounds": [1, 6]},
    {"name": "activation", "type": "categorical", "values": ["relu", "gelu", "tanh"]},
]
METRIC = {"name": "val_loss", "objective": "minimize"}
OBSERVATIONS = 200
WORKERS = 4


def loss(a: dict[str, Any]) -> float:
    import math

    lr = math.log10(a["learning_rate"])
    act = {"relu": 0.0, "gelu": -0.05, "tanh": 0.15}[a["activation"]]
    return round(0.3 + 0.08 * (lr + 2.5) ** 2 + 0.4 * (a["dropout"] - 0.2) ** 2 + 0.02 * abs(a["layers"] - 3) + act, 6)


class World:
    def __init__(self, daemon: Daemon, token: str, other_token: str) -> None:
        self.daemon, self.url, self.token, self.other_token = daemon, daemon.url, token, other_token
        self.http = httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        self.search = ""
        self.stuck = ""


DESCRIPTION = "ResNet-18 on CIFAR-10: learning rate, depth, <b>not bold</b>"
METADATA = {"team": "<b>vision</b>", "gpus": 8, "pinned": True}


def _work(url: str, token: str, eid: str, tag: str, n: int, errors: list[BaseException]) -> None:
    try:
        with Client(driver="http", base_url=url, token=token) as client:
            for i in range(n):
                s = client.suggest(eid, tag=tag)
                failed = (i % 17) == 5  # a few crashed trials, as in life
                client.observe(eid, suggestion_id=s.id, value=None if failed else loss(s.assignments), failed=failed)
    except BaseException as exc:  # re-raised in the fixture
        errors.append(exc)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    db = tmp_path_factory.mktemp("dash") / "tauopt.db"
    daemon = Daemon(db)
    try:
        token = token_of(daemon)
        made = subprocess.run(
            [sys.executable, "-m", "tauopt.cli", "token", "create", "--db", str(db), "--name", "someone-else"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        w = World(daemon, token, made.stdout.strip())
        with Client(driver="http", base_url=w.url, token=token) as client:
            w.search = client.create_experiment(
                "resnet-sweep", PARAMS, METRIC, parallel_bandwidth=WORKERS + 2, suggestion_ttl_s=900,
                observation_budget=400, strategy="random", description=DESCRIPTION, spec={"metadata": METADATA},
            ).id  # fmt: skip
            w.stuck = client.create_experiment("recovery-demo", PARAMS[:2], METRIC, parallel_bandwidth=2, suggestion_ttl_s=600).id
            for tag in ("node-7/rank-0", "node-7/rank-1"):
                client.suggest(w.stuck, tag=tag)  # two workers that died holding their suggestions
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=_work, args=(w.url, token, w.search, f"node-{i}/rank-0", OBSERVATIONS // WORKERS, errors))
            for i in range(WORKERS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        if errors:
            raise errors[0]
        s = w.http.post(f"/v1/experiments/{w.search}/suggestions", json={"tag": "node-9/rank-0"})
        assert s.status_code == 201  # one suggestion left open, for the workers' view
        yield w
        w.http.close()
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()


class Console:
    """Every console error and uncaught page error of a page."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text} at {m.location}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        # say where a CSP violation came from (the console line alone does not)
        page.add_init_script(
            "document.addEventListener('securitypolicyviolation', e => console.error("
            "`CSP ${e.violatedDirective} ${e.sourceFile}:${e.lineNumber}:${e.columnNumber} ${e.sample}`))"
        )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[tuple[Any, Console]]:
    context = browser.new_context(viewport={"width": 1360, "height": 900}, accept_downloads=True, device_scale_factor=1)
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    console = Console(pg)
    yield pg, console
    context.close()
    assert console.errors == [], console.errors


def screenshot(pg: Any, tmp_path: Path, name: str, **options: Any) -> None:
    """Save a screenshot; with TAUOPT_SCREENSHOTS=1 into docs/img/, shrunk for the README."""
    keep = os.environ.get("TAUOPT_SCREENSHOTS") == "1"
    path = (ROOT / "docs" / "img" if keep else tmp_path) / name
    pg.screenshot(path=str(path), **options)
    assert path.stat().st_size > 0
    if keep:
        shrink_png(path)


def sign_in(pg: Any, url: str, token: str) -> None:
    pg.goto(url + "/")
    pg.wait_for_selector("#signin-form")
    pg.fill("#token-input", token)
    pg.click("#signin-form button[type=submit]")
    pg.wait_for_selector("#exp-table")


def open_experiment(pg: Any, eid: str) -> None:
    pg.click(f'#exp-table tr[data-id="{eid}"] a')
    pg.wait_for_selector("#plot-history .main-svg", state="attached")
    wait_js(pg, "document.querySelector('#importance-note').textContent.includes('method')")


def test_sign_in_lists_the_experiments_and_keeps_the_token_out_of_urls_and_cookies(world: World, page: Any, tmp_path: Path) -> None:
    pg, _ = page
    sign_in(pg, world.url, world.token)
    wait_js(pg, "document.querySelectorAll('#exp-table tbody tr').length === 2")
    rows = pg.locator("#exp-table tbody tr")
    names = sorted(rows.nth(i).locator("td").first.locator("a").inner_text() for i in range(2))
    assert names == ["recovery-demo", "resnet-sweep"]
    row = pg.locator(f'#exp-table tr[data-id="{world.search}"]')
    wait_js(pg, f"document.querySelector('#exp-table tr[data-id=\"{world.search}\"] svg.spark path') !== null")
    cells = [row.locator("td").nth(i).inner_text() for i in range(6)]
    assert cells[1] == "active" and cells[2] == "random"
    assert row.locator(".description").inner_text() == DESCRIPTION  # listed under its name
    assert cells[3].replace(",", "").startswith(f"{OBSERVATIONS} / 400")
    assert cells[4].startswith("1 / 6")
    best = world.http.get(f"/v1/experiments/{world.search}/best").json()["value"]
    assert float(cells[5].split()[0]) == pytest.approx(best, rel=1e-3)
    # filter by state and sort by a column
    pg.select_option("#state-filter", "completed")
    wait_js(pg, "document.querySelectorAll('#exp-table tbody tr').length === 0")
    pg.select_option("#state-filter", "")
    # the list is one page of the server's (filtered by name there); both fit on the first
    pg.fill("#name-filter", "RESNET")
    wait_js(pg, f"document.querySelectorAll('#exp-table tbody tr').length === 1 && document.querySelector('#exp-table tbody tr').dataset.id === '{world.search}'")
    pg.fill("#name-filter", "")
    wait_js(pg, "document.querySelectorAll('#exp-table tbody tr').length === 2")
    assert pg.is_disabled("#page-next") and pg.is_disabled("#page-prev")
    pg.click('#exp-table th[data-key="observations"]')
    wait_js(pg, f"document.querySelector('#exp-table tbody tr').dataset.id === '{world.search}'")
    pg.click('#exp-table th[data-key="observations"]')
    wait_js(pg, f"document.querySelector('#exp-table tbody tr').dataset.id === '{world.stuck}'")
    pg.click('#exp-table th[data-key="name"]')  # names A to Z first
    wait_js(pg, f"document.querySelector('#exp-table tbody tr').dataset.id === '{world.stuck}'")  # recovery-demo
    pg.click('#exp-table th[data-key="name"]')
    wait_js(pg, f"document.querySelector('#exp-table tbody tr').dataset.id === '{world.search}'")  # resnet-sweep
    pg.click('#exp-table th[data-key="best"]')  # the best value, highest first; one with none (no observation) last
    wait_js(pg, f"document.querySelector('#exp-table tbody tr:last-child').dataset.id === '{world.stuck}'")
    assert world.token not in pg.url
    assert pg.context.cookies() == []
    assert pg.evaluate("sessionStorage.getItem('tauopt.token')") == world.token
    screenshot(pg, tmp_path, "dashboard-list.png")
    pg.click("#signout")
    pg.wait_for_selector("#signin-form")
    assert pg.evaluate("sessionStorage.getItem('tauopt.token')") is None


def test_every_plot_renders_with_the_right_number_of_points(world: World, page: Any, tmp_path: Path) -> None:
    pg, _ = page
    sign_in(pg, world.url, world.token)
    open_experiment(pg, world.search)
    obs = world.http.get(f"/v1/experiments/{world.search}/observations").json()
    ok = [o for o in obs if not o["failed"]]
    failed = [o for o in obs if o["failed"]]
    assert len(obs) == OBSERVATIONS and failed
    count = "(sel) => document.querySelectorAll(sel).length"
    daemon_id = httpx.get(world.url + "/v1/health", timeout=10).json()["daemon_id"]  # one daemon: serves and owns
    wait_js(pg, f"document.querySelector('#daemon').textContent === 'daemon {daemon_id}'")
    assert pg.inner_text("#served-by") == f"daemon {daemon_id}"
    assert pg.inner_text("#exp-description") == DESCRIPTION  # as text: its markup is not markup
    shown = pg.eval_on_selector_all("#exp-metadata div", "rows => rows.map(r => [r.querySelector('dt').textContent, r.querySelector('dd').textContent])")
    assert shown == [[k, v if isinstance(v, str) else json.dumps(v)] for k, v in METADATA.items()]  # keys and values as text
    traces = "#plot-history .scatterlayer .trace"
    assert pg.evaluate(count, f"{traces}:nth-child(1) path.point") == len(ok)
    assert pg.evaluate(count, f"{traces}:nth-child(2) path.point") == len(failed)
    assert pg.evaluate(count, f"{traces}:nth-child(3) path.js-line") == 1  # the best-so-far line
    assert pg.evaluate(count, "#plot-importance .bars path") == len(PARAMS)
    assert "binned_variance" in pg.inner_text("#importance-note")
    # below the fold, each plot is drawn once it scrolls into view
    reveal(pg, "#plot-parcoords", "#plot-parcoords .pc-axis")
    # parallel coordinates: one axis per parameter plus the metric, one line per observation;
    # brushing a range on the metric's axis leaves only the lines inside it
    assert pg.evaluate(count, "#plot-parcoords .pc-axis") == len(PARAMS) + 1
    assert pg.evaluate(count, "#plot-parcoords path.pc-line") == len(ok)
    pg.locator("#plot-parcoords").scroll_into_view_if_needed()
    metric_axis = pg.locator("#plot-parcoords .pc-axis .pc-hit").last.bounding_box()
    x, y, h = metric_axis["x"] + metric_axis["width"] / 2, metric_axis["y"], metric_axis["height"]
    # the axis puts each value at (value - lo) / (hi - lo) of its height from the bottom (the best);
    # the brush starts in the widest gap between values in the lower half and runs past the bottom,
    # so no value lies within a pixel's rounding of its edges
    values = sorted(o["value"] for o in ok)
    units = [(v - values[0]) / (values[-1] - values[0]) for v in values]
    gap, cut = max((b - a, (a + b) / 2) for a, b in zip(units, units[1:]) if 0.1 <= a and b <= 0.5)
    assert gap * h >= 4, f"the widest gap between values in the lower half is {gap * h:.1f} px"
    pg.mouse.move(x, y + h * (1 - cut))
    pg.mouse.down()
    pg.mouse.move(x, y + h * (1 - cut / 2), steps=4)
    pg.mouse.move(x, y + h * 1.02, steps=4)  # past the axis: the range reaches its bottom, the best value
    pg.mouse.up()
    inside = [u for u in units if u <= cut]
    kept = pg.evaluate(count, "#plot-parcoords path.pc-line:not(.pc-off)")
    assert 0 < kept < len(ok) and kept == len(inside)
    assert "selected" in pg.inner_text("#parcoords-note")
    # slices: one panel per parameter, every successful observation in each
    reveal(pg, "#plot-slices", "#plot-slices .scatterlayer")
    per_panel = "[...document.querySelectorAll('#plot-slices .scatterlayer')].map(l => l.querySelectorAll('path.point').length)"
    assert pg.evaluate(per_panel) == [len(ok)] * len(PARAMS)
    # contour for the first numeric pair, with the points on top
    reveal(pg, "#plot-contour", "#plot-contour .contourlayer")
    assert pg.evaluate(count, "#plot-contour .scatterlayer .trace path.point") == len(ok)
    # switch the history to wall time and back
    pg.locator("#plot-history").scroll_into_view_if_needed()
    pg.click('#history button[data-axis="time"]')
    wait_js(pg, "document.querySelector('#plot-history .xtitle').textContent === 'wall time'")
    assert pg.evaluate(count, f"{traces}:nth-child(1) path.point") == len(ok)
    # the workers' view: per-tag counts, the open suggestion, a timeline
    tags = {r["tag"]: r for r in world.http.get(f"/v1/experiments/{world.search}/workers").json()["tags"]}
    tag_rows = pg.locator("#tag-table tbody tr")
    assert tag_rows.count() == len(tags)
    first = [tag_rows.nth(0).locator("td").nth(i).inner_text() for i in range(4)]
    assert first[0] == "node-0/rank-0" and int(first[2]) == tags["node-0/rank-0"]["observed"]
    assert pg.locator("#open-table tbody tr[data-sid]").count() == 1
    reveal(pg, "#plot-timeline", "#plot-timeline .scatterlayer .trace")
    legend = "[...document.querySelectorAll('#plot-timeline .legendtext')].map(t => t.textContent)"
    assert pg.evaluate(legend) == ["observed", "failed", "open"]  # none closed or expired here
    assert pg.evaluate(count, "#plot-timeline .scatterlayer .trace path.js-line") == OBSERVATIONS + 1  # a bar per suggestion
    pg.click('#history button[data-axis="number"]')
    pg.evaluate("window.scrollTo(0, 0)")
    upto = _box(pg, "#parcoords")  # header, history, importance, workers, parallel coordinates
    screenshot(pg, tmp_path, "dashboard-experiment.png", full_page=True,
               clip={"x": 0, "y": 0, "width": 1360, "height": upto["y"] + upto["height"] + 16})


def test_the_csv_download_matches_the_api(world: World, page: Any, tmp_path: Path) -> None:
    pg, _ = page
    sign_in(pg, world.url, world.token)
    open_experiment(pg, world.search)
    with pg.expect_download() as info:
        pg.click("#download-csv")
    rows = list(csv.DictReader(io.StringIO(Path(info.value.path()).read_text())))
    api = world.http.get(f"/v1/experiments/{world.search}/observations").json()
    assert [r["id"] for r in rows] == [o["id"] for o in api]
    for r, o in zip(rows, api):
        assert (r["failed"] == "true") == o["failed"]
        assert (float(r["value"]) if r["value"] else None) == o["value"]
        assert r["suggestion_id"] == o["suggestion_id"]
        for p in PARAMS:
            want = o["assignments"][p["name"]]
            assert (r[p["name"]] == want) if isinstance(want, str) else float(r[p["name"]]) == pytest.approx(want)
    with pg.expect_download() as info:
        pg.click("#download-json")
    import json

    assert json.loads(Path(info.value.path()).read_text()) == api


def test_closing_a_suggestion_from_the_page_frees_its_slot(world: World, page: Any, tmp_path: Path) -> None:
    pg, _ = page
    full = world.http.post(f"/v1/experiments/{world.stuck}/suggestions", json={})
    assert full.status_code == 429 and full.json()["error"]["type"] == "bandwidth_full"
    sign_in(pg, world.url, world.token)
    pg.click(f'#exp-table tr[data-id="{world.stuck}"] a')
    wait_js(pg, "document.querySelectorAll('#open-table tbody tr[data-sid]').length === 2")
    ages = pg.locator("#open-table .agebar")
    assert ages.count() == 2  # age against the TTL
    reveal(pg, "#plot-timeline", "#plot-timeline .scatterlayer .trace")
    pg.evaluate("window.scrollTo(0, 0)")
    screenshot(pg, tmp_path, "dashboard-workers.png", full_page=True, clip=_box(pg, "#workers"))
    sid = pg.locator("#open-table tbody tr[data-sid]").first.get_attribute("data-sid")
    pg.click(f'#open-table tr[data-sid="{sid}"] .close-one')
    deadline = time.monotonic() + 20
    while world.http.get(f"/v1/experiments/{world.stuck}/suggestions/{sid}").json()["state"] != "closed":
        assert time.monotonic() < deadline, "the close did not reach the API"
        time.sleep(0.1)
    again = world.http.post(f"/v1/experiments/{world.stuck}/suggestions", json={"tag": "node-8/rank-0"})
    assert again.status_code == 201, again.text
    # the page shows the change without a reload: the closed one is gone, the new one is there
    wait_js(pg, 
        f"[...document.querySelectorAll('#open-table tbody tr[data-sid]')].map(r => r.dataset.sid).join() !== '' && "
        f"![...document.querySelectorAll('#open-table tbody tr[data-sid]')].some(r => r.dataset.sid === '{sid}')"
    )
    wait_js(pg, "[...document.querySelectorAll('#tag-table td')].some(td => td.textContent === 'node-8/rank-0')")


def test_close_all_asks_for_confirmation_stating_how_many(world: World, page: Any) -> None:
    pg, _ = page
    with Client(driver="http", base_url=world.url, token=world.token) as client:
        eid = client.create_experiment("close-all-demo", PARAMS[:1], METRIC, parallel_bandwidth=3).id
        for _ in range(3):
            client.suggest(eid)
    sign_in(pg, world.url, world.token)
    pg.click(f'#exp-table tr[data-id="{eid}"] a')
    wait_js(pg, "document.querySelectorAll('#open-table tbody tr[data-sid]').length === 3")
    messages: list[str] = []
    pg.once("dialog", lambda d: (messages.append(d.message), d.dismiss()))
    pg.click("#close-all")
    assert messages and "Close all 3 open suggestions" in messages[0]
    assert len(world.http.get(f"/v1/experiments/{eid}/suggestions", params={"state": "open"}).json()) == 3
    pg.once("dialog", lambda d: d.accept())
    pg.click("#close-all")
    wait_js(pg, "document.querySelectorAll('#open-table tbody tr[data-sid]').length === 0")
    assert world.http.get(f"/v1/experiments/{eid}/suggestions", params={"state": "open"}).json() == []
    # edit bandwidth, TTL and budget through the API's PATCH
    pg.click("#edit")
    pg.fill('#edit-form input[name="parallel_bandwidth"]', "5")
    pg.fill('#edit-form input[name="suggestion_ttl_s"]', "120")
    pg.fill('#edit-form input[name="observation_budget"]', "50")
    pg.click('#edit-form button[type="submit"]')
    pg.wait_for_selector("#edit-form", state="detached")
    exp = world.http.get(f"/v1/experiments/{eid}").json()
    assert (exp["parallel_bandwidth"], exp["suggestion_ttl_s"], exp["observation_budget"]) == (5, 120.0, 50)
    pg.once("dialog", lambda d: d.accept())
    pg.click("#archive")
    wait_js(pg, "document.querySelector('#exp-header .pill').textContent === 'archived'")
    assert world.http.get(f"/v1/experiments/{eid}").json()["state"] == "archived"


def test_a_live_update_arrives_without_a_reload(world: World, page: Any) -> None:
    pg, _ = page
    sign_in(pg, world.url, world.token)
    open_experiment(pg, world.stuck)
    pg.evaluate("window.__sameDocument = true")
    before = pg.evaluate("document.querySelectorAll('#plot-history .scatterlayer .trace:nth-child(1) path.point').length")
    with Client(driver="http", base_url=world.url, token=world.token) as client:
        client.observe(world.stuck, assignments={"learning_rate": 0.01, "dropout": 0.1}, value=0.42)
    wait_js(pg, 
        f"document.querySelectorAll('#plot-history .scatterlayer .trace:nth-child(1) path.point').length === {before + 1}"
    )
    assert pg.evaluate("window.__sameDocument") is True
    assert pg.inner_text("#best-value") == "0.42"


def test_a_second_credential_sees_none_of_the_first_ones_experiments(world: World, page: Any) -> None:
    pg, _ = page
    sign_in(pg, world.url, world.other_token)
    pg.wait_for_selector("#exp-table + .empty:not(.hidden)")
    assert pg.locator("#exp-table tbody tr").count() == 0
    mine = world.http.get("/v1/experiments").json()
    assert len(mine) >= 2


def test_a_refused_token_is_not_kept(world: World, page: Any) -> None:
    pg, console = page
    pg.goto(world.url + "/")
    pg.fill("#token-input", "not-a-token")
    pg.click("#signin-form button[type=submit]")
    pg.wait_for_selector("#signin-error:not(.hidden)")
    assert "refused" in pg.inner_text("#signin-error")
    assert pg.evaluate("sessionStorage.getItem('tauopt.token')") is None
    # Chromium logs the 401 response itself as a console error; that one is expected here
    console.errors[:] = [e for e in console.errors if "401" not in e]


def reveal(pg: Any, plot: str, drawn: str) -> None:
    """Scroll a lazily drawn plot into view and wait until `drawn` is in the page."""
    pg.locator(plot).scroll_into_view_if_needed()
    wait_js(pg, f"document.querySelector({drawn!r}) !== null")


def wait_js(pg: Any, expression: str, timeout_s: float = 20.0) -> None:
    """Poll `expression` until it is truthy. (Playwright's wait_for_function evaluates its
    predicate with eval, which the dashboard's CSP refuses, as it should; page.evaluate does not.)"""
    deadline = time.monotonic() + timeout_s
    while not pg.evaluate(expression):
        assert time.monotonic() < deadline, f"still false after {timeout_s} s: {expression}"
        pg.wait_for_timeout(100)


def _box(pg: Any, selector: str) -> dict[str, float]:
    box = pg.locator(selector).bounding_box()
    assert box is not None
    return {"x": box["x"], "y": box["y"], "width": box["width"], "height": box["height"]}


def test_a_page_draws_only_what_is_in_view_and_the_rest_when_scrolled_to(world: World, page: Any) -> None:
    pg, _ = page
    sign_in(pg, world.url, world.token)
    open_experiment(pg, world.search)
    pg.evaluate("window.scrollTo(0, 0)")
    assert pg.evaluate("document.querySelector('#plot-slices .main-svg') === null")  # far below the fold: not drawn yet
    assert pg.evaluate("performance.getEntriesByName('tauopt:experiment-drawn').length") == 1
    reveal(pg, "#plot-slices", "#plot-slices .main-svg")


# -- several metrics: the Pareto front; intermediate reports: learning curves ------------

MO_METRICS = [
    {"name": "acc", "objective": "maximize"},
    {"name": "latency_ms", "objective": "minimize"},
    {"name": "mem_mb", "constraint": {"<=": 512}},
]


def _mo_values(i: int, objectives: int) -> dict[str, float]:
    import math

    t = (i * 0.618) % 1.0
    v = {"acc": round(0.6 + 0.35 * t - 0.05 * ((i * 7) % 3), 4), "latency_ms": round(10 + 60 * t ** 2 + 3 * ((i * 5) % 4), 3),
         "mem_mb": float(300 + (i * 37) % 400)}  # fmt: skip
    if objectives == 3:
        v["size_mb"] = round(5 + 20 * math.cos(t) + (i % 5), 3)
    return v


def _mo_experiment(world: World, name: str, metrics: list[dict[str, Any]], n: int) -> str:
    r = world.http.post("/v1/experiments", json={"name": name, "parameters": PARAMS[:2], "metrics": metrics, "strategy": "random"})
    assert r.status_code == 201, r.text
    eid = r.json()["id"]
    k = sum(1 for m in metrics if "objective" in m)
    for i in range(n):
        a = {"learning_rate": 10 ** (-4 + 3 * ((i * 0.37) % 1.0)), "dropout": (i * 0.21) % 0.6}
        body: dict[str, Any] = {"assignments": a, "values": _mo_values(i, k)}
        if i % 11 == 4:
            body = {"assignments": a, "failed": True}
        r = world.http.post(f"/v1/experiments/{eid}/observations", json=body)
        assert r.status_code == 201, r.text
    return eid


def test_two_objectives_show_the_front_on_a_scatter_with_infeasible_points_marked(world: World, page: Any, tmp_path: Path) -> None:
    pg, _ = page
    eid = _mo_experiment(world, "latency-vs-accuracy", MO_METRICS, 60)
    front = world.http.get(f"/v1/experiments/{eid}/pareto_front").json()
    obs = world.http.get(f"/v1/experiments/{eid}/observations").json()
    done = [o for o in obs if not o["failed"]]
    infeasible = [o for o in done if o["metrics"]["mem_mb"] > 512]
    assert front and infeasible
    sign_in(pg, world.url, world.token)
    pg.click(f'#exp-table tr[data-id="{eid}"] a')
    reveal(pg, "#plot-pareto", "#plot-pareto .scatterlayer .trace")
    count = "(sel) => document.querySelectorAll(sel).length"
    traces = "#plot-pareto .scatterlayer .trace"
    assert pg.evaluate(count, f"{traces}:nth-child(1) path.point") == len(done) - len(infeasible) - len(front)  # feasible, off the front
    assert pg.evaluate(count, f"{traces}:nth-child(2) path.point") == len(infeasible)
    assert pg.evaluate(count, f"{traces}:nth-child(3) path.point") == len(front)
    legend = "[...document.querySelectorAll('#plot-pareto .legendtext')].map(t => t.textContent)"
    assert pg.evaluate(legend) == ["feasible", "infeasible", "Pareto front"]
    note = pg.inner_text("#pareto-note")
    assert f"{len(front)} on the front" in note and f"{len(infeasible)} infeasible" in note
    assert "mem_mb <= 512" in pg.inner_text("#pareto-help")
    assert pg.evaluate("document.querySelector('#plot-pareto .xtitle').textContent") == "acc ↑"
    # the CSV has every metric by name, feasibility and front membership
    with pg.expect_download() as info:
        pg.click("#download-csv")
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(Path(info.value.path()).read_text()))}
    front_ids = {o["id"] for o in front}
    for o in obs:
        r = rows[o["id"]]
        if o["failed"]:
            assert r["metric:acc"] == r["metric:mem_mb"] == "" and r["feasible"] == "false"
            continue
        assert float(r["metric:acc"]) == o["value"] and float(r["metric:latency_ms"]) == o["metrics"]["latency_ms"]
        assert float(r["metric:mem_mb"]) == o["metrics"]["mem_mb"]
        assert (r["feasible"] == "true") == (o["metrics"]["mem_mb"] <= 512)
        assert (r["pareto_front"] == "true") == (o["id"] in front_ids)
    pg.locator("#pareto").scroll_into_view_if_needed()
    screenshot(pg, tmp_path, "dashboard-pareto.png", clip=_box(pg, "#pareto"))


def test_three_objectives_show_the_front_in_parallel_coordinates(world: World, page: Any) -> None:
    pg, _ = page
    metrics = [{"name": "acc", "objective": "maximize"}, {"name": "latency_ms", "objective": "minimize"},
               {"name": "size_mb", "objective": "minimize"}, {"name": "mem_mb", "constraint": {"<=": 512}}]  # fmt: skip
    eid = _mo_experiment(world, "three-objectives", metrics, 40)
    front = world.http.get(f"/v1/experiments/{eid}/pareto_front").json()
    obs = world.http.get(f"/v1/experiments/{eid}/observations").json()
    infeasible = [o for o in obs if not o["failed"] and o["metrics"]["mem_mb"] > 512]
    sign_in(pg, world.url, world.token)
    pg.click(f'#exp-table tr[data-id="{eid}"] a')
    reveal(pg, "#plot-pareto", "#plot-pareto .pc-axis")
    count = "(sel) => document.querySelectorAll(sel).length"
    assert pg.evaluate(count, "#plot-pareto .pc-axis") == 3
    assert pg.evaluate(count, "#plot-pareto path.pareto-front") == len(front) > 0
    assert pg.evaluate(count, "#plot-pareto path.pareto-bad") == len(infeasible) > 0
    ids = pg.evaluate("[...document.querySelectorAll('#plot-pareto path.pareto-front')].map(p => p.dataset.id).sort()")
    assert ids == sorted(o["id"] for o in front)


def test_learning_curves_show_each_suggestions_reports_and_mark_stopped_trials(world: World, page: Any, tmp_path: Path) -> None:
    pg, _ = page
    r = world.http.post("/v1/experiments", json={"name": "early-stopping-demo", "parameters": PARAMS[:2], "metric": METRIC,
                                                 "strategy": "random", "parallel_bandwidth": 8})  # fmt: skip
    eid = r.json()["id"]
    sids = [world.http.post(f"/v1/experiments/{eid}/suggestions", json={"tag": f"w{i}"}).json()["id"] for i in range(6)]
    stopped = set(sids[1:3])
    for i, sid in enumerate(sids):
        last = 3 if sid in stopped else 8
        for step in range(1, last + 1):
            value = 0.3 + 0.1 * i + 1.0 / step
            assert world.http.post(f"/v1/experiments/{eid}/suggestions/{sid}/reports", json={"step": step, "value": value}).status_code == 200
        if i < 5:  # the last one is still running
            body = {"suggestion_id": sid, "value": value, "stopped": sid in stopped}
            assert world.http.post(f"/v1/experiments/{eid}/observations", json=body).status_code == 201
    sign_in(pg, world.url, world.token)
    pg.click(f'#exp-table tr[data-id="{eid}"] a')
    reveal(pg, "#plot-curves", "#plot-curves .scatterlayer .trace")
    count = "(sel) => document.querySelectorAll(sel).length"
    curves = "#plot-curves .scatterlayer .trace"
    assert pg.evaluate(count, f"{curves} path.js-line") == len(sids)  # a curve per suggestion that reported
    assert pg.evaluate(count, f"{curves}:last-child path.point") == len(stopped)  # × where a trial was stopped
    assert "6 suggestions reported · 2 stopped early" in pg.inner_text("#curves-note")
    # a new report arrives live, without a reload
    world.http.post(f"/v1/experiments/{eid}/suggestions/{sids[5]}/reports", json={"step": 9, "value": 0.2})
    wait_js(pg, "[...document.querySelectorAll('#plot-curves .scatterlayer .trace path.js-line')].some(p => (p.getAttribute('d') || '').split('L').length === 9)")
    pg.locator("#curves").scroll_into_view_if_needed()
    screenshot(pg, tmp_path, "dashboard-curves.png", clip=_box(pg, "#curves"))
    # an experiment without reports shows no curves card
    pg.goto(f"{world.url}/#/e/{world.search}")
    pg.wait_for_selector("#plot-history .main-svg", state="attached")
    assert pg.evaluate("document.getElementById('curves').classList.contains('hidden')")


def test_the_page_reads_every_page_of_observations_and_reports_without_waiting_for_ticks(world: World, page: Any) -> None:
    r = world.http.post("/v1/experiments", json={"name": "paged", "parameters": PARAMS[:2], "metric": METRIC,
                                                 "strategy": "random", "parallel_bandwidth": 8})  # fmt: skip
    eid = r.json()["id"]
    for sid in [world.http.post(f"/v1/experiments/{eid}/suggestions", json={}).json()["id"] for _ in range(3)]:
        for step in range(1, 11):
            assert world.http.post(f"/v1/experiments/{eid}/suggestions/{sid}/reports", json={"step": step, "value": 1 / step}).status_code == 200
    for i in range(30):
        a = {"learning_rate": 10 ** (-4 + 3 * ((i * 0.37) % 1.0)), "dropout": (i * 0.21) % 0.6}
        assert world.http.post(f"/v1/experiments/{eid}/observations", json={"assignments": a, "value": 1 + i / 100}).status_code == 201
    pg, _ = page
    sign_in(pg, world.url, world.token)

    def small_pages(route: Any) -> None:  # pages of 7 observations and 5 reports: a few make several pages
        url = route.request.url
        route.continue_(url=url if "limit=" in url else url + ("&limit=7" if "/columns" in url else "&limit=5"))

    ticks: list[Any] = []

    def first_tick_only(route: Any) -> None:  # later ticks wait: what follows the first page comes without them
        ticks.append(route)
        if len(ticks) == 1:
            route.continue_()

    pg.route("**/v1/experiments/*/observations/columns*", small_pages)
    pg.route("**/v1/experiments/*/reports*", small_pages)
    pg.route(f"**/v1/experiments/{eid}/summary", first_tick_only)
    pg.goto(f"{world.url}/#/e/{eid}")
    wait_js(pg, "document.querySelectorAll('#plot-history .scatterlayer .trace:nth-child(1) path.point').length === 30")
    reveal(pg, "#plot-curves", "#plot-curves .scatterlayer .trace")
    lines = "[...document.querySelectorAll('#plot-curves .scatterlayer .trace path.js-line')].map(p => (p.getAttribute('d') || '').split('L').length)"
    assert pg.evaluate(lines) == [10, 10, 10]  # every report, read in one tick
    assert len(ticks) <= 2, "one tick (and at most the next, waiting) read all of it"


def test_a_gp_experiment_ranks_importance_by_fitted_length_scales_and_says_so(world: World, page: Any) -> None:
    from tauopt.strategies import get

    if not get("gp").available():
        pytest.skip("the gp extra (torch, gpytorch) is not installed")
    import numpy as np

    params = [{"name": "noise", "type": "double", "bounds": [0.0, 1.0]}, {"name": "x", "type": "double", "bounds": [0.0, 1.0]},
              {"name": "other", "type": "double", "bounds": [0.0, 1.0]}]  # fmt: skip
    r = world.http.post("/v1/experiments", json={"name": "gp-importance", "parameters": params, "metric": METRIC, "strategy": "gp"})
    eid = r.json()["id"]
    rng = np.random.default_rng(5)
    for _ in range(30):
        a = {"noise": float(rng.random()), "x": float(rng.random()), "other": float(rng.random())}
        value = float(np.sin(6.0 * a["x"]) + 3.0 * a["x"] ** 2)  # only x matters
        assert world.http.post(f"/v1/experiments/{eid}/observations", json={"assignments": a, "value": value}).status_code == 201
    sign_in(pg := page[0], world.url, world.token)
    pg.click(f'#exp-table tr[data-id="{eid}"] a')
    wait_js(pg, "(document.querySelector('#importance-note') || {}).textContent?.includes('method')", timeout_s=180)  # a GP fit in the daemon
    assert "method: gp_lengthscales" in pg.inner_text("#importance-note")
    assert pg.evaluate("document.querySelector('#plot-importance .xtitle').textContent") == "inverse length-scale (share of the sum)"
    # bars are drawn bottom-up, so the top bar (the most important) is the last label
    labels = pg.evaluate("[...document.querySelectorAll('#plot-importance .ytick text')].map(t => t.textContent)")
    assert labels[-1] == "x"


# -- the observations table; a history past the plots' limits ---------------------------


def test_the_observations_table_sorts_by_a_column_and_filters_rows(world: World, page: Any) -> None:
    pg, _ = page
    sign_in(pg, world.url, world.token)
    open_experiment(pg, world.search)
    reveal(pg, "#obs-table", "#obs-table tbody tr")
    obs = world.http.get(f"/v1/experiments/{world.search}/observations").json()
    values = sorted(o["value"] for o in obs if not o["failed"])
    first_value = "document.querySelector('#obs-table tbody tr td:nth-child(2)').textContent"
    pg.click("#obs-table th:nth-child(2)")  # the metric, ascending: the best first, failed (no value) last
    wait_js(pg, "document.querySelector('#obs-table th:nth-child(2)').classList.contains('sorted')")
    assert float(pg.evaluate(first_value)) == pytest.approx(values[0], rel=1e-3)
    pg.click("#obs-table th:nth-child(2)")  # again: descending
    wait_js(pg, "document.querySelector('#obs-table th:nth-child(2)').classList.contains('desc')")
    assert float(pg.evaluate(first_value)) == pytest.approx(values[-1], rel=1e-3)
    failed = [o for o in obs if o["failed"]]
    pg.fill("#obs-filter", "failed")
    wait_js(pg, f"document.querySelectorAll('#obs-table tbody tr').length === {len(failed)}")
    assert pg.evaluate("[...document.querySelectorAll('#obs-table tbody tr')].every(r => r.classList.contains('failed'))")
    assert pg.inner_text("#obs-more") == f"{len(failed)} rows"


def test_a_history_past_the_plots_limits_is_thinned_and_the_chart_says_so(world: World, page: Any) -> None:
    r = world.http.post("/v1/experiments", json={"name": "long-run", "parameters": PARAMS[:2], "metric": METRIC, "strategy": "random"})
    assert r.status_code == 201, r.text
    eid, n = r.json()["id"], 700
    for i in range(n):  # unsolicited observations: quicker than 700 asks
        a = {"learning_rate": 10 ** (-4 + 3 * ((i * 0.37) % 1.0)), "dropout": (i * 0.21) % 0.6}
        body: dict[str, Any] = {"assignments": a, "failed": True} if i % 50 == 7 else {"assignments": a, "value": 1 + ((i * 0.618) % 1.0)}
        assert world.http.post(f"/v1/experiments/{eid}/observations", json=body).status_code == 201
    failed = len([i for i in range(n) if i % 50 == 7])
    pg, _ = page
    sign_in(pg, world.url, world.token)
    pg.goto(f"{world.url}/#/e/{eid}")
    wait_js(pg, "document.querySelectorAll('#plot-history .scatterlayer .trace').length === 3")
    traces = "#plot-history .scatterlayer .trace"
    count = "(sel) => document.querySelectorAll(sel).length"
    assert pg.evaluate(count, f"{traces}:nth-child(1) path.point") == 600  # evenly thinned to its limit
    assert pg.evaluate(count, f"{traces}:nth-child(2) path.point") == failed  # under the failed marks' limit: all
    assert pg.inner_text("#history-note") == f"showing {600 + failed} of {n} points (evenly thinned)"
    reveal(pg, "#plot-slices", "#plot-slices .scatterlayer")
    assert "showing 400 of" in pg.inner_text("#slices-note")


def test_the_contour_follows_the_pair_chosen(world: World, page: Any) -> None:
    pg, _ = page
    sign_in(pg, world.url, world.token)
    open_experiment(pg, world.search)
    reveal(pg, "#plot-contour", "#plot-contour .contourlayer")
    assert pg.evaluate("document.querySelector('#plot-contour .xtitle').textContent") == "log10 learning_rate"
    pg.select_option("#pair-y", "layers")
    wait_js(pg, "document.querySelector('#plot-contour .ytitle').textContent === 'layers'")
    ok = [o for o in world.http.get(f"/v1/experiments/{world.search}/observations").json() if not o["failed"]]
    assert pg.evaluate("document.querySelectorAll('#plot-contour .scatterlayer .trace path.point').length") == len(ok)
    pg.select_option("#pair-y", "learning_rate")  # the same parameter twice: no contour, and the chart says why
    wait_js(pg, "document.querySelector('#contour-note').textContent === 'choose two different parameters'")
    assert pg.evaluate("document.querySelector('#plot-contour .main-svg') === null")


def test_the_contour_is_a_surface_interpolated_from_the_points_and_says_so(world: World, page: Any) -> None:
    pg, _ = page
    sign_in(pg, world.url, world.token)
    open_experiment(pg, world.search)
    reveal(pg, "#plot-contour", "#plot-contour .contourlayer")
    z = pg.evaluate("document.getElementById('plot-contour').data[0].z.flat()")
    assert len(z) == 40 * 40 and all(isinstance(v, (int, float)) for v in z)  # every cell, not a sparse grid of means
    ok = [o["value"] for o in world.http.get(f"/v1/experiments/{world.search}/observations").json() if not o["failed"]]
    assert min(ok) <= min(z) and max(z) <= max(ok)  # a weighted mean of the observed values
    assert "val_loss, interpolated" in pg.evaluate("document.querySelector('#plot-contour .cbtitle').textContent")  # on the plot
    assert "interpolated from" in pg.inner_text("#contour-note")


def test_a_log_parameters_slice_has_a_log_axis_whose_tick_labels_do_not_overlap(world: World, page: Any) -> None:
    pg, _ = page
    sign_in(pg, world.url, world.token)
    open_experiment(pg, world.search)
    reveal(pg, "#plot-slices", "#plot-slices .main-svg")
    assert pg.evaluate("document.getElementById('plot-slices')._fullLayout.xaxis.type") == "log"  # learning_rate's panel
    ticks = pg.evaluate(
        "[...document.querySelectorAll('#plot-slices .xaxislayer-above .xtick text')]"
        ".map(t => { const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.right]; }).sort((a, b) => a[1] - b[1])"
    )
    texts = [t[0] for t in ticks]
    assert len(texts) >= 3 and set(texts) <= {"1e-4", "0.001", "0.01", "0.1"}, texts  # decades, written out
    assert all(a[2] + 2 <= b[1] for a, b in zip(ticks, ticks[1:])), ticks  # apart, not overlapping


CHARTS = {  # every chart of a one-objective experiment without reports, and what it draws
    "plot-history": ".main-svg", "plot-importance": ".main-svg", "plot-timeline": ".main-svg",
    "plot-parcoords": ".pc-axis", "plot-slices": ".main-svg", "plot-contour": ".main-svg",
}  # fmt: skip
TITLES = ["Optimization history", "Parameter importance", "Workers", "Parallel coordinates", "Slices", "Contour", "Observations"]


def test_the_first_paint_shows_every_chart_and_each_draws_once_scrolled_to(world: World, page: Any) -> None:
    pg, _ = page
    sign_in(pg, world.url, world.token)
    held: list[Any] = []

    def hold(route: Any) -> None:  # the page's first paint, before any data
        if held:
            route.continue_()
        else:
            held.append(route)

    pg.route("**/v1/experiments/*/summary", hold)
    pg.click(f'#exp-table tr[data-id="{world.search}"] a')
    pg.wait_for_selector("#plot-contour", state="attached")
    shown = "[...document.querySelectorAll('.experiment .card:not(.hidden) .card-head h2')].map(h => h.textContent)"
    assert pg.evaluate(shown) == TITLES
    placeholder = "(id) => getComputedStyle(document.getElementById(id), '::before').content"
    height = "(id) => document.getElementById(id).getBoundingClientRect().height"
    for chart in CHARTS:
        assert "scrolled into view" in pg.evaluate(placeholder, chart) and pg.evaluate(height, chart) > 200, chart
    wait_js(pg, "1", timeout_s=1)
    assert held, "the page asked for the summary"
    for route in held:
        route.continue_()
    pg.unroute("**/v1/experiments/*/summary")
    pg.wait_for_selector("#plot-history .main-svg", state="attached")
    for chart, drawn in CHARTS.items():
        reveal(pg, f"#{chart}", f"#{chart} {drawn}")
        assert pg.evaluate(placeholder, chart) == "none", chart  # drawn: the placeholder is gone
    reveal(pg, "#obs-table", "#obs-table tbody tr")


def test_a_live_tick_redraws_what_is_in_view_and_a_plot_out_of_view_once_scrolled_back(world: World, page: Any) -> None:
    r = world.http.post("/v1/experiments", json={"name": "watched", "parameters": PARAMS[:2], "metric": METRIC, "strategy": "random"})
    assert r.status_code == 201, r.text
    eid = r.json()["id"]

    def post(i: int) -> None:
        a = {"learning_rate": 10 ** (-4 + 3 * ((i * 0.37) % 1.0)), "dropout": (i * 0.21) % 0.6}
        assert world.http.post(f"/v1/experiments/{eid}/observations", json={"assignments": a, "value": 1 + i / 100}).status_code == 201

    for i in range(30):
        post(i)
    pg, _ = page
    sign_in(pg, world.url, world.token)
    pg.goto(f"{world.url}/#/e/{eid}")
    history = "document.querySelectorAll('#plot-history .scatterlayer .trace:nth-child(1) path.point').length"
    slices = "document.querySelectorAll('#plot-slices .scatterlayer path.point').length"  # both panels
    wait_js(pg, f"{history} === 30")
    reveal(pg, "#plot-slices", "#plot-slices .scatterlayer")
    assert pg.evaluate(slices) == 60
    pg.evaluate("window.scrollTo(0, 0)")
    drawn = "performance.getEntriesByName('tauopt:slices').length"
    times_drawn = pg.evaluate(drawn)
    for i in range(30, 35):
        post(i)
    wait_js(pg, f"{history} === 35")  # a tick arrived and redrew the history, in view
    pg.wait_for_timeout(2500)  # and another tick, for good measure
    assert pg.evaluate(slices) == 60 and pg.evaluate(drawn) == times_drawn  # out of view: left stale
    pg.locator("#plot-slices").scroll_into_view_if_needed()
    wait_js(pg, f"{slices} === 70")  # back in view: redrawn with the new observations


def test_the_workers_view_counts_and_colours_an_expired_suggestion(world: World, page: Any) -> None:
    r = world.http.post("/v1/experiments", json={"name": "expiring", "parameters": PARAMS[:2], "metric": METRIC, "suggestion_ttl_s": 1})
    assert r.status_code == 201, r.text
    eid = r.json()["id"]
    assert world.http.post(f"/v1/experiments/{eid}/suggestions", json={"tag": "node-dead/rank-0"}).status_code == 201
    time.sleep(1.5)  # past the TTL: the next ask expires it
    assert world.http.post(f"/v1/experiments/{eid}/suggestions", json={"tag": "node-live/rank-0"}).status_code == 201
    tags = {t["tag"]: t for t in world.http.get(f"/v1/experiments/{eid}/workers").json()["tags"]}
    assert tags["node-dead/rank-0"]["expired"] == 1
    pg, _ = page
    sign_in(pg, world.url, world.token)
    pg.goto(f"{world.url}/#/e/{eid}")
    wait_js(pg, "document.querySelectorAll('#tag-table tbody tr').length === 2")
    rows = pg.evaluate("[...document.querySelectorAll('#tag-table tbody tr')].map(r => [...r.cells].map(c => c.textContent))")
    dead = next(r for r in rows if r[0] == "node-dead/rank-0")
    assert dead[5] == "1"  # Tag, Open, Observed, Failed, Closed, Expired
    assert pg.evaluate("document.querySelector('#tag-table tbody tr td.bad') !== null")  # expiries shown as bad
    reveal(pg, "#plot-timeline", "#plot-timeline .scatterlayer .trace")
    legend = "[...document.querySelectorAll('#plot-timeline .legendtext')].map(t => t.textContent)"
    assert pg.evaluate(legend) == ["open", "expired"]
    expired_colour = "document.querySelector('#plot-timeline .scatterlayer .trace:nth-child(2) path.js-line').style.stroke"
    assert pg.evaluate(expired_colour) == "rgb(220, 38, 38)"  # red, as failures


def test_a_long_history_opens_on_the_daemons_sample_and_the_plot_says_so(world: World, page: Any) -> None:
    # the page's sample cut to 50 here, so the module's 200 observations stand for a long history
    cols = world.http.get(f"/v1/experiments/{world.search}/observations/columns").json()
    total, limit = cols["count"], 50
    sample = world.http.get(f"/v1/experiments/{world.search}/observations/sample?limit={limit}").json()
    assert sample["count"] == limit and sample["total"] == total
    trace, best = [], None  # the best-so-far line from every observation: the sample's is exact
    for i, (v, failed) in enumerate(zip(cols["value"], cols["failed"])):
        if not failed and v is not None and (best is None or v < best):
            best = v
            trace.append(i + 1)
    assert sample["best_trace"]["position"] == trace
    assert cols["id"][trace[-1] - 1] in sample["id"] and sample["id"][-1] == cols["id"][-1]  # the best and the latest
    pg, _ = page
    sign_in(pg, world.url, world.token)
    reads: list[str] = []
    pg.on("request", lambda r: reads.append(r.url) if "/observations" in r.url else None)
    pg.route("**/v1/experiments/*/observations/sample*", lambda route: route.continue_(url=route.request.url.replace("limit=2000", f"limit={limit}")))
    pg.goto(f"{world.url}/#/e/{world.search}")
    wait_js(pg, "document.querySelector('#history-note').textContent.includes('downsampled')")
    points = "document.querySelectorAll('#plot-history .scatterlayer .trace:nth-child(%d) path.point').length"
    shown = pg.evaluate(points % 1) + pg.evaluate(points % 2)
    assert shown == limit
    assert pg.inner_text("#history-note") == f"downsampled: {limit} of {total} shown (the best and the latest always)"
    # the first paint read the sample only; later ticks read only what came after its latest observation
    assert "/observations/sample?limit=" in reads[0]
    assert all(f"/observations/columns?after={cols['id'][-1]}" in u for u in reads[1:]), reads
    with pg.expect_download() as info:  # the page holds a sample; a download still has every observation
        pg.click("#download-json")
    import json

    assert json.loads(Path(info.value.path()).read_text()) == world.http.get(f"/v1/experiments/{world.search}/observations").json()
