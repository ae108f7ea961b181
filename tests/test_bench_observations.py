"""Smoke test of the history-size benchmark (benchmarks/observations_scale.py): its
quick mode seeds two small histories, rebuilds the actor from the store and prints
one JSON document with every curve's figures. Speed is never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quick_observations_scale_run_prints_a_row_per_size_with_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "obs.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "observations_scale.py"), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc == json.loads(out.read_text())
    assert doc["benchmark"] == "observations_scale" and doc["sizes"] == [100, 400]
    rows = doc["rows"]
    assert [r["observations"] for r in rows] == [100, 400]
    for r in rows:
        assert r["sqlite_bytes_per_observation"] > 0 and r["load_s"] >= 0 and r["list_observations_s"] >= 0, r
        assert "rss_bytes_per_observation" in r, r
        for strategy in ("random", "sobol"):
            t = r[strategy]
            assert 0 < t["ask_p50_ms"] <= t["ask_p99_ms"] and 0 < t["observe_p50_ms"] <= t["observe_p99_ms"], t
    assert rows[1]["sqlite_bytes"] > rows[0]["sqlite_bytes"]
