"""`tauopt kerastuner ...`: the environment preflight and the chief daemon.

`register(subparsers)` adds the group to tauopt's argparse CLI; each leaf sets
`func(args) -> exit code`. Nothing heavy is imported until a command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

__all__ = ["register", "check_env_command", "chief_command"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2


def register(subparsers: Any) -> argparse.ArgumentParser:
    group = subparsers.add_parser(
        "kerastuner",
        help="serve unmodified KerasTuner workers as their chief Oracle",
        description="tauopt as the chief Oracle of a distributed KerasTuner search (insecure gRPC: trusted networks only).",
    )
    sub = group.add_subparsers(dest="kerastuner_command", metavar="COMMAND")
    sub.required = True

    check = sub.add_parser(
        "check-env",
        help="check KERASTUNER_ORACLE_IP/PORT and KERASTUNER_TUNER_ID (reads the environment only)",
        description="Exit 0 when the KerasTuner environment is valid (local mode or a complete set), 2 when not.",
    )
    check.add_argument("--json", action="store_true", help="print the verdict as JSON")
    check.set_defaults(func=check_env_command)

    chief = sub.add_parser(
        "chief",
        help="serve keras_tuner.Oracle on KERASTUNER_ORACLE_IP:KERASTUNER_ORACLE_PORT",
        description=(
            "Serve the KerasTuner chief Oracle from a tauopt experiment. Needs the three KERASTUNER_* variables "
            "with a chief id (one containing 'chief'). Exit 0 when the search completes, 1 when it ends in "
            "failures, 2 on bad configuration."
        ),
    )
    chief.add_argument(
        "--objective", required=True, action="append",
        help="the metric name workers report (not on the wire), with --direction; or NAME:min|max, repeatable "
        "for KerasTuner's objective list (score = its multi_objective; tauopt keeps every metric and the Pareto front)",
    )
    chief.add_argument("--direction", default=None, choices=("min", "max"), help="the direction of a single NAME objective")
    chief.add_argument("--max-trials", type=int, default=None, help="completed plus running trials to aim for (required unless --algorithm hyperband)")
    chief.add_argument("--algorithm", choices=("tauopt", "hyperband"), default="tauopt",
                       help="tauopt: suggestions from --strategy; hyperband: KerasTuner's Hyperband brackets (new trials' values from --strategy)")
    chief.add_argument("--max-epochs", type=int, default=None, help="hyperband: the most epochs one model trains")
    chief.add_argument("--factor", type=int, default=3, help="hyperband: reduction factor of epochs and trials per round (default 3)")
    chief.add_argument("--hyperband-iterations", type=int, default=1, help="hyperband: passes over all brackets (default 1)")
    chief.add_argument("--strategy", default="auto", help="tauopt strategy (default: auto)")
    chief.add_argument("--db", default=None, help="SQLite file for durable state (default: in memory)")
    chief.add_argument("--project", default="kerastuner", help="experiment name; an active one is resumed")
    chief.add_argument(
        "--advertise-url", default=None, metavar="http://HOST:PORT",
        help="share a postgresql:// --db with other chiefs of the search (workers may use any); this chief's name there",
    )  # fmt: skip
    chief.add_argument("--lease-s", type=float, default=3.0, help="with --advertise-url: a dead chief's search moves after this many seconds")
    chief.add_argument("--trial-ttl-s", type=float, default=3600.0, help="hand a trial out again after this long (default 3600)")
    chief.add_argument("--max-retries-per-trial", type=int, default=0, help="reruns of an INVALID trial (default 0)")
    chief.add_argument("--max-consecutive-failures", type=int, default=3, help="end the search after this many failed trials in a row (default 3)")
    chief.add_argument("--space", default=None, help="tauopt parameter JSON file; otherwise learned from the workers")
    chief.add_argument("--http-port", type=int, default=None, help="also serve tauopt's HTTP API on this port")
    chief.add_argument("--parallel-bandwidth", type=int, default=None, help="at most this many trials at once (default: max-trials)")
    chief.add_argument("--workers", type=int, default=None, help="expected number of workers: exit as soon as each was told STOPPED")
    chief.add_argument("--linger-s", type=float, default=10.0, help="after the search ends, keep answering late workers STOPPED this long (default 10; the cap when --workers is given)")
    chief.add_argument("--hold-s", type=float, default=300.0, help="hold a CreateTrial at most this long before answering IDLE (default 300)")
    chief.add_argument("--seed", type=int, default=None, help="seed for reproducible suggestions")
    chief.set_defaults(func=chief_command)
    return group


def check_env_command(args: argparse.Namespace) -> int:
    from ._env import check_env

    result = check_env(os.environ)
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(result.describe(), file=sys.stdout if result.valid else sys.stderr)
    return EXIT_OK if result.valid else EXIT_INVALID


def chief_command(args: argparse.Namespace) -> int:
    from ._chief import run_chief_from_args

    return run_chief_from_args(args)
