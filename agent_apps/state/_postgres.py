"""The state store on PostgreSQL: a server named by a ``postgresql://`` URL (docs/state.md).

Imported only when such a URL is opened; psycopg (extra ``postgres``) is imported here
and nowhere else, and a missing one is reported when the store is first used.

* **Its own schema** in the database: ``agent_apps``, or ``?schema=NAME`` in the URL
  (the parameter is ours: it is taken out before the URL reaches libpq, as is
  ``pool_size``). The store shares a database with other programs without meeting
  their tables, and one database can hold several stores.
* **A pool of connections** (psycopg-pool, ``pool_size`` of them, default
  :func:`default_pool_size`: one per CPU, 2 to 8) and as many threads for :meth:`Database.call`: unlike one SQLite
  file, the server runs the transactions of one process side by side.
* **Transactions**: a write is one ``READ COMMITTED`` transaction (the pipeline's
  implicit one: no ``BEGIN`` or ``COMMIT`` is sent, see :meth:`PostgresDatabase._transaction`) in which every read
  that decides a write locks its rows (:attr:`Dialect.for_update`), so concurrent
  writers, on this machine or another, wait for each other as SQLite's would; a read is
  one ``REPEATABLE READ READ ONLY`` transaction, whose statements see one snapshot. A
  lock held by another transaction for more than :data:`LOCK_TIMEOUT` seconds fails
  the write with a clear error, as SQLite's busy timeout does.
* **Versioned**: the table ``schema_version`` holds how many of :data:`MIGRATIONS`
  the schema has had. The first open of a process checks it; an older store is migrated
  in one transaction under an advisory lock (processes that open it at once wait for
  the one that migrates); a newer one, or a schema that holds another program's tables,
  is refused naming the store, and nothing is changed.
* **Pipelined**: a transaction's statements are sent as they come and their results
  read when asked for, so an append (the session's row, the messages, the commit)
  costs two round trips, not three.
* **Errors name the store**, its password hidden, in one line. A pooled connection the
  server closed while it waited (a server restarted since) is seen on its socket and
  replaced before anything is sent on it. A server that cannot be reached for
  :data:`CONNECT_TIMEOUT` seconds fails the call. A connection lost once a transaction
  has begun fails that transaction and is never retried: it was not committed (or,
  lost during the commit, it may have been: the error says so), and everything
  committed before stays.
"""

from __future__ import annotations

import atexit
import functools
import logging
import re
import select
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from .. import machine
from ._db import Database, Dialect, opened, redact
from .errors import StateError
from .schema import APPLICATION_ID, MIGRATIONS
from .upgrade import SchemaObject, missing, upgrade

try:  # the extra: bound to None when missing, and reported when a store is opened
    import psycopg
    from psycopg.adapt import Loader
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError:  # pragma: no cover - exercised in a venv without the extra
    psycopg = None  # type: ignore[assignment]
    Loader = object  # type: ignore[assignment,misc]

# The pool logs each failed reconnection as a warning; our errors say what failed, in
# one line. Records still reach the handlers an application configured.
logging.getLogger("psycopg").addHandler(logging.NullHandler())

__all__ = ["CONNECT_TIMEOUT", "LOCK_TIMEOUT", "POOL_SIZE", "POSTGRESQL", "PostgresDatabase", "default_pool_size"]

#: Connections of one process's pool (and threads of its store), unless ``?pool_size=N``:
#: one per CPU the process may use, at least 2 and at most this many. Its runs share one
#: interpreter lock, so a thread more than it has CPUs adds lock hand-offs, not store
#: throughput: 2,000 runs on 2 CPUs with 8 took 20-30% more CPU in the store's threads
#: than with 2, and more wall time (docs/state.md, Speed).
POOL_SIZE = 8


def default_pool_size() -> int:
    """The ``pool_size`` of a URL that does not say (see :data:`POOL_SIZE`)."""
    return max(2, min(POOL_SIZE, machine.usable_cpus()))

