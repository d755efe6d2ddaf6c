"""What one agent run tells as it goes: events on its topic, and its trace.

Events (docs/events.md) go to the event-bus topic of the run (the ``events`` arg, or
the enclosing agent's), each with the ids that place the run in the tree of nested
agents; progress printers, the MCP server, ``cm.stream`` and subscribers read them.
Every event also goes to the run's **progress topic**, ``run.RUN_ID`` (seed 001: the
progress topic is keyed by the run id), which anyone may follow by the run's id
(``run.*``: every run's), and to the lifecycle hook that hears its type (hooks.py).
The trace is kept in the run's state (``ctx.locals["agent"]["trace"]``) and in its
report. What is stored (session messages, the run's report) is the
:class:`~.recorder.Recorder`'s.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..manager import ContextManager
    from ..run_record import RunRecord
    from .hooks import RunHooks
    from .run_state import RunState
    from .settings import RunSettings

__all__ = ["PROGRESS_TOPIC", "RunReporter"]

#: The progress topic of a run: every event of the run's agents, by its run id.
PROGRESS_TOPIC = "run.{run_id}"


class RunReporter:
    """The events and trace entries of one agent run."""

    def __init__(
        self, cm: ContextManager, settings: RunSettings, record: RunRecord, state: RunState, hooks: RunHooks
    ) -> None:
        self.cm = cm
        self.name = settings.name
        self.topic = settings.topic
        self.progress = PROGRESS_TOPIC.format(run_id=record.run_id)
        self.record = record
        self.state = state
        self.hooks = hooks
        self._context_ids = {"context_id": settings.served.id, "ancestor_context_id": settings.ancestor_context_id}
        #: Waits of the run's topic's flow-controlled subscribers (``cm.stream``): a
        #: slow reader holds the run at its next :meth:`flow` (events.py).
        self._flow = cm.events.flow_controls(self.topic) if self.topic else ()

    def emit(self, kind: str, /, **fields: Any) -> None:
        """Publish an event of type ``kind`` on the run's topic and its progress topic,
        and tell the hook that hears it (when nobody listens: nothing to do)."""
        bus = self.cm.events
        hears = self.hooks.hears(kind)
        if not bus.listened and not hears:
            return
        event = {"type": kind, "timestamp": time.time(), "agent": self.name, **self.ids(), **fields}
        if self.topic:
            bus.emit(self.topic, event)
        if self.progress != self.topic:
            bus.emit(self.progress, event)
        if hears:
            self.hooks.observe(kind, event)

    async def flow(self) -> None:
        """Wait while a flow-controlled reader of the run's events is behind (see
        ``cm.stream``); at once when there is none."""
        for wait in self._flow:
            await wait()

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
