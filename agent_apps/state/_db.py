"""The state store's database: one interface, two backends.

The concept modules (sessions, runs, journal, schedules, ...) hold a :class:`Database`
and use three calls: :meth:`Database.read` and :meth:`Database.write` give a
:class:`Connection` for one transaction, on which they run SQL written once for both
backends (``?`` placeholders, standard upserts, ``RETURNING``); :meth:`Database.call`
runs store work off the event loop, and :meth:`Database.write_short` a short write on
it when that needs no wait. The backends:

* ``_sqlite`` (the default): one embedded SQLite file, no server.
* ``_postgres``: a PostgreSQL server named by a ``postgresql://`` URL (extra
  ``postgres``), shared by every process on every machine that opens it.

What SQL must still say per backend is in its :class:`Dialect`: row locks (an SQLite
write transaction locks the whole file, so a read that decides a write needs nothing
more; PostgreSQL locks rows, so such a read says ``FOR UPDATE``) and full-text search
(FTS5 ranked by BM25; a tsvector ranked by ``ts_rank``).

A :meth:`~Database.write` (or :meth:`~Database.read`) opened on a thread that is inside
a write already **joins** that write: its statements go in the same transaction, which
commits when the outermost block ends. So :meth:`Database.together` makes the writes of
several concept methods one transaction (an agent's turn: its report, its messages,
its journal entries) without a second copy of their SQL.

Constructing a database touches nothing: the first :meth:`~Database.read` or
:meth:`~Database.write` opens it, creates it when missing and applies pending
migrations (:mod:`.schema`). A store of a newer schema, or one that is not agent-apps',
raises :class:`~agent_apps.state.StateError` naming the store; nothing is changed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

__all__ = [
    "MEMORY", "ROWS_PER_INSERT", "Connection", "Cursor", "Database", "Dialect", "dump_json", "dump_json_or_repr",
    "insert_rows", "is_postgres_url", "redact",
]

T = TypeVar("T")

#: The path of a private in-memory store (tests, throwaway managers).
MEMORY = ":memory:"

_URL = re.compile(r"postgres(?:ql)?://", re.I)
_SECRET_IN_NETLOC = re.compile(r"^(postgres(?:ql)?://[^:@/?#]*:)[^@/?#]*@", re.I)
_SECRET_IN_QUERY = re.compile(r"([?&]password=)[^&#]*", re.I)


#: JSON as the store keeps it in its text columns: compact, non-ASCII text as it is. An
#: encoder made once (``json.dumps`` with options makes one a call).
dump_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
#: The same, with a value JSON cannot hold stored as its ``repr`` (reports, traces).
dump_json_or_repr = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=repr).encode

#: Rows one INSERT takes at most (:func:`insert_rows`): each number of rows up to it is a
#: statement text of its own, which a PostgreSQL connection prepares, so they stay few.
ROWS_PER_INSERT = 8


def insert_rows(conn: Connection, head: str, rows: Sequence[Sequence[Any]], tail: str = "") -> None:
    """Insert ``rows`` with one ``head VALUES (...), (...) tail`` statement per
    :data:`ROWS_PER_INSERT` of them. On PostgreSQL ``executemany`` is a statement per
    row, each one parsed, executed and answered by the server."""
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        marks = ", ".join(["(" + ", ".join("?" * len(chunk[0])) + ")"] * len(chunk))
        conn.execute(f"{head} VALUES {marks}{tail}", [value for row in chunk for value in row])


def is_postgres_url(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a PostgreSQL store (``postgresql://`` or ``postgres://``)."""
    return isinstance(location, str) and _URL.match(location) is not None


def redact(location: str) -> str:
    """``location`` as it may be printed: a URL's password shown as ``***``."""
    return _SECRET_IN_QUERY.sub(r"\1***", _SECRET_IN_NETLOC.sub(r"\1***@", location))


class Cursor(Protocol):
    """What a statement returns (an ``sqlite3.Cursor``, a psycopg cursor)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """One transaction's connection: ``?`` placeholders, rows as tuples."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...


