"""`tauopt serve`, `tauopt token create|list|revoke`, `tauopt experiments list|show`.

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
from typing import Any, Callable

__all__ = ["register", "token_path", "ensure_first_token", "serve_on_engine"]

DEFAULT_DB = "./tauopt.db"


def token_path(db: str) -> Path:
    """Where `tauopt serve` writes the first token: next to the database."""
    return Path(db + ".token")


def register(subparsers: Any) -> None:
    serve = subparsers.add_parser("serve", help="run the HTTP API daemon")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--db", default=DEFAULT_DB, help="SQLite file (created if missing); default %(default)s")
    serve.add_argument("--durability", choices=["os", "fsync"], default="os")
    serve.add_argument("--pool", choices=["thread", "process"], default="process", help="where GP fits run")
    serve.add_argument("--suggestions-per-day", type=int, default=1000, help="default per-credential quota")
    serve.add_argument("--max-active-experiments", type=int, default=100, help="default per-credential cap")
    serve.add_argument("--heavy-read-rate", type=float, default=15.0, help="listings per second per credential")
    serve.add_argument("--heavy-read-burst", type=int, default=30)
    serve.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    serve.set_defaults(func=_serve)

    token = subparsers.add_parser("token", help="manage bearer tokens (create, list, revoke)")
    tsub = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    create = tsub.add_parser("create", help="create a token and print it once, alone on stdout")
    create.add_argument("--db", default=DEFAULT_DB)
    create.add_argument("--name", required=True)
    create.add_argument("--suggestions-per-day", type=int, default=None)
    create.add_argument("--max-active-experiments", type=int, default=None)
    create.set_defaults(func=_token_create)
    listing = tsub.add_parser("list", help="list credentials (never tokens)")
    listing.add_argument("--db", default=DEFAULT_DB)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=_token_list)
    revoke = tsub.add_parser("revoke", help="revoke a credential by id or unique name")
    revoke.add_argument("credential", help="credential id (cred_...) or name")
    revoke.add_argument("--db", default=DEFAULT_DB)
    revoke.set_defaults(func=_token_revoke)

    exps = subparsers.add_parser("experiments", help="inspect experiments in a database (read-only)")
    esub = exps.add_subparsers(dest="experiments_command", metavar="ACTION", required=True)
    elist = esub.add_parser("list", help="every experiment, of every credential")
    elist.add_argument("--db", default=DEFAULT_DB)
    elist.add_argument("--state", choices=["active", "completed", "archived"], default=None)
    elist.add_argument("--owner", default=None, help="only this credential's experiments")
    elist.add_argument("--json", action="store_true")
    elist.set_defaults(func=_experiments_list)
    show = esub.add_parser("show", help="one experiment with its counts and best observation")
    show.add_argument("experiment_id")
    show.add_argument("--db", default=DEFAULT_DB)
    show.set_defaults(func=_experiments_show)


# -- the engine's admin API over the database ---------------------------------------


def _with_admin(db: str, work: Callable[[Any], Any], *, create: bool = True) -> Any:
    """Run `work(admin)` on the engine's admin API over the database at `db`."""
    import anyio

    from ...engine._admin import Admin
    from ...engine._engine import open_store

    if not create and not Path(db).exists():
        raise SystemExit(f"tauopt: no database at {db}; pass --db PATH")

    from ...errors import ApiError

    async def run() -> Any:
        async with open_store(db) as store:
            try:
                return await work(Admin(store))
            except ApiError as exc:  # raised below, outside the store's task group (no ExceptionGroup)
                return exc

    result = anyio.run(run)
    if isinstance(result, ApiError):
        raise result
    return result


def _fail(message: str, code: int = 1) -> int:
    print(f"tauopt: {message}", file=sys.stderr)
    return code


async def ensure_first_token(admin: Any, db: str) -> Path | None:
    """On an empty database, create one credential and write its token to
    `<db>.token` (mode 0600). Returns the file's path, or None if credentials exist."""
    if await admin.credentials():
        return None
    path = token_path(db)
    cred, token = await admin.create_credential("default")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)  # also when the file already existed
        f.write(token + "\n")
    return path


