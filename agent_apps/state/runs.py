"""Runs: every agent run, recorded with its run id, session, status, report and trace.

A run is one invocation tree (``ctx.run.run_id``). The agents in it are rows of their
own (``agents``: id, parent, depth), so a sub-agent started from agent code shows as a
child of the agent whose code started it. A run's status is that of its outermost
agents: ``running`` while one runs, else the status of the last one to end.
"""

from __future__ import annotations

import builtins
import json
import os
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._db import Connection, Database
from .errors import NotFound, NotResumable

if TYPE_CHECKING:
    from ..run_record import RunRecord

__all__ = ["STATUSES", "AgentInfo", "RunInfo", "Runs"]

#: A run's status: ``running`` while it runs, then one of the others.
STATUSES = (
    "running",
    "done",
    "stopped",
    "error",
    "guardrail",
    "max_turns",
    "max_steps",
    "budget",
    "cancelled",
    "waiting-approval",
    "interrupted",
)
#: The status of an agent whose process died (set when the run is resumed in another),
#: and of an imported run that was running when it was exported. ``runs list`` also
#: shows a run still ``running`` whose process is gone as interrupted.
INTERRUPTED = "interrupted"
#: Statuses of a run that nothing runs but that has not ended: a stop ends it at once.
_PAUSED = ("waiting-approval", INTERRUPTED)

_HOST = socket.gethostname()


@dataclass(frozen=True)
class RunInfo:
    id: str
    session_id: str | None
    name: str
    status: str
    started_at: float
    ended_at: float | None
    pid: int | None
    host: str | None
    input_tokens: int
    output_tokens: int

    @property
    def process_gone(self) -> bool:
        """A run still marked ``running`` whose process on this host has ended (it was
        killed, or the machine went down): it will never finish."""
        if self.status != "running" or self.host != _HOST or not self.pid:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False

    def to_json(self) -> dict[str, Any]:
        data = {
            "id": self.id,
            "session_id": self.session_id,
            "name": self.name,
            "status": self.status,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "pid": self.pid,
            "host": self.host,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
        }
        if self.process_gone:
            data["process_gone"] = True
        return data


@dataclass(frozen=True)
class AgentInfo:
    run_id: str
    id: str
    parent_id: str | None
    depth: int
    name: str
    session_id: str | None
    status: str
    started_at: float
    ended_at: float | None
    report: dict[str, Any] | None
    trace: list[dict[str, Any]] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parent_id": self.parent_id,
            "depth": self.depth,
            "name": self.name,
            "session_id": self.session_id,
            "status": self.status,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "report": self.report,
            "trace": self.trace,
        }


_RUN_COLUMNS = "id, session_id, name, status, started_at, ended_at, pid, host, input_tokens, output_tokens"


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)


def find_run(conn: Connection, run_id: str, *, lock: str = "") -> RunInfo:
    """The run of that id, or of a unique prefix of it, read on ``conn``; ``lock``: the
    dialect's ``for_update``, when the transaction goes on to change the run."""
    rows = conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM runs WHERE id >= ? AND id < ? ORDER BY id LIMIT 2{lock}",
        (run_id, run_id + "\uffff"),
    ).fetchall()
    exact = [row for row in rows if row[0] == run_id]
    if exact:
        return RunInfo(*exact[0])
    if len(rows) == 1 and run_id:
        return RunInfo(*rows[0])
    if len(rows) > 1:
        raise NotFound("run", run_id, "that prefix matches several runs: give more of the id")
    raise NotFound("run", run_id, "agent-apps runs list shows the runs")


