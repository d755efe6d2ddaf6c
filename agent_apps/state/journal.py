"""The journal of durable runs, and their checkpoints (``store.journal``).

The policy side (``agent_apps/agent/durable.py``) decides *what* is journaled and how a
resumed run replays it; this module only stores it. Every method is synchronous and
short (one transaction); async code calls them through ``StateStore.call``.

* ``journal`` rows: one entry per model response, code run (its clock and seed), host
  call from agent code (its skill, args and result or error), stored turn, and agent
  start, keyed by ``(run, agent path, key)`` and kept in the order they happened;
* ``checkpoints`` rows: how to invoke a run again, the call waiting for approval and the
  decision taken on it.
"""

from __future__ import annotations

import builtins
import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from ._db import Database, insert_rows
from ._db import dump_json as _dump
from .errors import NotResumable
from .runs import INTERRUPTED, RunInfo, find_run, touch_run

__all__ = ["DECISIONS", "FINISHED", "Checkpoint", "Journal", "JournalEntry"]

#: What a human may decide about a call waiting for approval (``result``: do not make it,
#: it returns the result the human supplied).
DECISIONS = ("approve", "deny", "skip", "result")
#: Statuses of runs that ended for good: nothing to resume.
FINISHED = ("done", "stopped", "guardrail", "max_turns", "max_steps", "budget")

_HOST = socket.gethostname()


@dataclass(frozen=True)
class JournalEntry:
    """One journal entry: ``kind`` is start, model, code, call or turn."""

    agent: str
    key: str
    kind: str
    body: dict[str, Any]
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "key": self.key, "kind": self.kind, "body": self.body, "at": self.created_at}


@dataclass(frozen=True)
class Checkpoint:
    """A resumable run: its root invocation, the pending call and the decision on it."""

    run_id: str
    invocation: dict[str, Any]
    pending: dict[str, Any] | None
    decision: dict[str, Any] | None
    attempts: int

    def to_json(self) -> dict[str, Any]:
        return {
            "invocation": self.invocation,
            "pending": self.pending,
            "decision": self.decision,
            "attempts": self.attempts,
        }


