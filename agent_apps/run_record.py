"""The run record: where an invocation sits in its run tree (``ctx.run``).

A **run** is one invocation tree: everything that happens below one top-level
``invoke``. Agents inside it form a tree of their own (an agent started from agent code
is a child of the agent whose code started it). Every :class:`~agent_apps.Context`
carries one immutable :class:`RunRecord`; plain invocations share their parent's, and
each agent run makes a child record for everything below it.

The record is created on first use (``ctx.run``), so an invocation that never asks pays
nothing: no id is minted and nothing is stored for plain skill calls.

Besides the ids, the record carries what supervises the tree (docs/supervision.md): the
trace id, the deadline, the cancellation token (the :class:`~agent_apps.Signal` of the
agent run, a child of its parent's, so cancelling one cancels everything below it), the
execution budget's :class:`~agent_apps.budget.Ledger`, the spawn limits, the priority,
the current agent's :class:`AgentLimits` (which agents below it inherit, lowered by
their own config, never raised), and the :class:`RunTree` every record of one run
shares (how many agents it started, the sandbox memory its live agents hold).
The record itself never changes; the ledger and the tree are the two shared, mutable
accounts it points to.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._random import token_hex, uuid4_hex

if TYPE_CHECKING:
    from collections.abc import Callable

    from .budget import Ledger, SpawnLimits
    from .context import Signal
    from .sandbox import SandboxLimits

__all__ = ["AgentLimits", "RunRecord", "RunTree", "id_problem"]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199}")


def id_problem(ident: object, noun: str) -> str | None:
    """Why ``ident`` cannot be a ``noun`` (a session id, a tenant id), or None: 1-200
    letters, digits and ``._:@+=-``, starting with a letter or digit (such ids go into
    file names, command lines and store columns)."""
    if not isinstance(ident, str):
        return f"a {noun} is a string, not {type(ident).__name__}"
    if not _ID.fullmatch(ident):
        return f"bad {noun} {ident!r}: use 1-200 letters, digits and . _ : @ + = -, starting with a letter or digit"
    return None


class RunTree:
    """What the whole run shares: the number of agents started in it and the MB of
    sandbox memory its live agents hold (the spawn budget counts both), whether it was
    asked to stop gracefully (``cm.stop``: every agent of the run stops), and the account
    of model calls made outside any agent."""

    __slots__ = ("_stop_callbacks", "agents", "memory_mb", "outside_agents", "stop_reason")

    def __init__(self) -> None:
        self.agents = 0
        self.memory_mb = 0
        #: The ledger of ``ctx.llm`` calls made outside any agent (made by the first,
        #: with its config's limits): they share one budget, as an agent's turns do.
        self.outside_agents: Ledger | None = None
        #: Why the run was asked to stop (None: it was not).
        self.stop_reason: str | None = None
        self._stop_callbacks: list[Callable[[str], None]] = []

    def request_stop(self, reason: str) -> bool:
        """Ask every agent of the run to stop gracefully (safe from any thread: the
        callbacks must be too). False when it was asked already."""
        if self.stop_reason is not None:
            return False
        self.stop_reason = reason
        for callback in list(self._stop_callbacks):
            callback(reason)
        return True

    def on_stop(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(reason)`` when the run is asked to stop; returns the removal."""
        self._stop_callbacks.append(callback)

        def remove() -> None:
            if callback in self._stop_callbacks:
                self._stop_callbacks.remove(callback)

        return remove

    def reserve_memory(self, name: str, memory_mb: int, spawn: SpawnLimits) -> Callable[[], None]:
        """Count a sandbox's ``memory_mb`` for its lifetime, or refuse it past
        ``spawn.max_memory_mb``; returns the release (idempotent)."""
        from .errors import BudgetExceeded

        if self.memory_mb + memory_mb > spawn.max_memory_mb:
            raise BudgetExceeded(
                "model.spawn.max_memory_mb",
                spawn.max_memory_mb,
                self.memory_mb,
                who=name,
                note=f" MB held by the run's live agents; agent {name!r} needs {memory_mb} MB more: wait for "
                "running agents to finish, or start it with a smaller sandbox.memory_mb",
            )
        self.memory_mb += memory_mb
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.memory_mb -= memory_mb

        return release