#: Seconds to keep trying to reach a server that does not answer before failing a call.
CONNECT_TIMEOUT = 10.0
#: Seconds a statement waits for a lock another transaction holds (SQLite's busy timeout).
LOCK_TIMEOUT = 10.0
#: The schema a store lives in unless the URL says ``?schema=NAME``.
DEFAULT_SCHEMA = "agent_apps"

#: The stores open in this process: closed at exit, so their connections end cleanly.
_OPEN: set[PostgresDatabase] = set()
_OPEN_LOCK = threading.Lock()

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_WRITE = "BEGIN"

#: The first key of the advisory lock a write holds while it has a change number that
#: is not yet committed (the second: the store's schema), see :meth:`Runs.latest`.
CHANGE_LOCK = 0x61617066
_CHANGE_KEY = f"{CHANGE_LOCK}, hashtext(current_schema()) & 2147483647"
_HOLD_CHANGE = f"SELECT pg_advisory_xact_lock_shared({_CHANGE_KEY})"

POSTGRESQL = Dialect(
    name="postgresql",
    for_update=" FOR UPDATE",
    skip_locked=" FOR UPDATE SKIP LOCKED",
    fts_term="'{}'",
    fts_any=" | ",
    fts_count="SELECT count(*) FROM memory_chunks WHERE tsv @@ to_tsquery('english', ?)",
    fts_search=(
        "SELECT rowid, text, heading, line, ts_rank(tsv, query) AS score "
        "FROM memory_chunks, to_tsquery('english', ?) AS query "
        "WHERE tsv @@ query AND ({ranges}) ORDER BY score DESC, rowid LIMIT ?"
    ),
    sync_ids="SELECT setval(pg_get_serial_sequence('memory_files', 'id'), coalesce(max(id), 0) + 1, false) "
    "FROM memory_files",
    # a sequence locks nothing; the shared lock tells watchers the number is not settled
    next_change=(_HOLD_CHANGE, "SELECT nextval('run_change_numbers')"),
    # one statement, in this order: the run's row locked (a write to it waits here, before
    # it holds a number), the shared lock held, then the number taken. The row lock is the
    # one an UPDATE takes: rows inserted beside it that refer to the run do not wait for it
    touch_run=(
        "WITH locked AS MATERIALIZED (SELECT id FROM runs WHERE id = ? FOR NO KEY UPDATE), "
        f"held AS MATERIALIZED ({_HOLD_CHANGE}, id FROM locked) "
        "UPDATE runs SET seq = nextval('run_change_numbers') FROM held WHERE runs.id = held.id",
    ),
    last_change="SELECT last_value FROM run_change_numbers",
    changes_in_flight=(
        "SELECT virtualtransaction FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid() "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        f"AND classid = {CHANGE_LOCK} AND objid = (hashtext(current_schema()) & 2147483647)::oid AND objsubid = 2"
    ),
    reset_changes="SELECT setval('run_change_numbers', (SELECT coalesce(max(seq), 0) FROM runs))",
    json_values="SELECT json_array_elements_text(?::json)",
)


@functools.lru_cache(maxsize=1024)
def _sql(sql: str) -> str:
    """The concept modules' SQL with psycopg's placeholders (``%s``; a ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def _text(parameters: Sequence[Any]) -> Sequence[Any]:
    """PostgreSQL text cannot hold NUL: a NUL character is stored as U+FFFD."""
    if any(type(value) is str and "\x00" in value for value in parameters):
        return [value.replace("\x00", "\ufffd") if type(value) is str else value for value in parameters]
    return parameters


class _Connection:
    """A pooled connection during one transaction, with the interface of the others.

    Statements are pipelined: each is sent at once and its result read only when asked
    for (a row, a row count), so the statements of a transaction whose results nothing
    reads travel together with the next one that is read, or with the commit.
    """

    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> _Cursor:
        return _Cursor(self.raw.execute(_sql(sql), _text(parameters)))

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> _Cursor:
        cursor = self.raw.cursor()
        cursor.executemany(_sql(sql), [_text(row) for row in parameters])
        return _Cursor(cursor)


class _Cursor:
    """A statement's results, read from the server when first asked for."""

    __slots__ = ("raw",)

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    @property
    def rowcount(self) -> int:
        if self.raw.rowcount < 0:  # not read yet: ask the server for it (a Sync would end a write)
            self.raw._fetch_pipeline()
        return int(self.raw.rowcount)

    def fetchone(self) -> Any:
        return self.raw.fetchone()

    def fetchall(self) -> list[Any]:
        return list(self.raw.fetchall())


