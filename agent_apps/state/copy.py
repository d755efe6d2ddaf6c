"""``agent-apps state copy FROM TO``: a whole state store into another, between SQLite and
PostgreSQL or between two of either (docs/state.md).

Every table is copied, rows as they are (ids, times, JSON text byte for byte), in one
read transaction of the source (one snapshot of it, whatever writes it meanwhile) and
one write transaction of the target: the target gets all of it or, on any error,
nothing. (The counter of run changes is not copied: it is set after the copy to the
last change number of the runs copied.) Both stores are opened as usual first (created and migrated to this release's
schema when older), so they have the same tables. Rows are read a page at a time
(:data:`PAGE` rows, in key order), so a store of any size is copied in bounded memory.

The target must be empty: a non-empty one is refused with what it holds, unless
``replace`` (``--replace``), which deletes its contents first, in the same transaction.
Copying a store onto itself is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .errors import StateError

if TYPE_CHECKING:
    from . import StateStore
    from ._db import Connection

__all__ = ["PAGE", "TABLES", "CopyRefused", "copy_store"]

#: Rows read from the source at a time.
PAGE = 1000

#: Every table of the store, parents before children (the order rows are written in;
#: deleted in the reverse one): its name, what is copied, and the key pages are read by.
#: The journal and the agents of a run are read in ``rowid`` order, the order they were
#: written in, which is not copied: the target numbers them again, in the same order.
#: ``session_queue`` is not copied: its tickets belong to processes running now.
TABLES: tuple[tuple[str, str, str], ...] = (
    (
        "sessions",
        "id, created_at, updated_at, seq, tokens, memory, summary, summary_through, anchor_tokens, anchor_seq, meta",
        "id",
    ),
    ("messages", "session_id, seq, run_id, created_at, role, tokens, body, stale", "session_id, seq"),
    (
        "runs",
        "id, session_id, name, status, started_at, ended_at, pid, host, input_tokens, output_tokens, cost_usd, seq, "
        "stop_requested, stop_reason, tenant_id",
        "id",
    ),
    (
        "agents",
        "run_id, id, parent_id, depth, name, session_id, status, started_at, ended_at, report, trace, seq, live, "
        "input_tokens, output_tokens, cost_usd",
        "rowid",
    ),
    ("journal", "run_id, agent, key, kind, body, created_at", "rowid"),
    ("checkpoints", "run_id, invocation, pending, decision, attempts, updated_at", "run_id"),
    (
        "schedules",
        "id, name, ref, args, every, cron, tz, at, catch_up, created_at, created_by, next_at, missed, authority",
        "id",
    ),
    (
        "schedule_runs",
        "schedule_id, due_at, run_id, status, claimed_at, ended_at, pid, host, error",
        "schedule_id, due_at",
    ),
    ("subscriptions", "id, topic, ref, created_at, created_by, authority", "id"),
    ("memory_files", "id, path, size, mtime_ns, digest, chunks, indexed_at", "id"),
    ("memory_chunks", "rowid, text, heading, line", "rowid"),
    ("memory_vectors", "rowid, model, digest, vector", "rowid"),
    ("batch_runs", "output, idx, input_hash, run_id, started_at", "output, idx"),
)


class CopyRefused(StateError):
    """``state copy`` will not copy: into a store that holds something (without
    ``--replace``), or a store onto itself (exit status 2)."""

    call_error = True


def copy_store(source: StateStore, target: StateStore, *, replace: bool = False) -> dict[str, int]:
    """Copy every row of ``source`` into ``target``; returns how many rows, by table."""
    if _same(source, target):
        raise CopyRefused("it is the store being copied: give another target", path=target.path)
    held = counts(target)
    if any(held.values()) and not replace:
        raise CopyRefused(
            f"it is not empty ({describe(held)}): copy into an empty store, or give --replace to delete what it "
            "holds first",
            path=target.path,
        )
    copied: dict[str, int] = {}
    with source.db.read() as reading, target.db.write() as writing:
        if replace:
            for table, _, _ in reversed(TABLES):
                writing.execute(f"DELETE FROM {table}")
        for table, columns, key in TABLES:
            marks = ", ".join("?" for _ in columns.split(","))
            insert = f"INSERT INTO {table} ({columns}) VALUES ({marks})"
            copied[table] = 0
            for page in _pages(reading, table, columns, key):
                writing.executemany(insert, page)
                copied[table] += len(page)
        if target.db.dialect.sync_ids:
            writing.execute(target.db.dialect.sync_ids)
        # the next change to a run is numbered after every one copied (watchers, docs/console.md)
        writing.execute(target.db.dialect.reset_changes)
    return copied


def counts(store: StateStore) -> dict[str, int]:
    """How many rows each table of ``store`` holds."""
    with store.db.read() as conn:
        return {table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]) for table, _, _ in TABLES}


#: What a row of each table is called, one and several.
_NOUNS = {
    "sessions": ("session", "sessions"),
    "messages": ("message", "messages"),
    "runs": ("run", "runs"),
    "agents": ("agent", "agents"),
    "journal": ("journal entry", "journal entries"),
    "checkpoints": ("checkpoint", "checkpoints"),
    "schedules": ("schedule", "schedules"),
    "schedule_runs": ("schedule run", "schedule runs"),
    "subscriptions": ("subscription", "subscriptions"),
    "memory_files": ("indexed file", "indexed files"),
    "memory_chunks": ("memory chunk", "memory chunks"),
    "memory_vectors": ("memory vector", "memory vectors"),
    "batch_runs": ("batch input run", "batch input runs"),
}


def describe(rows: dict[str, int]) -> str:
    """``1 session, 120 messages, ...``: the tables that hold rows, with how many."""
    held = [f"{count} {_NOUNS[table][count != 1]}" for table, count in rows.items() if count]
    return ", ".join(held) or "nothing"


def _pages(conn: Connection, table: str, columns: str, key: str) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``table`` (its ``columns``), a page at a time, in ``key`` order: each
    page starts after the last key of the one before (not at an offset, which would
    read the table again up to it)."""
    width = len(key.split(","))
    last: tuple[Any, ...] = ()
    while True:
        after = f" WHERE ({key}) > ({', '.join('?' for _ in last)})" if last else ""
        rows = conn.execute(
            f"SELECT {key}, {columns} FROM {table}{after} ORDER BY {key} LIMIT ?", (*last, PAGE)
        ).fetchall()
        if rows:
            last = tuple(rows[-1][:width])
            yield [tuple(row[width:]) for row in rows]
        if len(rows) < PAGE:
            return


def _same(source: StateStore, target: StateStore) -> bool:
    """Whether both name one store: one file, or one schema of one database of one server."""
    a, b = source.db, target.db
    if a.dialect.name != b.dialect.name:
        return False
    if a.dialect.name == "sqlite":
        if ":memory:" in (a.location, b.location):
            return False
        try:
            return os.path.samefile(a.location, b.location)
        except OSError:
            return False
    return _identity(source) == _identity(target)


def _identity(store: StateStore) -> tuple[Any, ...]:
    """Where a PostgreSQL store is, as its server sees it."""
    with store.db.read() as conn:
        row = conn.execute("SELECT inet_server_addr(), inet_server_port(), current_database(), current_schema()")
        return tuple(row.fetchone())
