"""Stores are chosen from a URL or path in one place (`tauopt.store.open_store`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tauopt import ApiError, Engine
from tauopt.store import MemoryStore, open_store
from tauopt.store._sqlite import SqliteStore

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("spec", [None, ":memory:", "memory://"])
def test_memory_urls_give_a_memory_store(spec: str | None) -> None:
    assert isinstance(open_store(spec), MemoryStore)


def test_sqlite_urls_and_plain_paths_give_the_same_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    by_url = open_store(f"sqlite:///{path}", durability="fsync")
    by_path = open_store(path)
    assert isinstance(by_url, SqliteStore) and isinstance(by_path, SqliteStore)
    assert by_url.path == by_path.path == path and by_url.durability == "fsync"


def test_a_store_passes_through() -> None:
    store = MemoryStore()
    assert open_store(store) is store


def test_an_unknown_scheme_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ApiError) as err:
        open_store("mysql://db/tauopt")
    assert err.value.error_type == "invalid_request"
    assert "mysql://" in err.value.message and "postgresql://" in err.value.message and "memory://" in err.value.message


async def test_the_engine_takes_a_store_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'e.db'}"
    async with Engine(store=url) as engine:
        exp = await engine.create_experiment("e", [{"name": "x", "type": "double", "bounds": (0, 1)}], {"name": "y"})
    async with Engine(store=url) as engine:
        assert (await engine.experiment(exp.id)).name == "e"
