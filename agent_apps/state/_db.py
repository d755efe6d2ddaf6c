"""The one place that opens the state store's SQLite database.

* **Lazily**: constructing a :class:`Database` touches no file; the first read or write
  opens it, creates it when missing and applies pending migrations.
* **WAL** journal, ``synchronous=NORMAL``: readers never wait for the writer, a commit
  costs no fsync, and a killed process (``kill -9``) loses at most the transaction it
  was in; a committed one survives and the file is never left corrupt.
* **Short write transactions** taken with ``BEGIN IMMEDIATE``, so a writer waits for
  the lock (up to :data:`BUSY_TIMEOUT`) instead of failing on a lock upgrade; several
  processes can share the file.
* **Off the event loop**: async code goes through :meth:`Database.call`, which runs the
  work on one thread of the store's own. A database kept busy by another process then
  stalls that thread, never the loop (measured by ``benchmarks/bench_sessions.py``).
* A database of a **newer schema**, another program's SQLite file or a **corrupt** file
  raises :class:`StateError` naming the file; nothing is reset or overwritten.
* **Private**: the file and its ``-wal`` and ``-shm`` are ``0600`` and the folders it
  creates ``0700``, whatever the umask (conversations, memory and tool output are in
  it). A store made wider (by an older version) is tightened when opened, and so is
  its folder when that is agent-apps' own (the agent-apps home, or a ``.agent-apps``).
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ..host_files import private_file, private_folder
from .errors import StateError
from .schema import APPLICATION_ID, MIGRATIONS

__all__ = ["BUSY_TIMEOUT", "MEMORY", "Database"]

T = TypeVar("T")

#: Seconds a write waits for another process's transaction before giving up.
BUSY_TIMEOUT = 10.0
#: The path of a private in-memory store (tests, throwaway managers).
MEMORY = ":memory:"


class Database:
    """A lazily opened SQLite connection, shared by the threads of one process under a
    lock (SQLite serializes writers anyway; one connection keeps the cost per call low)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = MEMORY if str(path) == MEMORY else str(Path(path).expanduser())
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._on_open: list[Callable[[sqlite3.Connection], None]] = []

    # -- access ------------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection, for reads: every statement in the block sees one snapshot."""
        with self._lock:
            conn = self._connect()
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    if conn.in_transaction:
                        conn.rollback()
            except sqlite3.Error as exc:
                raise self._error(exc) from exc

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed when the block ends, rolled back if it raises."""
        with self._lock:
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:
                        conn.rollback()
                    raise
                conn.commit()
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.rollback()
                raise self._error(exc) from exc

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` (which uses :meth:`read` / :meth:`write`) on the
        store's thread. A cancelled caller does not cancel a write already queued."""
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(1, thread_name_prefix="agent-apps-state")
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
        return await asyncio.shield(future)

    def close(self) -> None:
        """Close the connection and stop the store's thread (reopened on next use)."""
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @property
    def opened(self) -> bool:
        return self._conn is not None

    def on_open(self, fn: Callable[[sqlite3.Connection], None]) -> None:
        """Call ``fn(conn)`` once the database is open and migrated (now, if it is):
        how a ContextManager subscribes the persisted event subscriptions. A callback
        that fails is logged; the store opens all the same."""
        with self._lock:
            self._on_open.append(fn)
            if self._conn is not None:
                _opened(fn, self._conn)

    # -- opening -----------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            conn = self._conn = self._open()
        return conn

    def _open(self) -> sqlite3.Connection:
        if self.path != MEMORY:
            try:
                folder = Path(self.path).parent
                private_folder(folder, tighten=_ours(folder))
            except OSError as exc:
                raise StateError(f"cannot create its folder: {exc.strerror}", path=self.path) from None
            _keep_private(self.path)
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StateError(f"cannot open it: {exc}", path=self.path) from None
        try:
            self._check(conn)
            if self.path != MEMORY:
                _wal(conn)
                conn.execute("PRAGMA journal_size_limit = 16777216")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            # deleted content (retention, rm) is overwritten, not left in free pages
            conn.execute("PRAGMA secure_delete = ON")
            self._migrate(conn)
            for fn in self._on_open:
                _opened(fn, conn)
        except StateError:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise self._error(exc) from None
        return conn

    def _check(self, conn: sqlite3.Connection) -> None:
        """Refuse what is not ours, or newer than us, before writing anything."""
        # one read transaction: the three reads see one state of the file, not a
        # migration another process commits between them
        conn.execute("BEGIN")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]  # raises on a non-database
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        finally:
            conn.execute("COMMIT")
        if version > len(MIGRATIONS):
            raise StateError(
                f"it was written by a newer agent-apps (schema version {version}; this version knows up to "
                f"{len(MIGRATIONS)}): upgrade agent-apps, or point AGENT_APPS_STATE or state.path at another file",
                path=self.path,
            )
        if (version and app != APPLICATION_ID) or (not version and tables):
            raise StateError(
                "it is an SQLite database of another program, not an agent-apps state store "
                "(nothing was changed); point AGENT_APPS_STATE or state.path at another file",
                path=self.path,
            )

    def _migrate(self, conn: sqlite3.Connection) -> None:
        if conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS):
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            # read again under the write lock: another process may have just migrated
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for number in range(version + 1, len(MIGRATIONS) + 1):
                for statement in _statements(MIGRATIONS[number - 1]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number}")
            conn.commit()
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise

    def _error(self, exc: sqlite3.Error) -> StateError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StateError(
                f"another process kept it locked for more than {BUSY_TIMEOUT:g} s ({text})", path=self.path
            )
        if isinstance(exc, sqlite3.DatabaseError) and ("not a database" in text or "malformed" in text):
            return StateError(
                f"the file is damaged or not a database ({text}); nothing was changed: move it away to start "
                "a new store, or restore a backup",
                path=self.path,
            )
        return StateError(f"{type(exc).__name__}: {text}", path=self.path)


def _ours(folder: Path) -> bool:
    """Whether ``folder`` is agent-apps' own: the agent-apps home, or a ``.agent-apps``."""
    from ..config import agent_apps_home

    return folder.name == ".agent-apps" or folder.resolve() == agent_apps_home().resolve()


def _keep_private(path: str) -> None:
    """Make the database ``0600`` before SQLite opens it (SQLite gives its ``-wal`` and
    ``-shm`` the mode of the database), and tighten the three files if they are wider."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:  # there already (or not ours to make: SQLite says why when it opens)
        pass
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            private_file(path + suffix)
        except OSError:  # another user's store: SQLite's own error says more
            pass


def _opened(fn: Callable[[sqlite3.Connection], None], conn: sqlite3.Connection) -> None:
    try:
        fn(conn)
    except Exception:
        import logging

        logging.getLogger("agent_apps.state").warning("a callback on opening the state store failed", exc_info=True)


def _statements(script: str) -> Iterator[str]:
    """The complete SQL statements of a script (``executescript`` would commit)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        if not buffer and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()


def _wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL. On a new file several processes may do this at once, and SQLite
    answers "locked" at once, without the busy timeout: wait and try again."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
