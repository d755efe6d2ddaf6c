"""The state store on SQLite: one embedded file, the default backend.

* **WAL** journal, ``synchronous=NORMAL``: readers never wait for the writer, a commit
  costs no fsync, and a killed process (``kill -9``) loses at most the transaction it
  was in; a committed one survives and the file is never left corrupt.
* **Short write transactions** taken with ``BEGIN IMMEDIATE``, so a writer waits for
  the lock (up to :data:`BUSY_TIMEOUT`) instead of failing on a lock upgrade; several
  processes can share the file. A write transaction holds the whole file: the
  concept modules' row locks (:attr:`Dialect.for_update`) are not needed here.
* **One connection, one thread**: the threads of a process share the connection under
  a lock (SQLite serializes writers anyway; one connection keeps the cost per call
  low), and :meth:`Database.call` runs work on one thread of the store's own. A
  database kept busy by another process then stalls that thread, never the event loop
  (measured by ``benchmarks/bench_sessions.py``). A short write
  (:meth:`Database.write_short`) runs on the event loop's thread only when it can take
  the lock at once, and never checkpoints the WAL there.
* ``PRAGMA user_version`` counts the migrations applied; ``PRAGMA application_id``
  marks the file as agent-apps'. A newer schema, another program's SQLite file or a
  **corrupt** file raises :class:`StateError` naming the file; nothing is changed.
* **Private**: the file and its ``-wal`` and ``-shm`` are ``0600`` and the folders it
  creates ``0700``, whatever the umask (conversations, memory and tool output are in
  it). A store made wider (by an older version) is tightened when opened, and so is
  its folder when that is agent-apps' own (the agent-apps home, or a ``.agent-apps``).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ..config import agent_apps_home
from ..host_files import private_file, private_folder
from ._db import MEMORY, Database, Dialect, opened
from .errors import StateError
from .schema import APPLICATION_ID, MIGRATIONS
from .upgrade import SchemaObject, missing, upgrade

__all__ = ["BUSY_TIMEOUT", "SQLITE", "SQLiteDatabase"]

T = TypeVar("T")

#: Seconds a write waits for another process's transaction before giving up.
BUSY_TIMEOUT = 10.0
#: SQLite's own: a commit on the store's thread checkpoints the WAL once it holds this
#: many pages.
WAL_AUTOCHECKPOINT = 1000
#: Writes made on the event loop's thread (:meth:`Database.write_short`, a few pages
#: each) after which the store's thread checkpoints the WAL, as SQLite would have at
#: about :data:`WAL_AUTOCHECKPOINT` pages.
WAL_CHECKPOINT_EVERY = 100

SQLITE = Dialect(
    name="sqlite",
    for_update="",
    skip_locked="",
    fts_term='"{}"',
    fts_any=" OR ",
    fts_count="SELECT count(*) FROM memory_chunks WHERE memory_chunks MATCH ?",
    fts_search=(
        "SELECT rowid, text, heading, line, -bm25(memory_chunks, 1.0, 0.3) AS score FROM memory_chunks "
        "WHERE memory_chunks MATCH ? AND ({ranges}) ORDER BY score DESC LIMIT ?"
    ),
    sync_ids="",
    # one write at a time: the counter row's numbers follow the order of commits
    next_change=("UPDATE run_changes SET n = n + 1 WHERE id = 1 RETURNING n",),
    touch_run=(
        "UPDATE run_changes SET n = n + 1 WHERE id = 1",
        "UPDATE runs SET seq = (SELECT n FROM run_changes WHERE id = 1) WHERE id = ?",
    ),
    last_change="SELECT n FROM run_changes WHERE id = 1",
    changes_in_flight="",
    reset_changes="UPDATE run_changes SET n = (SELECT coalesce(max(seq), 0) FROM runs) WHERE id = 1",
    json_values="SELECT value FROM json_each(?)",
)


class SQLiteDatabase(Database):
    """A lazily opened SQLite file (or ``:memory:``), shared by the threads of one process."""

    dialect = SQLITE

    def __init__(self, path: str) -> None:
        path = MEMORY if path == MEMORY else str(Path(path).expanduser())
        super().__init__(path, path)
        self._conn: sqlite3.Connection | None = None
        #: Writes made on the event loop's thread since the WAL was last checkpointed for them.
        self._written_here = 0

    # -- access ------------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        joined = self._joined()
        if joined is not None:
            yield joined
            return
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
        joined = self._joined()
        if joined is not None:
            yield joined
            return
        with self._lock:
            conn = self._connect()
            here = getattr(self._open_write, "here", False)
            try:
                if here:
                    self._begin_here(conn)
                else:
                    conn.execute("BEGIN IMMEDIATE")
                try:
                    with self._writing(conn):
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
            finally:
                if here:
                    conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}")

    def _write_here(self, fn: Callable[..., T], args: tuple[Any, ...]) -> tuple[bool, T | None]:
        """The write on this thread when the file is open, no thread of this process
        holds the connection, and no other process holds the write lock (see
        :meth:`_begin_here`). After :data:`WAL_CHECKPOINT_EVERY` of them the WAL is
        checkpointed on the store's thread, not waited for."""
        if self._conn is None or self._joined() is not None or not self._lock.acquire(blocking=False):
            return False, None
        self._open_write.here = True
        try:
            value = self.together(fn, *args)
        except _Locked:
            return False, None
        finally:
            self._open_write.here = False
            self._lock.release()
        self._written_here += 1
        if self._written_here >= WAL_CHECKPOINT_EVERY and self.path != MEMORY:
            self._checkpoint_later()
        return True, value

    def _begin_here(self, conn: sqlite3.Connection) -> None:
        """Begin a write on the event loop's thread: ``BEGIN IMMEDIATE`` without SQLite's
        busy wait (another process's transaction raises :class:`_Locked`: the write goes
        to the store's thread, which waits for it), and a commit that does not
        checkpoint the WAL (a checkpoint fsyncs)."""
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise _Locked from exc
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        conn.execute("PRAGMA wal_autocheckpoint = 0")

    def _checkpoint_later(self) -> None:
        """Checkpoint the WAL on the store's thread. Nobody waits for it; while it is
        queued, short writes go to the store's thread too (after it)."""

        def checkpoint() -> None:
            with self._lock:
                if self._conn is not None:
                    self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

        self._written_here = 0
        self._submit(checkpoint)

    @property
    def opened(self) -> bool:
        return self._conn is not None

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- opening -----------------------------------------------------------------------

    def _forget(self) -> None:
        self._conn = None  # not closed: SQLite's connection must not be used across a fork at all

    def _connect(self) -> sqlite3.Connection:
        self.forked()
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
                opened(fn, conn)
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
        """Bring the schema up to date (see :func:`.upgrade.upgrade`), in one transaction."""
        scripts = [migration.sqlite for migration in MIGRATIONS]
        if conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) and not missing(
            scripts, _catalog(conn)
        ):
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            # read again under the write lock: another process may have just migrated
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            try:
                for statement in upgrade(scripts, version, _catalog(conn)):
                    conn.execute(statement)
            except sqlite3.OperationalError as exc:
                raise StateError(
                    f"its tables do not match schema version {version} and could not be brought up to version "
                    f"{len(MIGRATIONS)} ({exc}); nothing was changed: move it away to start a new store",
                    path=self.path,
                ) from None
            conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
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
    return folder.name == ".agent-apps" or folder.resolve() == agent_apps_home().resolve()


class _Locked(Exception):
    """Another process holds the write lock (a write tried on the event loop's thread)."""


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


def _catalog(conn: sqlite3.Connection) -> set[SchemaObject]:
    """The tables, indexes and columns a store has, named as :data:`.upgrade.SchemaObject`."""
    found: set[SchemaObject] = set()
    rows = conn.execute(
        "SELECT m.type, lower(m.name), lower(m.tbl_name), lower(c.name) FROM sqlite_master m "
        "LEFT JOIN pragma_table_info(m.name) c ON m.type = 'table' WHERE m.type IN ('table', 'index')"
    )
    for kind, name, table, column in rows:
        found.add(("table", name) if kind == "table" else ("index", name, table))
        if column is not None:
            found.add(("column", name, column))
    return found


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
