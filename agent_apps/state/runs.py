"""Runs: every agent run, recorded with its run id, session, status, report and trace.

A run is one invocation tree (``ctx.run.run_id``). The agents in it are rows of their
own (``agents``: id, parent, depth), so a sub-agent started from agent code shows as a
child of the agent whose code started it. A run's status is that of its outermost
agents: ``running`` while one runs, else the status of the last one to end.

Watchers (the console) follow runs as they change: every write to a run or its agents
gives them the next change number (:func:`touch_run`), so :meth:`Runs.latest` and
:meth:`Runs.changed` tell what changed after the number a watcher saw, and an agent's
``live`` column holds the turn it has in flight.

A watcher that saw number N must never miss a change that commits later with a number
at or below N. On SQLite the numbers come from one counter row, whose writes are
serialized, so they follow the order of commits. On PostgreSQL they come from a
sequence, which locks nothing (the counter row's lock, held until commit, made the
writes of every run wait for each other's commits), so a change may commit after one
with a higher number: each write holds a shared advisory lock while its number is
pending, and :meth:`Runs.latest` answers only a number every change at or below which
has ended. The changes of one run still follow their commits on both backends: a write
locks the run's row before it takes a number.

A write's change number is not read back into Python: the agents' rows take it from
the run's row in the same transaction (:data:`RUN_SEQ`), so on PostgreSQL a write to
a run is one round trip to the server, its statements sent together with its commit.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import os
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._db import Connection, Database, Dialect
from ._db import dump_json_or_repr as _dump
from .errors import NotFound, NotResumable

if TYPE_CHECKING:
    from ..run_record import RunRecord

__all__ = [
    "INTERRUPTED", "RUN_SEQ", "STATUSES", "WAITING", "AgentInfo", "RunInfo", "Runs", "find_run", "process_gone",
    "touch_run", "touch_runs",
]

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
#: The status of a run (and its agents) whose process died: read so from a row still
#: marked running whose process is gone, stored so when the run is resumed in another
#: process, and for an imported run that was running when it was exported.
INTERRUPTED = "interrupted"

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
    #: USD, from the price table (0 when the model's price is not known).
    cost_usd: float = 0.0
    #: The number of the run's last change (see :func:`touch_run`).
    seq: int = 0
    #: The tenant the run serves (``invoke(..., tenant=ID)``), or None.
    tenant_id: str | None = None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> RunInfo:
        """The run of a ``runs`` row; one still marked ``running`` whose process on this
        host has ended (killed, or the machine went down) is ``interrupted``: it will
        never finish by itself."""
        info = cls(*row)
        if info.status == "running" and process_gone(info.pid, info.host):
            return dataclasses.replace(info, status=INTERRUPTED)
        return info

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
            "cost_usd": round(self.cost_usd, 8),
            "tenant_id": self.tenant_id,
        }
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
    #: The turn in flight (a report step so far), while the agent runs.
    live: dict[str, Any] | None = None
    #: The number of the agent's last change (see :func:`touch_run`).
    seq: int = 0

    def to_json(self) -> dict[str, Any]:
        data = {
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
        if self.live is not None:
            data["live"] = self.live
        return data


_RUN_COLUMNS = (
    "id, session_id, name, status, started_at, ended_at, pid, host, input_tokens, output_tokens, cost_usd, seq, "
    "tenant_id"
)
_AGENT_COLUMNS = (
    "run_id, id, parent_id, depth, name, session_id, status, started_at, ended_at, report, trace, live, seq"
)
#: The status of a run whose call waits for a human's decision.
WAITING = "waiting-approval"
#: Statuses of a run that nothing runs but that has not ended: a stop ends it at once.
_PAUSED = (WAITING, INTERRUPTED)
#: A LIMIT that takes every row (the same on every backend, unlike -1 or ALL).
_ALL = 2**62


def process_gone(pid: int | None, host: str | None) -> bool:
    """Whether the process ``pid`` on ``host`` has ended (known only for this host)."""
    if host != _HOST or not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


#: The change number a write gave a run (:func:`touch_run`), as an SQL value for the
#: rows of its agents that the same transaction writes; its parameter is the run's id.
RUN_SEQ = "(SELECT seq FROM runs WHERE id = ?)"


def touch_run(conn: Connection, dialect: Dialect, run_id: str) -> None:
    """Give the run ``run_id`` the next change number, inside the caller's write
    transaction; the agents that changed with it take it by :data:`RUN_SEQ`."""
    touch_runs(conn, dialect, [run_id])


def touch_runs(conn: Connection, dialect: Dialect, run_ids: builtins.list[str]) -> None:
    """Give the runs ``run_ids`` the next change number, one for all (see :func:`touch_run`).

    The runs' rows are locked first, and the number taken after: two writes to one run
    take their numbers in the order they commit, on either backend (module docstring).
    The first run's lock is in the dialect's statements (one on PostgreSQL); the
    others' are taken before them, by an UPDATE that changes nothing."""
    if not run_ids:
        return
    first, *others = run_ids
    if others:
        conn.executemany("UPDATE runs SET seq = seq WHERE id = ?", [(run_id,) for run_id in others])
    *take, give = dialect.touch_run
    for statement in take:
        conn.execute(statement)
    conn.execute(give, (first,))
    if others:
        conn.executemany(f"UPDATE runs SET seq = {RUN_SEQ} WHERE id = ?", [(first, run_id) for run_id in others])


