"""Schedules: a skill ref and its args, run at due times by ``agent-apps scheduler``.

``store.schedules`` stores them (``schedule-create`` / ``-list`` / ``-delete`` are the
skills over it) and is how schedulers share the work: :meth:`Schedules.claim` takes the
due times that are due, decides what a missed stretch gets (``catch_up``), moves the
schedule's ``next_at`` past them and records one row per due time it will run, all in
one write transaction. Two schedulers on one store therefore never run a due time twice:
on SQLite whoever takes the write lock first moves ``next_at``; on PostgreSQL each
scheduler locks the due schedules it takes (``FOR UPDATE SKIP LOCKED``), so schedulers
on several machines claim side by side, each due schedule by one of them; and
``(schedule_id, due_at)`` is the key of ``schedule_runs`` besides. Every run is also a
row of ``runs`` (``agent-apps runs list`` shows it), made with the claim;
:meth:`Schedules.finish_run` ends it.
"""

from __future__ import annotations

import builtins
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from ..authority import Authority
from ..timing import CATCH_UP, When, iso
from ._db import Cursor, Database
from ._db import dump_json as _dump
from .errors import AlreadyExists, NotFound
from .runs import touch_runs

__all__ = ["MAX_CATCH_UP", "Claim", "Claimed", "ScheduleInfo", "Schedules"]

#: ``catch_up: all`` makes up at most this many missed due times of a schedule (the
#: latest ones); older ones are skipped and counted as missed.
MAX_CATCH_UP = 100
#: Missed due times are counted up to this many per catch-up: a cron schedule's are
#: stepped through, inside the claim's write transaction, so this bounds how long it
#: holds the lock after a long downtime (about 0.1 s).
_MAX_COUNT = 1_000

_HOST = socket.gethostname()
_COLUMNS = "id, name, ref, args, every, cron, tz, at, catch_up, created_at, created_by, next_at, missed, authority"
#: A schedule with how many due times it ran and its last run, in one statement.
_WITH_RUNS = (
    "SELECT s.id, s.name, s.ref, s.args, s.every, s.cron, s.tz, s.at, s.catch_up, s.created_at, s.created_by, "
    "s.next_at, s.missed, s.authority, (SELECT count(*) FROM schedule_runs WHERE schedule_id = s.id), "
    "r.due_at, r.run_id, r.status, r.ended_at, r.error FROM schedules s LEFT JOIN schedule_runs r "
    "ON r.schedule_id = s.id AND r.due_at = (SELECT max(due_at) FROM schedule_runs WHERE schedule_id = s.id)"
)
_LAST = ("due_at", "run_id", "status", "ended_at", "error")


@dataclass(frozen=True)
class ScheduleInfo:
    """One schedule, with its last run (``last``: due_at, run_id, status, ended_at,
    error) and how many due times it has run. ``authority``: its maker's, which its
    runs run under (None: made from Python or the command line)."""

    id: str
    name: str | None
    ref: str
    args: dict[str, Any]
    when: When
    catch_up: str
    created_at: float
    created_by: str | None
    next_at: float | None
    missed: int
    authority: Authority | None = None
    runs: int = 0
    last: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        """How logs name it: ``nightly (3f9a0c1d)``, or the id alone."""
        return f"{self.name} ({self.id})" if self.name else self.id

    def to_json(self) -> dict[str, Any]:
        last = dict(self.last) if self.last else None
        if last:
            last["due"] = iso(last.pop("due_at"))
            last["ended"] = iso(last.pop("ended_at"))
        return {
            "id": self.id,
            "name": self.name,
            "ref": self.ref,
            "args": self.args,
            **self.when.to_json(),
            "catch_up": self.catch_up,
            "created": iso(self.created_at),
            "created_by": self.created_by,
            "authority": self.authority.to_json() if self.authority is not None else None,
            "next": iso(self.next_at),
            "runs": self.runs,
            "missed": self.missed,
            "last_run": last,
        }


@dataclass(frozen=True)
class Claim:
    """One due time a scheduler claimed, and the run id it records the run under."""

    schedule: ScheduleInfo
    due_at: float
    run_id: str


@dataclass
class Claimed:
    """What one :meth:`Schedules.claim` did: the runs to make, and the due times it
    skipped (by schedule: ``(schedule, count)``), for the log."""

    claims: list[Claim] = field(default_factory=list)
    skipped: list[tuple[ScheduleInfo, int]] = field(default_factory=list)


