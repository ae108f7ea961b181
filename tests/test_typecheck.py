"""The typed API (issue 20): mypy over examples/ and the whole package passes, so
IDE completion and type checkers see real signatures; the package ships py.typed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_ships_py_typed() -> None:
    assert (ROOT / "tauopt" / "py.typed").is_file()
    assert '"tauopt" = ["py.typed"]' in (ROOT / "pyproject.toml").read_text()


@pytest.mark.slow
def test_mypy_passes_over_the_examples_and_the_package(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    r = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache"), "--no-error-summary"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
