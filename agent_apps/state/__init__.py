"""The state store: sessions, runs, the journals of durable runs, schedules and the memory
index, in one embedded SQLite database that needs no server, or in a PostgreSQL database
shared by every process on every machine that opens it (``postgresql://...``).

::

    store = cm.state                           # a ContextManager's store, opened on first use
    store.sessions.list()
    store.sessions.history("s1").messages()    # the neutral messages after the last compaction
    store.runs.list(session="s1")
    store.schedules.list()                     # what agent-apps scheduler runs
    store.memory.search(["ws/MEMORY.md"], "units")  # the chunks that match best (BM25)
    store.batch_runs.runs("/abs/results.jsonl")  # the run each batch input started

Where it lives: ``ContextManager(state=":memory:" | path | url)``, else
``AGENT_APPS_STATE``, else the config key ``state.path`` (a relative path is relative to
the config file that sets it), else ``<agent-apps home>/state.db``. See
``docs/sessions.md`` and ``docs/state.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ._db import MEMORY, Database, is_postgres_url
from ._sqlite import SQLiteDatabase
from .batch_runs import BatchRuns
from .errors import AlreadyExists, NotFound, NotResumable, SnapshotInvalid, StateError
from .journal import Checkpoint, Journal
from .memory import Hit, MemoryIndex
from .messages import Entry, History, Message, estimate_tokens
from .runs import AgentInfo, RunInfo, Runs
from .schedules import ScheduleInfo, Schedules
from .session_queue import POLL, SessionQueue, SessionTurn
from .sessions import SessionInfo, Sessions, session_id_problem
from .subscriptions import SubscriptionInfo, Subscriptions

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from ..config import Cascade

__all__ = [
    "open_database",
    "open_store",
    "MEMORY",
    "AgentInfo",
    "AlreadyExists",
    "Checkpoint",
    "Entry",
    "History",
    "Hit",
    "MemoryIndex",
    "Message",
    "NotFound",
    "NotResumable",
    "RunInfo",
    "ScheduleInfo",
    "SessionInfo",
    "SessionTurn",
    "SnapshotInvalid",
    "StateError",
    "StateStore",
    "SubscriptionInfo",
    "estimate_tokens",
    "is_postgres_url",
    "session_id_problem",
    "state_path",
]

T = TypeVar("T")
STATE_ENV = "AGENT_APPS_STATE"


class StateStore:
    """One state store: typed APIs per concept over one lazily opened database, an
    SQLite file (a path, or ``:memory:``) or a PostgreSQL database (a ``postgresql://``
    URL)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.db = open_database(path)
        self.sessions = Sessions(self.db)
        self.runs = Runs(self.db)
        self.schedules = Schedules(self.db)
        self.subscriptions = Subscriptions(self.db)
        self.journal = Journal(self.db)
        self.memory = MemoryIndex(self.db)
        self.batch_runs = BatchRuns(self.db)
        self._session_queue = SessionQueue(self.db)

    @property
    def path(self) -> str:
        """The store's file, or its URL with the password hidden (what messages show)."""
        return self.db.path

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a store method off the event loop: ``await store.call(store.sessions.get, "s1")``."""
        return await self.db.call(fn, *args, **kwargs)

    @contextlib.asynccontextmanager
    async def session_lock(
        self,
        session_id: str,
        run_id: str,
        *,
        opening: Callable[[], None] | None = None,
        granted: Callable[[], T] | None = None,
    ) -> AsyncIterator[SessionTurn[T]]:
        """Hold session ``session_id`` for run ``run_id``: ``async with
        store.session_lock("s1", run_id): ...`` waits until no other run of the session
        is in progress, in arrival order, across processes; then the block runs alone.
        It gets the :class:`SessionTurn`, which the run may give back in its last write.

        Agents of the same run share its turn (an agent started inside the run never
        waits for the run around it). Cancelling the waiting task stops the wait and
        gives the place back; a process that dies (even ``kill -9``) lets go of its
        sessions. The wait runs nothing on the event loop but short sleeps: each look at
        the queue is a read on the store's thread (:mod:`.session_queue`). A store on
        another database implements this one method with that database's own lock.

        ``opening`` (store writes: the run's own row) is made in the transaction that
        queues the run. ``granted`` (what the run reads or writes first once it holds
        the session) runs in that transaction too when the session is free, else once
        the wait is over; its result is the turn's ``value``.
        """
        queue = self._session_queue

        def join() -> tuple[int, bool, T | None]:
            with self.db.write():  # one transaction: every store call below joins it
                if opening is not None:
                    opening()
                ticket, turn = queue.join(session_id, run_id)
                return ticket, turn, granted() if turn and granted is not None else None

        # the join runs to its end on the store's thread even when this task is cancelled
        # meanwhile: the ticket it took is given back from the future, never lost
        joining: asyncio.Future[tuple[int, bool, T | None]] = asyncio.ensure_future(self.call(join))
        taken: SessionTurn[T] | None = None
        try:
            turn: bool | None
            ticket, turn, value = await asyncio.shield(joining)
            waited = not turn
            pause = 0.002
            while not turn:
                await asyncio.sleep(pause)
                pause = min(pause * 2, POLL)
                turn = await self.call(queue.turn, session_id, run_id, ticket)
                if turn is None:  # dropped as dead while this process was stopped: queue again
                    joining = asyncio.ensure_future(self.call(self._join_again, session_id, run_id))
                    ticket, turn, _ = await asyncio.shield(joining)
            if waited and granted is not None:
                value = await self.call(granted)
            taken = SessionTurn(queue, ticket, value)
            yield taken
        finally:  # shielded: a second cancel must not keep the session held
            if taken is None or taken.held:
                await asyncio.shield(self._give_back(joining))

    def _join_again(self, session_id: str, run_id: str) -> tuple[int, bool, None]:
        return (*self._session_queue.join(session_id, run_id, again=True), None)

    async def _give_back(self, joining: asyncio.Future[tuple[int, bool, Any]]) -> None:
        """Give back the ticket ``joining`` took (none if joining failed)."""
        try:
            ticket = (await joining)[0]
        except Exception:  # the join failed: it took nothing
            return
        await self.call(self._session_queue.leave, ticket)

    def close(self) -> None:
        self.db.close()

    def __repr__(self) -> str:
        return f"<StateStore {self.path}>"


def open_database(location: str | os.PathLike[str]) -> Database:
    """The database at ``location``: a ``postgresql://`` (or ``postgres://``) URL, else an
    SQLite file (or ``:memory:``). Nothing is opened yet."""
    text = os.fspath(location)
    if is_postgres_url(text):
        from ._postgres import PostgresDatabase  # psycopg: only for such a URL

        return PostgresDatabase(text)
    return SQLiteDatabase(text)


def state_path(cascade: Cascade | None, home: Path) -> str:
    """Where the state store is: ``AGENT_APPS_STATE``, else ``state.path`` from the user
    or project config (a relative path is relative to that file's folder; a URL is taken
    as it is), else ``home/state.db``."""
    env = os.environ.get(STATE_ENV)
    if env:
        return env
    if cascade is not None:
        for layer in reversed(cascade.base_layers()):
            section = layer.data.get("state")
            value = section.get("path") if isinstance(section, dict) else None
            if isinstance(value, str) and value:
                if value == MEMORY or is_postgres_url(value):
                    return value
                path = Path(value).expanduser()
                if not path.is_absolute() and layer.source != "defaults":
                    path = Path(layer.source.removesuffix(" [tool.agent-apps]")).parent / path
                return str(path)
    return str(home / "state.db")


def open_store(cwd: Path | None = None) -> StateStore:
    """The state store the commands open: the one the config cascade of ``cwd`` (the
    current directory by default) names, else ``~/.agent-apps/state.db``."""
    from ..config import Cascade, agent_apps_home

    home = agent_apps_home()
    return StateStore(state_path(Cascade(cwd=cwd or Path.cwd(), home=home), home))
