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


# `make test` runs on pytest-xdist with `--dist loadgroup --no-loadscope-reorder`: a worker takes
# one group of tests at a time, in collection order. A test's group is its file (so a module's
# shared daemon, pool or cluster starts once) unless it is marked `pytest.mark.xdist_group(NAME)`,
# which splits a long file into parts run side by side. The groups that take longest go first
# (longest first), so no worker ends the run alone on a long one while the other idles.
LONGEST_FIRST = (
    "tests/test_kerastuner_interop.py::hyperband",
    "tests/test_http_fuzz.py",
    "tests/test_typecheck.py",
    "tests/test_wheel.py",
    "tests/test_kerastuner_interop.py::two_objectives",
    "tests/test_http_fuzz.py::fuzzing_phase_alone",
    "tests/test_gp.py",
    "tests/test_kerastuner_interop.py::failures",
    "tests/test_http_schema.py::0",
    "tests/test_http_schema.py::1",
    "tests/test_readme_programs.py",
    "tests/test_kerastuner_interop.py::workers",
    "tests/test_integration_ray.py",
    "tests/test_compute_dask.py",
    "tests/test_quality_suite.py",
    "tests/test_hyperband_schedule.py",
    "tests/test_serve_failover.py",
    "tests/test_kerastuner_interop.py::one_worker",
)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    group: dict[pytest.Item, str] = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is None:
            group[item] = item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(group[item]))
        else:
            group[item] = mark.args[0] if mark.args else mark.kwargs["name"]
    items.sort(key=lambda item: rank.get(group[item], len(rank)))  # stable: a group's own order is kept


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """On a machine without Chromium, say in one line which tests were skipped and how to enable them."""
    from browser_support import browser_skip_reason

    reason = browser_skip_reason()
    if reason is not None:
        terminalreporter.write_line(reason, yellow=True)