@dataclass(frozen=True, slots=True)
class AgentLimits:
    """What an agent may use; an agent below it gets the smaller of its own and these."""

    sandbox: SandboxLimits
    max_turns: float
    max_steps: int

    def tighter(self, own: AgentLimits) -> AgentLimits:
        """``own`` with every limit lowered to this one's where that is smaller."""
        import dataclasses

        mine, theirs = own.sandbox, self.sandbox
        lowest = {f.name: min(getattr(mine, f.name), getattr(theirs, f.name)) for f in dataclasses.fields(mine)}
        box = mine.replace(**lowest)
        return AgentLimits(box, min(own.max_turns, self.max_turns), min(own.max_steps, self.max_steps))


@dataclass(frozen=True, slots=True)
class RunRecord:
    """Immutable: derive a new record (:meth:`child`) instead of changing one.

    ``depth`` counts the agents above this one's agent (0 for an outermost agent, and
    for invocations outside any agent).
    """

    #: The invocation tree (a UUID, hex).
    run_id: str
    #: The session whose conversation the current agent continues (``None``: no session).
    session_id: str | None = None
    #: The agent run this invocation belongs to (``None`` above any agent).
    agent_id: str | None = None
    #: The outermost agent of this branch of the tree.
    root: str | None = None
    #: The agent that started the current one (``None`` for an outermost agent).
    parent: str | None = None
    depth: int = 0
    #: The trace every span of the run belongs to (32 hex digits: the OpenTelemetry
    #: trace id when tracing is on, else the run id).
    trace_id: str = ""
    #: When the current agent must be done (``time.time()`` seconds), from the
    #: tightest ``model.budget.deadline_s`` above and at it; ``None``: no deadline.
    deadline: float | None = None
    #: The cancellation token: cancelling it cancels the current agent and every
    #: invocation below it (``None`` above any agent run and before one asked).
    signal: Signal | None = field(default=None, compare=False, repr=False)
    #: The current agent's account in the execution budget (``None`` above any agent).
    ledger: Ledger | None = field(default=None, compare=False, repr=False)
    #: The spawn limits in force (the tightest of the agents above and this one).
    spawn: SpawnLimits | None = None
    #: Who goes first when runs wait for a sandbox or a model call.
    priority: str = "normal"
    #: What the current agent may use, and so every agent below it at most: its
    #: sandbox limits, turns and steps (``None`` above any agent).
    limits: AgentLimits | None = None
    tree: RunTree = field(default_factory=RunTree, compare=False, repr=False)
    #: The tenant the whole run serves (``invoke(..., tenant=ID)``), the same in every
    #: record of the run: set at its top, never changed below (``None``: no tenant).
    tenant_id: str | None = None

    @classmethod
    def new(
        cls, *, signal: Signal | None = None, trace_id: str | None = None, tenant_id: str | None = None
    ) -> RunRecord:
        """The record of a new run (a top-level invocation)."""
        run_id = uuid4_hex()
        return cls(run_id, trace_id=trace_id or run_id, signal=signal, tenant_id=tenant_id)

    def child(
        self,
        *,
        session_id: str | None = None,
        signal: Signal | None = None,
        ledger: Ledger | None = None,
        spawn: SpawnLimits | None = None,
        deadline: float | None = None,
        priority: str | None = None,
        limits: AgentLimits | None = None,
    ) -> RunRecord:
        """The record of an agent started inside this one's tree, with a new agent id.

        Sessions are not inherited: a sub-agent writes into no session unless it was
        given one. The deadline is the earlier of this record's and ``deadline``; the
        priority is this record's unless given; the tenant is always this record's.
        """
        agent_id = token_hex(6)
        top = self.agent_id is None
        if self.deadline is not None and (deadline is None or self.deadline < deadline):
            deadline = self.deadline
        return RunRecord(
            self.run_id,
            session_id,
            agent_id,
            agent_id if top else self.root,
            None if top else self.agent_id,
            0 if top else self.depth + 1,
            trace_id=self.trace_id,
            deadline=deadline,
            signal=signal if signal is not None else self.signal,
            ledger=ledger,
            spawn=spawn if spawn is not None else self.spawn,
            priority=priority or self.priority,
            limits=limits,
            tree=self.tree,
            tenant_id=self.tenant_id,
        )

    @property
    def time_left(self) -> float | None:
        """Seconds until the deadline (negative once past), or ``None``."""
        return None if self.deadline is None else self.deadline - time.time()

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "root": self.root,
            "parent": self.parent,
            "depth": self.depth,
            "trace_id": self.trace_id,
            "deadline": self.deadline,
            "priority": self.priority,
            "tenant_id": self.tenant_id,
        }
