"""`tauopt experiments create|list|show|update|archive|close-all`, against a
database file (`--db`) or a running daemon (`--url`, or TAUOPT_BASE_URL; the
token from TAUOPT_TOKEN or `--token-file`).

Reads of a file go through the engine's admin API (`tauopt.engine.open_admin`)
without owning the file, so they work beside a daemon serving it; changes to a
file go through an in-process engine, which a daemon serving the file refuses
(use `--url` then). Over HTTP every command is the public `Client`, so the CLI
sees exactly what a worker sees. Either way listings and "best" are the
engine's (`Admin.reports`, or the daemon's `experiments` and `best` operations).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ._experiment_report import as_json, summary, table
from .store import is_url_of_server
from .engine import Admin, ExperimentReport, run_admin
from .errors import ApiError

__all__ = ["register", "Target", "target_from", "load_spec", "SPEC_KEYS"]

DEFAULT_DB = "./tauopt.db"
SPEC_KEYS = (
    "name", "parameters", "metric", "parallel_bandwidth", "suggestion_ttl_s",
    "observation_budget", "strategy", "strategy_options", "max_consecutive_failures",
)  # fmt: skip


class CliError(Exception):
    """A refusal the command prints as one line and exits 1 (2 for bad usage)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Target:
    """Where a command acts: a daemon (url and token) or a database file."""

    url: str | None
    token: str | None
    db: str


def target_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Target:
    """`--db` wins; else `--url` or TAUOPT_BASE_URL; else ./tauopt.db."""
    url = None if args.db else (args.url or environ.get("TAUOPT_BASE_URL") or None)
    if url is None:
        return Target(None, None, args.db or DEFAULT_DB)
    if args.token_file:
        try:
            token = Path(args.token_file).read_text().strip()
        except OSError as exc:
            raise CliError(f"--token-file {args.token_file}: {exc.strerror}", 2) from None
    else:
        token = environ.get("TAUOPT_TOKEN", "").strip()
    if not token:
        raise CliError(
            f"{url} needs a token: set TAUOPT_TOKEN (e.g. export TAUOPT_TOKEN=$(cat tauopt.db.token), "
            "the file `tauopt serve` wrote beside its database) or pass --token-file PATH", 2
        )
    return Target(url, token, DEFAULT_DB)


def load_spec(path: str) -> dict[str, Any]:
    """A spec file (JSON, or YAML by its .yaml/.yml suffix): create_experiment's keywords."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise CliError(f"--spec {path}: {exc.strerror}", 2) from None
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise CliError("a YAML spec needs PyYAML (pip install pyyaml, or the server extra); or write it as JSON", 2) from None
        try:
            spec = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise CliError(f"--spec {path} is not valid YAML: {exc}", 2) from None
    else:
        try:
            spec = json.loads(text)
        except ValueError as exc:
            raise CliError(f"--spec {path} is not valid JSON ({exc}); YAML files must end in .yaml or .yml", 2) from None
    if not isinstance(spec, dict):
        raise CliError(f"--spec {path}: give an object with the keys {list(SPEC_KEYS)}", 2)
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise CliError(f"--spec {path}: unknown keys {unknown}; the keys are {list(SPEC_KEYS)}", 2)
    return spec


# -- where the work happens --------------------------------------------------------------


def _client(target: Target, *, writing: bool) -> Any:
    from ._client import Client

    if target.url is not None:
        return Client(driver="http", base_url=target.url, token=target.token)
    if not is_url_of_server(target.db) and not Path(target.db).exists():
        raise CliError(f"no database at {target.db}; pass --db PATH, or --url to reach a running `tauopt serve`")
    try:
        return Client(driver="local", store=target.db)
    except ApiError as exc:
        hint = "; while `tauopt serve` runs on it, pass --url (and TAUOPT_TOKEN)" if writing else ""
        raise CliError(exc.message + hint) from None


def _remote_reports(target: Target, state: str | None, ids: Sequence[str] | None) -> list[ExperimentReport]:
    """Over HTTP, the daemon's operations: its listing, and each experiment's `best` and
    `summary` (light reads); `show` (ids given) also reads the history."""
    with _client(target, writing=False) as c:
        if ids is None:
            return [ExperimentReport.of(e, c.best(e.id), c.summary(e.id)) for e in c.experiments(state=state)]
        exps = [c.experiment(i) for i in ids]
        return [
            ExperimentReport.of(e, c.best(e.id), c.summary(e.id), c.observations(e.id), c.suggestions(e.id)) for e in exps
        ]


def _file_reports(target: Target, state: str | None, owner: str | None, ids: Sequence[str] | None) -> list[ExperimentReport]:
    """On a file, the engine's admin API without owning the file (works beside a daemon)."""

    async def read(admin: Admin) -> list[ExperimentReport]:
        if ids is not None:
            return [await admin.report(i) for i in ids]
        return await admin.reports(state, await _owner_id(admin, owner))

    if not is_url_of_server(target.db) and not Path(target.db).exists():
        raise CliError(f"no database at {target.db}; pass --db PATH, or --url to reach a running `tauopt serve`")
    return run_admin(target.db, read)


