"""A throwaway PostgreSQL cluster for the tests: Debian's server binaries, initdb in a
temp dir the `postgres` user owns, a free 127.0.0.1 port and a unix socket in that
dir, trust auth for this cluster only; stopped and removed at the end. Never the
system cluster (port 5432).

initdb and postgres refuse to run as root, so as root they run as `postgres`
(`runuser -u postgres -- ...`); pytest's own tmp_path (under a 0700 directory of
root's) is out of that user's reach, hence a directory of its own under /tmp.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PG_BIN", "PgCluster", "missing_reason", "start_cluster"]

PG_BIN = Path(os.environ.get("TAUOPT_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))


def missing_reason() -> str | None:
    """Why no cluster can be started here (one line), or None."""
    for tool in ("initdb", "pg_ctl", "postgres"):
        if not (PG_BIN / tool).is_file():
            return f"PostgreSQL server binaries not found in {PG_BIN} (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run initdb as"
    return None


def _as_server_user(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgCluster:
    root: Path
    port: int

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres", **settings: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in settings.items())
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}" + (f"?{query}" if query else "")

    def psql(self, sql: str, database: str = "postgres") -> str:
        out = subprocess.run(
            [str(PG_BIN / "psql"),
             "-h", str(self.root), "-p", str(self.port), "-U", "postgres", "-d", database,
             "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql],
            check=True, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        return out.stdout.strip()

    def new_schema(self, database: str = "postgres") -> str:
        """A fresh, empty schema; its name (a URL's ?search_path= makes it a store's own)."""
        name = "s_" + uuid.uuid4().hex[:12]
        self.psql(f"CREATE SCHEMA {name}", database)
        return name

    def new_database(self) -> str:
        """A fresh, empty database; its name."""
        name = "t_" + uuid.uuid4().hex[:12]
        self.psql(f"CREATE DATABASE {name}")
        return name

    def pg_ctl(self, *args: str) -> None:
        subprocess.run(
            _as_server_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), *args]),
            check=True, capture_output=True, timeout=60,
        )

    def stop(self, mode: str = "fast") -> None:
        self.pg_ctl("-m", mode, "-w", "stop")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        self.pg_ctl("-o", options, "-w", "-t", "30", "start")

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> PgCluster:
    root = Path(tempfile.mkdtemp(prefix="tauopt-pg-", dir="/tmp"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    cluster = PgCluster(root, _free_port())
    try:
        subprocess.run(
            _as_server_user([str(PG_BIN / "initdb"), "-D", str(cluster.data), "-A", "trust", "-U", "postgres",
                             "--no-sync", "-E", "UTF8", "--locale", "C"]),
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        cluster.start()
    except BaseException:
        cluster.destroy()
        raise
    return cluster
