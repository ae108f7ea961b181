"""The `--optuna-*` options of `tauopt serve` (the CLI composes the door with `door_from_args`)."""

from __future__ import annotations

import argparse
from typing import Any

from ._door import OptunaDoor

__all__ = ["register", "door_from_args"]


def register(subparsers: Any) -> None:
    serve = subparsers.choices.get("serve")
    if serve is None:
        return
    group = serve.add_argument_group("Optuna door (Optuna's gRPC storage protocol, for GrpcStorageProxy)")
    group.add_argument("--optuna-port", type=int, default=None, help="serve Optuna's StorageService on this port")
    group.add_argument("--optuna-host", default="127.0.0.1", help="default %(default)s (the door has no authentication)")
    group.add_argument(
        "--optuna-owner", default="default", metavar="NAME",
        help="the credential (by name) whose studies the door makes and sees; default %(default)s",
    )  # fmt: skip
    group.add_argument(
        "--optuna-allow-remote", action="store_true",
        help="allow --optuna-host beyond loopback (unauthenticated: anyone who reaches it can change studies)",
    )  # fmt: skip
    group.add_argument("--optuna-max-studies", type=int, default=None, help="studies the door keeps (default: --max-active-experiments)")


def door_from_args(args: argparse.Namespace) -> OptunaDoor:
    """The door `--optuna-port` asks for, checked (an ApiError says what to fix)."""
    cap = args.optuna_max_studies if args.optuna_max_studies is not None else args.max_active_experiments
    door = OptunaDoor(args.optuna_port, args.optuna_host, args.optuna_owner, args.optuna_allow_remote, cap)
    door.check()
    return door