class Schedules:
    """``store.schedules``: create, list, delete, and claim due times of schedules."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- the skills' side ----------------------------------------------------------------

    def create(
        self,
        *,
        ref: str,
        args: dict[str, Any],
        when: When,
        catch_up: str = "one",
        name: str | None = None,
        created_by: str | None = None,
        authority: Authority | None = None,
        now: float | None = None,
    ) -> ScheduleInfo:
        """Store a new schedule (checked by the caller: ``schedule-create``); its runs run
        under ``authority`` (None: the user's, for schedules made from Python)."""
        if catch_up not in CATCH_UP:
            raise ValueError(f"catch_up must be one of {', '.join(CATCH_UP)}")
        now = time.time() if now is None else now
        ident = secrets.token_hex(4)
        with self.db.write() as conn:
            made = conn.execute(
                f"INSERT INTO schedules ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?) "
                "ON CONFLICT (name) DO NOTHING",
                (ident, name, ref, _dump(args), when.every, when.cron, when.tz, when.at, catch_up, now, created_by,
                 when.first(now), _dump(authority.to_json()) if authority is not None else None),
            ).rowcount
            if not made:
                raise AlreadyExists("schedule", str(name), "schedule-delete removes it; or choose another name")
        return self.get(ident)

    def list(self) -> builtins.list[ScheduleInfo]:
        """Every schedule, the next due first (those with no due time left last)."""
        with self.db.read() as conn:
            rows = conn.execute(f"{_WITH_RUNS} ORDER BY s.next_at IS NULL, s.next_at, s.created_at").fetchall()
        return [_info(row) for row in rows]

    def get(self, key: str) -> ScheduleInfo:
        """The schedule of that id, or of that name."""
        with self.db.read() as conn:
            row = conn.execute(f"{_WITH_RUNS} WHERE s.id = ?", (key,)).fetchone()
            if row is None:
                row = conn.execute(f"{_WITH_RUNS} WHERE s.name = ?", (key,)).fetchone()
        if row is None:
            raise NotFound("schedule", key, "schedule-list shows the schedules")
        return _info(row)

    def delete(self, key: str) -> ScheduleInfo:
        """Remove a schedule (by id or name) and its claims; its runs stay in ``runs``."""
        info = self.get(key)
        with self.db.write() as conn:
            conn.execute("DELETE FROM schedules WHERE id = ?", (info.id,))
        return info

    def runs_of(self, key: str, *, last: int | None = None) -> builtins.list[dict[str, Any]]:
        """The due times a schedule has run, oldest first (``last``: only the latest N)."""
        info = self.get(key)
        sql = "SELECT due_at, run_id, status, claimed_at, ended_at, pid, host, error FROM schedule_runs "
        with self.db.read() as conn:
            if last is None:
                rows = conn.execute(sql + "WHERE schedule_id = ? ORDER BY due_at", (info.id,)).fetchall()
            else:
                latest = conn.execute(sql + "WHERE schedule_id = ? ORDER BY due_at DESC LIMIT ?", (info.id, last))
                rows = latest.fetchall()[::-1]
        keys = ("due_at", "run_id", "status", "claimed_at", "ended_at", "pid", "host", "error")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    # -- the scheduler's side --------------------------------------------------------------

    def next_due(self) -> float | None:
        """The earliest due time of any schedule (None: nothing is scheduled)."""
        with self.db.read() as conn:
            row = conn.execute("SELECT min(next_at) FROM schedules WHERE next_at IS NOT NULL").fetchone()
        return row[0] if row else None

    def claim(self, now: float, *, limit: int, grace: float) -> Claimed:
        """Claim up to ``limit`` runs of due times at or before ``now``, in one write
        transaction (see the module docstring). Per schedule, of the due times since its
        ``next_at``: ``all`` runs each, oldest first (the latest :data:`MAX_CATCH_UP` at
        most); ``one`` runs the latest; ``none`` runs the latest if it is at most
        ``grace`` seconds old. The rest are skipped and counted in ``missed``."""
        out = Claimed()
        if limit <= 0:
            return out
        with self.db.write() as conn:
            # the due schedules no other scheduler is claiming right now (on PostgreSQL, where
            # several claim at once: their rows are locked till they commit); SQLite's write
            # transaction holds the whole store
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM schedules WHERE next_at IS NOT NULL AND next_at <= ? ORDER BY next_at "
                f"LIMIT ?{self.db.dialect.skip_locked}",
                (now, limit),
            ).fetchall()
            # every statement first, their outcomes after: on PostgreSQL they travel together
            made: builtins.list[tuple[Claim, Cursor]] = []
            for row in rows:
                if len(made) >= limit:
                    break
                info = _info(row)
                due, skipped, next_at = _plan(info, now, limit - len(made), grace)
                for due_at in due:
                    run_id = _run_id()
                    inserted = conn.execute(
                        "INSERT INTO schedule_runs (schedule_id, due_at, run_id, status, claimed_at, pid, host) "
                        "VALUES (?, ?, ?, 'running', ?, ?, ?) ON CONFLICT DO NOTHING",
                        (info.id, due_at, run_id, now, os.getpid(), _HOST),
                    )
                    conn.execute(
                        "INSERT INTO runs (id, session_id, name, status, started_at, pid, host) "
                        "VALUES (?, NULL, ?, 'running', ?, ?, ?)",
                        (run_id, info.ref, now, os.getpid(), _HOST),
                    )
                    made.append((Claim(info, due_at, run_id), inserted))
                if skipped:
                    out.skipped.append((info, skipped))
                conn.execute(
                    "UPDATE schedules SET next_at = ?, missed = missed + ? WHERE id = ?", (next_at, skipped, info.id)
                )
            for claim, inserted in made:
                if inserted.rowcount:
                    out.claims.append(claim)
                else:  # cannot happen while next_at only moves forward; never run it twice
                    conn.execute("DELETE FROM runs WHERE id = ?", (claim.run_id,))
            touch_runs(conn, self.db.dialect, [claim.run_id for claim in out.claims])
        return out

    def finish_run(self, claim: Claim, *, status: str, error: str | None = None, now: float | None = None) -> None:
        """A claimed run ended: ``done``, ``error`` or ``cancelled``. The run's row keeps
        a status its agents set (``max_turns``, ``budget``, ...) unless the invocation
        failed after them."""
        now = time.time() if now is None else now
        # an agent's own status (max_turns, budget, ...) stays, unless the invocation failed after it
        overridden = "('running')" if status == "done" else "('running', 'done')"
        with self.db.write() as conn:
            conn.execute(
                f"UPDATE runs SET status = CASE WHEN status IN {overridden} THEN ? ELSE status END, ended_at = ? "
                "WHERE id = ?",
                (status if status in ("done", "cancelled") else "error", now, claim.run_id),
            )
            conn.execute(
                "UPDATE schedule_runs SET status = ?, ended_at = ?, error = ? WHERE schedule_id = ? AND due_at = ?",
                (status, now, error, claim.schedule.id, claim.due_at),
            )
            touch_runs(conn, self.db.dialect, [claim.run_id])