def _next_change(conn: Connection, dialect: Dialect) -> int:
    """The next change number, taken inside the caller's write transaction."""
    *hold, take = dialect.next_change
    for statement in hold:
        conn.execute(statement)
    return int(conn.execute(take).fetchone()[0])


def _agent(row: tuple[Any, ...], gone: bool) -> AgentInfo:
    """The agent of an ``agents`` row; ``gone``: its run's process died, so an agent
    still marked running is ``interrupted``."""
    run_id, ident, parent, depth, name, session, status, started, ended, report, trace, live, seq = row
    if gone and status == "running":
        status = INTERRUPTED
    return AgentInfo(
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
        json.loads(live) if live else None,
        seq,
    )


def _like(text: str) -> str:
    """A LIKE pattern matching ``text`` anywhere (``%``, ``_`` and ``\\`` taken literally)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _where(
    session: str | None, status: str | None, name: str | None, text: str | None, tenant: str | None = None
) -> tuple[str, builtins.list[Any]]:
    """The WHERE clause of a filtered run list, and its parameters."""
    clauses: builtins.list[str] = []
    params: builtins.list[Any] = []
    if tenant is not None:
        clauses.append("tenant_id = ?")
        params.append(tenant)
    if session is not None:
        clauses.append("id IN (SELECT run_id FROM agents WHERE session_id = ?)")
        params.append(session)
    if status is not None:
        clauses.append("status = ?")
        params.append(status)
    if name is not None:
        clauses.append("name = ?")
        params.append(name)
    if text:
        # the run's id, skill and session, and what its agents' reports recorded (JSON
        # text), ignoring case (lower() on both sides: LIKE itself ignores it on SQLite only)
        plain, quoted = _like(text.lower()), _like(json.dumps(text.lower(), ensure_ascii=False)[1:-1])
        clauses.append(
            "(lower(id) LIKE ? ESCAPE '\\' OR lower(name) LIKE ? ESCAPE '\\' "
            "OR lower(coalesce(session_id, '')) LIKE ? ESCAPE '\\' "
            "OR EXISTS (SELECT 1 FROM agents WHERE run_id = runs.id AND lower(report) LIKE ? ESCAPE '\\'))"
        )
        params += [plain, plain, plain, quoted]
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def find_run(conn: Connection, run_id: str, *, lock: str = "") -> RunInfo:
    """The run of that id, or of a unique prefix of it, read on ``conn``; ``lock``: the
    dialect's ``for_update``, when the transaction goes on to change the run."""
    rows = conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM runs WHERE id >= ? AND id < ? ORDER BY id LIMIT 2{lock}",
        (run_id, run_id + "\uffff"),
    ).fetchall()
    exact = [row for row in rows if row[0] == run_id]
    if exact:
        return RunInfo.from_row(exact[0])
    if len(rows) == 1 and run_id:
        return RunInfo.from_row(rows[0])
    if len(rows) > 1:
        raise NotFound("run", run_id, "that prefix matches several runs: give more of the id")
    raise NotFound("run", run_id, "agent-apps runs list shows the runs")