class Journal:
    """``store.journal``: write and read the journal and checkpoints of runs."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- writing (by the agent) ----------------------------------------------------------

    def begin(self, run_id: str, invocation: dict[str, Any]) -> None:
        """The run's root invocation, recorded once (a resumed run keeps its own)."""
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO checkpoints (run_id, invocation, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (run_id) DO NOTHING",
                (run_id, _dump(invocation), time.time()),
            )

    def add(self, run_id: str, agent: str, key: str, kind: str, body: Any) -> None:
        """Append one entry; an entry already there under that key stays (a replay
        never writes what it replayed, so this only happens to a racing duplicate)."""
        text = _dump(body)
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO journal (run_id, agent, key, kind, body, created_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, agent, key) DO NOTHING",
                (run_id, agent, key, kind, text, time.time()),
            )

    def add_rows(self, run_id: str, rows: builtins.list[tuple[str, str, str, str, float]]) -> None:
        """Append entries ``(agent, key, kind, body as JSON text, time)`` in one transaction."""
        with self.db.write() as conn:
            insert_rows(
                conn,
                "INSERT INTO journal (run_id, agent, key, kind, body, created_at)",
                [(run_id, *row) for row in rows],
                " ON CONFLICT (run_id, agent, key) DO NOTHING",
            )

    def pend(self, run_id: str, pending: dict[str, Any]) -> None:
        """Record the call the run waits for approval of (replacing an older one)."""
        with self.db.write() as conn:
            conn.execute(
                "UPDATE checkpoints SET pending = ?, decision = NULL, updated_at = ? WHERE run_id = ?",
                (_dump(pending), time.time(), run_id),
            )
            touch_run(conn, self.db.dialect, run_id)

    def settle(self, run_id: str) -> None:
        """The decision was applied: the run waits for nothing any more."""
        with self.db.write() as conn:
            conn.execute(
                "UPDATE checkpoints SET pending = NULL, decision = NULL, updated_at = ? WHERE run_id = ?",
                (time.time(), run_id),
            )
            touch_run(conn, self.db.dialect, run_id)

    def forget(self, run_id: str, agent: str | None = None) -> None:
        """Delete a run's journal (one agent's, with ``agent``) and, for the whole run,
        its checkpoint: retention ``run`` keeps no content once the run ended."""
        with self.db.write() as conn:
            if agent is None:
                conn.execute("DELETE FROM journal WHERE run_id = ?", (run_id,))
                conn.execute("DELETE FROM checkpoints WHERE run_id = ?", (run_id,))
            else:
                conn.execute("DELETE FROM journal WHERE run_id = ? AND agent = ?", (run_id, agent))

    def release(self, run_id: str) -> None:
        """A resume whose root ended without an agent settling the run's status (it
        failed before one started): the run is not left ``running``."""
        with self.db.write() as conn:
            conn.execute(
                "UPDATE runs SET status = 'error', ended_at = ? WHERE id = ? AND status = 'running' AND pid = ? "
                "AND host = ? AND NOT EXISTS (SELECT 1 FROM agents WHERE run_id = runs.id AND status = 'running')",
                (time.time(), run_id, os.getpid(), _HOST),
            )
            touch_run(conn, self.db.dialect, run_id)

    # -- the human's side ----------------------------------------------------------------

    def decide(self, run_id: str, action: str, reason: str | None = None, *, result: Any = None) -> Checkpoint:
        """Record a decision on the call a run waits for (``result``: the value a
        ``result`` decision supplies); returns the checkpoint."""
        if action not in DECISIONS:
            raise ValueError(f"a decision is one of {', '.join(DECISIONS)}, not {action!r}")
        with self.db.write() as conn:
            run = find_run(conn, run_id, lock=self.db.dialect.for_update)
            point = _checkpoint(conn, run.id)
            if run.status != "waiting-approval" or point is None or point.pending is None:
                raise NotResumable("run", run.id, f"is not waiting for approval (status {run.status})")
            decision = {"action": action, "reason": reason, "at": time.time()}
            if action == "result":
                decision["result"] = result
            conn.execute(
                "UPDATE checkpoints SET decision = ?, updated_at = ? WHERE run_id = ?",
                (_dump(decision), time.time(), run.id),
            )
            touch_run(conn, self.db.dialect, run.id)
        return Checkpoint(run.id, point.invocation, point.pending, decision, point.attempts)

    def claim(self, run_id: str) -> tuple[RunInfo, Checkpoint]:
        """Take a run over for resuming, in one transaction (two processes cannot both
        resume it): it must have a checkpoint, must not have ended for good, must not
        be running in a live process, and a call waiting for approval must be decided.
        The run is marked running in this process; its agents still marked running
        (their process is gone) become ``interrupted``."""
        with self.db.write() as conn:  # the run's row locked: on any machine, one resume takes it
            run = find_run(conn, run_id, lock=self.db.dialect.for_update)
            point = _checkpoint(conn, run.id)
            if point is None:
                raise NotResumable(
                    "run",
                    run.id,
                    "cannot be resumed: it has no journal (it ran with model.journal false or retention none, "
                    "its provider does not report model calls, or no agent ran in it)",
                )
            if not point.invocation.get("skill"):
                why = point.invocation.get("why") or "its root invocation cannot be invoked again"
                raise NotResumable("run", run.id, f"cannot be resumed: {why}")
            if run.status in FINISHED:
                raise NotResumable("run", run.id, f"cannot be resumed: it already ended (status {run.status})")
            if run.status == "running":  # a run whose process is gone reads as interrupted
                where = f"process {run.pid}" + (f" on {run.host}" if run.host != _HOST else "")
                raise NotResumable("run", run.id, f"cannot be resumed: it is still running ({where})")
            if run.status == "waiting-approval" and point.pending is not None and point.decision is None:
                call = f"{point.pending.get('skill')} {_short_args(point.pending.get('args'))}"
                raise NotResumable(
                    "run",
                    run.id,
                    f"waits for approval of {call}: decide with agent-apps approve {run.id} "
                    "[--deny REASON | --skip], then resume it",
                )
            conn.execute(
                "UPDATE runs SET status = 'running', ended_at = NULL, pid = ?, host = ? WHERE id = ?",
                (os.getpid(), _HOST, run.id),
            )
            conn.execute("UPDATE agents SET status = ? WHERE run_id = ? AND status = 'running'", (INTERRUPTED, run.id))
            conn.execute(
                "UPDATE checkpoints SET attempts = attempts + 1, updated_at = ? WHERE run_id = ?",
                (time.time(), run.id),
            )
            touch_run(conn, self.db.dialect, run.id)
        return run, Checkpoint(run.id, point.invocation, point.pending, point.decision, point.attempts + 1)

    # -- reading -------------------------------------------------------------------------

    def checkpoint(self, run_id: str) -> Checkpoint | None:
        with self.db.read() as conn:
            return _checkpoint(conn, run_id)

    def entries(self, run_id: str, agent: str | None = None) -> builtins.list[JournalEntry]:
        """A run's journal (one agent's, with ``agent``), in the order it was written."""
        sql = "SELECT agent, key, kind, body, created_at FROM journal WHERE run_id = ?"
        params: builtins.list[Any] = [run_id]
        if agent is not None:
            sql += " AND agent = ?"
            params.append(agent)
        with self.db.read() as conn:
            rows = conn.execute(sql + " ORDER BY rowid", params).fetchall()
        return [JournalEntry(a, k, kind, json.loads(body), at) for a, k, kind, body, at in rows]

    # -- export / import (agent_apps.state.run_snapshot) ---------------------------------

    def restore(self, conn: Any, run_id: str, checkpoint: dict[str, Any] | None, entries: list[dict[str, Any]]) -> None:
        """Write an imported run's checkpoint and journal (inside the caller's transaction)."""
        now = time.time()
        if checkpoint is not None:
            conn.execute(
                "INSERT INTO checkpoints (run_id, invocation, pending, decision, attempts, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    _dump(checkpoint["invocation"]),
                    None if checkpoint.get("pending") is None else _dump(checkpoint["pending"]),
                    None if checkpoint.get("decision") is None else _dump(checkpoint["decision"]),
                    int(checkpoint.get("attempts") or 1),
                    now,
                ),
            )
        conn.executemany(
            "INSERT INTO journal (run_id, agent, key, kind, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            [(run_id, e["agent"], e["key"], e["kind"], _dump(e["body"]), e.get("at", now)) for e in entries],
        )


def _checkpoint(conn: Any, run_id: str) -> Checkpoint | None:
    row = conn.execute(
        "SELECT invocation, pending, decision, attempts FROM checkpoints WHERE run_id = ?", (run_id,)
    ).fetchone()
    if row is None:
        return None
    invocation, pending, decision, attempts = row
    return Checkpoint(
        run_id,
        json.loads(invocation),
        json.loads(pending) if pending else None,
        json.loads(decision) if decision else None,
        attempts,
    )


def _short_args(args: Any, limit: int = 200) -> str:
    text = json.dumps(args, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
