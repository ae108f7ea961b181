"""A progress bar on stderr for benchmark runs that take more than a few seconds.

tqdm (the bench extra) with `delay`: a run shorter than TAUOPT_PROGRESS_DELAY
seconds (default 3) shows nothing, so quick runs and their JSON stay clean.
Without tqdm, a one-line `\\r` counter with the same delay. stdout (the JSON the
README quotes) is never touched.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = ["progress", "say"]


def _delay() -> float:
    try:
        return float(os.environ.get("TAUOPT_PROGRESS_DELAY", "3"))
    except ValueError:
        return 3.0


@contextmanager
def progress(total: int, desc: str) -> Iterator[Callable[[str], None]]:
    """`with progress(n, "contention") as step:` then `step(label)` after each of n units."""
    try:
        from tqdm import tqdm
    except ImportError:
        with _plain(total, desc) as step:
            yield step
        return
    delay, started = _delay(), time.monotonic()
    bar = tqdm(total=total, desc=desc, file=sys.stderr, delay=delay, leave=False, dynamic_ncols=True, unit="run")

    def step(label: str) -> None:
        bar.set_postfix_str(label, refresh=False)
        bar.update(1)

    try:
        yield step
    finally:
        if bar.n and time.monotonic() - started >= delay:  # a shown bar draws its last step (tqdm
            bar.refresh()  # skips draws within mininterval), then is cleared
        bar.close()


def say(text: str) -> None:
    """A line on stderr that does not tear a bar being drawn: the bar is cleared,
    the line printed, the bar redrawn below it (tqdm.write). A reader of a stderr
    log takes what follows a line's last \\r."""
    try:
        from tqdm import tqdm
    except ImportError:
        print(f"\r\x1b[K{text}", file=sys.stderr, flush=True)
        return
    tqdm.write(text, file=sys.stderr)


@contextmanager
def _plain(total: int, desc: str) -> Iterator[Callable[[str], None]]:
    start, done, shown = time.monotonic(), [0], [False]

    def step(label: str) -> None:
        done[0] += 1
        if time.monotonic() - start >= _delay():
            shown[0] = True
            print(f"\r{desc}: {done[0]}/{total} {label[:40]:<40}", end="", file=sys.stderr, flush=True)

    try:
        yield step
    finally:
        if shown[0]:
            print(file=sys.stderr, flush=True)
