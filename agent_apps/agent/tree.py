"""The tree of agents one top-level agent starts, and what the whole tree may spend.

Agent code can start agents (the ``agent`` skill, or any prompt skill), and those can
start more: without bounds, eight sub-agents each starting eight more, each holding
40 MB, reach dozens of sandboxes and gigabytes in seconds. So:

* **Limits are inherited.** An agent started anywhere below another agent gets
  sandbox limits (time, memory, output, calls, payload, recursion) and turn and step
  limits that are at most the enclosing agent's: each is the smaller of its own
  config and its parent's. Raising a limit for a sub-agent is therefore impossible,
  lowering one always works.
* **The tree has budgets**, set by the top-level agent's ``model.spawn`` config:
  ``max_agents`` agents started in all (the top-level one included), ``max_depth``
  levels of nesting below it, and ``max_memory_mb``, the sum of the ``memory_mb`` of
  the sandboxes alive at once. An agent that would exceed one is refused with
  :class:`~agent_apps.errors.LimitExceeded` naming the budget and the config key,
  which agent code sees as the error of its call and can act on.

Each agent leaves a :class:`Nesting` in its own invocation's nonlocals
(``ctx.nonlocals["agent_tree"]``): the tree, its depth and its limits. Every agent
started below it (through the provider, the agent code, a prompt skill...) finds
the nearest one there, and sibling agents never see each other's. Nested agents'
own ``spawn`` config is ignored (agent code may not set it anyway).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import DEFAULTS
from ..errors import LimitExceeded

if TYPE_CHECKING:
    from ..sandbox import SandboxLimits

__all__ = ["NESTING_KEY", "SPAWN_DEFAULTS", "AgentTree", "Nesting", "inherit_limits"]

#: The nonlocals key under which an agent leaves its :class:`Nesting`.
NESTING_KEY = "agent_tree"

#: The budgets of a tree when ``model.spawn`` does not say: the bundled config layer
#: (so ``agent-apps config`` shows them), for trees built outside the cascade too.
SPAWN_DEFAULTS: dict[str, int] = DEFAULTS["model"]["spawn"]


@dataclass
class AgentTree:
    """The spawn and memory budgets of one tree of agents, and what it has used."""

    max_agents: int = SPAWN_DEFAULTS["max_agents"]
    max_depth: int = SPAWN_DEFAULTS["max_depth"]
    max_memory_mb: int = SPAWN_DEFAULTS["max_memory_mb"]
    started: int = 0
    live_memory_mb: int = 0
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def from_config(cls, spawn: Mapping[str, Any] | None) -> AgentTree:
        """Budgets from ``model.spawn``; raises ``ValueError`` naming a bad key."""
        values = {**SPAWN_DEFAULTS, **dict(spawn or {})}
        unknown = sorted(set(values) - set(SPAWN_DEFAULTS))
        if unknown:
            raise ValueError(f"unknown spawn budget(s): {', '.join(unknown)} (known: {', '.join(SPAWN_DEFAULTS)})")
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "max_depth" else 1):
                raise ValueError(f"spawn.{key} must be a positive integer, got {value!r}")
        return cls(**values)

    def admit(self, name: str, depth: int) -> None:
        """Count one more agent at ``depth`` (0: the top-level one), or refuse it."""
        with self._lock:
            if depth > self.max_depth:
                raise LimitExceeded(
                    f"{name}: agents may nest at most {self.max_depth} levels below the first "
                    f"(spawn.max_depth); this one would be at level {depth}",
                    skill=name,
                )
            if self.started >= self.max_agents:
                raise LimitExceeded(
                    f"{name}: this tree of agents already started {self.started} agents, its budget "
                    f"(spawn.max_agents: {self.max_agents}); finish with the agents you have",
                    skill=name,
                )
            self.started += 1

    def reserve_memory(self, name: str, memory_mb: int) -> Callable[[], None]:
        """Reserve a sandbox's ``memory_mb`` for its lifetime; returns the release."""
        with self._lock:
            if self.live_memory_mb + memory_mb > self.max_memory_mb:
                raise LimitExceeded(
                    f"{name}: its sandbox needs {memory_mb} MB, but the agents of this tree already hold "
                    f"{self.live_memory_mb} MB of their {self.max_memory_mb} MB (spawn.max_memory_mb); "
                    "wait for running agents to finish, or start this one with a smaller sandbox.memory_mb",
                    skill=name,
                )
            self.live_memory_mb += memory_mb
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if not released:
                    released = True
                    self.live_memory_mb -= memory_mb

        return release


@dataclass
class Nesting:
    """What an agent hands down to the agents nested in it."""

    tree: AgentTree
    depth: int
    max_turns: float
    max_steps: int
    #: The agent's sandbox limits, once its sandbox is acquired.
    limits: SandboxLimits | None = None


def inherit_limits(own: SandboxLimits, parent: SandboxLimits | None) -> SandboxLimits:
    """``own`` with every limit lowered to ``parent``'s where that is smaller."""
    if parent is None:
        return own
    return own.replace(**{f.name: min(getattr(own, f.name), getattr(parent, f.name)) for f in dataclasses.fields(own)})
