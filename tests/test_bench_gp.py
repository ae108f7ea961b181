"""The GP row's yardstick in the contention benchmark (issue 16's GP target):
one fit's time measured on the row's own history at the asks' n, the ask
latencies over it, and the report line beside Optuna's GPSampler row."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from _bench_common import METRIC, PARAMETERS, objective  # noqa: E402
from _bench_gp import gp_lines, gp_yardstick  # noqa: E402
from _bench_optuna import _sampler  # noqa: E402

from tauopt.models import Metric, Observation  # noqa: E402
from tauopt.space import Space  # noqa: E402
from tauopt.schema import parse_metric  # noqa: E402


def _history(n: int) -> list[Observation]:
    space, metric = Space.parse(PARAMETERS), parse_metric(METRIC)
    assert metric.name
    rng = np.random.default_rng(0)
    points = [space.from_unit(u) for u in rng.random((n, len(PARAMETERS)))]
    return [Observation(str(i), "e", None, a, objective(a)) for i, a in enumerate(points)]


def test_the_yardstick_times_one_fit_at_the_asks_n_and_divides_each_ask_by_it() -> None:
    history = _history(24)
    asks = [0.5] * 10  # seconds: every ask took half a second
    out = gp_yardstick(history, 7, asks, repeats=1)
    fit = out["one_fit_ms"]
    assert fit["n"] == [7, 12, 18, 24] and fit["n_mid"] == 15
    assert all(ms > 0 for ms in fit["p50_ms"])
    mid = float(np.interp(15, fit["n"], fit["p50_ms"]))
    assert out["ask_p95_over_one_fit"] == round(500.0 / mid, 2)
    slowest_fit = max(fit["p50_ms"][:2])  # the asks' n run from 7 to 16: the first two lengths bound them
    assert out["ask_over_one_fit_p95"] >= round(500.0 / slowest_fit, 2) - 0.01
    # the yardstick before 2026-12-02 (warm from a fit on the same data: 0 fit iterations) is reported beside it
    no_fit = out["proposal_without_fit_ms"]
    assert len(no_fit["p50_ms"]) == 4 and all(ms > 0 for ms in no_fit["p50_ms"])
    assert out["ask_p95_over_proposal_without_fit"] == round(500.0 / float(np.interp(15, fit["n"], no_fit["p50_ms"])), 2)


def test_the_report_puts_the_gp_row_beside_optunas_gpsampler() -> None:
    row = {
        "name": "inproc/memory/gp/w8/e1", "workers": 8, "pairs_per_s": 12.0, "ask_ms": {"p95": 900.0},
        "one_fit_ms": {"n": [7, 50], "p50_ms": [200.0, 300.0], "n_mid": 28, "at_n_mid": 250.0},
        "ask_p95_over_one_fit": 3.6, "ask_over_one_fit_p95": 3.1,
    }  # fmt: skip
    optuna = {"name": "optuna/memory/gp/threads8", "workers": 8, "pairs_per_s": 1.9, "ask_ms": {"p95": 8000.0}}
    text = gp_lines([row, optuna])
    assert "ask p95 900 ms = 3.6x one fit at n=28" in text and "per ask at its own n, p95: 3.1x" in text
    assert "12.0 pairs/s; Optuna GPSampler 8 threads 1.9 pairs/s" in text


def test_the_optuna_side_of_the_gp_row_samples_with_gpsampler() -> None:
    import optuna

    assert isinstance(_sampler(optuna, "gp"), optuna.samplers.GPSampler)
