"""`tauopt serve`, `tauopt token create|list|revoke` (experiments: tauopt/_cli_experiments.py).

Heavy imports (fastapi, uvicorn, the SQLite store) happen inside the
commands, so `tauopt --help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

from ...errors import ApiError
from ...limits import MAX_WAIT_S, check_wait

if TYPE_CHECKING:
    from ...engine import Admin
    from ...store import CredentialRecord

__all__ = ["register", "token_path", "ensure_first_token", "serve_on_engine"]

DEFAULT_DB = "./tauopt.db"
# uvicorn's `server: uvicorn` on every answer: nothing a client needs (it names the
# software to whoever asks), and one header less for every client to parse. Date stays
# (RFC 9110 asks an origin server with a clock to send it).
SERVER_HEADER = False
# A worker holds one connection idle while it evaluates (seconds to hours): closing it
# after uvicorn's default 5 s costs every ask a new connection, and thousands of workers
# reconnecting at once overflow the accept backlog (connection resets). 75 s is nginx's
# default; workers evaluating longer reconnect once per evaluation, which is cheap.
KEEP_ALIVE_S = 75
# One connection per worker, up to this many workers on one daemon; `serve` raises its
# open-files limit to fit them (`raise_open_files_limit`).
MAX_CONNECTIONS = 10_000
_FILES_BESIDE_CONNECTIONS = 256  # the database, its WAL, logs, pipes to the GP pool, listening sockets
T = TypeVar("T")


def _wait_cap(text: str) -> float:
    """--max-wait-s: seconds, from 0 (asks never wait) to the protocol's MAX_WAIT_S, as check_wait says."""
    try:
        return check_wait(float(text)) or 0.0
    except (ValueError, ApiError):
        raise argparse.ArgumentTypeError(f"give a number of seconds from 0 to {MAX_WAIT_S:g}, not {text!r}") from None


def token_path(db: str) -> Path:
    """Where `tauopt serve` writes the first token: next to the database file; for a
    database server (postgresql://), ./tauopt.token in the directory it starts in."""
    from ...store import is_url_of_server

    return Path("tauopt.token") if is_url_of_server(db) else Path(db + ".token")


def _missing(db: str) -> bool:
    """No database file at `db` (a server's URL is never missing here: connecting tells)."""
    from ...store import is_url_of_server

    return not is_url_of_server(db) and not Path(db).exists()