class Runs:
    """``store.runs``: record agent runs and read them back."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- writing (by the agent) ----------------------------------------------------------

    def _touch(self, conn: Connection, run_id: str) -> None:
        """:func:`touch_run`, once per transaction: the writes of an agent's turn (its
        report, the turn in flight) commit together and share one change number."""
        if self.db.first_touch(run_id):
            touch_run(conn, self.db.dialect, run_id)

    def start_agent(self, record: RunRecord, *, name: str) -> None:
        """An agent run starts: its row, and the run's (new, or running again)."""
        assert record.agent_id is not None
        now = time.time()
        # an outermost agent runs its run again: a row made before (a scheduler's claim,
        # an earlier outermost agent) is running again, and gets the run's tenant too
        again = " DO NOTHING"
        if record.parent is None:
            again = (
                " DO UPDATE SET status = 'running', ended_at = NULL, "
                "tenant_id = coalesce(runs.tenant_id, excluded.tenant_id)"
            )
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO runs (id, session_id, name, status, started_at, pid, host, tenant_id) "
                f"VALUES (?, ?, ?, 'running', ?, ?, ?, ?) ON CONFLICT (id){again}",
                (record.run_id, record.session_id, name, now, os.getpid(), _HOST, record.tenant_id),
            )
            self._touch(conn, record.run_id)
            conn.execute(
                "INSERT INTO agents (run_id, id, parent_id, depth, name, session_id, status, started_at, seq) "
                f"VALUES (?, ?, ?, ?, ?, ?, 'running', ?, {RUN_SEQ})",
                (record.run_id, record.agent_id, record.parent, record.depth, name, record.session_id, now,
                 record.run_id),
            )  # fmt: skip

    def report(self, record: RunRecord, report: dict[str, Any]) -> None:
        """The report so far (after each turn), so a crashed run still shows its turns;
        the turn in flight is then over."""
        with self.db.write() as conn:
            self._touch(conn, record.run_id)
            _write_report(conn, record, report, "live = NULL")

    def live(self, record: RunRecord, step: str) -> None:
        """The turn the agent has in flight (``step``: JSON text), for watchers."""
        with self.db.write() as conn:
            self._touch(conn, record.run_id)
            conn.execute(
                f"UPDATE agents SET live = ?, seq = {RUN_SEQ} WHERE run_id = ? AND id = ? AND status = 'running'",
                (step, record.run_id, record.run_id, record.agent_id),
            )

    def finish_agent(
        self, record: RunRecord, *, status: str, report: dict[str, Any], trace: list[dict[str, Any]] | None = None
    ) -> None:
        """An agent run ended with ``status``; its usage counts toward the run's. A
        ``trace`` is stored with it (:meth:`save_trace`) in the same statement."""
        now = time.time()
        assign, values = "status = ?, ended_at = ?, live = NULL", [status, now]
        if trace is not None:
            assign, values = f"{assign}, trace = ?", [*values, _dump(trace)]
        with self.db.write() as conn:
            self._touch(conn, record.run_id)
            _write_report(conn, record, report, assign, *values)
            if record.parent is None:  # the run ends with its last outermost agent: a stop asked of it is void
                conn.execute(
                    "UPDATE runs SET status = ?, ended_at = ?, stop_requested = NULL WHERE id = ? AND NOT EXISTS "
                    "(SELECT 1 FROM agents WHERE run_id = runs.id AND parent_id IS NULL AND status = 'running')",
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
            if run.status == "running":  # a live process runs it (one that is gone reads interrupted)
                touch_run(conn, self.db.dialect, run.id)  # watchers see the request
                conn.execute(
                    "UPDATE runs SET stop_requested = ?, stop_reason = ? WHERE id = ?", (now, reason, run.id)
                )
                return run, False
            if run.status not in _PAUSED:
                raise NotResumable("run", run.id, f"cannot be stopped: it already ended (status {run.status})")
            touch_run(conn, self.db.dialect, run.id)
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
        end ``stopped`` with the run's change number; each one's report gets the status,
        the reason and, for its result, the model's last text in the run's journal."""
        rows = conn.execute(
            "SELECT id, parent_id, report FROM agents WHERE run_id = ? AND status IN (?, ?, ?)",
            (run_id, "running", WAITING, INTERRUPTED),
        ).fetchall()
        for ident, parent, text in rows:
            report = json.loads(text) if text else {}
            report.update(status="stopped", message=f"Stopped: {reason}", ended_at=now)
            if parent is None and report.get("retention", "permanent") == "permanent":
                report["result"] = _last_text(conn, run_id)
            conn.execute(
                f"UPDATE agents SET status = 'stopped', ended_at = ?, report = ?, live = NULL, seq = {RUN_SEQ} "
                "WHERE run_id = ? AND id = ?",
                (now, _dump(report), run_id, run_id, ident),
            )

    def stop_requests(self, run_ids: builtins.list[str]) -> dict[str, str]:
        """The stop requests pending for these runs: the reason, by run id."""
        if not run_ids:
            return {}
        ids = self.db.dialect.json_values
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT id, stop_reason FROM runs WHERE stop_requested IS NOT NULL AND id IN ({ids})",
                (json.dumps(run_ids),),
            ).fetchall()
        return {ident: reason or "stopped" for ident, reason in rows}

    def save_trace(self, run_id: str, agent_id: str, trace: list[dict[str, Any]]) -> None:
        """Store an agent run's trace with it (the bundled ``session`` middleware)."""
        with self.db.write() as conn:
            conn.execute("UPDATE agents SET trace = ? WHERE run_id = ? AND id = ?", (_dump(trace), run_id, agent_id))

    def take_over(self, run_id: str) -> bool:
        """Run ``run_id`` again from its start in this process (a run that cannot be
        resumed from a journal): it is marked running here, and its agents still marked
        running become ``interrupted``. False when it is still running in a live process."""
        with self.db.write() as conn:
            run = find_run(conn, run_id)
            if run.status == "running":
                return False
            conn.execute(
                "UPDATE runs SET status = 'running', ended_at = NULL, pid = ?, host = ? WHERE id = ?",
                (os.getpid(), _HOST, run.id),
            )
            conn.execute("UPDATE agents SET status = ? WHERE run_id = ? AND status = 'running'", (INTERRUPTED, run.id))
        return True

    # -- reading ---------------------------------------------------------------------------

    def list(
        self,
        *,
        session: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        status: str | None = None,
        name: str | None = None,
        text: str | None = None,
        tenant: str | None = None,
        waiting_first: bool = False,
    ) -> builtins.list[RunInfo]:
        """Runs, newest first (``waiting_first``: those waiting for approval before the
        rest), ``limit`` of them after the first ``offset``. Filters: ``session`` (an
        agent of the run is in it), ``status``, ``name`` (the skill first invoked),
        ``text`` (in the run's id, name, session or its agents' reports) and ``tenant``
        (the tenant the run serves)."""
        where, params = _where(session, status, name, text, tenant)
        first = f"status = '{WAITING}' DESC, " if waiting_first else ""
        sql = f"SELECT {_RUN_COLUMNS} FROM runs{where} ORDER BY {first}started_at DESC, id"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            params += [_ALL if limit is None else limit, offset]
        with self.db.read() as conn:
            return [RunInfo.from_row(row) for row in conn.execute(sql, params).fetchall()]

    def count(
        self,
        *,
        session: str | None = None,
        status: str | None = None,
        name: str | None = None,
        text: str | None = None,
        tenant: str | None = None,
    ) -> int:
        """How many runs :meth:`list` gives with these filters and no limit."""
        where, params = _where(session, status, name, text, tenant)
        with self.db.read() as conn:
            return int(conn.execute(f"SELECT count(*) FROM runs{where}", params).fetchone()[0])

    def names(self, limit: int = 500) -> builtins.list[str]:
        """The names runs have (the skills first invoked), sorted."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT DISTINCT name FROM runs ORDER BY name LIMIT ?", (limit,)).fetchall()
        return [row[0] for row in rows]

    def latest(self) -> int:
        """The number of the last change to any run (0: none yet) whose transaction, and
        those of every change numbered below it, have ended (see :func:`touch_run`).

        On PostgreSQL a change that took its number may still be in flight: this waits
        for the transactions that held a number when the last one was read (a few ms:
        a run's writes are short), not for those that begin meanwhile."""
        dialect = self.db.dialect
        with self.db.read() as conn:
            last = int(conn.execute(dialect.last_change).fetchone()[0])
            pending = self._in_flight(conn)
        pause = 0.001
        while pending:
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
            with self.db.read() as conn:
                pending &= self._in_flight(conn)
        return last

    def _in_flight(self, conn: Connection) -> set[str]:
        """The transactions of other connections that hold a change number now."""
        sql = self.db.dialect.changes_in_flight
        return {row[0] for row in conn.execute(sql).fetchall()} if sql else set()

    def prune(self, before: float, *, dry_run: bool = False) -> builtins.list[RunInfo]:
        """Delete the runs that ended before ``before`` (a time), with their agents'
        reports, journals and checkpoints; returns them. A run still recorded as running
        is kept, however old: ``runs show`` says whether its process is gone."""
        where = "FROM runs WHERE status != 'running' AND COALESCE(ended_at, started_at) < ?"
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT {_RUN_COLUMNS} {where} ORDER BY started_at, id", (before,)).fetchall()
        if rows and not dry_run:
            with self.db.write() as conn:
                conn.executemany("DELETE FROM runs WHERE id = ?", [(row[0],) for row in rows])
                _next_change(conn, self.db.dialect)  # watchers: runs went away
        return [RunInfo.from_row(row) for row in rows]

    def get(self, run_id: str) -> RunInfo:
        """The run of that id, or of a unique prefix of it (as printed by ``runs list``)."""
        with self.db.read() as conn:
            return find_run(conn, run_id)

    def agents(self, run_id: str) -> builtins.list[AgentInfo]:
        """The agent runs of a run, in the order they started."""
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {_AGENT_COLUMNS} FROM agents WHERE run_id = ? ORDER BY started_at, rowid", (run_id,)
            ).fetchall()
            owner = conn.execute("SELECT pid, host FROM runs WHERE id = ?", (run_id,)).fetchone()
        gone = owner is not None and process_gone(*owner)  # its agents still marked running never end
        return [_agent(row, gone) for row in rows]

    def changed(self, run_id: str, after: int) -> tuple[RunInfo, builtins.list[AgentInfo]] | None:
        """The run ``run_id`` (the whole id) and its agents that changed after change
        number ``after``, read together; None when nothing changed since."""
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise NotFound("run", run_id, "it was removed")
            run = RunInfo.from_row(row)
            if run.seq <= after:
                return None
            rows = conn.execute(
                f"SELECT {_AGENT_COLUMNS} FROM agents WHERE run_id = ? AND seq > ? ORDER BY started_at, rowid",
                (run_id, after),
            ).fetchall()
        return run, [_agent(row, run.status == INTERRUPTED) for row in rows]


def _write_report(conn: Connection, record: RunRecord, report: dict[str, Any], assign: str, *values: Any) -> None:
    """Write an agent's report, with the run's change number, its token and cost totals
    from the report and ``assign`` (more columns, set to ``values``), and add what its
    totals grew by to the run's (a report is written after every turn, so the run's
    grow as it runs). Two statements, nothing read back: the run's row takes the
    difference from the agent's row before the agent's row is written."""
    usage = report.get("usage") or {}
    totals = (
        int(usage.get("input_tokens") or 0),
        int(usage.get("output_tokens") or 0),
        float(report.get("cost_usd") or 0.0),
    )
    conn.execute(
        "UPDATE runs SET input_tokens = runs.input_tokens + ? - agents.input_tokens, "
        "output_tokens = runs.output_tokens + ? - agents.output_tokens, cost_usd = runs.cost_usd + ? - agents.cost_usd "
        "FROM agents WHERE runs.id = ? AND agents.run_id = runs.id AND agents.id = ?",
        (*totals, record.run_id, record.agent_id),
    )
    conn.execute(
        f"UPDATE agents SET {assign}, report = ?, seq = {RUN_SEQ}, input_tokens = ?, output_tokens = ?, cost_usd = ? "
        "WHERE run_id = ? AND id = ?",
        (*values, _dump(report), record.run_id, *totals, record.run_id, record.agent_id),
    )


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
