"""A throw-away PostgreSQL cluster for the sinks' tests and benches: ``initdb`` into a temporary
directory, a server on a free loopback port with password (SCRAM) authentication, stopped and
removed at the end.

As root (CI's user) ``initdb`` and the server run as Debian's unprivileged ``postgres`` user
(``runuser``); the data directory is that user's. The password reaches the sinks only through
``PGPASSWORD``, as a user's would; it is never on a command line (``initdb`` reads it from a file
that is removed at once)."""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Postgres:
    host: str
    port: int
    user: str
    password: str
    dbname: str = "postgres"

    def url(self, table: str, user: str | None = None) -> str:
        return f"postgres://{user or self.user}@{self.host}:{self.port}/{self.dbname}?table={table}"

    def connect(self):
        import psycopg

        return psycopg.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                               dbname=self.dbname, autocommit=True)


def bin_dir() -> str | None:
    """Where PostgreSQL's server programs are (Debian keeps them under /usr/lib/postgresql/N/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def throwaway_postgres(durable: bool = False, settings: dict[str, str] | None = None) -> Iterator[Postgres]:
    """A server for the duration of the ``with``, ``PGPASSWORD`` set to its password meanwhile.
    ``durable=False`` turns fsync and synchronous commit off (tests); a bench that measures a
    sink's delivery keeps them on, as a user's server has them. ``settings``: more server
    settings (``track_commit_timestamp``: when a bench reads the instant a batch became visible)."""
    where = bin_dir()
    if where is None:
        raise RuntimeError("PostgreSQL is not installed (make setup installs Debian's postgresql)")
    root = tempfile.mkdtemp(prefix="streamfold-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
    password = secrets.token_hex(12)
    pwfile = os.path.join(root, "pw")
    with open(pwfile, "w") as fh:
        fh.write(password)
    if as_user:
        shutil.chown(pwfile, "postgres")
    data = os.path.join(root, "data")
    subprocess.run([*as_user, f"{where}/initdb", "-D", data, "-U", "streamfold", f"--pwfile={pwfile}",
                    "-A", "scram-sha-256", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"],
                   check=True, capture_output=True)
    os.remove(pwfile)
    port = _free_port()
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1"
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off"
    options += "".join(f" -c {name}={value}" for name, value in (settings or {}).items())
    subprocess.run([*as_user, f"{where}/pg_ctl", "-D", data, "-o", options, "-w", "-l",
                    os.path.join(root, "log"), "start"], check=True, capture_output=True)
    before = os.environ.get("PGPASSWORD")
    os.environ["PGPASSWORD"] = password
    try:
        yield Postgres("127.0.0.1", port, "streamfold", password)
    finally:
        if before is None:
            os.environ.pop("PGPASSWORD", None)
        else:
            os.environ["PGPASSWORD"] = before
        subprocess.run([*as_user, f"{where}/pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
