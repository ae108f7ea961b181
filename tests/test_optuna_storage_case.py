"""Optuna's own storage contract, `optuna.testing.pytest_storages.StorageTestCase` (shipped in
the optuna 5.0.0 wheel: every BaseStorage method), run against the Optuna door of a real
`tauopt serve`. The sdist's test files around it run with `python tests/optuna_suite.py`."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from test_http_daemon import Daemon
from test_http_support import free_port

optuna = pytest.importorskip("optuna")
pytest.importorskip("grpc")

from optuna.testing.pytest_storages import StorageTestCase  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")]


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    d = Daemon(tmp_path_factory.mktemp("case") / "tauopt.db", "--optuna-port", str(port), "--optuna-max-studies", "100000")
    yield port
    d.stop()


@pytest.fixture
def storage(door: int) -> Iterator[Any]:
    """A fresh storage, as each of Optuna's tests expects: the door emptied of studies."""
    from optuna.storages import GrpcStorageProxy

    proxy = GrpcStorageProxy(host="127.0.0.1", port=door)
    for study in proxy.get_all_studies():
        proxy.delete_study(study._study_id)
    yield proxy
    proxy.close()


class TestOptunasStorageContractAgainstTheDoor(StorageTestCase):
    @pytest.mark.parametrize("param_names", [["a", "b"], ["b", "a"]])
    def test_get_all_trials_params_order(self, storage: Any, param_names: list[str]) -> None:
        pytest.skip("Optuna skips it for GrpcStorageProxy too: a proto map<> does not keep the order")
