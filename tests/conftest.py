"""Shared fixtures. Async tests use anyio's pytest plugin (`@pytest.mark.anyio`);
the default backend is asyncio, and engine tests that must hold on trio too
parametrize `anyio_backend` themselves."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def python() -> str:
    """The interpreter running the tests (the project's venv), for child processes."""
    return sys.executable


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster for the whole run (tests/postgres_support.py),
    started by the first test that needs it; skips where the server binaries are absent."""
    from postgres_support import missing_reason, start_cluster

    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_url(pg_cluster: Any) -> str:
    """The URL of an empty tauopt database of its own on the test cluster (a new schema,
    chosen by the URL's search_path: cheaper than a database)."""
    return pg_cluster.url(search_path=pg_cluster.new_schema())


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """On a machine without Chromium, say in one line which tests were skipped and how to enable them."""
    from browser_support import browser_skip_reason

    reason = browser_skip_reason()
    if reason is not None:
        terminalreporter.write_line(reason, yellow=True)
