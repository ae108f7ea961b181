"""The documentation site builds with `mkdocs build --strict` (no broken link,
anchor or reference), its API reference is generated from the code's docstrings,
and its error table from the catalogue every door renders."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tauopt.errors import CATALOGUE
from tauopt.operations import OPERATIONS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (make venv installs it)")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_the_error_page_lists_every_error_type_of_the_catalogue(site: Path) -> None:
    page = (site / "reference" / "errors" / "index.html").read_text()
    for error_type, kind in CATALOGUE.items():
        assert re.search(rf"<code>{error_type}</code></td>\s*<td>{kind.http_status}</td>", page), error_type


def test_the_client_reference_documents_every_operation_of_both_clients(site: Path) -> None:
    page = (site / "reference" / "clients" / "index.html").read_text()
    for client in ("Client", "AsyncClient"):
        for op in OPERATIONS:
            assert f'id="tauopt.{client}.{op}"' in page, f"{client}.{op} is missing from the reference"


def test_the_benchmarks_page_shows_the_standing_table(site: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import standing

    page = (site / "benchmarks" / "index.html").read_text()
    for t in standing.TARGETS:
        assert t.current.replace("&", "&amp;") in page, t.goal
