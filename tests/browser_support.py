"""Headless Chromium for the dashboard tests (Debian's `chromium`, driven by Playwright
through its executable path: no browser download)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
HOW_TO_ENABLE = (
    "browser tests (tests/test_dashboard_browser.py) skipped: no Chromium; "
    "install Debian's `chromium` (sudo apt-get install chromium) or set TAUOPT_CHROMIUM=/path/to/chromium"
)


def chromium_path() -> str | None:
    """The Chromium to drive: $TAUOPT_CHROMIUM, /usr/bin/chromium, or `chromium` on PATH."""
    given = os.environ.get("TAUOPT_CHROMIUM")
    if given:
        return given if Path(given).exists() else None
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    return shutil.which("chromium")


def playwright_available() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return True


def browser_skip_reason() -> str | None:
    if chromium_path() is None:
        return HOW_TO_ENABLE
    if not playwright_available():
        return "browser tests skipped: the playwright package is missing (pip install -e '.[test]')"
    return None


def shrink_png(path: Path, max_width: int = 1100, colors: int = 128) -> None:
    """Make a screenshot small enough to commit: scaled to `max_width`, palette of `colors`."""
    from PIL import Image

    with Image.open(path) as img:
        img = img.convert("RGB")
        if img.width > max_width:
            img = img.resize((max_width, round(img.height * max_width / img.width)), Image.LANCZOS)
        img.quantize(colors=colors, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(path, optimize=True)
