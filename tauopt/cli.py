"""`tauopt` command line: serve | token | experiments | db | kerastuner | bench.

Each door registers its own subcommands (`register(subparsers)` in its
`_cli` module, each setting `func`, which returns an exit code); this module
assembles them, importing each door lazily so `tauopt --help` stays fast, and
composes doors: `kerastuner chief --http-port` serves the HTTP door on the
chief's engine, `serve --optuna-port` the Optuna door on the daemon's. Doors never import each other; only this module knows both.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from typing import Any, Sequence

_DOORS = (
    "tauopt.transport.http._cli",
    "tauopt._cli_experiments",
    "tauopt._cli_db",
    "tauopt.transport.grpc._cli",
    "tauopt.transport.optuna._cli",  # after the HTTP door's: it adds options to `serve`
)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="tauopt", description="A coordination engine for hyperparameter search.")
    parser.add_argument("--version", action="version", version=f"tauopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _DOORS:
        try:
            importlib.import_module(module).register(sub)
        except ModuleNotFoundError as exc:
            if exc.name is not None and not module.startswith(exc.name):
                raise  # a missing dependency inside the door, not a missing door
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    from .errors import ApiError

    try:
        _compose_doors(args)
    except ApiError as exc:
        print(f"tauopt: {exc.message}", file=sys.stderr)
        return 2
    return int(func(args) or 0)


def _compose_doors(args: argparse.Namespace) -> None:
    """Other doors a serving command opens on its engine, as `args.doors`."""
    doors: list[Any] = []
    http_port = getattr(args, "http_port", None)
    if http_port is not None:
        from .transport.http._cli import serve_on_engine

        doors.append(functools.partial(_with_port, serve_on_engine, http_port))
    if getattr(args, "optuna_port", None) is not None:
        from .transport.optuna._cli import door_from_args

        doors.append(door_from_args(args))  # not None: the port is given
    args.doors = tuple(doors)


async def _with_port(door: Any, port: int, tg: Any, engine: Any, host: str) -> Any:
    return await door(tg, engine, host, port)


if __name__ == "__main__":
    sys.exit(main())
