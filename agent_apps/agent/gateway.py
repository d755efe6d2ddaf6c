"""The host-call gateway: the one place a call from the agent's code passes.

The sandbox hands every ``ctx.manager.invoke(...)`` of the guest to
:meth:`HostCalls.call`. From there a call goes down one layer at a time, each adding
one concern (HTTPX's ``send`` has the same shape):

1. :meth:`HostCalls.call`: count the call for the report, refuse it once the run is
   halted, and keep it among the calls in flight (so a halt can wait for them).
2. :meth:`HostCalls._journaled`: with a journal (durable.py), answer it from the
   journal when resumed, else make it and journal its outcome before the code sees it.
3. :meth:`HostCalls._perform`: invoke the skill as a child of the code's invocation,
   which is untrusted, so the pipeline checks allowed-tools, args and any
   ``middleware`` the call names; this run's approval gate sits on it. ``next=True``
   advances the call this agent serves in middleware mode (:meth:`HostCalls._next`).
4. :meth:`HostCalls._gate`: the policy said ``ask``. A recorded decision, an approver,
   or (unattended, durable) a checkpoint answers it.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING, Any

from ..admission import mark_admitted
from ..errors import AgentAppsError, ApprovalPending, Cancelled, MiddlewareError, ReplayDiverged, ToolNotAllowed
from ..tools import approval
from ..tools.errors import CallSkipped
from ..validation import validate_args
from .durable import SCOPE, HostCall, failure, replay
from .guidance import note_loaded
from .limits import JOIN_GRACE

if TYPE_CHECKING:
    from ..tools.approval import ApprovalRequest
    from .run import AgentRun

__all__ = ["HostCalls"]

#: A host call skipped by the approver (journaled as such; the code gets None).
_SKIPPED: Any = object()


class HostCalls:
    """The host calls of one agent run's code (see the module docstring)."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        #: What happened to this code run's calls that the code cannot tell (a skipped
        #: call), for the model; the executor starts a new list for each code run.
        self.notes: list[str] = []
        self._in_flight: set[asyncio.Task[Any]] = set()

    async def call(self, name: str, args: dict[str, Any] | None, **options: Any) -> Any:
        """A call from guest code: a child of the agent-code invocation (untrusted), so
        the pipeline checks it and any ``middleware`` it names; ``next=True`` (the
        sandbox checked that it comes alone) advances the call this agent serves."""
        run = self.run
        assert run.recorder is not None  # made before the sandbox that calls this
        mark_admitted()  # agents started below this run (which holds a sandbox) never wait for one
        if run.state.halted is not None:
            raise run.state.halted
        task = asyncio.current_task()
        if task is not None:
            self._in_flight.add(task)
        try:
            return await run.recorder.host_call(name, args, self._journaled(name, args, options))
        finally:
            self._in_flight.discard(task)  # type: ignore[arg-type]

    async def _journaled(self, name: str, args: dict[str, Any] | None, options: dict[str, Any]) -> Any:
        """With a journal, a call the journal holds is answered from it (a resumed run),
        and every call made is journaled with its outcome before the code sees it."""
        journal = self.run.journal
        if journal is None:
            return await self._perform(name, args, options, None)
        call = journal.issue(name, args, next=bool(options.get("next")))
        try:
            entry = journal.replayed(call)
        except ReplayDiverged as exc:
            await self.halt(exc)
            raise
        if entry is not None:
            if call.next:  # the served call's outcome, as the first time (it is not made again)
                self.run.state.next_outcome = _next_outcome(entry.body)
            elif call.skill == "load-skills" and entry.body.get("ok"):  # its folders open again
                self._reload_guidance(call.args)
            return replay(entry)
        try:
            result = await self._perform(name, args, options, call)
        except (ApprovalPending, ReplayDiverged) as exc:  # the run stops here; nothing happened to journal
            await self.halt(exc)
            raise
        except Cancelled:
            raise
        except Exception as exc:
            journal.record(call, failure(exc))
            raise
        if result is _SKIPPED:
            journal.record(call, {"ok": True, "result": None, "skipped": True})
            return None
        journal.record(call, {"ok": True, "result": result})
        return result

    def _reload_guidance(self, args: dict[str, Any] | None) -> None:
        """A load-skills call answered from the journal: what it loaded counts as loaded
        (the skills' folders readable by this agent's code), as the first time."""
        run = self.run
        names = (args or {}).get("skills") or ()
        guidance = {s.name: s for s in run.cm.visible_to(run.executor.code_ctx).tools if s.guidance}
        note_loaded(run.scope, [guidance[n] for n in names if n in guidance])

    async def _perform(
        self, name: str, args: dict[str, Any] | None, options: dict[str, Any], call: HostCall | None
    ) -> Any:
        """Make a host call, with this run's approval gate on it (see :meth:`_gate`)."""
        code_ctx = self.run.executor.code_ctx
        assert code_ctx is not None
        if options.pop("next", False):
            return await self._next(name, args)
        internals: dict[str, Any] = {"approval_gate": functools.partial(self._gate, call)}
        if call is not None:  # agents started below this call find their place in the journal
            internals[SCOPE] = (self.run.journal, call)
        try:
            return await code_ctx.manager.invoke(name, args, internals=internals, **options)
        except CallSkipped as skipped:
            self.notes.append(f"[approval: the call of {skipped.skill} was skipped: not made, it returned None]")
            return _SKIPPED if call is not None else None

    async def _gate(self, call: HostCall | None, request: ApprovalRequest) -> tuple[str, str | None] | None:
        """The policy said ``ask`` for a host call from agent code. A resumed run applies
        the decision recorded for it; else an approver (the terminal, a session's, the
        manager's) answers approve, deny or skip; else, unattended, a durable run is
        checkpointed (:class:`ApprovalPending`); else None: nobody could be asked."""
        run = self.run
        if run.state.halted is not None:
            raise run.state.halted
        journal = run.journal
        if journal is not None and call is not None:
            verdict = journal.decision_for(call)
            if verdict is not None:
                await journal.run.settle()
                return verdict
        approver = approval.find_approver(run.cm)
        if approver is not None:
            return await approval.answer(approver, request)
        if journal is None or call is None or not journal.run.resumable:
            return None
        pending = {
            "agent": journal.path,
            "agent_name": run.settings.name,
            "step": call.step,
            "index": call.index,
            "skill": call.skill,
            "args": call.args,
            "category": request.category,
            "mode": request.mode,
            "rule": request.rule,
            "at": time.time(),
        }
        exc = ApprovalPending(run.record.run_id, pending)
        # the calls running beside it finish first, everything is journaled and the
        # checkpoint written; only then the code stops (which cancels this call's task)
        await self.halt(exc, interrupt=False)
        await journal.run.flush()
        store = run.cm.state
        await store.call(store.journal.pend, run.record.run_id, pending)
        run.executor.interrupt()
        raise exc

    async def _next(self, name: str, args: dict[str, Any] | None) -> Any:
        """``target.manager.next(args)`` from agent code: the served middleware's own
        ``next()``, which validates the args against the served skill and refuses a
        second call (MiddlewareError, as for code middleware)."""
        run = self.run
        state, serving = run.state, run.settings.serving
        if serving is None:
            raise MiddlewareError(
                run.settings.name, "ctx.manager.next() is only available when the agent serves as middleware"
            )
        if name != serving.skill.name:
            raise ToolNotAllowed(
                run.executor.skill.name, name, f"next() advances the served call of {serving.skill.name!r} only"
            )
        if args is not None:
            validate_args(serving.skill, args)  # a mistake the model can fix does not use next() up
        first = state.next_outcome is None
        if first:
            state.next_outcome = (False, None)  # in flight: a second call is refused
        try:
            result = await run.settings.served.manager.next(args)
        except BaseException as exc:
            if first:
                state.next_outcome = (False, exc)
            raise
        state.next_outcome = (True, result)
        return result

    # -- halting and unwinding ---------------------------------------------------------

    async def halt(self, exc: AgentAppsError, *, interrupt: bool = True) -> None:
        """Stop the run where it stands: no new host call starts, the ones running finish
        (so their outcomes are journaled), then the code is interrupted (``interrupt``)
        and every callback raises ``exc`` until the provider gives up."""
        state = self.run.state
        if state.halted is not None:
            return
        state.halted = exc
        current = asyncio.current_task()
        others = [task for task in self._in_flight if task is not current]
        if others:
            await asyncio.wait(others)
        if interrupt:
            self.run.executor.interrupt()

    async def unwind(self) -> None:
        """The run is over: cancel the calls its code left running, and wait (briefly)
        for them (a cancelled sub-agent recording its status, a subprocess being
        killed), so that nothing of the run outlives it."""
        pending = [task for task in self._in_flight if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=JOIN_GRACE)


def _next_outcome(body: dict[str, Any]) -> tuple[bool, Any]:
    """What a journaled ``next()`` call left for the run's result (see ``AgentRun._result``)."""
    if body.get("ok"):
        return True, body.get("result")
    error = body.get("error") or {}
    return False, AgentAppsError(f"{error.get('type')}: {error.get('message')}")