async def _owner_id(admin: Admin, owner: str | None) -> str | None:
    """--owner by credential id or by a name only one credential has."""
    if owner is None:
        return None
    try:
        return (await admin.credential(owner)).id
    except ApiError as exc:
        raise CliError(f"--owner {owner!r}: {exc.message}") from None


def _reports(args: argparse.Namespace, ids: Sequence[str] | None = None) -> list[ExperimentReport]:
    target = target_from(args, os.environ)
    state = getattr(args, "state", None)
    if target.url is not None:
        if getattr(args, "owner", None):
            raise CliError("--owner filters a database file (--db); over HTTP a token sees its own experiments", 2)
        return _remote_reports(target, state, ids)
    return _file_reports(target, state, getattr(args, "owner", None), ids)


# -- commands ---------------------------------------------------------------------------


def _create(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    with _client(target_from(args, os.environ), writing=True) as c:
        exp = c.create_experiment(**spec)
    print(exp.id, flush=True)  # alone on stdout: EXP=$(tauopt experiments create --spec spec.json)
    return 0


def _archive(args: argparse.Namespace) -> int:
    with _client(target_from(args, os.environ), writing=True) as c:
        exp = c.archive_experiment(args.experiment_id)
    print(exp.id, flush=True)
    print(f"tauopt: archived {exp.id}; its open suggestions were closed", file=sys.stderr)
    return 0


def _close_all(args: argparse.Namespace) -> int:
    with _client(target_from(args, os.environ), writing=True) as c:
        closed = c.close_all_suggestions(args.experiment_id)
    print(closed, flush=True)
    return 0


def _none_or(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return None if text.lower() in ("none", "null", "") else kind(text)

    parse.__name__ = kind.__name__
    return parse


def _update(args: argparse.Namespace) -> int:
    changes = {
        k: getattr(args, k)
        for k in ("name", "parallel_bandwidth", "suggestion_ttl_s", "observation_budget", "max_consecutive_failures")
        if getattr(args, k) is not _KEEP
    }
    if not changes:
        raise CliError(
            "nothing to update: pass --name, --parallel-bandwidth, --suggestion-ttl-s, --observation-budget "
            "or --max-consecutive-failures", 2,
        )  # fmt: skip
    with _client(target_from(args, os.environ), writing=True) as c:
        exp = c.update_experiment(args.experiment_id, **changes)
    print(json.dumps(exp.to_dict(), indent=2) if args.json else exp.id, flush=True)
    return 0


_KEEP = object()  # an option not given: that field is left unchanged


def _list(args: argparse.Namespace) -> int:
    return _refreshing(args, lambda: _render_list(args))


def _render_list(args: argparse.Namespace) -> str:
    views = _reports(args)
    if args.json:
        return json.dumps([as_json(v) for v in views], indent=2)
    return table(views, time.time())


def _show(args: argparse.Namespace) -> int:
    return _refreshing(args, lambda: _render_show(args))


def _render_show(args: argparse.Namespace) -> str:
    (view,) = _reports(args, [args.experiment_id])
    return json.dumps(as_json(view), indent=2) if args.json else summary(view, time.time())


def _refreshing(args: argparse.Namespace, render: Callable[[], str]) -> int:
    """Print once, or with --watch redraw every --interval seconds until Ctrl-C."""
    if not args.watch:
        print(render(), flush=True)
        return 0
    clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() else ""
    try:
        while True:
            frame = render()
            stamp = time.strftime("%H:%M:%S")
            print(f"{clear}every {args.interval:g}s, {stamp} (Ctrl-C to stop)\n{frame}\n", flush=True)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


def _run(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """One place that turns refusals into a line on stderr and an exit code."""

    def run(args: argparse.Namespace) -> int:
        import httpx

        try:
            return func(args)
        except CliError as exc:
            print(f"tauopt: {exc}", file=sys.stderr)
            return exc.code
        except ApiError as exc:
            print(f"tauopt: {exc.error_type}: {exc.message}", file=sys.stderr)
            return 1
        except httpx.TransportError as exc:
            print(f"tauopt: {exc}", file=sys.stderr)
            return 1

    return run


def register(subparsers: Any) -> None:
    exps = subparsers.add_parser("experiments", help="create, watch and change experiments (a file or a daemon)")
    esub = exps.add_subparsers(dest="experiments_command", metavar="ACTION", required=True)

    def target(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--db", default=None, help=f"a database file (default {DEFAULT_DB} when no --url)")
        p.add_argument("--url", default=None, help="a running `tauopt serve` (default $TAUOPT_BASE_URL)")
        p.add_argument("--token-file", default=None, help="the daemon's token (default $TAUOPT_TOKEN)")
        return p

    create = target(esub.add_parser("create", help="create from a spec file; prints the id alone"))
    create.add_argument("--spec", required=True, help="JSON or YAML (.yaml/.yml): create_experiment's keywords")
    create.set_defaults(func=_run(_create))
    for name, helps, func in (
        ("list", "every experiment: state, strategy, budget, bandwidth, best, last activity", _list),
        ("show", "one experiment: best assignments, counts by state and tag, recent failures", _show),
    ):
        p = target(esub.add_parser(name, help=helps))
        if name == "show":
            p.add_argument("experiment_id")
        else:
            p.add_argument("--state", choices=["active", "completed", "archived"], default=None)
            p.add_argument("--owner", default=None, help="(--db only) this credential's experiments, by id or name")
        p.add_argument("--json", action="store_true")
        p.add_argument("--watch", action="store_true", help="redraw until Ctrl-C")
        p.add_argument("--interval", type=float, default=2.0, help="seconds between redraws (default %(default)s)")
        p.set_defaults(func=_run(func))
    archive = target(esub.add_parser("archive", help="archive: no more suggestions; prints the id"))
    archive.add_argument("experiment_id")
    archive.set_defaults(func=_run(_archive))
    close_all = target(esub.add_parser("close-all", help="close every open suggestion; prints how many"))
    close_all.add_argument("experiment_id")
    close_all.set_defaults(func=_run(_close_all))
    update = target(esub.add_parser("update", help="change name, bandwidth, ttl, budget or failure cap ('none' unsets)"))
    update.add_argument("experiment_id")
    update.add_argument("--name", default=_KEEP)
    update.add_argument("--parallel-bandwidth", type=int, default=_KEEP)
    update.add_argument("--suggestion-ttl-s", type=_none_or(float), default=_KEEP)
    update.add_argument("--observation-budget", type=_none_or(int), default=_KEEP)
    update.add_argument(
        "--max-consecutive-failures", type=_none_or(int), default=_KEEP,
        help="the failure cap; setting it (even to its value) lifts a too_many_failures stop",
    )  # fmt: skip
    update.add_argument("--json", action="store_true", help="print the experiment, not just its id")
    update.set_defaults(func=_run(_update))
