"""What one agent run tells as it goes: events on its topic, and its trace.

Events (docs/events.md) go to the event-bus topic of the run (the ``events`` arg, or
the enclosing agent's), each with the ids that place the run in the tree of nested
agents; progress printers, the MCP server and subscribers read them. The trace is kept
in the run's state (``ctx.locals["agent"]["trace"]``) and in its report. What is stored
(session messages, the run's report) is the :class:`~.recorder.Recorder`'s.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..manager import ContextManager
    from ..run_record import RunRecord
    from .run_state import RunState
    from .settings import RunSettings

__all__ = ["RunReporter"]


class RunReporter:
    """The events and trace entries of one agent run."""

    def __init__(self, cm: ContextManager, settings: RunSettings, record: RunRecord, state: RunState) -> None:
        self.cm = cm
        self.name = settings.name
        self.topic = settings.topic
        self.record = record
        self.state = state
        self._context_ids = {"context_id": settings.served.id, "ancestor_context_id": settings.ancestor_context_id}

    def emit(self, kind: str, /, **fields: Any) -> None:
        """Publish an event of type ``kind`` on the run's topic (none: nothing to do)."""
        if self.topic:
            self.cm.events.emit(
                self.topic,
                {"type": kind, "timestamp": time.time(), "agent": self.name, **self.ids(), **fields},
            )

    def trace(self, kind: str, fields: dict[str, Any]) -> None:
        """Add an entry of type ``kind`` to the trace."""
        self.state.trace.append({"type": kind, "timestamp": time.time(), **fields})

    def guardrail_decision(self, name: str, kind: str, turn: int, decision: dict[str, Any]) -> None:
        """Report one guardrail decision: a trace entry and a ``guardrail`` event."""
        fields = {"guardrail": name, "kind": kind, "turn": turn, **decision}
        self.trace("guardrail", fields)
        self.emit("guardrail", **fields)

    def ids(self) -> dict[str, Any]:
        """The ids that place this run in the tree of nested agents."""
        record = self.record
        return {
            **self._context_ids,
            "run_id": record.run_id,
            "agent_id": record.agent_id,
            "parent_id": record.parent,
            "depth": record.depth,
        }
