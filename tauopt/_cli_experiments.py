"""`tauopt experiments create|list|show|update|archive|unarchive|delete|export|import|close-all`, against a
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

from ._experiment_report import as_json, shown, stopped_early, summary, table
from .store import is_url_of_server
from .engine import Admin, ExperimentReport, run_admin
from .errors import ApiError

__all__ = ["register", "Target", "target_from", "load_spec", "spec_keys"]

DEFAULT_DB = "./tauopt.db"


def spec_keys() -> tuple[str, ...]:
    """A spec file's keys: the fields of `ExperimentSpec`, read from it so the two never drift."""
    from .schema import ExperimentSpec  # with pydantic: only `experiments create` pays its import

    return tuple(ExperimentSpec.model_fields)


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
    """A spec file (JSON, or YAML by its .yaml/.yml suffix): the fields of `ExperimentSpec`."""
    spec = _read_document(path, "--spec")
    keys = spec_keys()
    if not isinstance(spec, dict):
        raise CliError(f"--spec {path}: give an object with the keys {list(keys)}", 2)
    unknown = sorted(set(spec) - set(keys))
    if unknown:
        raise CliError(f"--spec {path}: unknown keys {unknown}; the keys are {list(keys)}", 2)
    return spec


def _read_document(path: str, option: str) -> Any:
    """A JSON file, or YAML by its .yaml/.yml suffix."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise CliError(f"{option} {path}: {exc.strerror}", 2) from None
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise CliError("a YAML spec needs PyYAML (pip install pyyaml, or the server extra); or write it as JSON", 2) from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise CliError(f"{option} {path} is not valid YAML: {exc}", 2) from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{option} {path} is not valid JSON ({exc}); YAML files must end in .yaml or .yml", 2) from None


# -- where the work happens --------------------------------------------------------------


def _client(target: Target, *, writing: bool) -> Any:
    from .client import Client

    if target.url is not None:
        return Client(driver="http", base_url=target.url, token=target.token)
    if not is_url_of_server(target.db) and not Path(target.db).exists():
        raise CliError(f"no database at {target.db}; pass --db PATH, or --url to reach a running `tauopt serve`")
    try:
        return Client(driver="local", store=target.db)
    except ApiError as exc:
        if exc.error_type == "store_in_use" and writing:  # the advice for this command first, then who holds it
            raise CliError(
                f"{target.db} is open in a running engine (pid {exc.details.get('pid', '?')} on "
                f"{exc.details.get('host', '?')}, e.g. `tauopt serve`): run this command through it with "
                "--url URL (and TAUOPT_TOKEN or --token-file), or stop it first"
            ) from None
        raise CliError(exc.message) from None


def _remote_reports(
    target: Target, state: str | None, ids: Sequence[str] | None, page: Mapping[str, Any]
) -> list[ExperimentReport]:
    """Over HTTP, the daemon's operations: its listing (`page`: after, limit, name), and each
    experiment's `best` and `summary` (light reads); `show` (ids given) also reads the history."""
    with _client(target, writing=False) as c:
        if ids is None:
            return [ExperimentReport.of(e, c.best(e.id), c.summary(e.id)) for e in c.experiments(state=state, **page)]
        exps = [c.experiment(i) for i in ids]
        return [
            ExperimentReport.of(e, c.best(e.id), c.summary(e.id), c.observations(e.id), c.suggestions(e.id)) for e in exps
        ]


def _file_reports(
    target: Target, state: str | None, owner: str | None, ids: Sequence[str] | None, page: Mapping[str, Any]
) -> list[ExperimentReport]:
    """On a file, the engine's admin API without owning the file (works beside a daemon)."""

    async def read(admin: Admin) -> list[ExperimentReport]:
        if ids is not None:
            return [await admin.report(i) for i in ids]
        return await admin.reports(state, await _owner_id(admin, owner), **page)

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
    page = {k: getattr(args, k, None) for k in ("after", "limit", "name")}
    if target.url is not None:
        if getattr(args, "owner", None):
            raise CliError("--owner filters a database file (--db); over HTTP a token sees its own experiments", 2)
        return _remote_reports(target, state, ids, page)
    return _file_reports(target, state, getattr(args, "owner", None), ids, page)


# -- commands ---------------------------------------------------------------------------