def register(subparsers: Any) -> None:
    serve = subparsers.add_parser("serve", help="run the HTTP API daemon")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default %(default)s; 0.0.0.0: every interface)")
    serve.add_argument("--port", type=int, default=8080, help="the HTTP port (default %(default)s)")
    serve.add_argument(
        "--db", "--store", dest="db", default=DEFAULT_DB, metavar="PATH|URL",
        help="SQLite file (created if missing) or postgresql://user@host:port/database; default %(default)s",
    )
    serve.add_argument(
        "--durability", choices=["os", "fsync"], default="os",
        help="os: commits survive a killed process; fsync: also power loss (default %(default)s)",
    )  # fmt: skip
    serve.add_argument(
        "--advertise-url", default=None, metavar="http://HOST:PORT",
        help="share a postgresql:// --store with other daemons; the URL they reach this one at",
    )
    serve.add_argument(
        "--lease-s", type=float, default=3.0,
        help="with --advertise-url: a dead daemon's experiments move after this many seconds (default %(default)g)",
    )
    serve.add_argument(
        "--pool", choices=["thread", "process", "dask"], default="process", help="where GP fits run (default %(default)s)"
    )
    serve.add_argument(
        "--no-warm-pool", dest="warm_pool", action="store_false",
        help="start the GP pool at the first GP ask, not in the background at start (saves its memory until then)",
    )  # fmt: skip
    serve.add_argument(
        "--dask-scheduler",
        default=None,
        metavar="tcp://HOST:PORT",
        help="with --pool dask: an existing Dask scheduler (default: a LocalCluster of this machine)",
    )
    serve.add_argument(
        "--dask-connect-timeout-s", type=float, default=10.0, metavar="SECONDS",
        help="with --dask-scheduler: how long to try reaching the scheduler (and its workers) at start and "
        "when reconnecting before giving up (default %(default)g)",
    )
    serve.add_argument("--suggestions-per-day", type=int, default=1000, help="default per-credential quota")
    serve.add_argument("--max-active-experiments", type=int, default=100, help="default per-credential cap")
    serve.add_argument("--heavy-read-rate", type=float, default=15.0, help="listings per second per credential")
    serve.add_argument("--heavy-read-burst", type=int, default=30, help="listings allowed at once before the rate applies")
    serve.add_argument(
        "--max-wait-s", type=_wait_cap, default=MAX_WAIT_S,
        help="the longest a waiting ask (suggest with wait_s) is held here; longer waits are cut to it (default %(default)g)",
    )
    serve.add_argument(
        "--max-waiting-asks", type=int, default=16,
        help="asks of one credential waiting for a slot at once; more are answered at once (default %(default)d)",
    )
    serve.add_argument("--header-timeout", type=float, default=10.0, help="seconds a connection has to send its request headers")
    serve.add_argument(
        "--body-timeout", type=float, default=10.0,
        help="seconds a request has to send its whole body after its headers; then 408 and closed (default %(default)g)",
    )
    serve.add_argument(
        "--max-connections-per-address", type=int, default=None,
        help="open connections from one client address (default: a quarter of --max-connections; "
        "behind a proxy every client shares its address: raise it to --max-connections)",
    )
    serve.add_argument(
        "--max-connections", type=int, default=MAX_CONNECTIONS,
        help="open connections beyond this are closed at once (default %(default)d; each takes a file descriptor)",
    )
    serve.add_argument(
        "--keep-alive-s", type=int, default=KEEP_ALIVE_S,
        help="an idle kept-alive connection is closed after this many seconds; keep it above your evaluation "
        "time, so a worker's connection outlives its evaluation (default %(default)d)",
    )
    serve.add_argument("--max-header-bytes", type=int, default=64 * 1024, help="request line + headers, in bytes")
    serve.add_argument("--max-headers", type=int, default=100, help="header lines per request")
    serve.add_argument(
        "--metrics-token", default=os.environ.get("TAUOPT_METRICS_TOKEN"),
        help="require `Authorization: Bearer <this>` on GET /metrics (default: open; env TAUOPT_METRICS_TOKEN)",
    )
    serve.add_argument("--metrics-top-experiments", type=int, default=10, help="experiments with per-experiment gauges (served with --metrics-token only)")
    serve.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"], help="(default %(default)s)"
    )
    serve.add_argument(
        "--access-log", action=argparse.BooleanOptionalAction, default=True,
        help="one line per request on stdout at --log-level info (default on); --no-access-log spares a busy "
        "daemon that line's formatting and write (~15 us of CPU a request)",
    )
    serve.set_defaults(func=_serve)

    token = subparsers.add_parser("token", help="manage bearer tokens (create, list, revoke, transfer)")
    tsub = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    create = tsub.add_parser("create", help="create a token and print it once, alone on stdout")
    create.add_argument("--db", default=DEFAULT_DB, help="the daemon's database (default %(default)s)")
    create.add_argument("--name", required=True, help="a name unique in the database (revoke, transfer and --owner take it)")
    create.add_argument("--suggestions-per-day", type=int, default=None, help="this token's quota (default: the server's)")
    create.add_argument("--max-active-experiments", type=int, default=None, help="this token's cap (default: the server's)")
    create.add_argument("--create", action="store_true", help="start a new database if --db does not exist")
    create.set_defaults(func=_token_create)
    listing = tsub.add_parser("list", help="list credentials (never tokens)")
    listing.add_argument("--db", default=DEFAULT_DB)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=_token_list)
    revoke = tsub.add_parser("revoke", help="revoke a credential by id or unique name")
    revoke.add_argument("credential", help="credential id (cred_...) or name")
    revoke.add_argument("--db", default=DEFAULT_DB)
    revoke.set_defaults(func=_token_revoke)
    transfer = tsub.add_parser(
        "transfer", help="give a credential's experiments to another (after revoking a leaked token); daemon stopped"
    )
    transfer.add_argument("source", help="the credential whose experiments move (id or name; revoked or not)")
    transfer.add_argument("target", help="the credential that receives them (id or name; not revoked)")
    transfer.add_argument("--db", default=DEFAULT_DB)
    transfer.set_defaults(func=_token_transfer)


# -- the engine's admin API over the database ---------------------------------------


