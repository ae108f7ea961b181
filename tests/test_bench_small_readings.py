"""benchmarks/small_readings.py counts the small-budget goal's readings as the docs
quote them: per run, pooled over runs, and paired by seed against TPE."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import small_readings  # noqa: E402


def _report(path: Path, method: str, seeds: list[int], at5: list[float], at6: list[float]) -> str:
    row = {"function": "levy", "d": 10, "workers": 4, "method": method, "seeds": seeds, "per_seed@5d": at5, "per_seed@6d": at6, "seconds": 1.0}
    path.write_text(json.dumps({"rows": [row]}))
    return str(path)


def test_readings_per_run_pooled_and_paired_by_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tpe = _report(tmp_path / "tpe.json", "optuna_tpe", [0, 1, 2, 3], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0])
    gps = _report(tmp_path / "gps.json", "optuna_gp", [0, 1, 2, 3], [0.5, 0.5, 0.5, 0.5], [2.0, 2.0, 2.0, 2.0])
    # run a: seeds 0-1 and 2-3 in two reports; run b: the same seeds again
    a = [_report(tmp_path / "a1.json", "engine@1s", [0, 1], [0.9, 0.9], [0.9, 0.8]),
         _report(tmp_path / "a2.json", "engine@1s", [2, 3], [0.9, 0.9], [0.9, 0.8])]
    b = [_report(tmp_path / "b.json", "engine@1s", [0, 1, 2, 3], [1.3, 1.3, 1.3, 1.3], [0.7, 0.7, 0.7, 0.7])]
    assert small_readings.main(["--tpe", tpe, "--gpsampler", gps, "--run", "a", *a, "--run", "b", *b]) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)
    at5, at6 = sorted(report["readings"], key=lambda r: r["budget"])
    assert at5["gp"] == {"a": 0.9, "b": 1.3, "pooled": pytest.approx(1.1)}  # the pooled median of eight values
    assert at6["gp"]["pooled"] == pytest.approx(0.75)
    # a at or below TPE at both budgets, b at 6d only; the pooled median 1.1 is above TPE's 1.0 at 5d
    assert report["counts"] == {"a": {"tpe": 2, "gpsampler": 1}, "b": {"tpe": 1, "gpsampler": 1}, "pooled": {"tpe": 1, "gpsampler": 1}}
    # paired: each seed's mean over the runs minus TPE's value on that seed
    assert at5["paired_mean"] == pytest.approx(0.1) and at5["seeds_at_or_below"] == 0
    # seeds' means at 6d: 0.8, 0.75, 0.8, 0.75 against TPE's 1.0
    assert at6["paired_mean"] == pytest.approx(-0.225) and at6["paired_seeds"] == 4
    assert at6["paired_se"] == pytest.approx(statistics.stdev([-0.2, -0.25, -0.2, -0.25]) / 2)
    assert "pooled: at or below TPE in 1 of 2, GPSampler in 1 of 2" in out.err


def test_a_seed_twice_in_one_run_is_refused_and_one_seed_pairs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tpe = _report(tmp_path / "tpe.json", "optuna_tpe", [0], [1.0], [1.0])
    a = _report(tmp_path / "a.json", "engine@0s", [0], [0.9], [0.9])
    with pytest.raises(SystemExit, match="disjoint seeds"):  # quality.py --merge's refusal
        small_readings.main(["--tpe", tpe, "--run", "a", a, a])
    b = _report(tmp_path / "b.json", "engine@0s/ahead1", [0], [0.8], [0.8])
    with pytest.raises(SystemExit, match="two methods"):  # two policies' rows of one cell in one run
        small_readings.main(["--tpe", tpe, "--run", "a", a, b])
    with pytest.raises(SystemExit):  # two runs under one name would hide one of them
        small_readings.main(["--tpe", tpe, "--run", "a", a, "--run", "a", a])
    capsys.readouterr()
    assert small_readings.main(["--tpe", tpe, "--run", "a", a]) == 0
    one = json.loads(capsys.readouterr().out)["readings"][0]
    assert one["paired_mean"] is None and one["paired_se"] is None and one["gp"] == {"a": 0.9, "pooled": 0.9}
