"""Optuna's own storage tests, run against the Optuna door of a real `tauopt serve`.

    python tests/optuna_suite.py [--cache DIR] [--no-download | --fetch-only] [PYTEST ARGS...]

Takes optuna==5.0.0's sdist (the pinned Optuna; `pip download` into the cache dir,
default ~/.cache/tauopt/optuna-suite, once; never copied into this repository) and
runs from its `tests/storages_tests` the files that test any storage through
`optuna.testing.storages.StorageSupplier`: test_storages.py (Optuna's
`StorageTestCase`, every BaseStorage method), test_grpc.py and test_callbacks.py.
Every storage those tests make is a GrpcStorageProxy to one `tauopt serve
--optuna-port` started here, emptied of studies before each (the tests expect a
fresh storage). Exit status: pytest's.

Not applicable, and not run:
- rdb_tests/, journal_tests/, test_cached_storage.py, test_with_server.py: they test
  Optuna's own RDB, journal and cached backends (and their files and servers).
- test_heartbeat.py: parametrized over heartbeat storages only (RDB); GrpcStorageProxy
  is no heartbeat storage in Optuna 5.0, with any server.
- The one StorageTestCase test Optuna itself skips for GrpcStorageProxy
  (test_get_all_trials_params_order: the proxy's map<> loses the order).
- test_storages.py::test_get_trials_included_trial_ids and ::test_get_trials_trial_id_greater_than:
  they assert the storage is an RDBStorage and call its private `_get_trials` (the same
  incremental fetch is tested through the door in tests/test_optuna_door.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import warnings
from pathlib import Path
from typing import Any

OPTUNA = "5.0.0"
FILES = ("test_storages.py", "test_grpc.py", "test_callbacks.py")
NOT_APPLICABLE = ("test_storages.py::test_get_trials_included_trial_ids", "test_storages.py::test_get_trials_trial_id_greater_than")
DEFAULT_CACHE = Path(os.environ.get("TAUOPT_OPTUNA_SUITE_CACHE", Path.home() / ".cache" / "tauopt" / "optuna-suite"))


def suite_dir(cache: Path, download: bool = True) -> Path | None:
    """The sdist's tests/storages_tests, downloaded and extracted once."""
    root = cache / f"optuna-{OPTUNA}"
    tests = root / "tests" / "storages_tests"
    if tests.is_dir():
        return tests
    sdist = cache / f"optuna-{OPTUNA}.tar.gz"
    if not sdist.exists():
        if not download:
            return None
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", f"optuna=={OPTUNA}",
             "-d", str(cache)],
            check=True,
        )  # fmt: skip
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(f"optuna-{OPTUNA}/tests/")]
        tar.extractall(cache, members=members, filter="data")
    return tests


class TauoptStorages:
    """A pytest plugin: one `tauopt serve --optuna-port` for the session; every
    StorageSupplier hands out a GrpcStorageProxy to it."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.tmp = tempfile.TemporaryDirectory(prefix="tauopt-optuna-suite-")

    def pytest_configure(self, config: Any) -> None:
        import importlib.util
        import socket
        import types

        if importlib.util.find_spec("fakeredis") is None:
            # optuna.testing.storages imports it for its Redis journal mode, which is not run here
            sys.modules["fakeredis"] = types.ModuleType("fakeredis")
        import optuna
        from optuna.storages import GrpcStorageProxy
        from optuna.testing import storages

        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        ports = []
        for _ in range(2):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                ports.append(s.getsockname()[1])
        self.port = ports[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tauopt.cli", "serve", "--db", f"{self.tmp.name}/tauopt.db", "--port", str(ports[0]),
             "--pool", "thread", "--log-level", "warning", "--optuna-port", str(self.port),
             "--optuna-max-studies", "100000"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        GrpcStorageProxy(host="127.0.0.1", port=self.port).wait_server_ready(timeout=60)
        storages.STORAGE_MODES[:] = ["tauopt"]  # the tests' parametrize lists, read at their import
        storages.STORAGE_MODES_HEARTBEAT[:] = []
        port = self.port

        def enter(supplier: Any) -> Any:
            proxy = GrpcStorageProxy(host="127.0.0.1", port=port)
            for study in proxy.get_all_studies():
                proxy.delete_study(study._study_id)
            supplier.proxy = supplier.storage = proxy
            return proxy

        def exit_(supplier: Any, *exc: Any) -> None:
            if supplier.proxy is not None:
                supplier.proxy.close()
                supplier.proxy = None

        storages.StorageSupplier.__enter__ = enter  # type: ignore[method-assign]
        storages.StorageSupplier.__exit__ = exit_  # type: ignore[method-assign]

    def pytest_unconfigure(self, config: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        self.tmp.cleanup()


def run(cache: Path, pytest_args: list[str], download: bool = True) -> int:
    import pytest

    tests = suite_dir(cache, download)
    if tests is None:
        raise SystemExit(f"optuna {OPTUNA}'s sdist is not in {cache}; run tests/optuna_suite.py once to fetch it")
    ini = cache / "pytest.ini"  # neither Optuna's settings nor ours
    ini.write_text("[pytest]\n")
    args = [
        *[str(tests / f) for f in FILES], "-q", "-p", "no:cacheprovider", "-c", str(ini),
        "--rootdir", str(tests), "-W", "ignore::DeprecationWarning",
        *[f"--deselect={t}" for t in NOT_APPLICABLE], *pytest_args,
    ]  # fmt: skip
    os.chdir(tests)  # node ids relative to the suite, as --deselect names them
    return int(pytest.main(args, plugins=[TauoptStorages()]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="default: $TAUOPT_OPTUNA_SUITE_CACHE or %(default)s")
    parser.add_argument("--no-download", action="store_true", help="use the cached sdist only")
    parser.add_argument("--fetch-only", action="store_true", help="fetch the sdist into the cache if missing, run nothing (make test)")
    known, rest = parser.parse_known_args()
    if known.fetch_only:
        suite_dir(known.cache)
        return 0
    return run(known.cache, rest, download=not known.no_download)


if __name__ == "__main__":
    sys.exit(main())
