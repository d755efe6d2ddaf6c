"""A throwaway PostgreSQL server for tests and benchmarks: its own cluster in a temporary
folder, on a free loopback port, stopped and removed at the end.

::

    with PostgresServer() as server:
        store = StateStore(server.url("db1"))     # a new database per name

It runs the server binaries of the machine (``pg_config --bindir``, else the newest
``/usr/lib/postgresql/*/bin``); :func:`postgres_bindir` is None where there are none
(``apt-get install -y postgresql`` brings them). ``initdb`` refuses to run as root, so
under root the cluster belongs to the ``postgres`` OS user and its commands run through
``runuser``. Connections over TCP need the password (SCRAM), so the URLs carry one.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["PASSWORD", "PostgresServer", "postgres_bindir"]

#: The superuser's password in every throwaway cluster (it listens on loopback only).
PASSWORD = "agent-apps-test"
_OS_USER = "postgres"


def postgres_bindir() -> Path | None:
    """Where the server binaries are (``initdb``, ``pg_ctl``), or None."""
    candidates = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=30, check=True)
            candidates.append(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


def _version(folder: str) -> float:
    try:
        return float(Path(folder).parent.name)
    except ValueError:
        return 0.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster, started by :meth:`start` and removed by :meth:`stop`.

    ``settings`` are server settings (``{"fsync": "off"}``: faster, fine for tests).
    """

    def __init__(self, *, settings: dict[str, str] | None = None) -> None:
        self.bindir = postgres_bindir()
        self.settings = {"listen_addresses": "127.0.0.1", **(settings or {})}
        self.port = 0
        self.folder: Path | None = None
        self._as_root = os.geteuid() == 0
        self._databases: set[str] = set()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> PostgresServer:
        if self.bindir is None:
            raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl): apt-get install -y postgresql")
        self.folder = Path(tempfile.mkdtemp(prefix="agent-apps-pg-"))
        if self._as_root:
            shutil.chown(self.folder, _OS_USER, _OS_USER)
        data, pwfile = self.folder / "data", self.folder / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self._as_root:
            shutil.chown(pwfile, _OS_USER, _OS_USER)
        self._run(
            "initdb", "-D", str(data), "-U", "postgres", "--pwfile", str(pwfile), "--auth-local=trust",
            "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync",
        )  # fmt: skip
        self.port = _free_port()
        options = " ".join(f"-c {key}={value}" for key, value in self.settings.items())
        options += f" -p {self.port} -c unix_socket_directories={self.folder}"
        self._run("pg_ctl", "-D", str(data), "-o", options, "-l", str(self.folder / "log"), "-w", "-t", "60", "start")
        return self

    def stop(self) -> None:
        """Stop the server at once (no checkpoint: it is thrown away) and remove its folder."""
        if self.folder is None:
            return
        if (self.folder / "data" / "postmaster.pid").exists():
            self.pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None

    def pg_ctl(self, *args: str) -> None:
        """Run ``pg_ctl`` on this cluster: ``server.pg_ctl("stop", "-m", "immediate")``,
        ``server.pg_ctl("start")`` (the port and settings it started with)."""
        assert self.folder is not None
        extra: list[str] = []
        if args[:1] in (("start",), ("restart",)):
            options = " ".join(f"-c {key}={value}" for key, value in self.settings.items())
            options += f" -p {self.port} -c unix_socket_directories={self.folder}"
            extra = ["-o", options, "-l", str(self.folder / "log")]
        self._run("pg_ctl", "-D", str(self.folder / "data"), *extra, "-w", "-t", "60", *args)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- using it ----------------------------------------------------------------------

    def url(self, database: str = "postgres", *, password: bool = True, **params: str) -> str:
        """A ``postgresql://`` URL of ``database`` (created on first use), with ``params``
        as its query string."""
        if database != "postgres" and database not in self._databases:
            self.psql(f'CREATE DATABASE "{database}"')
            self._databases.add(database)
        secret = f":{PASSWORD}" if password else ""
        query = "&".join(f"{key}={value}" for key, value in params.items())
        return f"postgresql://postgres{secret}@127.0.0.1:{self.port}/{database}" + (f"?{query}" if query else "")

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL as the superuser (over the cluster's Unix socket); its output."""
        assert self.bindir is not None and self.folder is not None
        psql = shutil.which("psql") or str(self.bindir / "psql")
        out = self._command(
            psql, "-h", str(self.folder), "-p", str(self.port), "-U", "postgres", "-d", database, "-X", "-q", "-A",
            "-t", "-v", "ON_ERROR_STOP=1", "-c", sql,
        )  # fmt: skip
        return out.strip()

    # -- internals ---------------------------------------------------------------------

    def _run(self, binary: str, *args: str) -> str:
        assert self.bindir is not None
        return self._command(str(self.bindir / binary), *args)

    def _command(self, *argv: str) -> str:
        command = ["runuser", "-u", _OS_USER, "--", *argv] if self._as_root else list(argv)
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.folder)
        if done.returncode != 0:
            log = ""
            if self.folder is not None and (self.folder / "log").exists():
                log = "\n" + (self.folder / "log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stderr.strip()}{log}")
        return done.stdout
