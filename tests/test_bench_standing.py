"""The table of where each benchmark target stands has one source,
benchmarks/standing.py: BENCHMARKS.md carries the same text, the documentation's
benchmarks page is rendered from it (tests/test_docs_site.py) and `make bench`
prints it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import standing  # noqa: E402


def test_benchmarks_md_carries_the_table_standing_renders() -> None:
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert standing.benchmarks_md_block(text) == standing.block(), (
        "BENCHMARKS.md's table differs from benchmarks/standing.py: run `.venv/bin/python benchmarks/standing.py --write`"
    )


def test_every_row_links_a_section_of_benchmarks_md() -> None:
    headings = {standing.anchor(h) for h in re.findall(r"^## (.+)$", (ROOT / "BENCHMARKS.md").read_text(), re.M)}
    for row in (*standing.TARGETS, *standing.FIGURES):
        assert standing.anchor(row.section) in headings, row.section


def test_make_bench_prints_the_same_table() -> None:
    recipe = re.search(r"^bench:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe is not None and "benchmarks/standing.py" in recipe.group(1).splitlines()[-1]
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "standing.py")], capture_output=True, text=True, check=True)
    assert standing.table() in out.stdout
