"""A throwaway PostgreSQL cluster for the tests: a real server (``initdb`` + ``pg_ctl``) in a
temporary folder on a free local port, torn down afterwards.

PostgreSQL refuses to run as root, so as root the cluster runs as the ``postgres`` system
user (or ``nobody``), through ``runuser``. Binaries are found on ``$PATH`` or under
``/usr/lib/postgresql/<version>/bin`` (Debian's ``postgresql`` package). Runnable on its
own: ``python tests/pgcluster.py`` starts one, prints its URL and waits for Ctrl-C.
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
from pathlib import Path

SUPERUSER = "spotfleet"


def find_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    return candidates[-1] if candidates else None


def missing_binaries() -> list[str]:
    return [b for b in ("initdb", "pg_ctl") if find_binary(b) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as() -> str | None:
    """The system user to run the server as (None: this user, when not root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", "spotfleet-pg"], check=True)
    return "spotfleet-pg"


class Cluster:
    """One running server; ``url(db)`` names a database on it, ``new_database()`` makes one."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="spotfleet-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.user = _run_as()
        self.started = False

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *args] if self.user else list(args)

    def start(self) -> Cluster:
        os.chmod(self.root, 0o755)
        if self.user:
            shutil.chown(self.root, self.user)
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        out = subprocess.run(
            self._cmd(
                find_binary("initdb") or "initdb",
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ),
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
        )
        if out.returncode != 0:
            raise RuntimeError(f"initdb failed: {out.stderr.strip() or out.stdout.strip()}")
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        out = subprocess.run(
            self._cmd(
                find_binary("pg_ctl") or "pg_ctl",
                "-D",
                str(self.data),
                "-o",
                options,
                "-l",
                str(self.root / "server.log"),
                "-w",
                "-t",
                "60",
                "start",
            ),
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
        )
        if out.returncode != 0:
            log = (self.root / "server.log").read_text() if (self.root / "server.log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {out.stderr.strip()} {log[-2000:]}")
        self.started = True
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        if self.started:
            subprocess.run(
                self._cmd(find_binary("pg_ctl") or "pg_ctl", "-D", str(self.data), "-m", "immediate", "stop"),
                capture_output=True,
                cwd=self.root,
            )
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)


if __name__ == "__main__":
    cluster = Cluster().start()
    print(cluster.url(), flush=True)
    try:
        import signal

        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