def _with_admin(db: str, work: Callable[[Admin], Awaitable[T]], *, create: bool = True, exclusive: bool = False) -> T:
    """Run `work(admin)` on the engine's admin API over the database at `db`
    (`tauopt.engine.run_admin`). Not exclusive by default: token commands work beside
    a daemon that owns the file; `serve` and `token transfer` ask for ownership."""
    from ...engine import run_admin

    if not create and _missing(db):
        raise SystemExit(f"tauopt: no database at {db}; pass --db PATH")
    return run_admin(db, work, exclusive=exclusive)


def _shown(text: str) -> str:
    """A stored name as the terminal should see it: control, format and line-
    separator characters escaped (an ESC in a name must not drive the terminal,
    a newline must not forge a row)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _fail(message: str, code: int = 1) -> int:
    print(f"tauopt: {message}", file=sys.stderr)
    return code


class TokenFileExists(Exception):
    """A first start found something at the token file's path; nothing was written."""


async def ensure_first_token(admin: Admin, db: str) -> Path | None:
    """On a database without credentials, create one and write its token to a
    NEW file `<db>.token` (mode 0600). Returns its path, or None if credentials
    exist (a restart). Raises TokenFileExists if anything is at that path."""
    if await admin.credentials():
        return None
    path = token_path(db)
    created = False

    def write(token: str) -> None:  # before the credential is stored: no credential without its file
        nonlocal created
        fd = _create_token_file(path, db)
        created = True
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")

    try:
        await admin.create_credential("default", write_token=write)
    except BaseException:
        if created:
            path.unlink(missing_ok=True)  # ours (O_EXCL): a token without its credential is useless
        raise
    return path


def _create_token_file(path: Path, db: str) -> int:
    """O_EXCL|O_NOFOLLOW, 0600: never write through a symlink, into a file someone
    else created (and may read), or over the token of an existing deployment."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        kind = "a symbolic link" if path.is_symlink() else "a file"
        raise TokenFileExists(
            f"{db} has no credentials, but {path} already exists ({kind}); nothing was written. "
            f"If this is an existing deployment, its database was deleted or replaced: restore it. "
            f"To start a new deployment, remove {path} (or choose another --db)"
        ) from None


# -- serve ------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ...engine._auth import Limits
    from ...store import StoreError
    from ...errors import ApiError
    from ._guard import ConnectionLimits, guarded_protocol
    from ._server import create_app

    for option in ("header_timeout", "body_timeout", "max_header_bytes", "max_headers", "max_connections", "max_connections_per_address", "max_waiting_asks", "keep_alive_s", "dask_connect_timeout_s"):
        if getattr(args, option) is not None and not getattr(args, option) > 0:
            return _fail(f"--{option.replace('_', '-')} must be positive, not {getattr(args, option)}", 2)
    _log_to_stderr(args.log_level)
    try:
        pool = _pool_option(args.pool, args.dask_scheduler, args.dask_connect_timeout_s)
    except ValueError as exc:
        return _fail(str(exc), 2)
    except RuntimeError as exc:  # the cluster cannot serve (DaskUnavailable)
        return _fail(str(exc))
    db: Any = args.db
    if args.advertise_url is not None:
        from ...store import is_url_of_server, open_store

        if not is_url_of_server(args.db) or not args.lease_s > 0:
            return _fail("--advertise-url goes with a postgresql:// --store and a positive --lease-s", 2)
        db = open_store(args.db, shared_as=args.advertise_url, lease_s=args.lease_s)
    try:
        # several daemons: none owns the database, so the first token is written without its lock
        first = _with_admin(
            args.db, lambda admin: ensure_first_token(admin, args.db), exclusive=args.advertise_url is None
        )
    except (StoreError, TokenFileExists) as exc:
        return _fail(str(exc))
    except ApiError as exc:  # store_in_use: another engine serves this file
        return _fail(exc.message)
    if first is not None:
        print(str(first.resolve()), flush=True)
        print(f"tauopt: first start; a token was written to {first} (mode 0600)", file=sys.stderr, flush=True)
    limits = Limits(
        suggestions_per_day=args.suggestions_per_day,
        max_active_experiments=args.max_active_experiments,
        heavy_read_rate=args.heavy_read_rate,
        heavy_read_burst=args.heavy_read_burst,
        max_wait_s=args.max_wait_s,
        max_waiting_asks=args.max_waiting_asks,
    )
    app = create_app(
        db=db, engine_options={"pool": pool, "durability": args.durability, "warm_pool": args.warm_pool}, limits=limits,
        metrics_token=args.metrics_token, metrics_top_experiments=args.metrics_top_experiments,
        doors=getattr(args, "doors", ()),
        forward_lease_s=None if args.advertise_url is None else args.lease_s, freeze_at_start=True,
    )
    # once the store has opened: a daemon that cannot start says why in one line
    print(open_files_line(args.max_connections), file=sys.stderr, flush=True)
    print(f"tauopt: dashboard at http://{args.host}:{args.port}/ (sign in with a token)", file=sys.stderr, flush=True)
    guard = ConnectionLimits(
        args.header_timeout, args.max_header_bytes, args.max_headers, args.max_connections, args.body_timeout,
        args.max_connections_per_address,
    )
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=30,
        http=guarded_protocol(guard), backlog=min(65535, args.max_connections), server_header=SERVER_HEADER,
        timeout_keep_alive=args.keep_alive_s, access_log=args.access_log,
    )  # fmt: skip
    server = uvicorn.Server(config)
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal
    # under the handlers it found. Finding these no-ops, the process exits 0.
    stopped: list[int] = []

    def _stop(signum: int, frame: object) -> None:
        stopped.append(signum)
        server.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stop)
    fenced: list[str] = []
    shared = getattr(db, "shared", None)
    if shared is not None:  # a lapsed lease: stop, to be restarted fresh; the workers fail over meanwhile

        def _lost(why: str) -> None:
            fenced.append(why)
            server.should_exit = True

        shared.on_lost = _lost
    server.run()
    if fenced:
        return _fail(f"stopped: {fenced[0]}")
    return 0 if server.started or stopped else 1


async def serve_on_engine(tg: Any, engine: Any, host: str, port: int) -> tuple[dict[str, Any], Callable[[], None]]:
    """Serve the HTTP API for an engine another door owns (the CLI composes them),
    in that door's task group: ({"http_port": port}, stop)."""
    import anyio

    from ...errors import invalid

    try:
        import uvicorn

        from ._server import create_app
    except ImportError as exc:
        raise invalid(f"--http-port needs the server extra (pip install 'tauopt[server]'): {exc}") from exc
    host = host[1:-1] if host.startswith("[") else host
    config = uvicorn.Config(
        create_app(engine), host=host, port=port, log_level="warning", lifespan="on", server_header=SERVER_HEADER,
        timeout_keep_alive=KEEP_ALIVE_S,
    )  # fmt: skip
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[attr-defined,method-assign]  # older uvicorn
    tg.start_soon(server.serve)
    while not server.started:
        await anyio.sleep(0.02)
    return {"http_port": port}, lambda: setattr(server, "should_exit", True)


