"""A throwaway PostgreSQL cluster for the tests: `initdb` + `pg_ctl` in a temp dir, on a free port.

Debian's `postgresql` package (scripts/setup.sh installs it) puts the binaries under
/usr/lib/postgresql/<version>/bin. `initdb` refuses to run as root, so as root (CI) the
cluster is made and run by the `postgres` user (the package creates it) with `runuser`.
Locally a missing PostgreSQL skips with a reason; under CI=true it fails.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def find_bin() -> str | None:
    """The folder holding initdb and pg_ctl: on PATH, else Debian's newest version."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return os.path.dirname(found)
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(versions[-1]) if versions else None


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL is required under CI=true: {reason} (scripts/setup.sh installs Debian's postgresql)")
    pytest.skip(f"PostgreSQL is not available here: {reason}; run scripts/setup.sh as root to install it")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A running cluster: `url(db)` names a database on it; `create_db()` makes a fresh one."""

    def __init__(self, bindir: str, root: str, port: int, as_user: list[str]):
        self.bindir, self.root, self.port, self.as_user = bindir, root, port, as_user

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(sql)

    def create_db(self) -> str:
        name = "t_" + uuid.uuid4().hex[:12]
        self.admin(f"CREATE DATABASE {name}")
        return name

    def drop_db(self, name: str) -> None:
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def restart(self) -> None:
        """`pg_ctl restart` (fast mode): every session ends, the server comes back on the same port."""
        done = subprocess.run(
            [*self.as_user, os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.root, "data"), "-l", os.path.join(self.root, "log"), "-m", "fast", "-w", "-t", "120", "restart"],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if done.returncode != 0:
            pytest.fail(f"pg_ctl restart failed: {done.stderr[-1000:]}")

    def stop(self) -> None:
        subprocess.run(
            [*self.as_user, os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.root, "data"), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def cluster() -> Iterator[Cluster]:
    bindir = find_bin()
    if bindir is None:
        unavailable("no initdb/pg_ctl on PATH or under /usr/lib/postgresql/*/bin")
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        unavailable(f"psycopg is not installed ({exc}); pip install -e '.[dev]'")
    root = tempfile.mkdtemp(prefix="graphlab-pg-")
    as_user: list[str] = []
    if os.getuid() == 0:  # initdb refuses root: the cluster belongs to the `postgres` user
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            unavailable("running as root and there is no `postgres` user to own the cluster")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        os.chmod(os.path.dirname(root), os.stat(os.path.dirname(root)).st_mode)  # /tmp is world-traversable
        as_user = ["runuser", "-u", "postgres", "--"]
    data = os.path.join(root, "data")
    port = _free_port()
    init = subprocess.run(
        [*as_user, os.path.join(bindir, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if init.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"initdb failed: {init.stderr[-2000:]}")
    # pg_stat_statements (contrib, in Debian's postgresql package): tests count the statements a boundary sends
    opts = (
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 -c shared_buffers=32MB "
        "-c shared_preload_libraries=pg_stat_statements"
    )
    start = subprocess.run(
        [*as_user, os.path.join(bindir, "pg_ctl"), "-D", data, "-o", opts, "-l", os.path.join(root, "log"), "-w", "-t", "60", "start"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    c = Cluster(bindir, root, port, as_user)
    if start.returncode != 0:
        log = open(os.path.join(root, "log")).read()[-2000:] if os.path.exists(os.path.join(root, "log")) else ""
        c.stop()
        pytest.fail(f"pg_ctl start failed: {start.stderr[-1000:]} {log}")
    try:
        yield c
    finally:
        c.stop()
