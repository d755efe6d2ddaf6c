"""What changes while one agent run goes: its turn, steps, usage, status and outcome.

One small dataclass that every step of the run reads and writes (pydantic-ai's
``GraphAgentState``); the fixed inputs are in :mod:`.settings`. Callers and
middleware see part of it after the run as ``ctx.locals["agent"]``
(:attr:`RunState.published`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import AgentAppsError

__all__ = ["RunState"]


@dataclass(eq=False)
class RunState:
    """The state of one agent run (see the module docstring)."""

    #: The turn in progress (1 for the first).
    turn: int = 0
    #: Invoke calls made so far (code runs the model asked for).
    steps: int = 0
    #: Tokens used, summed over the turns (``estimated`` when a provider only guessed).
    usage: dict[str, Any] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    #: Every hook event and policy decision, in order (docs/agent.md, "The trace").
    trace: list[dict[str, Any]] = field(default_factory=list)
    #: ``ctx.locals["agent"]``: the trace, usage and status, then ids, context, memory,
    #: turns and steps as the run gets them.
    published: dict[str, Any] = field(default_factory=dict)
    #: The step limit was reached: no more code runs, the run stops at the turn's end.
    exhausted: bool = False
    #: ``ctx.manager.finish()`` was called with a valid value (:attr:`value`).
    finished: bool = False
    value: Any = None
    #: The model's last non-empty text.
    last_text: str = ""
    #: The partial result of a run stopped at a cap or by a stop (else None).
    stopped: Any = None
    #: Why the run was asked to stop gracefully (stopping.py), or None.
    stop_reason: str | None = None
    #: What stopped the run where it stood (a checkpoint for approval, a replay that
    #: diverged): every callback raises it from then on.
    halted: AgentAppsError | None = None
    #: ``(ok, result or error)`` of the served call's ``next()`` in middleware mode.
    next_outcome: tuple[bool, Any] | None = None

    def __post_init__(self) -> None:
        self.published.update(trace=self.trace, usage=self.usage, status="running")

    @property
    def status(self) -> str:
        """``running``, then how the run ended (docs/agent.md, "Run statuses")."""
        return str(self.published["status"])

    @status.setter
    def status(self, value: str) -> None:
        self.published["status"] = value