def _pool_option(kind: str, scheduler: str | None, connect_timeout_s: float = 10.0) -> Any:
    """The Engine's `pool` for `--pool` / `--dask-scheduler`. A Dask scheduler is
    reached (and its workers checked) before the daemon writes or listens, so a wrong
    address ends `tauopt serve` with one line, not a traceback at the first GP ask."""
    if scheduler is not None and kind != "dask":
        raise ValueError("--dask-scheduler goes with --pool dask")
    if kind != "dask":
        return kind
    import importlib.util

    if importlib.util.find_spec("distributed") is None:
        raise RuntimeError("--pool dask needs Dask distributed: pip install 'tauopt[dask]'")
    if scheduler is None:
        return "dask"  # a LocalCluster, started with the engine
    import anyio

    from ...compute import DaskExecutor, StrategyPool, check_dask_cluster

    anyio.run(check_dask_cluster, scheduler, connect_timeout_s)
    return StrategyPool(DaskExecutor(scheduler, connect_timeout_s=connect_timeout_s))


def raise_open_files_limit() -> tuple[int, int, int]:
    """Raise this process's open-files limit (RLIMIT_NOFILE) to its hard limit, which a
    process may do by itself: (soft limit before, after, hard limit). A platform without
    the resource module, or one refusing, leaves it as it was."""
    try:
        import resource
    except ImportError:  # Windows
        return -1, -1, -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError):
            return soft, soft, hard
        return soft, wanted, hard
    return soft, soft, hard


def open_files_line(max_connections: int) -> str:
    """Raise the open-files limit and say what it is, and what to do when it cannot
    hold `max_connections` connections beside the daemon's own files."""
    before, now, hard = raise_open_files_limit()
    if now < 0:
        return "tauopt: open-files limit: not settable on this platform"
    needed = max_connections + _FILES_BESIDE_CONNECTIONS
    raised = f"raised from {before} to {now}" if now != before else f"{now}"
    line = f"tauopt: open-files limit {raised} (hard limit {hard}); --max-connections {max_connections} needs about {needed}"
    if now < needed:
        line += (
            f". Too low: connections beyond ~{max(now - _FILES_BESIDE_CONNECTIONS, 0)} will fail. Raise the hard limit "
            f"(`ulimit -Hn {needed}` as root, LimitNOFILE={needed} in a systemd unit, nofile in "
            f"/etc/security/limits.conf) or lower --max-connections"
        )
    return line


