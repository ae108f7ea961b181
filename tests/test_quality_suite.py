"""The quality suite's functions are the published ones and its transforms keep
the known optimum exact: the regret the README quotes is measured against the
right number. A tiny run of benchmarks/quality.py prints valid JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import _suite  # noqa: E402

CELLS = [(f, d) for f in _suite.FUNCTIONS for d in _suite.dims_for(f)]


def test_the_suite_has_at_least_ten_functions_in_dimensions_2_5_10() -> None:
    assert len(_suite.FUNCTIONS) >= 10
    assert {d for _, d in CELLS} >= {2, 5, 10}


@pytest.mark.parametrize(("name", "d"), CELLS)
def test_no_point_beats_the_known_optimum_and_rotated_kinds_reach_it_at_their_shift(name: str, d: int) -> None:
    p = _suite.make(name, d, seed=4)
    rng = np.random.default_rng(0)
    values = np.array([p.f(p.space.from_unit(u)) for u in rng.random((3000, d))])
    assert values.min() >= p.optimum - 1e-6 * max(1.0, abs(p.optimum))
    m = _suite.minimizer(p, 4)
    if m is not None:
        assert abs(p.f(m) - p.optimum) < 1e-9


def test_published_values_at_published_minimizers() -> None:
    # [SB]: Branin 0.397887 at (pi, 2.275); Hartmann-6 -3.32237 at its listed minimizer;
    # Michalewicz d=2 -1.8013 at (2.20, 1.57)
    assert abs(_suite._branin(np.array([(np.pi + 5) / 15, 2.275 / 15])) - 0.397887) < 1e-5
    h = np.array([0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573])
    assert abs(_suite._hartmann6(h) + 3.32237) < 1e-4
    assert abs(_suite._michalewicz(np.array([2.20, 1.57])) + 1.8013) < 1e-3
    assert abs(_suite._styblinski_tang(np.full(3, -2.903534)) + 39.16617 * 3) < 1e-3
    assert _suite._ellipsoid(np.array([0.0, 1.0])) == 1e6  # condition 10^6


def test_instances_differ_by_seed() -> None:
    a, b = _suite.make("sphere", 5, 0), _suite.make("sphere", 5, 1)
    assert _suite.minimizer(a, 0) != _suite.minimizer(b, 1)


def _quality(cwd: Path, *args: str, ok: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    """benchmarks/quality.py run in cwd; with ok, it must exit 0."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "quality.py"), *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd,
    )  # fmt: skip
    assert not ok or proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_a_tiny_quality_run_prints_json_with_every_method_and_the_comparison(tmp_path: Path) -> None:
    proc = _quality(tmp_path, "--functions", "sphere", "--dims", "2", "--seeds", "1", "--workers", "2",
                    "--budgets", "5", "--methods", "gp,sobol,optuna_tpe,optuna_tpe_nocl", "--engine", "0", "--engine-workers", "2",
                    "--policies", "adaptive,fresh", "--out", "")  # fmt: skip
    report = json.loads(proc.stdout)
    methods = {r["method"] for r in report["rows"]}
    assert methods == {"gp", "sobol", "optuna_tpe", "optuna_tpe_nocl", "engine@0s", "engine@0s/fresh"}
    engine = next(r for r in report["rows"] if r["method"] == "engine@0s")
    assert 0.0 <= engine["fallback_frac"] <= 1.0 and 0.0 <= engine["stale_frac"] <= 1.0
    assert set(report["gp_vs"]) == {"sobol", "optuna_tpe", "optuna_tpe_nocl", "engine@0s", "engine@0s/fresh"}
    assert all(t["lower_median"] <= t["at_or_below"] <= t["cells"] for t in report["gp_vs"].values())
    assert "| sphere | 2 | 2 |" in proc.stderr and "| gp vs | W |" in proc.stderr  # the README's tables

    # reports of runs split across processes merge into one; a method can be renamed
    (tmp_path / "a.json").write_text(proc.stdout)
    merged = _quality(tmp_path, "--merge", "a.json:sobol=sobol_old", timeout=120)
    assert {r["method"] for r in json.loads(merged.stdout)["rows"]} == methods - {"sobol"} | {"sobol_old"}
    assert "sobol_old" in merged.stderr


