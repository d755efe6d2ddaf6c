"""A run as people read it: its tree of agents, each agent's turns, and the totals.

``agent-apps runs show`` and the console show the same thing, built here from the
store's public API: the run, its agents (each report's finished turns, then the turn in
flight), nested under the host call that started them (``parent_call``) or, for an
agent that no recorded call started, under their parent agent; and the call waiting
for approval. :mod:`agent_apps.state.run_text` writes it for a terminal and
:mod:`agent_apps.console` as HTML, both with the few functions at the end that say how a
time, a duration, token counts and a cost read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import StateStore
    from .journal import Checkpoint
    from .runs import AgentInfo, RunInfo

__all__ = ["AgentNode", "RunView", "clock", "duration", "load_run", "money", "token_counts"]



@dataclass
class AgentNode:
    """One agent of the run, and the agents it started."""

    info: AgentInfo
    #: Agents started by a host call of this agent's code, by the call's id.
    by_call: dict[str, list[AgentNode]] = field(default_factory=dict)
    #: Agents started by this agent that no recorded host call claims.
    children: list[AgentNode] = field(default_factory=list)

    @property
    def report(self) -> dict[str, Any]:
        return self.info.report or {}

    @property
    def steps(self) -> list[dict[str, Any]]:
        """The finished turns, then the turn in flight (marked ``live: true``)."""
        steps = list(self.report.get("steps") or ())
        live = self.info.live
        if live is not None and self.info.status == "running" and live.get("index", -1) >= len(steps):
            steps.append({**live, "live": True})
        return steps

    @property
    def duration_s(self) -> float | None:
        ended = self.info.ended_at
        return None if ended is None else max(0.0, ended - self.info.started_at)


@dataclass
class RunView:
    run: RunInfo
    agents: list[AgentInfo]
    checkpoint: Checkpoint | None
    roots: list[AgentNode]
    nodes: dict[str, AgentNode]

    @property
    def status(self) -> str:
        return self.run.status  # interrupted when its process is gone (RunInfo.from_row)

    @property
    def pending(self) -> dict[str, Any] | None:
        """The call waiting for approval (None when nothing waits)."""
        point = self.checkpoint
        if point is None or point.pending is None or self.run.status != "waiting-approval":
            return None
        return point.pending

    @property
    def decision(self) -> dict[str, Any] | None:
        return self.checkpoint.decision if self.checkpoint is not None else None

    def walk(self) -> list[AgentNode]:
        """Every agent, each before those it started."""
        out: list[AgentNode] = []

        def visit(node: AgentNode) -> None:
            out.append(node)
            for nested in node.by_call.values():
                for child in nested:
                    visit(child)
            for child in node.children:
                visit(child)

        for root in self.roots:
            visit(root)
        return out


def load_run(store: StateStore, run_id: str) -> RunView:
    """The run of that id (or unique prefix), its agents as a tree and its checkpoint."""
    run = store.runs.get(run_id)
    return build(run, store.runs.agents(run.id), store.journal.checkpoint(run.id))


def build(run: RunInfo, agents: list[AgentInfo], checkpoint: Checkpoint | None) -> RunView:
    """A :class:`RunView` of agents already read (the console updates them live)."""
    nodes = {agent.id: AgentNode(agent) for agent in agents}
    roots: list[AgentNode] = []
    for agent in agents:
        node = nodes[agent.id]
        parent = nodes.get(agent.parent_id) if agent.parent_id else None
        if parent is None:
            roots.append(node)
            continue
        call = (agent.report or {}).get("parent_call")
        if isinstance(call, str):
            parent.by_call.setdefault(call, []).append(node)
        else:
            parent.children.append(node)
    return RunView(run, agents, checkpoint, roots, nodes)


# -- how figures read ------------------------------------------------------------------------


def clock(at: float | None) -> str:
    """A time, local: ``2026-01-31 09:15:02`` (``-`` for none)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else "-"


def duration(ms: Any) -> str:
    """A duration given in milliseconds: ``812 ms``, ``4.2 s``, ``3.5 min`` (``…``: not over)."""
    if ms is None:
        return "…"
    ms = float(ms)
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s" if ms < 120_000 else f"{ms / 60_000:.1f} min"


def token_counts(usage: dict[str, Any]) -> str:
    """``1,020 in / 120 out``; ``~`` marks counts the provider could only estimate."""
    mark = "~" if usage.get("estimated") else ""
    return f"{mark}{int(usage.get('input_tokens') or 0):,} in / {mark}{int(usage.get('output_tokens') or 0):,} out"


def money(usd: Any) -> str:
    return f"${float(usd):.4f}"
