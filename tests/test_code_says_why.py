"""Code says why, not when: no comment or docstring in the package narrates the
history of its making (issue numbers, rounds, dated measurements, branches);
that story lives in commit messages and the benchmarks page."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tauopt"
SOURCES = ("*.py", "*.js", "*.html", "*.css")
HISTORY = re.compile(
    r"\b(?:issue|round|rounds|PR)\s*#?\d+"  # "issue 17", "round 3", "PR #12"
    r"|\b(?:measured|benchmarked|as of|in)\s+(?:19|20)\d\d-[01]\d-[0-3]\d"  # a dated measurement
    r"|\bbranch\s+issue-\d+",
    re.IGNORECASE,
)


def test_no_history_in_the_package() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
        for pattern in SOURCES
        for path in sorted(PACKAGE.rglob(pattern))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert not found, "say why, not when (the story goes in the commit message):\n" + "\n".join(found)


def test_the_pattern_finds_what_it_is_for() -> None:
    for narrative in ("# issue 17's sixth round", "kept since round 3", "(measured 2026-11-02: 3.1 ms)", "PR #12"):
        assert HISTORY.search(narrative), narrative
    for fine in ('"2024-01-31 12:00:00.000000" is a datetime', "round(x, 3)", "rounds to 3 digits"):
        assert not HISTORY.search(fine), fine
