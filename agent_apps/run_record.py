"""The run record: where an invocation sits in its run tree (``ctx.run``).

A **run** is one invocation tree: everything that happens below one top-level
``invoke``. Agents inside it form a tree of their own (an agent started from agent code
is a child of the agent whose code started it). Every :class:`~agent_apps.Context`
carries one immutable :class:`RunRecord`; plain invocations share their parent's, and
each agent run makes a child record for everything below it.

The record is created on first use (``ctx.run``), so an invocation that never asks pays
nothing: no id is minted and nothing is stored for plain skill calls. Later features
(budgets, deadlines, cancellation tokens, trace ids) extend this record rather than
inventing a second one.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

__all__ = ["RunRecord"]


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

    @classmethod
    def new(cls) -> RunRecord:
        """The record of a new run (a top-level invocation)."""
        import uuid  # a few ms to import: only when a run is actually recorded

        return cls(uuid.uuid4().hex)

    def child(self, *, session_id: str | None = None) -> RunRecord:
        """The record of an agent started inside this one's tree, with a new agent id.

        Sessions are not inherited: a sub-agent writes into no session unless it was
        given one.
        """
        agent_id = secrets.token_hex(6)
        if self.agent_id is None:
            return RunRecord(self.run_id, session_id, agent_id, agent_id, None, 0)
        return RunRecord(self.run_id, session_id, agent_id, self.root, self.agent_id, self.depth + 1)

    def to_json(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "root": self.root,
            "parent": self.parent,
            "depth": self.depth,
        }
