"""Lifecycle hooks: what plugins hear of each agent run, and where they may decide.

The hooks are pluggy hooks of :class:`~agent_apps.plugins.HookSpecs` (docs/agent.md,
"Hooks"): a plugin passed to ``ContextManager(plugins=[...])``, or declared by an
installed package, implements the ones it wants. Seven hear the run; each gets the
run (``agent``) and the event the run sends for that moment, the same dict its
subscribers get (docs/events.md):

=================================  ====================  =================================
hook                               event                 when
=================================  ====================  =================================
``agent_apps_run_start``           ``agent-start``       the run begins, its prompt built
``agent_apps_run_complete``        ``agent-complete``,   the run ended (``status``)
                                   the last ``agent-error``
``agent_apps_step_start``          ``turn-start``        a turn (a step) begins
``agent_apps_step_complete``       ``turn-end``          it ended; ``step`` is its report
``agent_apps_approval_requested``  ``approval-requested``  a call from the agent's code
                                                         needs a human, asked the first time
``agent_apps_approval_resolved``   ``approval-resolved``   the answer came (or was applied)
``agent_apps_tool_call_complete``  (none)                a host call from agent code returned
=================================  ====================  =================================

Two may decide about a host call from the agent's code (a call of a skill: the tools
of seed 003 are skills here), before it is made and when it failed:

* ``agent_apps_tool_call_start(agent, call)`` returns None (make the call),
  ``{"skip": true}`` (do not make it: the code gets None) or ``{"result": value}``
  (do not make it: the code gets ``value``);
* ``agent_apps_tool_call_error(agent, call, error)`` returns None (the code gets the
  error) or ``{"result": value}`` (a fallback: the code gets ``value`` instead).

What a hook decided is journaled like the call's own outcome, so a resumed run does not
ask again. An implementation may be a plain function or return an awaitable. A hook
that only hears and fails is logged and changes nothing; a deciding hook that fails
fails the call (the code gets the error).

Which hooks have implementations is found once per run, so a hook nobody implements
costs one lookup in a set where it would be called.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING, Any

from ..errors import AgentAppsError

if TYPE_CHECKING:
    from .run import AgentRun

__all__ = ["OBSERVED", "RunHooks"]

#: The hook that hears each event type of a run.
OBSERVED = {
    "agent-start": "agent_apps_run_start",
    "agent-complete": "agent_apps_run_complete",
    "agent-error": "agent_apps_run_complete",  # the one with a status: the run's end
    "turn-start": "agent_apps_step_start",
    "turn-end": "agent_apps_step_complete",
    "approval-requested": "agent_apps_approval_requested",
    "approval-resolved": "agent_apps_approval_resolved",
}
#: The hooks about host calls from agent code.
TOOL_CALL_HOOKS = ("agent_apps_tool_call_start", "agent_apps_tool_call_complete", "agent_apps_tool_call_error")
#: What a deciding hook may answer.
_DIRECTIVE_KEYS = frozenset({"skip", "result"})

_log = logging.getLogger("agent_apps.agent")


class RunHooks:
    """The hooks of one agent run that plugins implement (see the module docstring)."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        relay = run.cm.hook
        names = {*OBSERVED.values(), *TOOL_CALL_HOOKS}
        #: the implemented hooks, by name (their pluggy callers)
        self.callers = {name: getattr(relay, name) for name in names if getattr(relay, name).get_hookimpls()}
        self._pending: set[asyncio.Future[Any]] = set()

    def __contains__(self, name: str) -> bool:
        return name in self.callers

    def hears(self, kind: str) -> bool:
        """Whether a hook hears events of type ``kind``."""
        name = OBSERVED.get(kind)
        return name is not None and name in self.callers

    def observe(self, kind: str, event: dict[str, Any]) -> None:
        """Tell the hook that hears ``kind`` about ``event``; never raises."""
        if kind == "agent-error" and "status" not in event:  # a model error the run may survive
            return
        name = OBSERVED[kind]
        self.call(name, event=event)

    def call(self, name: str, **kwargs: Any) -> None:
        """Call a hook that only hears; a failure is logged, an awaitable is awaited in
        the background (:meth:`drain` waits for it)."""
        try:
            results = self.callers[name](agent=self.run, **kwargs)
        except Exception:
            _log.warning("hook %s failed", name, exc_info=True)
            return
        for result in results:
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._pending.add(task)
                task.add_done_callback(self._settled(name))

    def _settled(self, name: str) -> Any:
        def settled(task: asyncio.Future[Any]) -> None:
            self._pending.discard(task)
            if not task.cancelled() and task.exception() is not None:
                _log.warning("hook %s failed", name, exc_info=task.exception())

        return settled

    async def decide(self, name: str, **kwargs: Any) -> dict[str, Any] | None:
        """The first directive the implementations of ``name`` give (checked), or None."""
        for result in self.callers[name](agent=self.run, **kwargs):
            if inspect.isawaitable(result):
                result = await result
            if result is None:
                continue
            if not isinstance(result, dict) or not result or not _DIRECTIVE_KEYS.issuperset(result):
                raise AgentAppsError(
                    f"hook {name} returned {result!r}: a directive is None, {{'skip': true}} or {{'result': value}}",
                    skill=self.run.settings.name,
                )
            return result
        return None

    async def drain(self, timeout: float) -> None:
        """The run ends: wait (at most ``timeout`` seconds) for the hooks still running
        in the background, so that none outlives it unseen."""
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=timeout)
