"""Smoke test of the bounded-model comparison (benchmarks/gp_bounded_model.py): its
quick mode runs both subset rules past the posterior's cap and prints one JSON
document with a row per function. Quality and speed are never asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gpytorch")

ROOT = Path(__file__).resolve().parent.parent


def test_quick_bounded_model_run_prints_both_rules_per_function(tmp_path: Path) -> None:
    out = tmp_path / "bounded.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gp_bounded_model.py"), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc == json.loads(out.read_text())
    (row,) = doc["rows"]
    for rule in ("subsample", "local"):
        assert len(row[rule]["log10_regret_per_seed"]) == 1 and row[rule]["fallbacks"] == 0, row
