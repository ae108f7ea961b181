"""benchmarks/optuna_door.py runs: a tiny cell per backend prints its JSON row, trial numbers intact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("optuna")

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "optuna_door.py"


@pytest.mark.slow
def test_a_tiny_optuna_door_run_prints_a_row_per_backend_with_numbers_intact() -> None:
    r = subprocess.run(
        [sys.executable, str(BENCH), "--workers", "2", "--samplers", "random", "--objective-ms", "0", "--trials", "3",
         "--backends", "optuna-inmemory,tauopt"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [row["backend"] for row in rows] == ["optuna-inmemory", "tauopt"]
    assert all(row["numbers_ok"] and row["trials"] == 6 and row["trials_per_s"] > 0 for row in rows)
