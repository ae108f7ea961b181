"""`tauopt` command line: serve | token | experiments | kerastuner | bench.

Each door registers its own subcommands (`register(subparsers)` in its
`_cli` module, each setting `func`, which returns an exit code); this module
only assembles them, importing each door lazily so `tauopt --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

_DOORS = (
    "tauopt.transport.http._cli",
    "tauopt._cli_experiments",
    "tauopt.transport.grpc._cli",
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
    return int(func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
