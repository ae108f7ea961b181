"""`tauopt db copy SOURCE TARGET`: move a deployment's state between stores.

SOURCE and TARGET are what `--db` / `--store` take: a SQLite file (or sqlite:///
URL) or a postgresql:// URL. TARGET must be empty; everything is read back from
it and compared with SOURCE before the command says it is done
(`tauopt.store.copy_store`). Stop the daemons on SOURCE first: a copy of a store
that is being written is of some moment, not of the latest.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from .store import is_url_of_server

__all__ = ["register"]


def register(subparsers: Any) -> None:
    db = subparsers.add_parser("db", help="database maintenance: copy a store into another (SQLite <-> PostgreSQL)")
    dsub = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    copy = dsub.add_parser(
        "copy", help="copy experiments, suggestions, observations, reports and credentials into an empty store, verified"
    )
    copy.add_argument("source", help="a SQLite file or a postgresql:// URL (stop its daemons first)")
    copy.add_argument("target", help="a new SQLite file or an empty postgresql:// database")
    copy.set_defaults(func=_copy)


def _copy(args: argparse.Namespace) -> int:
    import anyio

    from .errors import ApiError
    from .store import StoreError, open_store
    from .store._copy import CopyCounts, copy_store

    if not is_url_of_server(args.source) and not Path(args.source).exists():
        print(f"tauopt: no database at {args.source}", file=sys.stderr)
        return 1

    async def run() -> CopyCounts:
        async with AsyncExitStack() as stack:
            source = await stack.enter_async_context(open_store(args.source, exclusive=False))
            target = await stack.enter_async_context(open_store(args.target))
            return await copy_store(source, target)

    try:
        counts = anyio.run(run)
    except BaseExceptionGroup as group:  # each store's task group wraps the error
        error: BaseException = group
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        return _failed(error)
    except (StoreError, ApiError) as exc:
        return _failed(exc)
    print(
        f"copied and verified: {counts.experiments} experiments, {counts.suggestions} suggestions, "
        f"{counts.observations} observations, {counts.reports} reports, {counts.credentials} credentials"
    )
    return 0


def _failed(exc: BaseException) -> int:
    message = getattr(exc, "message", None) or str(exc)
    print(f"tauopt: db copy failed: {message} (the source is unchanged; a target it wrote into may hold part "
          "of the copy: remove it before trying again)", file=sys.stderr)
    return 1