# -- serve ------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ...engine._auth import Limits
    from ...engine._store import StoreError
    from ._server import create_app

    try:
        first = _with_admin(args.db, lambda admin: ensure_first_token(admin, args.db))
    except StoreError as exc:
        return _fail(str(exc))
    if first is not None:
        print(str(first.resolve()), flush=True)
        print(f"tauopt: first start; a token was written to {first} (mode 0600)", file=sys.stderr, flush=True)
    limits = Limits(
        suggestions_per_day=args.suggestions_per_day,
        max_active_experiments=args.max_active_experiments,
        heavy_read_rate=args.heavy_read_rate,
        heavy_read_burst=args.heavy_read_burst,
    )
    app = create_app(db=args.db, engine_options={"pool": args.pool, "durability": args.durability}, limits=limits)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=30)
    server = uvicorn.Server(config)
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then re-raises the signal
    # under the handlers it found. Finding these no-ops, the process exits 0.
    stopped: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: (stopped.append(signum), setattr(server, "should_exit", True)))
    server.run()
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
    config = uvicorn.Config(create_app(engine), host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]  # older uvicorn
    tg.start_soon(server.serve)
    while not server.started:
        await anyio.sleep(0.02)
    return {"http_port": port}, lambda: setattr(server, "should_exit", True)


# -- token --------------------------------------------------------------------------------


def _token_create(args: argparse.Namespace) -> int:
    from ...errors import ApiError

    async def create(admin: Any) -> Any:
        return await admin.create_credential(args.name, args.suggestions_per_day, args.max_active_experiments)

    try:
        cred, token = _with_admin(args.db, create)
    except ApiError as exc:
        return _fail(exc.message, 2)
    print(token, flush=True)
    print(f"tauopt: created credential {cred.id} ({cred.name}); the token is shown only once", file=sys.stderr)
    return 0


def _token_list(args: argparse.Namespace) -> int:
    async def creds(admin: Any) -> list[Any]:
        return await admin.credentials()

    found = _with_admin(args.db, creds, create=False)
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
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'ID':<22} {'NAME':<20} {'CREATED':<20} {'PER DAY':>8} {'ACTIVE':>7}  STATUS")
    for r in rows:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["created_at"]))
        status = "revoked" if r["revoked_at"] is not None else "active"
        per_day = r["suggestions_per_day"] or "default"
        cap = r["max_active_experiments"] or "default"
        print(f"{r['id']:<22} {r['name'][:20]:<20} {created:<20} {per_day!s:>8} {cap!s:>7}  {status}")
    return 0


def _token_revoke(args: argparse.Namespace) -> int:
    from ...errors import ApiError

    async def revoke(admin: Any) -> Any:
        return await admin.revoke_credential(args.credential)

    try:
        _with_admin(args.db, revoke, create=False)
    except ApiError as exc:
        return _fail(exc.message)
    print(f"tauopt: revoked {args.credential} (a running server stops accepting it within seconds)", file=sys.stderr)
    return 0


# -- experiments ---------------------------------------------------------------------------


def _experiments_list(args: argparse.Namespace) -> int:
    async def listing(admin: Any) -> list[Any]:
        return await admin.experiments(args.state, args.owner)

    found = _with_admin(args.db, listing, create=False)
    if args.json:
        print(json.dumps([dict(e.to_dict(), owner=e.owner) for e in found], indent=2))
        return 0
    print(f"{'ID':<18} {'NAME':<24} {'STATE':<10} {'OPEN':>5} {'OBS':>6}  OWNER")
    for e in found:
        print(f"{e.id:<18} {e.name[:24]:<24} {e.state:<10} {e.open_suggestions:>5} {e.observations:>6}  {e.owner or '-'}")
    return 0


def _experiments_show(args: argparse.Namespace) -> int:
    from ...errors import ApiError

    async def load(admin: Any) -> Any:
        return await admin.report(args.experiment_id)

    try:
        report = _with_admin(args.db, load, create=False)
    except ApiError as exc:
        if exc.error_type != "not_found":
            raise
        return _fail(f"no experiment {args.experiment_id!r} in {args.db}")
    exp, best = report.experiment, report.best
    out = dict(exp.to_dict(), owner=exp.owner, best=None if best is None else best.to_dict())
    print(json.dumps(out, indent=2))
    return 0