class _Number(Loader):  # type: ignore[misc,valid-type]
    """``numeric`` results (``sum`` of integers) as int, or float: as SQLite gives them."""

    def load(self, data: Any) -> int | float:
        text = bytes(data)
        try:
            return int(text)
        except ValueError:
            return float(text)


class PostgresDatabase(Database):
    """A store in a schema of a PostgreSQL database, through a pool of connections."""

    dialect = POSTGRESQL

    def __init__(self, url: str) -> None:
        super().__init__(redact(url), url)
        self._pool: Any = None
        #: The server was found unreachable: calls ask it directly till ``_down_until``,
        #: then fail at once, until it answers again.
        self._down = False
        self._down_until = 0.0
        self._password = ""
        self.schema = DEFAULT_SCHEMA
        self.workers = default_pool_size()
        #: Connections this process's threads hold now: all of them (a pool too small),
        #: or fewer (a server that does not answer) when none comes free in time.
        self._lent = 0
        self._conninfo = url
        self._settings: dict[str, Any] = {}
        try:
            self._parse(url)
        except StateError as exc:  # raised on first use, as every other problem of opening
            self._invalid: StateError | None = exc
        else:
            self._invalid = None

    # -- access ------------------------------------------------------------------------

    def read(self) -> AbstractContextManager[_Connection]:
        return self._transaction(write=False)

    def write(self) -> AbstractContextManager[_Connection]:
        return self._transaction(write=True)

    @property
    def opened(self) -> bool:
        return self._pool is not None

    def _disconnect(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        with _OPEN_LOCK:
            _OPEN.discard(self)

    def _forget(self) -> None:
        # psycopg never closes a connection in a process other than the one that made
        # it, so the parent's stay the parent's; the pool's threads stayed there too
        self._pool, self._down, self._lent = None, False, 0
        with _OPEN_LOCK:
            _OPEN.discard(self)

    # -- transactions ------------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[_Connection]:
        """One transaction on a pooled connection, its statements pipelined (see
        :class:`_Connection`). A read is ``BEGIN ... REPEATABLE READ READ ONLY`` (its
        statements see one snapshot) to ``ROLLBACK``. A write is the pipeline's implicit
        transaction: the server runs the statements sent before the pipeline's Sync
        (sent when the block ends) as one ``READ COMMITTED`` transaction and commits it
        there, so it needs no ``BEGIN`` and no ``COMMIT`` statement. A block that raises
        is rolled back (a write by a ``ROLLBACK`` sent before the Sync, which aborts the
        implicit transaction); an error of the server is raised as a :class:`StateError`.
        Inside a write on this thread, the block joins it (see :meth:`Database.write`)."""
        joined = self._joined()
        if joined is not None:
            yield joined
            return
        pool, raw = self._connection()
        committing = False
        try:
            with raw.pipeline():
                conn = _Connection(raw)
                if write:
                    try:
                        with self._writing(conn):
                            yield conn
                    except BaseException:
                        _abort(raw)
                        raise
                    committing = True
                else:
                    raw.execute(_READ)
                    yield conn
                    raw.execute("ROLLBACK")
        except psycopg.Error as exc:
            if committing and raw.closed:
                raise StateError(
                    f"the connection to the server was lost while committing a write ({_reason(exc)}): it may or "
                    "may not have been saved; everything committed before it was",
                    path=self.path,
                ) from None
            raise self._error(exc) from None
        finally:
            try:
                if not raw.closed and raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    raw.execute("ROLLBACK")
            except psycopg.Error:
                pass  # a broken connection: the pool drops it
            with self._counting:
                self._lent -= 1
            pool.putconn(raw)

    def _connection(self) -> tuple[Any, Any]:
        """A pooled connection (and its pool) that was not closed while it waited in the
        pool, as far as can be seen without asking the server: a server that restarted
        closed them all, and they are replaced before anything is sent on them."""
        self.forked()
        if self._pool is None:
            self._open()
        if self._down:
            self._recover()
        pool = self._pool
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while True:
            try:
                conn = pool.getconn(timeout=max(deadline - time.monotonic(), 0.05))
            except PoolTimeout:
                if self._lent >= self.workers:
                    raise StateError(  # every connection is in use: the server is there, the pool is too small
                        f"no connection of its pool came free within {CONNECT_TIMEOUT:g} s (all {self.workers} in "
                        "use): give the URL a larger pool_size",
                        path=self.path,
                    ) from None
                self._down, self._down_until = True, time.monotonic()
                self._recover()  # raises why, when the server cannot be reached
                pool, deadline = self._pool, time.monotonic() + CONNECT_TIMEOUT
                continue
            if _alive(conn):
                with self._counting:
                    self._lent += 1
                return pool, conn
            conn.close()
            pool.putconn(conn)  # a closed connection: the pool drops it and makes another
            pool.check()  # its idle siblings are likely closed too
            if time.monotonic() > deadline:
                raise StateError("the server closes every connection made to it", path=self.path)

    def _recover(self) -> None:
        """The server was found unreachable. Ask it directly (the pool waits longer and
        longer between its own attempts) until it answers, or until :data:`CONNECT_TIMEOUT`
        after it was found down (then, and at once for every later call until it
        answers, raise why); once it answers, start a new pool."""
        with self._lock:
            if not self._down:
                return  # another thread recovered it meanwhile
            pause = 0.05
            while True:
                try:
                    psycopg.connect(self._conninfo, autocommit=True, **self._settings).close()
                    break
                except psycopg.Error as exc:
                    if time.monotonic() + pause > self._down_until:
                        raise StateError(
                            f"cannot connect to the server: {self._scrub(_reason(exc))}", path=self.path
                        ) from None
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
            old, self._pool = self._pool, self._new_pool()
            self._down = False
            old.close(timeout=0)

    # -- opening -----------------------------------------------------------------------

    def _parse(self, url: str) -> None:
        """Take our parameters out of the URL and check what is left is a libpq URL."""
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        ours = {key: value for key, value in query if key in ("schema", "pool_size")}
        rest = [(key, value) for key, value in query if key not in ours]
        schema = ours.get("schema", DEFAULT_SCHEMA)
        if not _SCHEMA_NAME.fullmatch(schema):
            raise StateError(
                f"bad URL: schema={schema!r}: a schema name is 1-63 letters, digits and _, not starting with a digit",
                path=self.path,
            )
        self.schema = schema
        size = ours.get("pool_size", str(self.workers))
        if not size.isdigit() or not 1 <= int(size) <= 100:
            raise StateError(f"bad URL: pool_size={size!r}: a number from 1 to 100", path=self.path)
        self.workers = int(size)
        self._conninfo = urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote)))  # libpq: %20, not +
        if psycopg is None:
            return
        try:
            settings = psycopg.conninfo.conninfo_to_dict(self._conninfo)
        except psycopg.Error as exc:
            raise StateError(f"bad URL: {_reason(exc)}", path=self.path) from None
        ports = str(settings.get("port") or "")
        if ports and not all(port.strip().isdigit() for port in ports.split(",")):
            raise StateError(f"bad URL: the port must be a number, not {ports!r}", path=self.path)
        self._password = str(settings.get("password") or "")
        options = str(settings.get("options") or "")
        self._settings = {
            "application_name": str(settings.get("application_name") or "agent-apps"),
            "connect_timeout": str(settings.get("connect_timeout") or 5),
            # our schema first; the user's options before ours, which win
            "options": f"{options} -c search_path={schema} -c lock_timeout={int(LOCK_TIMEOUT * 1000)}".strip(),
        }

    def _open(self) -> None:
        with self._lock:
            if self._pool is not None:
                return
            if psycopg is None:
                raise StateError(
                    "a postgresql:// store needs psycopg, which is not installed: pip install 'agent-apps[postgres]'",
                    path=self.path,
                )
            if self._invalid is not None:
                raise self._invalid
            conn = self._connect()
            try:
                self._migrate(conn)
                if self._on_open:
                    with conn.pipeline():
                        conn.execute(_READ)
                        for fn in self._on_open:
                            opened(fn, _Connection(conn))
                        conn.execute("ROLLBACK")
            except psycopg.Error as exc:
                raise self._error(exc) from None
            finally:
                conn.close()
            self._pool = self._new_pool()
            with _OPEN_LOCK:
                _OPEN.add(self)

    def _new_pool(self) -> Any:
        pool = ConnectionPool(
            self._conninfo,
            kwargs={**self._settings, "autocommit": True},
            min_size=1,
            max_size=self.workers,
            open=False,
            configure=_configure,
            timeout=CONNECT_TIMEOUT,
            num_workers=1,
            name=f"agent-apps-state-{self.schema}",
        )
        pool.open(wait=False)
        return pool

    def _connect(self) -> Any:
        """One connection, made now (for the first contact: its errors are the clearest).
        A server that refuses or does not answer is tried again until :data:`CONNECT_TIMEOUT`."""
        deadline = time.monotonic() + CONNECT_TIMEOUT
        pause = 0.05
        while True:
            try:
                conn = psycopg.connect(self._conninfo, autocommit=True, **self._settings)
                _configure(conn)
                return conn
            except psycopg.OperationalError as exc:
                if not _transient(exc) or time.monotonic() + pause > deadline:
                    why = self._scrub(_reason(exc))
                    raise StateError(f"cannot connect to the server: {why}", path=self.path) from None
            except psycopg.Error as exc:
                raise self._error(exc) from None
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _migrate(self, conn: Any) -> None:
        """Check the schema's version and bring it up to date (see the module docstring)."""
        table = f'"{self.schema}".schema_version'
        scripts = [migration.postgresql for migration in MIGRATIONS]
        if self._version(conn, table) == len(MIGRATIONS) and not missing(scripts, self._catalog(conn)):
            return
        conn.execute(_WRITE)
        try:
            # one process migrates; the others wait here, then find it done
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (APPLICATION_ID, self.schema))
            version = self._version(conn, table)
            if version is None:
                (tables,) = conn.execute(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (self.schema,)
                ).fetchone()
                if tables:
                    raise StateError(
                        f'its schema "{self.schema}" holds tables of another program, not an agent-apps state store '
                        "(nothing was changed): choose another schema with ?schema=NAME in the URL, or another "
                        "database",
                        path=self.path,
                    )
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                conn.execute(
                    f"CREATE TABLE {table} (version INTEGER NOT NULL, application INTEGER NOT NULL, "
                    "updated_at DOUBLE PRECISION NOT NULL)"
                )
                conn.execute(f"INSERT INTO {table} VALUES (0, %s, %s)", (APPLICATION_ID, time.time()))
                version = 0
            if version > len(MIGRATIONS):
                raise StateError(
                    f"it was written by a newer agent-apps (schema version {version}; this version knows up to "
                    f"{len(MIGRATIONS)}): upgrade agent-apps, or point AGENT_APPS_STATE or state.path at another "
                    "store",
                    path=self.path,
                )
            try:
                for statement in upgrade(scripts, version, self._catalog(conn)):
                    conn.execute(statement)
            except psycopg.errors.ProgrammingError as exc:  # a table or column there or not, as in SQLite
                raise StateError(
                    f"its tables do not match schema version {version} and could not be brought up to version "
                    f"{len(MIGRATIONS)} ({_reason(exc)}); nothing was changed: choose another schema with "
                    "?schema=NAME in the URL, or another database",
                    path=self.path,
                ) from None
            conn.execute(f"UPDATE {table} SET version = %s, updated_at = %s", (len(MIGRATIONS), time.time()))
            conn.execute("COMMIT")
        except BaseException:
            if not conn.closed:
                conn.execute("ROLLBACK")
            raise

    def _catalog(self, conn: Any) -> set[SchemaObject]:
        """The tables, indexes, sequences and columns of the store's schema, named as
        :data:`.upgrade.SchemaObject`."""
        rows = conn.execute(
            "SELECT 'table', tablename, NULL FROM pg_tables WHERE schemaname = %(s)s "
            "UNION ALL SELECT 'index', indexname, tablename FROM pg_indexes WHERE schemaname = %(s)s "
            "UNION ALL SELECT 'sequence', sequencename, NULL FROM pg_sequences WHERE schemaname = %(s)s "
            "UNION ALL SELECT 'column', table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = %(s)s",
            {"s": self.schema},
        ).fetchall()
        return {tuple(name.lower() for name in row if name is not None) for row in rows}

    def _version(self, conn: Any, table: str) -> int | None:
        """The schema's version; None when it has no version table (a new store)."""
        # pg_tables, not to_regclass: a relation cache lookup may miss a table another
        # process has just created, a scan of the catalog does not
        row = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename = 'schema_version'", (self.schema,)
        ).fetchone()
        if not row[0]:
            return None
        found = conn.execute(f"SELECT version, application FROM {table}").fetchone()
        if found is None or found[1] != APPLICATION_ID:
            raise StateError(
                f'its schema "{self.schema}" has a schema_version table of another program (nothing was changed)',
                path=self.path,
            )
        return int(found[0])

    # -- errors ------------------------------------------------------------------------

    def _error(self, exc: BaseException) -> StateError:
        text = self._scrub(_reason(exc))
        if psycopg is not None and isinstance(exc, psycopg.errors.LockNotAvailable):
            return StateError(f"another process kept a lock for more than {LOCK_TIMEOUT:g} s ({text})", path=self.path)
        if psycopg is not None and isinstance(exc, psycopg.OperationalError) and _lost(exc):
            return StateError(
                f"the connection to the server was lost ({text}): the transaction in flight was not committed; "
                "everything committed before it was",
                path=self.path,
            )
        return StateError(f"{type(exc).__name__}: {text}", path=self.path)

    def _scrub(self, text: str) -> str:
        """A server's message, without the password should it quote it."""
        return text.replace(self._password, "***") if len(self._password) >= 3 else text