@dataclass(frozen=True)
class Dialect:
    """The SQL that differs between the backends (see the module docstring)."""

    name: str
    #: Appended to a SELECT (after any LIMIT) whose rows the write transaction goes on to
    #: change, so that a concurrent writer waits for it instead of deciding on old values.
    for_update: str
    #: Appended likewise to take rows no other transaction holds, skipping held ones: how
    #: several schedulers share due schedules without waiting for each other.
    skip_locked: str
    #: A full-text query of one term (``{}``), and what joins terms into "any of them".
    fts_term: str
    fts_any: str
    #: How many chunks match the query (one parameter: the query).
    fts_count: str
    #: The best chunks (rowid, text, heading, line, score: higher is better) among the
    #: rowid ranges ``{ranges}``; parameters: the query, the range bounds, how many.
    fts_search: str
    #: Run after rows were written with their ids (``state copy``), so that the ids the
    #: database makes for new rows come after them ("": it does so by itself).
    sync_ids: str
    #: The change feed of runs (:mod:`.runs`). The statements of a write that take the
    #: next change number; the last one returns it.
    next_change: tuple[str, ...]
    #: The statements of a write that lock a run's row and then give it the next change
    #: number (the last one's parameter: the run's id); none returns anything.
    touch_run: tuple[str, ...]
    #: The number of the last change taken.
    last_change: str
    #: The transactions of other connections that hold change numbers now, as ids ("":
    #: numbers are taken in the order their transactions commit, so none is pending).
    changes_in_flight: str
    #: Run after runs were written with their numbers (``state copy``), so that the next
    #: change is numbered after them.
    reset_changes: str
    #: The values of a JSON array of strings (one parameter: its text), as a subquery for
    #: ``IN``: one statement text however many values, which PostgreSQL prepares once.
    json_values: str

    def fts_query(self, terms: Iterable[str]) -> str:
        """A query matching any of ``terms`` (words: letters, digits and ``_``)."""
        return self.fts_any.join(self.fts_term.format(term) for term in terms)