def test_runs_over_disjoint_seeds_merge_into_the_rows_of_one_run(tmp_path: Path) -> None:
    run = ("--functions", "sphere,ellipsoid", "--dims", "2", "--workers", "1", "--budgets", "3,5",
           "--methods", "sobol,optuna_tpe", "--engine", "", "--out", "")  # fmt: skip
    whole = json.loads(_quality(tmp_path, *run, "--first-seed", "0", "--seeds", "5").stdout)["rows"]
    parts = []
    for name, first, n in (("a.json", "0", "3"), ("b.json", "3", "2")):
        (tmp_path / name).write_text(_quality(tmp_path, *run, "--first-seed", first, "--seeds", n).stdout)
        parts.append({(r["function"], r["method"]): r for r in json.loads((tmp_path / name).read_text())["rows"]})
    joined = json.loads(_quality(tmp_path, "--merge", "a.json", "b.json").stdout)["rows"]
    assert len(joined) == len(whole) == 4
    for a, b in zip(sorted(whole, key=str), sorted(joined, key=str), strict=True):
        assert b["seeds"] == a["seeds"] == [0, 1, 2, 3, 4]
        for key in ("log10_regret@3d", "log10_regret@5d", "per_seed@3d", "per_seed@5d"):
            assert b[key] == a[key], (a["function"], a["method"], key)
        p, q = (part[(b["function"], b["method"])] for part in parts)
        assert b["suggest_s"] == pytest.approx((3 * p["suggest_s"] + 2 * q["suggest_s"]) / 5, abs=1e-5)  # a mean over seeds
    again = _quality(tmp_path, "--merge", "a.json", "a.json", ok=False, timeout=120)
    assert again.returncode != 0 and "disjoint seeds" in again.stderr  # a seed counted twice is refused
    # `file:method=` leaves that method of the file out: b's sobol rows are dropped, its TPE rows joined
    part = json.loads(_quality(tmp_path, "--merge", "a.json", "b.json:sobol=").stdout)["rows"]
    seeds = {r["function"] + "/" + r["method"]: r["seeds"] for r in part}
    assert seeds == {"sphere/sobol": [0, 1, 2], "sphere/optuna_tpe": [0, 1, 2, 3, 4],
                     "ellipsoid/sobol": [0, 1, 2], "ellipsoid/optuna_tpe": [0, 1, 2, 3, 4]}  # fmt: skip


def test_compute_ahead_policy_patches_the_engine_knobs_and_restores_them() -> None:
    from _quality_drivers import ahead_policy

    from tauopt.engine import _ahead

    before = (_ahead.MAX_AHEAD, _ahead.ComputeAhead.stale_bound(8), _ahead.PARK_LEFTOVERS, _ahead.ADAPT_AHEAD, _ahead.ROUND_SHARE)
    with ahead_policy("fresh"):
        assert _ahead.MAX_AHEAD == 1 and _ahead.ComputeAhead.stale_bound(8) == 0
    with ahead_policy("ahead1"):
        assert _ahead.MAX_AHEAD == 1 and _ahead.ComputeAhead.stale_bound(8) == before[1]
    with ahead_policy("demand"):
        assert _ahead.MAX_AHEAD == 1 and _ahead.PARK_LEFTOVERS is True and _ahead.ADAPT_AHEAD is False
    with ahead_policy("ahead8"):
        assert _ahead.MAX_AHEAD == 8 and _ahead.PARK_LEFTOVERS is False and _ahead.ADAPT_AHEAD is False
    with ahead_policy("adaptive_ahead"):
        assert _ahead.ADAPT_AHEAD is True and _ahead.ROUND_SHARE == 0
    assert (_ahead.MAX_AHEAD, _ahead.ComputeAhead.stale_bound(8), _ahead.PARK_LEFTOVERS, _ahead.ADAPT_AHEAD, _ahead.ROUND_SHARE) == before


def test_the_simulated_clock_skips_evaluation_time_the_engine_does_not_use() -> None:
    """Four 30 s evaluations on 2 workers (all from the Sobol design: no job runs)
    take 60 s on the engine's clock and almost none of the test's."""
    import time

    import anyio
    from _quality_drivers import SimClock, run_engine

    from tauopt import AsyncClient

    clock = SimClock()

    async def go():
        async with AsyncClient(driver="local", clock=clock) as client:
            return await run_engine(client, _suite.make("sphere", 2, 0), 4, 2, 0, 30.0, clock)

    t0 = time.monotonic()
    run = anyio.run(go)
    assert len(run.values) == 4
    assert clock.skipped >= 60.0 - 1.0 and time.monotonic() - t0 < 30.0
