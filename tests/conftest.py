"""Shared fixtures. Async tests use anyio's pytest plugin (`@pytest.mark.anyio`);
the default backend is asyncio, and engine tests that must hold on trio too
parametrize `anyio_backend` themselves."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def python() -> str:
    """The interpreter running the tests (the project's venv), for child processes."""
    return sys.executable