class Database(ABC):
    """A store's database, opened on first use (see the module docstring).

    ``path`` names the store where it is shown (a URL's password hidden); ``location``
    is what opens it again (for a worker elsewhere: it may hold the password).
    """

    dialect: ClassVar[Dialect]

    def __init__(self, path: str, location: str) -> None:
        self.path = path
        self.location = location
        #: Threads that run store work for :meth:`call`.
        self.workers = 1
        self._lock = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._on_open: list[Callable[[Connection], None]] = []
        #: The process that opened the connections and threads (a forked child makes its own).
        self._pid = os.getpid()
        #: Per thread, the connection of the write transaction it is in (``conn``), if any.
        self._open_write = threading.local()
        #: Work handed to the store's threads and not done yet (:meth:`write_short`
        #: runs on the loop only when none is, so writes keep their order).
        self._queued = 0
        self._counting = threading.Lock()

    @abstractmethod
    def read(self) -> AbstractContextManager[Connection]:
        """A connection for reads: every statement in the block sees one snapshot (inside
        a write on this thread: the write's own, with what it wrote so far)."""

    @abstractmethod
    def write(self) -> AbstractContextManager[Connection]:
        """One write transaction: committed when the block ends, rolled back if it raises.
        Inside another write on this thread it joins that one (committed with it)."""

    def together(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` in one write transaction: every read and write it makes
        joins it (see the module docstring), so all of them commit or none does."""
        with self.write():
            return fn(*args)

    def _joined(self) -> Any:
        """The connection of the write this thread is in, which a new block joins; None
        outside one."""
        return getattr(self._open_write, "conn", None)

    def first_touch(self, run_id: str) -> bool:
        """Whether this thread's write transaction has not given run ``run_id`` a change
        number yet (it is taken once per transaction: every write in it shares it); it
        counts as given from now on."""
        touched: set[str] | None = getattr(self._open_write, "touched", None)
        if touched is None or run_id not in touched:
            if touched is not None:
                touched.add(run_id)
            return True
        return False

    @contextmanager
    def _writing(self, conn: T) -> Iterator[T]:
        """Mark ``conn`` as this thread's write transaction while the block runs."""
        self._open_write.conn, self._open_write.touched = conn, set()
        try:
            yield conn
        finally:
            self._open_write.conn = self._open_write.touched = None

    @property
    @abstractmethod
    def opened(self) -> bool:
        """Whether the database was opened (and not closed since)."""

    @abstractmethod
    def _disconnect(self) -> None:
        """Close the connections (reopened on next use); called under the lock."""

    @abstractmethod
    def _forget(self) -> None:
        """Drop the connections without closing them: they are the parent process's."""

    def forked(self) -> None:
        """In a process forked from the one that opened the database, forget its
        connections and threads (they belong to the parent, and the threads did not
        survive the fork): the next call opens the child's own."""
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._executor = None
                    self._forget()
                    self._pid = os.getpid()

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` (which uses :meth:`read` / :meth:`write`) on one
        of the store's threads. A cancelled caller does not cancel a write already queued."""
        future = asyncio.wrap_future(self._submit(functools.partial(fn, *args, **kwargs)))
        return await asyncio.shield(future)

    def _submit(self, work: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Queue ``work`` for the store's threads (started on first use)."""
        if self._executor is None or self._pid != os.getpid():
            with self._lock:
                self.forked()
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="agent-apps-state")
        with self._counting:
            self._queued += 1
        try:
            return self._executor.submit(self._counted, work)
        except BaseException:  # not queued after all (an executor shut down meanwhile)
            with self._counting:
                self._queued -= 1
            raise

    def _counted(self, work: Callable[[], T]) -> T:
        """Run ``work`` on the store's thread; it is no longer queued once it returns."""
        try:
            return work()
        finally:
            with self._counting:
                self._queued -= 1

    async def write_short(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` in one write transaction (:meth:`together`) that is short: a
        run's opening, a turn's end, a run's end. With no store work queued before it
        and the backend able to take the write at once (:meth:`_write_here`), it runs
        here, on the event loop's thread: a hand-off to the store's thread and back
        costs two thread wake-ups (0.6 to 1.9 ms together on a loaded 2-core machine),
        more than such a write's 0.2 to 0.3 ms of CPU. Otherwise (a store busy in this
        process or in another, PostgreSQL) it goes to the store's thread like
        :meth:`call`, so the loop never waits for a lock."""
        if not self._queued and self._pid == os.getpid():
            done, value = self._write_here(fn, args)
            if done:
                return value  # type: ignore[return-value]
        return await self.call(self.together, fn, *args)

    def _write_here(self, fn: Callable[..., T], args: tuple[Any, ...]) -> tuple[bool, T | None]:
        """Run :meth:`write_short`'s write on this thread if that needs no wait:
        ``(True, result)``; ``(False, None)`` when it must go to the store's thread
        (then nothing of ``fn`` ran). The base class always hands it off."""
        return False, None

    def close(self) -> None:
        """Close the database and stop the store's threads (reopened on next use)."""
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
            self._disconnect()

    def on_open(self, fn: Callable[[Connection], None]) -> None:
        """Call ``fn(conn)`` once the database is open and migrated (now, if it is):
        how a ContextManager subscribes the persisted event subscriptions. A callback
        that fails is logged; the store opens all the same."""
        with self._lock:
            self._on_open.append(fn)
            if self.opened:
                with self.read() as conn:
                    opened(fn, conn)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path}>"


def opened(fn: Callable[[Connection], None], conn: Connection) -> None:
    """Call one :meth:`Database.on_open` callback; a failure is logged, not raised."""
    try:
        fn(conn)
    except Exception:
        logging.getLogger("agent_apps.state").warning("a callback on opening the state store failed", exc_info=True)
