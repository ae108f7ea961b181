"""Shared fixtures. Async tests use anyio's pytest plugin (`@pytest.mark.anyio`);
the default backend is asyncio, and engine tests that must hold on trio too
parametrize `anyio_backend` themselves."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def python() -> str:
    """The interpreter running the tests (the project's venv), for child processes."""
    return sys.executable


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """On a machine without Chromium, say in one line which tests were skipped and how to enable them."""
    from browser_support import browser_skip_reason

    reason = browser_skip_reason()
    if reason is not None:
        terminalreporter.write_line(reason, yellow=True)