class Runs:
    """``store.runs``: record agent runs and read them back."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- writing (by the agent) ----------------------------------------------------------

    def start_agent(self, record: RunRecord, *, name: str) -> None:
        """An agent run starts: its row, and the run's (new, or running again)."""
        assert record.agent_id is not None
        now = time.time()
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO runs (id, session_id, name, status, started_at, pid, host) "
                "VALUES (?, ?, ?, 'running', ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (record.run_id, record.session_id, name, now, os.getpid(), _HOST),
            )
            if record.parent is None:
                conn.execute("UPDATE runs SET status = 'running', ended_at = NULL WHERE id = ?", (record.run_id,))
            conn.execute(
                "INSERT INTO agents (run_id, id, parent_id, depth, name, session_id, status, started_at) "
                "VALUES (?, ?, ?, ?, ?, ?, 'running', ?)",
                (record.run_id, record.agent_id, record.parent, record.depth, name, record.session_id, now),
            )

    def report(self, record: RunRecord, report: dict[str, Any]) -> None:
        """The report so far (after each turn), so a crashed run still shows its turns."""
        with self.db.write() as conn:
            conn.execute(
                "UPDATE agents SET report = ? WHERE run_id = ? AND id = ?",
                (_dump(report), record.run_id, record.agent_id),
            )

    def finish_agent(self, record: RunRecord, *, status: str, report: dict[str, Any]) -> None:
        """An agent run ended with ``status``; its usage counts toward the run's."""
        now = time.time()
        usage = report.get("usage") or {}
        with self.db.write() as conn:
            conn.execute(
                "UPDATE agents SET status = ?, ended_at = ?, report = ? WHERE run_id = ? AND id = ?",
                (status, now, _dump(report), record.run_id, record.agent_id),
            )
            conn.execute(
                "UPDATE runs SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ? WHERE id = ?",
                (int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0), record.run_id),
            )
            if record.parent is None:
                running = conn.execute(
                    "SELECT 1 FROM agents WHERE run_id = ? AND parent_id IS NULL AND status = 'running'",
                    (record.run_id,),
                ).fetchone()
                if running is None:  # the run ended: a stop asked of it is void
                    conn.execute(
                        "UPDATE runs SET status = ?, ended_at = ?, stop_requested = NULL WHERE id = ?",
                        (status, now, record.run_id),
                    )

    # -- stopping (agent/stopping.py) -------------------------------------------------------

    def stop(self, run_id: str, reason: str) -> tuple[RunInfo, bool]:
        """Ask the run of that id (or unique prefix) to stop gracefully; returns the run
        and whether it stopped here and now. A run that some process runs gets a stop
        request, which that process polls for (:meth:`stop_requests`); a run nothing
        runs (waiting for approval, or its process is gone) ends ``stopped`` now, its
        pending call undecided for good, its partial result the model's last text.
        An ended run is refused (:class:`NotResumable`)."""
        with self.db.write() as conn:
            run = find_run(conn, run_id, lock=self.db.dialect.for_update)
            now = time.time()
            if run.status == "running" and not run.process_gone:
                conn.execute(
                    "UPDATE runs SET stop_requested = ?, stop_reason = ? WHERE id = ?", (now, reason, run.id)
                )
                return run, False
            if run.status not in (*_PAUSED, "running"):
                raise NotResumable("run", run.id, f"cannot be stopped: it already ended (status {run.status})")
            conn.execute(
                "UPDATE runs SET status = 'stopped', ended_at = ?, stop_requested = NULL, stop_reason = ? WHERE id = ?",
                (now, reason, run.id),
            )
            self._stop_agents(conn, run.id, reason, now)
            conn.execute("UPDATE checkpoints SET pending = NULL, decision = NULL, updated_at = ? WHERE run_id = ?",
                         (now, run.id))  # fmt: skip
        return run, True

    @staticmethod
    def _stop_agents(conn: Connection, run_id: str, reason: str, now: float) -> None:
        """The agents a stopped run left waiting (or running, in a process that is gone)
        end ``stopped``; each one's report gets the status, the reason and, for its
        result, the model's last text in the run's journal."""
        rows = conn.execute(
            "SELECT id, parent_id, report FROM agents WHERE run_id = ? AND status IN ('running', 'waiting-approval')",
            (run_id,),
        ).fetchall()
        for ident, parent, text in rows:
            report = json.loads(text) if text else {}
            report.update(status="stopped", message=f"Stopped: {reason}", ended_at=now)
            if parent is None and report.get("retention", "permanent") == "permanent":
                report["result"] = _last_text(conn, run_id)
            conn.execute(
                "UPDATE agents SET status = 'stopped', ended_at = ?, report = ? WHERE run_id = ? AND id = ?",
                (now, _dump(report), run_id, ident),
            )

    def stop_requests(self, run_ids: builtins.list[str]) -> dict[str, str]:
        """The stop requests pending for these runs: the reason, by run id."""
        if not run_ids:
            return {}
        marks = ", ".join("?" * len(run_ids))
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT id, stop_reason FROM runs WHERE stop_requested IS NOT NULL AND id IN ({marks})", run_ids
            ).fetchall()
        return {ident: reason or "stopped" for ident, reason in rows}

    def save_trace(self, run_id: str, agent_id: str, trace: list[dict[str, Any]]) -> None:
        """Store an agent run's trace with it (the bundled ``session`` middleware)."""
        with self.db.write() as conn:
            conn.execute("UPDATE agents SET trace = ? WHERE run_id = ? AND id = ?", (_dump(trace), run_id, agent_id))

    # -- reading ---------------------------------------------------------------------------

    def list(self, *, session: str | None = None, limit: int | None = None) -> builtins.list[RunInfo]:
        """Runs, newest first; ``session``: those with an agent in that session."""
        sql = f"SELECT {_RUN_COLUMNS} FROM runs"
        params: builtins.list[Any] = []
        if session is not None:
            sql += " WHERE id IN (SELECT run_id FROM agents WHERE session_id = ?)"
            params.append(session)
        sql += " ORDER BY started_at DESC, id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self.db.read() as conn:
            return [RunInfo(*row) for row in conn.execute(sql, params).fetchall()]

    def get(self, run_id: str) -> RunInfo:
        """The run of that id, or of a unique prefix of it (as printed by ``runs list``)."""
        with self.db.read() as conn:
            return find_run(conn, run_id)

    def agents(self, run_id: str) -> builtins.list[AgentInfo]:
        """The agent runs of a run, in the order they started."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT run_id, id, parent_id, depth, name, session_id, status, started_at, ended_at, report, trace "
                "FROM agents WHERE run_id = ? ORDER BY started_at, rowid",
                (run_id,),
            ).fetchall()
        return [
            AgentInfo(
                run_id,
                ident,
                parent,
                depth,
                name,
                session,
                status,
                started,
                ended,
                json.loads(report) if report else None,
                json.loads(trace) if trace else None,
            )
            for run_id, ident, parent, depth, name, session, status, started, ended, report, trace in rows
        ]


def _last_text(conn: Connection, run_id: str) -> str:
    """The last non-empty text the model of a run's outermost agents said, in its
    journal (agents below them have paths with a ``/``)."""
    rows = conn.execute(
        "SELECT body FROM journal WHERE run_id = ? AND kind = 'model' AND agent NOT LIKE '%/%' ORDER BY rowid DESC",
        (run_id,),
    ).fetchall()
    for (body,) in rows:
        text = ((json.loads(body).get("response") or {}).get("text") or "").strip()
        if text:
            return str(text)
    return ""