def _create(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    with _client(target_from(args, os.environ), writing=True) as c:
        exp = c.create_experiment(spec=spec)
    print(exp.id, flush=True)  # alone on stdout: EXP=$(tauopt experiments create --spec spec.json)
    return 0


def _archive(args: argparse.Namespace) -> int:
    """`archive` (args.archive) or `unarchive`: prints the id, says what changed on stderr."""
    with _client(target_from(args, os.environ), writing=True) as c:
        if args.archive:
            exp = c.archive_experiment(args.experiment_id)
            said = f"archived {exp.id}; its open suggestions were closed"
        else:
            exp = c.unarchive_experiment(args.experiment_id)
            said = f"{exp.id} is {exp.state} again"
    print(exp.id, flush=True)
    print(f"tauopt: {said}", file=sys.stderr)
    return 0


def _delete(args: argparse.Namespace) -> int:
    with _client(target_from(args, os.environ), writing=True) as c:
        if not args.yes:
            exp = c.experiment(args.experiment_id)
            question = (
                f"delete experiment {exp.id} ({shown(exp.name)}: {exp.observations} observations, "
                f"{exp.open_suggestions} open suggestions) and its whole history? [y/N] "
            )
            print(question, end="", file=sys.stderr, flush=True)
            answer = sys.stdin.readline().strip().lower()
            if answer not in ("y", "yes"):
                raise CliError("nothing deleted (answer y, or pass --yes to skip the question)")
        exp = c.delete_experiment(args.experiment_id, force=args.force)
    print(exp.id, flush=True)
    print(f"tauopt: deleted {exp.id} and its history", file=sys.stderr)
    return 0


def _export(args: argparse.Namespace) -> int:
    with _client(target_from(args, os.environ), writing=True) as c:
        document = c.export_experiment(args.experiment_id)
    text = json.dumps(document, indent=1, allow_nan=False)
    if args.out is None:
        print(text, flush=True)
        return 0
    try:
        Path(args.out).write_text(text + "\n")
    except OSError as exc:
        raise CliError(f"--out {args.out}: {exc.strerror}") from None
    print(f"tauopt: wrote {args.experiment_id} to {args.out}", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    if args.file == "-":
        try:
            document = json.loads(sys.stdin.read())
        except ValueError as exc:
            raise CliError(f"the document on stdin is not JSON ({exc}); give what `experiments export` wrote", 2) from None
    else:
        document = _read_document(args.file, "import")
    with _client(target_from(args, os.environ), writing=True) as c:
        exp = c.import_experiment(document)
    print(exp.id, flush=True)  # alone on stdout, like create
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


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"give a positive integer, not {text!r}")
    return n


def _update(args: argparse.Namespace) -> int:
    changes = {k: getattr(args, k) for k in _UPDATABLE if getattr(args, k) is not _KEEP}
    if not changes:
        raise CliError(
            "nothing to update: pass --name, --parallel-bandwidth, --suggestion-ttl-s, --observation-budget, "
            "--max-consecutive-failures, --early-stopping, --parameters, --description or --metadata", 2,
        )  # fmt: skip
    with _client(target_from(args, os.environ), writing=True) as c:
        exp = c.update_experiment(args.experiment_id, **changes)
    print(json.dumps(exp.to_dict(), indent=2) if args.json else exp.id, flush=True)
    return 0


_UPDATABLE = (
    "name", "parallel_bandwidth", "suggestion_ttl_s", "observation_budget", "max_consecutive_failures",
    "early_stopping", "parameters", "description", "metadata",
)  # fmt: skip


def _json_option(option: str) -> Callable[[str], Any]:
    """An option's value as JSON text, or `@FILE` for a JSON or YAML file."""

    def parse(text: str) -> Any:
        if text.startswith("@"):
            try:
                return _read_document(text[1:], option)
            except CliError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not JSON ({exc}); give e.g. '{_EXAMPLES[option]}' or @FILE") from None

    parse.__name__ = "JSON"
    return parse


_EXAMPLES = {
    "--early-stopping": '{"rule": "median", "min_trials": 5}',
    "--parameters": '[{"name": "lr", "type": "double", "bounds": [1e-4, 0.1]}]',
    "--metadata": '{"team": "vision", "gpus": 8}',
}

_KEEP = object()  # an option not given: that field is left unchanged


def _list(args: argparse.Namespace) -> int:
    return _refreshing(args, lambda: _render_list(args))


def _render_list(args: argparse.Namespace) -> Any:
    views = _reports(args)
    if args.json:
        return [as_json(v) for v in views]
    return table(views, time.time())


def _show(args: argparse.Namespace) -> int:
    return _refreshing(args, lambda: _render_show(args))


def _render_show(args: argparse.Namespace) -> Any:
    (view,) = _reports(args, [args.experiment_id])
    return dict(as_json(view), stopped_early=stopped_early(view)) if args.json else summary(view, time.time())


def _refreshing(args: argparse.Namespace, render: Callable[[], Any]) -> int:
    """Print once, or with --watch redraw every --interval seconds until Ctrl-C. With
    --json a frame is a JSON value: indented once, one document per line when watching
    (the banner then goes to stderr, so stdout is JSON lines and nothing else)."""
    if not args.watch:
        frame = render()
        print(frame if isinstance(frame, str) else json.dumps(frame, indent=2), flush=True)
        return 0
    clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() and not args.json else ""
    try:
        while True:
            frame = render()
            banner = f"every {args.interval:g}s, {time.strftime('%H:%M:%S')} (Ctrl-C to stop)"
            if isinstance(frame, str):
                print(f"{clear}{banner}\n{frame}\n", flush=True)
            else:
                print(banner, file=sys.stderr, flush=True)
                print(json.dumps(frame), flush=True)
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
            message = exc.message
            if exc.error_type == "unauthorized":  # the server cannot know where the token came from
                source = f"--token-file {args.token_file}" if getattr(args, "token_file", None) else "$TAUOPT_TOKEN"
                message = message.replace("the token given (token=)", source) + f" (the token came from {source})"
            print(f"tauopt: {exc.error_type}: {message}", file=sys.stderr)
            return 1
        except httpx.TransportError as exc:
            print(f"tauopt: {exc}", file=sys.stderr)
            return 1

    return run


def register(subparsers: Any) -> None:
    exps = subparsers.add_parser(
        "experiments", help="create, watch, change, export, import and delete experiments (a file or a daemon)"
    )
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
            p.add_argument("--name", default=None, help="only experiments with this text in their name (any case)")
            p.add_argument("--limit", type=_positive, default=None, help="at most this many (default: all)")
            p.add_argument("--after", default=None, metavar="ID", help="those after this experiment (the last one you have)")
        p.add_argument("--json", action="store_true")
        p.add_argument("--watch", action="store_true", help="redraw until Ctrl-C")
        p.add_argument("--interval", type=float, default=2.0, help="seconds between redraws (default %(default)s)")
        p.set_defaults(func=_run(func))
    archive = target(esub.add_parser("archive", help="archive: no more suggestions; prints the id"))
    archive.add_argument("experiment_id")
    archive.set_defaults(func=_run(_archive), archive=True)
    unarchive = target(esub.add_parser("unarchive", help="undo an archive: active again; prints the id"))
    unarchive.add_argument("experiment_id")
    unarchive.set_defaults(func=_run(_archive), archive=False)
    delete = target(esub.add_parser("delete", help="remove an experiment and its history (asks first); prints the id"))
    delete.add_argument("experiment_id")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    delete.add_argument("--force", action="store_true", help="delete even while suggestions are open")
    delete.set_defaults(func=_run(_delete))
    export = target(esub.add_parser("export", help="write an experiment and its whole history as JSON"))
    export.add_argument("experiment_id")
    export.add_argument("--out", default=None, metavar="FILE", help="write it here (default: stdout)")
    export.set_defaults(func=_run(_export))
    imp = target(esub.add_parser("import", help="recreate an exported experiment (a new id); prints the id"))
    imp.add_argument("file", metavar="FILE", help="what `experiments export` wrote (- for stdin)")
    imp.set_defaults(func=_run(_import))
    close_all = target(esub.add_parser("close-all", help="close every open suggestion; prints how many"))
    close_all.add_argument("experiment_id")
    close_all.set_defaults(func=_run(_close_all))
    update = target(esub.add_parser(
        "update", help="change name, bandwidth, ttl, budget, failure cap ('none' unsets), early stopping, parameters, description or metadata",
    ))  # fmt: skip
    update.add_argument("experiment_id")
    update.add_argument("--name", default=_KEEP)
    update.add_argument("--parallel-bandwidth", type=int, default=_KEEP)
    update.add_argument("--suggestion-ttl-s", type=_none_or(float), default=_KEEP)
    update.add_argument("--observation-budget", type=_none_or(int), default=_KEEP)
    update.add_argument(
        "--max-consecutive-failures", type=_none_or(int), default=_KEEP,
        help="the failure cap; setting it (even to its value) lifts a too_many_failures stop",
    )  # fmt: skip
    update.add_argument(
        "--early-stopping", type=_json_option("--early-stopping"), default=_KEEP, metavar="JSON",
        help=f"the stopping rule as JSON or @FILE, e.g. '{_EXAMPLES['--early-stopping']}'",
    )  # fmt: skip
    update.add_argument(
        "--parameters", type=_json_option("--parameters"), default=_KEEP, metavar="JSON",
        help="every parameter as JSON or @FILE: the existing ones unchanged, plus new ones (added, never removed)",
    )  # fmt: skip
    update.add_argument("--description", type=_none_or(str), default=_KEEP, help="free text for people ('none' unsets)")
    update.add_argument(
        "--metadata", type=_json_option("--metadata"), default=_KEEP, metavar="JSON",
        help=f"every label as a JSON object or @FILE, replacing the old ones ({{}} clears), e.g. '{_EXAMPLES['--metadata']}'",
    )  # fmt: skip
    update.add_argument("--json", action="store_true", help="print the experiment, not just its id")
    update.set_defaults(func=_run(_update))