def _info(row: tuple[Any, ...]) -> ScheduleInfo:
    """A row of ``_COLUMNS``, or of ``_WITH_RUNS`` (then with its runs and last run)."""
    ident, name, ref, args, every, cron, tz, at, catch_up, created_at, created_by, next_at, missed = row[:13]
    authority = Authority.from_json(json.loads(row[13])) if row[13] is not None else None
    runs = row[14] if len(row) > 14 else 0
    last = dict(zip(_LAST, row[15:], strict=True)) if len(row) > 14 and row[16] is not None else None
    when = When(every=every, cron=cron, tz=tz, at=at)
    return ScheduleInfo(
        ident, name, ref, json.loads(args), when, catch_up, created_at, created_by, next_at, missed, authority, runs,
        last,
    )


def _plan(info: ScheduleInfo, now: float, free: int, grace: float) -> tuple[builtins.list[float], int, float | None]:
    """``(due times to run, how many are skipped, the new next_at)`` of a due schedule."""
    when, since = info.when, info.next_at
    assert since is not None
    latest = when.latest(since, now)
    if info.catch_up == "all":
        start, skipped = since, 0
        if when.count(since, now, MAX_CATCH_UP + 1) > MAX_CATCH_UP:
            start = when.back(latest, MAX_CATCH_UP - 1)
            skipped = when.count(since, start - 1e-6, _MAX_COUNT)
        due: builtins.list[float] = []
        t: float | None = start
        while t is not None and t <= now and len(due) < free:
            due.append(t)
            t = when.after(t)
        return due, skipped, t
    total = when.count(since, now, _MAX_COUNT)
    on_time = info.catch_up == "one" or now - latest <= grace
    due = [latest] if on_time else []
    return due, total - len(due), when.after(latest)


def _run_id() -> str:
    import uuid

    return uuid.uuid4().hex
