"""benchmarks/trial_lifecycle.py runs: a tiny run prints one JSON row per door."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "trial_lifecycle.py"


def test_a_tiny_trial_lifecycle_run_prints_a_row_per_door() -> None:
    proc = subprocess.run([sys.executable, str(BENCH), "--trials", "5"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["door"], r["trials"]) for r in rows] == [("optuna", 5), ("kerastuner", 5)]
    assert all(r["cpu_us_per_trial"] > 0 for r in rows)
