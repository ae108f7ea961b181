"""The dashboard carries data, not code: names, categorical values and tags written as
HTML are shown as written on every chart (Plotly renders HTML in titles, labels,
hover text and ticks), and the CSV download neutralizes cells a spreadsheet would run
as formulas (OWASP: a leading ' on text starting with = + - @ tab or CR; numbers stay
numbers). In a real headless Chromium against a real `tauopt serve` process."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from browser_support import browser_skip_reason

if browser_skip_reason() is not None:
    pytest.skip(browser_skip_reason() or "", allow_module_level=True)

from test_dashboard_browser import browser, page, reveal, sign_in, wait_js  # noqa: E402,F401 - fixtures shared
from test_http_daemon import Daemon, token_of  # noqa: E402

LINK = '<a href="https://evil.example/x">click</a>'
FORMULA = "=cmd|' /C calc'!A0"
VALUES = ['+HYPERLINK("http://evil.example","x")', "@SUM(1+1)", "-2+3+cmd|' /C calc'!A0", "<b>bold</b>"]
PARAMS = [
    {"name": LINK, "type": "double", "bounds": [0.0, 1.0]},
    {"name": FORMULA, "type": "double", "bounds": [-5.0, 5.0]},
    {"name": "kind<br>", "type": "categorical", "values": VALUES},
]
METRICS = [{"name": '<i>acc</i><a href="https://evil.example/m">m</a>', "objective": "maximize"}, {"name": "lat<br>ms", "objective": "minimize"}]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    daemon = Daemon(tmp_path_factory.mktemp("hostile") / "tauopt.db")
    try:
        token = token_of(daemon)
        with httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
            r = http.post("/v1/experiments", json={"name": LINK, "parameters": PARAMS, "metrics": METRICS, "strategy": "random",
                                                   "parallel_bandwidth": 4})  # fmt: skip
            assert r.status_code == 201, r.text
            eid = r.json()["id"]
            for i in range(24):
                s = http.post(f"/v1/experiments/{eid}/suggestions", json={"tag": "<i>node</i>" if i % 2 else LINK}).json()
                values = {METRICS[0]["name"]: -1.5 + (i % 7) / 3, METRICS[1]["name"]: (i * 5) % 11 - 3.25}
                r = http.post(f"/v1/experiments/{eid}/observations", json={"suggestion_id": s["id"], "values": values})
                assert r.status_code == 201, r.text
        yield daemon.url, token, eid
    finally:
        if daemon.proc.poll() is None:
            daemon.stop()


def test_html_in_names_values_and_tags_is_shown_as_text_and_the_csv_runs_no_formula(
    hostile: tuple[str, str, str], page: Any, tmp_path: Path
) -> None:
    url, token, eid = hostile
    pg, _ = page
    sign_in(pg, url, token)
    pg.click(f'#exp-table tr[data-id="{eid}"] a')
    pg.wait_for_selector("#plot-history .main-svg", state="attached")
    for plot in ("#plot-history", "#plot-importance", "#plot-pareto", "#plot-slices", "#plot-timeline"):
        reveal(pg, plot, f"{plot} .main-svg")
    wait_js(pg, "document.querySelector('#plot-importance .ytick') !== null")
    plots = "[...document.querySelectorAll('.js-plotly-plot')]"
    # no link, line break or styling made from user text: Plotly drew none of them
    assert pg.evaluate(f"{plots}.flatMap(p => [...p.querySelectorAll('a, tspan[style*=\"bold\"], tspan[style*=\"italic\"]')]).length") == 0
    text = pg.evaluate(f"{plots}.map(p => p.textContent).join('\\n')")
    assert LINK in text and "kind<br>" in text and "<b>bold</b>" in text  # shown as written: axis titles, ticks
    assert "<i>node</i>" in pg.evaluate("document.querySelector('#plot-timeline').textContent")
    with pg.expect_download() as info:
        pg.click("#download-csv")
    raw = Path(info.value.path()).read_text()
    header, *rows = list(csv.reader(io.StringIO(raw)))
    assert f"'{FORMULA}" in header and LINK in header
    kinds = {r[header.index("kind<br>")] for r in rows}
    assert kinds <= {"'" + VALUES[0], "'" + VALUES[1], "'" + VALUES[2], VALUES[3]} and len(kinds) > 1
    lat = [r[header.index(f"metric:{METRICS[1]['name']}")] for r in rows]
    assert any(v.startswith("-") for v in lat) and all(float(v) == float(v) for v in lat)  # negative numbers stay numbers
    for cell in [c for r in [header, *rows] for c in r]:
        assert not cell.startswith(("=", "+", "@", "\t", "\r")) and not (cell.startswith("-") and not _number(cell)), cell


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
