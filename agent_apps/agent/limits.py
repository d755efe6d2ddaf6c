"""How far one agent run may go: turns, steps, its sandbox, its budget and its deadline.

``model.max_turns`` and ``model.max_steps`` cap the turns (counted by the turn policy,
:mod:`.turns`) and the code runs (counted by the executor, :mod:`.executor`);
``model.sandbox`` limits each code run and ``model.tool_timeout`` each invoke call. An
agent below another gets at most that agent's limits. ``model.budget`` and
``model.spawn`` bound the whole tree of agents: this module opens the run's account
(its :class:`~agent_apps.run_record.RunRecord`, with a
:class:`~agent_apps.budget.Ledger`) and arms its deadline (docs/supervision.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..budget import Ledger
from ..errors import ArgsInvalid, BudgetExceeded
from ..run_record import AgentLimits
from ..sandbox import SandboxLimits

if TYPE_CHECKING:
    from ..budget import Supervision
    from ..context import Context, Signal
    from ..run_record import RunRecord
    from .run_state import RunState

__all__ = ["JOIN_GRACE", "agent_limits", "arm_deadline", "check_budget", "child_record", "tool_timeout"]

#: How long the end of a run waits for what its code left running to unwind (a batch
#: still forming, host calls being cancelled).
JOIN_GRACE = 5.0


def agent_limits(ctx: Context, config: Mapping[str, Any], persistent: bool) -> AgentLimits:
    """The agent's limits: its own config's, each lowered to the enclosing agent's (a
    sub-agent, or a prompt skill's agent below another agent, never gets more)."""
    try:
        sandbox = SandboxLimits.from_config(config.get("sandbox"))
    except (TypeError, ValueError) as exc:
        raise ArgsInvalid(ctx.skill.name, "config.sandbox", str(exc)) from None
    turns = float("inf") if persistent else int(config.get("max_turns", 30))
    own = AgentLimits(sandbox, turns, int(config.get("max_steps", 30)))
    above = ctx.run.limits
    return own if above is None else above.tighter(own)


def tool_timeout(ctx: Context, value: Any) -> float | None:
    """``model.tool_timeout`` checked: seconds > 0, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise ArgsInvalid(ctx.skill.name, "config.tool_timeout", f"must be a number of seconds > 0, not {value!r}")
    return float(value)


def child_record(
    ctx: Context, name: str, supervision: Supervision, session: str | None, limits: AgentLimits
) -> RunRecord:
    """This agent's record in the run tree, once the spawn budget allows it to start:
    at most ``max_agents`` agents in the run and ``max_depth`` levels below the
    outermost, each the tightest of this agent's config and its callers'."""
    above = ctx.run
    spawn = supervision.spawn.tighter(above.spawn)
    depth = 0 if above.agent_id is None else above.depth + 1
    if depth > spawn.max_depth:
        raise BudgetExceeded(
            "model.spawn.max_depth", spawn.max_depth, depth, who=name, note=f"; agent {name!r} would nest that deep"
        )
    if above.tree.agents >= spawn.max_agents:
        raise BudgetExceeded(
            "model.spawn.max_agents",
            spawn.max_agents,
            above.tree.agents,
            who=name,
            note=f" agents started in this run; agent {name!r} refused",
        )
    if above.ledger is not None:
        above.ledger.check()  # nothing left in the tree: do not start
    above.tree.agents += 1
    ledger = Ledger(supervision.budget, above.ledger, name=name, started=time.time(), sources=supervision.sources)
    return above.child(
        session_id=session,
        signal=ctx.signal,
        ledger=ledger,
        spawn=spawn,
        deadline=ledger.deadline(),
        priority=supervision.priority,
        limits=limits,
    )


def check_budget(state: RunState, check: Callable[[], Any]) -> None:
    """Run a budget check; past a limit the run ends with status ``budget``."""
    try:
        check()
    except BudgetExceeded:
        state.status = "budget"
        raise


def arm_deadline(ledger: Ledger, signal: Signal) -> asyncio.TimerHandle | None:
    """Cancel this agent's tree (``signal``) when its budget deadline passes."""
    deadline = ledger.deadline()
    if deadline is None:
        return None

    def expire() -> None:
        over = ledger.deadline_exceeded(time.time() + 0.001)
        signal.cancel(str(over) if over is not None else "deadline", error=over)

    loop = asyncio.get_running_loop()
    return loop.call_at(loop.time() + max(0.0, deadline - time.time()), expire)