def _log_to_stderr(level: str) -> None:
    """tauopt's own log records (a store failure, a file gone) on stderr with their
    level, like uvicorn's; without a handler Python prints bare messages."""
    import logging

    logger = logging.getLogger("tauopt")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(level.upper())


# -- token --------------------------------------------------------------------------------


def _token_create(args: argparse.Namespace) -> int:
    from ...errors import ApiError

    if args.db != ":memory:" and _missing(args.db) and not args.create:
        # A token in a stray new file is one no running daemon accepts.
        return _fail(
            f"no database at {args.db}; pass --db with the file `tauopt serve --db` uses "
            "(default ./tauopt.db in the directory it started in), or --create to start a new database there"
        )

    async def create(admin: Admin) -> tuple[CredentialRecord, str]:
        return await admin.create_credential(args.name, args.suggestions_per_day, args.max_active_experiments)

    try:
        cred, token = _with_admin(args.db, create)
    except ApiError as exc:
        return _fail(exc.message, 2)
    print(token, flush=True)
    print(f"tauopt: created credential {cred.id} ({cred.name}); the token is shown only once", file=sys.stderr)
    return 0


def _token_list(args: argparse.Namespace) -> int:
    async def creds(admin: Admin) -> list[CredentialRecord]:
        return await admin.credentials()

    found = _with_admin(args.db, creds, create=False)
    if args.json:
        rows = [
            {
                "id": c.id,
                "name": c.name,
                "created_at": c.created_at,
                "suggestions_per_day": c.suggestions_per_day,
                "max_active_experiments": c.max_active_experiments,
                "revoked_at": c.revoked_at,
            }
            for c in found
        ]
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'ID':<22} {'NAME':<20} {'CREATED':<20} {'PER DAY':>8} {'ACTIVE':>7}  STATUS")
    for c in found:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.created_at))
        status = "revoked" if c.revoked_at is not None else "active"
        per_day = c.suggestions_per_day or "default"
        cap = c.max_active_experiments or "default"
        print(f"{c.id:<22} {_shown(c.name)[:20]:<20} {created:<20} {per_day!s:>8} {cap!s:>7}  {status}")
    return 0


def _token_revoke(args: argparse.Namespace) -> int:
    from ...errors import ApiError

    async def revoke(admin: Admin) -> CredentialRecord:
        return await admin.revoke_credential(args.credential)

    try:
        was = _with_admin(args.db, revoke, create=False)
    except ApiError as exc:
        return _fail(exc.message)
    if was.revoked_at is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(was.revoked_at))
        print(f"tauopt: {args.credential} was already revoked (at {when}); nothing changed", file=sys.stderr)
        return 0
    print(f"tauopt: revoked {args.credential} (a running server stops accepting it within seconds)", file=sys.stderr)
    return 0


def _token_transfer(args: argparse.Namespace) -> int:
    """Move every experiment of one credential to another (`Admin.transfer_experiments`).
    It owns the file while it works: a running daemon keeps each live experiment's
    owner in memory, so the daemon must be stopped (it is refused otherwise), and
    restarted after."""
    from ...engine import Transfer
    from ...errors import ApiError

    async def transfer(admin: Admin) -> Transfer:
        return await admin.transfer_experiments(args.source, args.target)

    try:
        done = _with_admin(args.db, transfer, create=False, exclusive=True)
    except ApiError as exc:
        if exc.error_type == "store_in_use":  # the daemon runs: the advice for this command first
            return _fail(
                f"stop `tauopt serve` first, transfer, then start it again: {args.db} is open in a running engine "
                f"(pid {exc.details.get('pid', '?')} on {exc.details.get('host', '?')}), which keeps each live "
                "experiment's owner in memory"
            )
        return _fail(exc.message)
    src, dst = done.source, done.target
    print(done.moved, flush=True)
    print(f"tauopt: moved {done.moved} experiment(s) from {_shown(src.name)} ({src.id}) to {_shown(dst.name)} ({dst.id})", file=sys.stderr)
    return 0
