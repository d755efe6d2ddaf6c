"""One run of a session at a time: a fair queue in the state store, across processes.

Two runs of one session at once would interleave its history (user A, A1, user B, B1,
A2, B2), and every later run would send the model that mixed conversation. So a run
of a session first takes a **ticket** in ``session_queue`` (an ``AUTOINCREMENT`` key:
arrival order, whichever process arrives) and goes on once the lowest live ticket of
the session is its own run's; it gives the ticket back when it ends.
:meth:`StateStore.session_lock <agent_apps.state.StateStore.session_lock>` is the
async context manager around it.

* **Waiting is off the event loop**: the ticket is taken and the queue first looked at
  in one transaction; each later look is one short read on the store's thread, and the
  wait between looks is an ``asyncio.sleep`` (a few ms at first, then at most
  :data:`POLL`). Cancelling the waiting task gives the ticket back.
* **A run's own agents share its turn**: a ticket goes on when the lowest live ticket
  belongs to the same run, so an agent that code started inside a run of the session
  (the same run id) never waits for the run around it.
* **A crashed run lets go**: a ticket of a process that is gone is dead, and the next
  look removes it. On this machine (same host name and process namespace) that is
  known at once: the process id no longer runs, or runs another program (its start
  time differs). Elsewhere (another container sharing the file) a ticket is alive
  while its process refreshes it: every :data:`HEARTBEAT` seconds, from a thread of
  its own (so a busy event loop does not let it lapse); one not refreshed for
  :data:`LEASE` seconds is dead.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import sqlite3

    from ._db import Connection, Database

__all__ = ["HEARTBEAT", "LEASE", "POLL", "SessionQueue", "SessionTurn"]

T = TypeVar("T")

#: Seconds between two looks at the queue, at most (the first looks come sooner).
POLL = 0.05
#: Seconds between two refreshes of this process's tickets.
HEARTBEAT = 5.0
#: Seconds after which a ticket of another machine that was not refreshed is dead.
LEASE = 30.0

_HOST = socket.gethostname()


def _namespace() -> str | None:
    """This process's pid namespace (two containers may share a host name), if known."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _started(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (Linux), else None: with
    the pid it names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19].decode() if len(fields) > 19 else None


_NAMESPACE = _namespace()