@atexit.register
def close_all() -> None:
    """Close every store this process opened (at exit; and tests, between tests)."""
    with _OPEN_LOCK:
        stores = list(_OPEN)
    for store in stores:
        store.close()


def _alive(conn: Any) -> bool:
    """Whether an idle connection can be used: not closed, and nothing to read on its
    socket (an idle connection is sent nothing; what is there is the server closing it)."""
    if conn.closed:
        return False
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return not poller.poll(0)


def _abort(raw: Any) -> None:
    """Abort a write's implicit transaction before its pipeline's Sync would commit it."""
    try:
        raw.execute("ROLLBACK")
    except psycopg.Error:
        pass  # the server aborted it already (a statement failed), or the connection is gone


def _configure(conn: Any) -> None:
    """Every new connection: numeric results loaded as Python numbers."""
    conn.adapters.register_loader("numeric", _Number)


def _reason(exc: BaseException) -> str:
    """The first line of a psycopg error (its others are hints and context)."""
    text = str(exc).strip()
    return " ".join(text.splitlines()[:1]) or type(exc).__name__


def _lost(exc: BaseException) -> bool:
    """Whether an error means the connection is gone (the server or the network closed
    it, the server shutting down), not that a statement failed on a live connection (a
    statement cancelled at its timeout, a query libpq refused to send)."""
    state = getattr(exc, "sqlstate", None)
    if state:
        return state.startswith(("08", "57P"))  # connection exception; operator intervention
    pgconn = getattr(exc, "pgconn", None)
    return pgconn is None or pgconn.status != psycopg.pq.ConnStatus.OK


def _transient(exc: BaseException) -> bool:
    """A failure to connect that may pass (the server starting, restarting, unreachable),
    not one that will not (a wrong password, an unknown database)."""
    text = str(exc).lower()
    return not any(
        word in text
        for word in ("password", "authentication", "does not exist", "permission", "no pg_hba", "invalid", "ssl")
    )
