"""Optuna's own storage test suite passes against the Optuna door (tests/optuna_suite.py).

It needs optuna 5.0.0's sdist in the suite's cache (`make test` fetches it first, with
`python tests/optuna_suite.py --fetch-only`; tests reach no network): skipped without it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from optuna_suite import DEFAULT_CACHE, OPTUNA, suite_dir

pytest.importorskip("optuna")


@pytest.mark.slow
def test_optunas_storage_tests_pass_against_the_door() -> None:
    if suite_dir(DEFAULT_CACHE, download=False) is None:
        pytest.skip(f"optuna {OPTUNA}'s sdist is not cached in {DEFAULT_CACHE}: run `python tests/optuna_suite.py` once")
    r = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "optuna_suite.py"), "--no-download", "-p", "no:randomly"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " failed" not in r.stdout and " passed" in r.stdout