class SessionQueue:
    """The tickets of the runs of sessions, in one store (see the module docstring)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._held = 0  # tickets this process holds in this store
        self._beat: threading.Event | None = None  # set to stop the heartbeat

    # -- on the store's thread ---------------------------------------------------------

    def join(self, session_id: str, run_id: str, *, again: bool = False) -> tuple[int, bool]:
        """Take a ticket for ``run_id`` in ``session_id``'s queue and look at the queue in
        the same transaction (one round trip on PostgreSQL, not two); returns the ticket
        and whether the run may go on now (see :meth:`turn`). ``again``: it replaces one
        of this process that was removed as dead."""
        pid = os.getpid()
        with self.db.write() as conn:
            ticket = int(
                conn.execute(
                    "INSERT INTO session_queue (session_id, run_id, host, namespace, pid, started, alive_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING ticket",
                    (session_id, run_id, _HOST, _NAMESPACE, pid, _started(pid), time.time()),
                ).fetchone()[0]
            )
            first, dead = _first(_tickets(conn, session_id), ticket)
            _remove(conn, dead)
        if not again:
            self._count(+1)
        return ticket, first is not None and first[1] == run_id

    def turn(self, session_id: str, run_id: str, ticket: int) -> bool | None:
        """Whether ``run_id`` may go on now (the lowest live ticket is its run's); dead
        tickets met on the way are removed. None when ``ticket`` is gone (removed as
        dead while this process could not refresh it): the caller joins again."""
        with self.db.read() as conn:
            rows = _tickets(conn, session_id)
        if all(row[0] != ticket for row in rows):
            return None
        first, dead = _first(rows, ticket)
        if dead:
            with self.db.write() as conn:
                _remove(conn, dead)
        return first is not None and first[1] == run_id

    def leave(self, ticket: int) -> None:
        """Give ``ticket`` back (whether the run went on or stopped waiting)."""
        try:
            self.remove(ticket)
        finally:
            self._count(-1)

    def remove(self, ticket: int) -> None:
        """Delete ``ticket`` (joining the write this thread is in): :meth:`leave`
        without the count of the tickets this process holds (:meth:`left` does that)."""
        with self.db.write() as conn:
            conn.execute("DELETE FROM session_queue WHERE ticket = ?", (ticket,))

    def left(self) -> None:
        """A ticket was removed by a write that committed (:class:`SessionTurn`)."""
        self._count(-1)

    # -- the heartbeat -------------------------------------------------------------------

    def _count(self, change: int) -> None:
        with self._lock:
            self._held += change
            if self._held > 0 and self._beat is None:
                self._beat = threading.Event()
                threading.Thread(target=self._refresh, args=(self._beat,), daemon=True,
                                 name="agent-apps-session-queue").start()  # fmt: skip
            elif self._held <= 0 and self._beat is not None:
                self._beat.set()
                self._beat = None

    def _refresh(self, stop: threading.Event) -> None:
        """Keep this process's tickets alive for other machines, until ``stop`` is set."""
        while not stop.wait(HEARTBEAT):
            try:
                with self.db.write() as conn:
                    conn.execute(
                        "UPDATE session_queue SET alive_at = ? WHERE host = ? AND pid = ?",
                        (time.time(), _HOST, os.getpid()),
                    )
            except Exception:  # a busy or closed store: the next beat tries again
                continue


def _tickets(conn: Connection, session_id: str) -> list[Any]:
    """The tickets of ``session_id``'s queue, lowest first."""
    return conn.execute(
        "SELECT ticket, run_id, host, namespace, pid, started, alive_at FROM session_queue "
        "WHERE session_id = ? ORDER BY ticket",
        (session_id,),
    ).fetchall()


def _first(rows: list[Any], ticket: int) -> tuple[Any | None, list[int]]:
    """The first ticket of ``rows`` that is alive or is ``ticket`` (None: neither is
    there), and the dead tickets before it."""
    dead: list[int] = []
    now = time.time()
    for row in rows:
        if row[0] == ticket or _alive(row, now):
            return row, dead
        dead.append(row[0])
    return None, dead


def _remove(conn: Connection, dead: list[int]) -> None:
    """Remove the dead tickets ``dead``."""
    if dead:
        conn.executemany("DELETE FROM session_queue WHERE ticket = ?", [(t,) for t in dead])


def _alive(row: sqlite3.Row | tuple[Any, ...], now: float) -> bool:
    """Whether the process that holds the ticket ``row`` is still there."""
    _, _, host, namespace, pid, started, alive_at = row
    if host == _HOST and namespace == _NAMESPACE:  # this machine: ask the kernel
        if pid == os.getpid():
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:  # another user's process: it is there
            pass
        return started is None or _started(pid) in (None, started)
    return bool(now - alive_at < LEASE)


class SessionTurn(Generic[T]):
    """A run's turn in its session, held while ``async with store.session_lock(...) as
    turn`` runs (:meth:`StateStore.session_lock
    <agent_apps.state.StateStore.session_lock>`); ``turn.value`` is what its
    ``granted`` read. The block's end gives the turn back, in a transaction of its own;
    a run gives it back in its last write instead, one transaction less: it calls
    :meth:`give_back` inside that write and :meth:`given_back` once the write committed.
    A write that failed gives nothing back: the block's end does."""

    def __init__(self, queue: SessionQueue, ticket: int, value: T | None) -> None:
        self.value = value
        self._queue, self._ticket = queue, ticket
        self.held = True

    def give_back(self) -> None:
        """On the store's thread, inside a write: the turn's ticket is deleted with it."""
        self._queue.remove(self._ticket)

    def given_back(self) -> None:
        """The write that called :meth:`give_back` committed: the turn is over."""
        if self.held:
            self.held = False
            self._queue.left()
