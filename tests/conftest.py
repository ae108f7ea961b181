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


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """torch and BLAS at one thread, as in the pool's workers, for tests that fit GPs in
    this process: on a shared 2-core machine two torch threads are 10x slower, and two
    OpenBLAS threads waking for L-BFGS-B's tiny vectors cost over half of every fit's CPU."""
    import scipy.optimize  # noqa: F401  (loads the BLAS a fit uses, so the limit reaches it)

    from tauopt.compute._workers import blas_pinned, torch_pinned

    with torch_pinned(), blas_pinned():
        yield


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


# `make test` runs on pytest-xdist (`--dist loadscope --no-loadscope-reorder`) with the scopes
# below: a worker takes one group of tests at a time and runs it whole. A test's group is its
# file (so a module's shared daemon, pool or cluster starts once), or one of PARTS: a part of a
# long file, run beside its other parts. The groups that take longest go first (LONGEST_FIRST),
# so no worker ends the run alone on a long one (the groups of 10 s or more in a `make test`
# run's --junitxml, longest first); pytest-xdist's own order, by number of tests,
# put the few-test long files last. (Its `xdist_group` marks are not used: pytest-xdist 3.8 sets
# the mark's group on the item's `_nodeid`, which pytest 9 no longer reads.)
PARTS = {  # nodeid prefix -> group
    "tests/test_kerastuner_interop.py::test_real_hyperband_workers": "kerastuner_interop:hyperband",
    "tests/test_kerastuner_interop.py::test_two_real_workers_with_an_objective_list": "kerastuner_interop:two_objectives",
    "tests/test_kerastuner_interop.py::test_consecutive_failures": "kerastuner_interop:failures",
    "tests/test_kerastuner_interop.py::test_invalid_trials": "kerastuner_interop:failures",
    "tests/test_kerastuner_interop.py::test_two_real_workers_run_ten_trials": "kerastuner_interop:workers",
    "tests/test_kerastuner_interop.py::test_a_late_joining_worker": "kerastuner_interop:workers",
    "tests/test_kerastuner_interop.py::test_a_tiny_real_keras_model": "kerastuner_interop:one_worker",
    "tests/test_kerastuner_interop.py::test_a_worker_killed_mid_trial": "kerastuner_interop:one_worker",
    "tests/test_http_fuzz.py::test_the_fuzzing_phase_alone": "http_fuzz:fuzzing_phase_alone",
    "tests/test_http_schema.py::test_every_operation_answers_per_its_schema_and_never_5xx[0]": "http_schema:0",
    "tests/test_http_schema.py::test_every_operation_answers_per_its_schema_and_never_5xx[1]": "http_schema:1",
}
LONGEST_FIRST = (
    "tests/test_dashboard_browser.py",
    "tests/test_typecheck.py",
    "tests/test_http_fuzz.py",
    "tests/test_wheel.py",
    "tests/test_readme_programs.py",
    "tests/test_gp.py",
    "kerastuner_interop:hyperband",
    "tests/test_integration_ray.py",
    "tests/test_gp_pieces.py",
    "http_fuzz:fuzzing_phase_alone",
    "tests/test_serve_failover.py",
    "kerastuner_interop:two_objectives",
    "tests/test_http_daemon.py",
    "tests/test_http_ops.py",
    "tests/test_compute_dask.py",
    "tests/test_quality_suite.py",
    "tests/test_http_capacity.py",
    "tests/test_cli_experiments.py",
    "tests/test_http_heavy_reads.py",
    "http_schema:1",
    "kerastuner_interop:failures",
    "tests/test_pool_prewarm.py",
    "tests/test_bench_smoke.py",
    "http_schema:0",
    "tests/test_hyperband_schedule.py",
    "tests/test_engine_contention.py",
    "tests/test_store_sqlite.py",
    "tests/test_optuna_suite.py",
    "tests/test_pool.py",
    "tests/test_store_postgresql.py",
    "tests/test_sobol.py",
    "tests/test_optuna_interop.py",
    "tests/test_store_lock.py",
    "tests/test_user_types.py",
    "tests/test_http_long_poll.py",
    "kerastuner_interop:workers",
    "kerastuner_interop:one_worker",
)


def group_of(nodeid: str) -> str:
    for prefix, group in PARTS.items():
        if nodeid.startswith(prefix):
            return group
    return nodeid.split("::")[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))  # stable: a group's own order is kept


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return Groups(config, log)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """On a machine without Chromium, say in one line which tests were skipped and how to enable them."""
    from browser_support import browser_skip_reason

    reason = browser_skip_reason()
    if reason is not None:
        terminalreporter.write_line(reason, yellow=True)
