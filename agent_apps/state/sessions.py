"""Sessions: long-lived conversations, their messages and the sandbox ``memory``.

Every method is synchronous and short (one transaction); async code calls them through
:meth:`StateStore.call <agent_apps.state.StateStore.call>`, off the event loop.
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..run_record import id_problem
from ._db import Database, insert_rows
from ._db import dump_json as _dump
from .errors import AlreadyExists, NotFound
from .messages import Entry, History, Message, estimate_tokens, stale_form

__all__ = ["SessionInfo", "Sessions", "session_id_problem"]


def session_id_problem(ident: object) -> str | None:
    """Why ``ident`` cannot name a session, or None (the rules of every id: :func:`id_problem`)."""
    return id_problem(ident, "session id")


@dataclass(frozen=True)
class SessionInfo:
    id: str
    created_at: float
    updated_at: float
    #: Messages appended so far (the number of the last one).
    messages: int
    #: Estimated tokens of all its messages.
    tokens: int
    #: Messages up to this number are summarized (compacted) in the prompt window.
    summary_through: int = 0
    summary: str | None = None
    memory: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "messages": self.messages,
            "tokens": self.tokens,
            "summary_through": self.summary_through,
            "summary": self.summary,
            "memory": self.memory,
            "meta": self.meta,
        }


_COLUMNS = "id, created_at, updated_at, seq, tokens, summary_through, summary, memory, meta"


def _info(row: tuple[Any, ...]) -> SessionInfo:
    ident, created, updated, seq, tokens, through, summary, memory, meta = row
    return SessionInfo(
        ident,
        created,
        updated,
        seq,
        tokens,
        through,
        summary,
        json.loads(memory) if memory is not None else None,
        json.loads(meta) if meta else {},
    )



def _stale(message: Message) -> str | None:
    form = stale_form(message)
    return None if form is None else _dump(form)


#: Appending messages: the session's row made or grown, its last message's number returned.
_APPEND = (
    "INSERT INTO sessions (id, created_at, updated_at, seq, tokens, memory) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET seq = sessions.seq + excluded.seq, tokens = sessions.tokens + excluded.tokens, "
    "updated_at = excluded.updated_at, memory = coalesce(excluded.memory, sessions.memory) RETURNING seq"
)
#: The same with the provider's anchor ``(tokens, index)``: the history it counted ends at
#: message number ``seq + index`` (``seq`` before this append: 0 for a new session).
_APPEND_ANCHORED = (
    "INSERT INTO sessions (id, created_at, updated_at, seq, tokens, memory, anchor_tokens, anchor_seq) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET seq = sessions.seq + excluded.seq, tokens = sessions.tokens + excluded.tokens, "
    "updated_at = excluded.updated_at, memory = coalesce(excluded.memory, sessions.memory), "
    "anchor_tokens = excluded.anchor_tokens, anchor_seq = sessions.seq + excluded.anchor_seq RETURNING seq"
)


class Sessions:
    """``store.sessions``: create, append, read, compact, fork and remove sessions."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- reading -----------------------------------------------------------------------

    def list(self) -> builtins.list[SessionInfo]:
        """Every session, most recently updated first (without memory and summary)."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT id, created_at, updated_at, seq, tokens, summary_through FROM sessions "
                "ORDER BY updated_at DESC, id"
            ).fetchall()
        return [SessionInfo(*row) for row in rows]

    def get(self, session_id: str) -> SessionInfo:
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise NotFound("session", session_id, "agent-apps sessions list shows the sessions")
        return _info(row)

    def exists(self, session_id: str) -> bool:
        with self.db.read() as conn:
            return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None

    def messages(self, session_id: str, *, after: int = 0) -> builtins.list[Entry]:
        """The stored messages (all of them, compacted or not) numbered above ``after``."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT seq, tokens, body FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq",
                (session_id, after),
            ).fetchall()
        return [Entry(seq, json.loads(body), tokens) for seq, tokens, body in rows]

    def history(self, session_id: str) -> History:
        """What the prompt window starts from: the messages after the last compaction,
        its summary and the token anchor (an empty history for an unknown session)."""
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT summary, summary_through, anchor_tokens, anchor_seq FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                return History(session_id)
            summary, through, anchor_tokens, anchor_seq = row
            rows = conn.execute(
                "SELECT seq, tokens, role, body, stale FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq",
                (session_id, through),
            ).fetchall()
        entries = [
            Entry(seq, None, tokens, body=body, role=role, stale=stale) for seq, tokens, role, body, stale in rows
        ]
        return History(session_id, entries, summary, through, anchor_tokens, anchor_seq)

    # -- writing -----------------------------------------------------------------------

    def begin(self, session_id: str) -> SessionInfo:
        """Create the session if it is new; return it as a run finds it (the ``memory``
        its last run left, the skills its runs loaded), read in the same transaction:
        a run reads nothing more of its session before its prompt window."""
        now = time.time()
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (session_id, now, now),
            )
            row = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return _info(row)

    def append(
        self,
        session_id: str,
        messages: builtins.list[Message],
        *,
        run_id: str | None = None,
        memory: dict[str, Any] | None = None,
        anchor: tuple[int, int] | None = None,
    ) -> int:
        """Append ``messages`` (one transaction; the session is created if new) and
        return the number of the last one. ``memory`` replaces the saved memory (None
        leaves it). ``anchor = (tokens, index)``: a provider reported ``tokens`` input tokens
        for the history up to the message before ``messages[index]``."""
        now = time.time()
        tokens = [estimate_tokens(m) for m in messages]
        bodies = [_dump(m) for m in messages]
        saved = None if memory is None else _dump(memory)
        row: tuple[Any, ...] = (session_id, now, now, len(messages), sum(tokens), saved)
        with self.db.write() as conn:
            (last,) = conn.execute(
                _APPEND if anchor is None else _APPEND_ANCHORED, row if anchor is None else (*row, *anchor)
            ).fetchone()
            first = last - len(messages) + 1
            insert_rows(
                conn,
                "INSERT INTO messages (session_id, seq, run_id, created_at, role, tokens, body, stale)",
                [
                    (session_id, first + i, run_id, now, m.get("role"), tokens[i], bodies[i], _stale(m))
                    for i, m in enumerate(messages)
                ],
            )
        return int(last)

    def compact(self, session_id: str, *, through: int, summary: str | None) -> bool:
        """Let ``summary`` stand for messages up to ``through`` in the prompt window
        (``None``: they are dropped from it). The messages stay stored. False when a
        concurrent compaction got further already."""
        with self.db.write() as conn:
            cursor = conn.execute(
                "UPDATE sessions SET summary = ?, summary_through = ?, anchor_tokens = NULL, anchor_seq = NULL "
                "WHERE id = ? AND summary_through < ?",
                (summary, through, session_id, through),
            )
            return cursor.rowcount > 0

    def update_meta(self, session_id: str, values: dict[str, Any]) -> None:
        """Merge ``values`` into the session's metadata (top-level keys replace)."""
        lock = self.db.dialect.for_update
        with self.db.write() as conn:
            row = conn.execute(f"SELECT meta FROM sessions WHERE id = ?{lock}", (session_id,)).fetchone()
            if row is None:
                raise NotFound("session", session_id)
            meta = {**json.loads(row[0] or "{}"), **values}
            conn.execute("UPDATE sessions SET meta = ? WHERE id = ?", (_dump(meta), session_id))

    def add_loaded_guidance(self, session_id: str, names: Sequence[str]) -> None:
        """Add ``names`` to the guidance skills the session remembers, each once. A run
        adds the names it loads (never its whole list), so a :meth:`reset_guidance`
        while the run is in progress is not undone by it."""
        lock = self.db.dialect.for_update
        with self.db.write() as conn:
            row = conn.execute(f"SELECT meta FROM sessions WHERE id = ?{lock}", (session_id,)).fetchone()
            if row is None:
                raise NotFound("session", session_id)
            meta = json.loads(row[0] or "{}")
            loaded = [name for name in meta.get("loaded_skills") or [] if isinstance(name, str)]
            meta["loaded_skills"] = list(dict.fromkeys([*loaded, *names]))
            conn.execute("UPDATE sessions SET meta = ? WHERE id = ?", (_dump(meta), session_id))

    def reset_guidance(self, session_id: str) -> builtins.list[str]:
        """Forget the guidance skills the session's runs loaded (seed 004's
        ``ResetSession``): later runs no longer get their text in the prompt nor read
        their folders, until they load them again. The messages (those that loaded
        them included) and the memory stay. Returns the names it forgot."""
        lock = self.db.dialect.for_update
        with self.db.write() as conn:
            row = conn.execute(f"SELECT meta FROM sessions WHERE id = ?{lock}", (session_id,)).fetchone()
            if row is None:
                raise NotFound("session", session_id, "agent-apps sessions list shows the sessions")
            meta = json.loads(row[0] or "{}")
            forgotten = meta.pop("loaded_skills", None) or []
            conn.execute("UPDATE sessions SET meta = ? WHERE id = ?", (_dump(meta), session_id))
        return [name for name in forgotten if isinstance(name, str)]

    def forget_run(self, session_id: str, run_id: str, *, memory: dict[str, Any] | None) -> None:
        """Retention ``run``: remove the messages a run added and put ``memory`` back."""
        with self.db.write() as conn:
            (tokens,) = conn.execute(
                "SELECT coalesce(sum(tokens), 0) FROM messages WHERE session_id = ? AND run_id = ?",
                (session_id, run_id),
            ).fetchone()
            conn.execute("DELETE FROM messages WHERE session_id = ? AND run_id = ?", (session_id, run_id))
            conn.execute(
                "UPDATE sessions SET tokens = tokens - ?, memory = ?, anchor_tokens = NULL, anchor_seq = NULL "
                "WHERE id = ?",
                (tokens, None if memory is None else _dump(memory), session_id),
            )

    def fork(self, session_id: str, new_id: str) -> SessionInfo:
        """An independent copy of a session (messages, memory, summary) under ``new_id``."""
        now = time.time()
        lock = self.db.dialect.for_update  # no append to it between copying the row and its messages
        with self.db.write() as conn:
            row = conn.execute(f"SELECT meta FROM sessions WHERE id = ?{lock}", (session_id,)).fetchone()
            if row is None:
                raise NotFound("session", session_id)
            meta = {**json.loads(row[0] or "{}"), "forked_from": session_id}
            copied = conn.execute(
                "INSERT INTO sessions (id, created_at, updated_at, seq, tokens, memory, summary, summary_through, "
                "anchor_tokens, anchor_seq, meta) SELECT ?, ?, ?, seq, tokens, memory, summary, summary_through, "
                "anchor_tokens, anchor_seq, ? FROM sessions WHERE id = ? ON CONFLICT (id) DO NOTHING",
                (new_id, now, now, _dump(meta), session_id),
            ).rowcount
            if not copied:
                raise AlreadyExists("session", new_id, "choose another id, or remove it first")
            conn.execute(
                "INSERT INTO messages (session_id, seq, run_id, created_at, role, tokens, body, stale) "
                "SELECT ?, seq, run_id, created_at, role, tokens, body, stale FROM messages WHERE session_id = ?",
                (new_id, session_id),
            )
        return self.get(new_id)

    def prune(self, before: float, *, dry_run: bool = False) -> builtins.list[SessionInfo]:
        """Delete the sessions last used before ``before`` (a time), with their messages
        (their runs stay recorded); returns them."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT id, created_at, updated_at, seq, tokens, summary_through FROM sessions "
                "WHERE updated_at < ? ORDER BY updated_at, id",
                (before,),
            ).fetchall()
        if rows and not dry_run:
            with self.db.write() as conn:
                conn.executemany("DELETE FROM sessions WHERE id = ?", [(row[0],) for row in rows])
        return [SessionInfo(*row) for row in rows]

    def remove(self, session_id: str) -> None:
        """Delete a session and its messages (its runs stay recorded)."""
        with self.db.write() as conn:
            if conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount == 0:
                raise NotFound("session", session_id)

    # -- export / import ---------------------------------------------------------------

    def export(self, session_id: str) -> dict[str, Any]:
        """A versioned JSON snapshot of the session; :meth:`import_` gives it back."""
        from .snapshot import export_session

        return export_session(self.db, session_id)

    def import_(self, snapshot: Any, *, as_id: str | None = None, source: str = "<snapshot>") -> SessionInfo:
        """Create a session from an export (``as_id`` renames it). A bad snapshot raises
        :class:`~agent_apps.state.SnapshotInvalid` naming the field (and, with
        :func:`~agent_apps.state.snapshot.load_snapshot`, the line)."""
        from .snapshot import import_session

        return self.get(import_session(self.db, snapshot, as_id=as_id, source=source))
