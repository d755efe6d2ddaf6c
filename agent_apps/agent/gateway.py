"""The host-call gateway: the one place a call from the agent's code passes.

The sandbox hands every ``ctx.manager.invoke(...)`` of the guest to
:meth:`HostCalls.call`. From there a call goes down one layer at a time, each adding
one concern (HTTPX's ``send`` has the same shape):

1. :meth:`HostCalls.call`: refuse the call once the run is halted or stopping, keep it
   among the calls in flight (so a halt can wait for them), and list it in the report
   (the recorder's entry: args, result or error, latency; :meth:`HostCalls._listed`
   adds how its result came, and :meth:`HostCalls._perform` its metrics).
2. :meth:`HostCalls._journaled`: with a journal (durable.py), answer it from the
   journal when resumed, else make it and journal its outcome before the code sees it.
3. :meth:`HostCalls._decided`: the tool-call hooks (hooks.py) may skip the call or
   answer it, and give a fallback result when it failed; what they decided is
   journaled like the call's own outcome. A run whose plugins implement no tool-call
   hook skips this layer.
4. :meth:`HostCalls._perform`: invoke the skill as a child of the code's invocation,
   which is untrusted, so the pipeline checks allowed-tools, args and any
   ``middleware`` the call names; this run's approval gate sits on it. ``next=True``
   advances the call this agent serves in middleware mode (:meth:`HostCalls._next`).
5. :meth:`HostCalls._gate`: the policy said ``ask``. A recorded decision, an approver,
   or (unattended, durable) a checkpoint answers it; the run says so with the
   ``approval-requested`` and ``approval-resolved`` events.

Each layer returns the call's result and how it came (:data:`MADE`, ``skipped``,
``answered`` or ``fallback``), which the journal and the report keep.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import TYPE_CHECKING, Any

from .. import pipeline
from ..admission import mark_admitted
from ..authority import Authority, check_call_as
from ..errors import (
    AgentAppsError,
    ApprovalPending,
    Cancelled,
    MiddlewareError,
    ReplayDiverged,
    RunStopped,
    ToolNotAllowed,
)
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

#: How a call's result came: the skill made it (the others: the call was not made, and
#: a hook or the approver said what it returns; or it failed and a hook gave a fallback).
MADE, SKIPPED, ANSWERED, FALLBACK = "made", "skipped", "answered", "fallback"
_START, _COMPLETE, _ERROR = "agent_apps_tool_call_start", "agent_apps_tool_call_complete", "agent_apps_tool_call_error"


class HostCalls:
    """The host calls of one agent run's code (see the module docstring)."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        #: What happened to this code run's calls that the code cannot tell (a skipped
        #: call), for the model; the executor starts a new list for each code run.
        self.notes: list[str] = []
        self._in_flight: set[asyncio.Task[Any]] = set()
        #: the tool-call hooks plugins implement (looked up once: none costs nothing per call)
        hooks = run.hooks
        hooked = _START in hooks or _COMPLETE in hooks or _ERROR in hooks
        #: the layer below the journal: without tool-call hooks, the call itself
        self._decide = self._decided if hooked else self._perform
        self._count = 0  # calls so far: the id of a call of a run without a journal

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
            return await run.recorder.host_call(name, args, functools.partial(self._listed, name, args, options))
        finally:
            self._in_flight.discard(task)  # type: ignore[arg-type]

    async def _listed(
        self, name: str, args: dict[str, Any] | None, options: dict[str, Any], entry: dict[str, Any] | None
    ) -> Any:
        """The call, with how its result came in its ``entry`` of the report (the
        recorder's; None when the call is not listed). A run that is stopping refuses it
        (listed, with the RunStopped error)."""
        stopping = self.run.stopper.reason
        if stopping is not None:
            raise RunStopped(stopping, message=f"the run was stopped ({stopping}): no new call starts")
        result, how = await self._journaled(name, args, options, entry)
        if entry is not None and how != MADE:
            entry[how] = True
            if how == ANSWERED:  # not made either
                entry[SKIPPED] = True
        return result

    async def _journaled(
        self, name: str, args: dict[str, Any] | None, options: dict[str, Any], entry: dict[str, Any] | None
    ) -> tuple[Any, str]:
        """With a journal, a call the journal holds is answered from it (a resumed run),
        and every call made is journaled with its outcome before the code sees it."""
        journal = self.run.journal
        if journal is None:
            return await self._decide(name, args, options, None, entry)
        call = journal.issue(name, args, next=bool(options.get("next")))
        try:
            found = journal.replayed(call) if journal.replaying else None  # a new run holds nothing to replay
        except ReplayDiverged as exc:
            await self.halt(exc)
            raise
        if found is not None:
            if call.next:  # the served call's outcome, as the first time (it is not made again)
                self.run.state.next_outcome = _next_outcome(found.body)
            elif call.skill == "load-skills" and found.body.get("ok"):  # its folders open again
                self._reload_guidance(call.args)
            if entry is not None:
                entry["replayed"] = True
            return replay(found), MADE
        if journal.run.response_unsaved:  # the model response the code acts on is journaled before any call
            await journal.run.flush()
        try:
            result, how = await self._decide(name, args, options, call, entry)
        except (ApprovalPending, ReplayDiverged) as exc:  # the run stops here; nothing happened to journal
            await self.halt(exc)
            raise
        except Cancelled:
            raise
        except Exception as exc:
            journal.record(call, failure(exc))
            raise
        outcome: dict[str, Any] = {"ok": True, "result": result}
        if how == FALLBACK:
            outcome["fallback"] = True
        elif how != MADE:  # not made: what it returns is what a hook or the approver said
            outcome["skipped"] = True
        journal.record(call, outcome)
        return result, how

    def _reload_guidance(self, args: dict[str, Any] | None) -> None:
        """A load-skills call answered from the journal: what it loaded counts as loaded
        (the skills' folders readable by this agent's code), as the first time."""
        run = self.run
        names = (args or {}).get("skills") or ()
        guidance = {s.name: s for s in run.cm.visible_to(run.executor.code_ctx).tools if s.guidance}
        note_loaded(run.scope, [guidance[n] for n in names if n in guidance])

    async def _decided(
        self,
        name: str,
        args: dict[str, Any] | None,
        options: dict[str, Any],
        call: HostCall | None,
        entry: dict[str, Any] | None,
    ) -> tuple[Any, str]:
        """The tool-call hooks around the call (see hooks.py): a start hook may skip or
        answer it, an error hook may give a fallback result."""
        if options.get("next"):
            return await self._perform(name, args, options, call, entry)
        hooks = self.run.hooks
        self._check_allowed(name, args)
        about = self._about(name, args, call)
        if _START in hooks:
            directive = await hooks.decide(_START, call=about)
            if directive is not None and "result" in directive:
                self.notes.append(f"[hook: the call of {name} was answered by a hook: not made]")
                return directive["result"], ANSWERED
            if directive is not None and directive.get("skip"):
                self.notes.append(f"[hook: the call of {name} was skipped: not made, it returned None]")
                return None, SKIPPED
        started = time.perf_counter()
        try:
            result, how = await self._perform(name, args, options, call, entry)
        except (Cancelled, ApprovalPending, ReplayDiverged, RunStopped):
            raise
        except Exception as exc:
            directive = await hooks.decide(_ERROR, call=about, error=exc) if _ERROR in hooks else None
            if directive is None or "result" not in directive:
                raise
            return directive["result"], FALLBACK
        if _COMPLETE in hooks:
            metrics = entry.get("metrics") if entry is not None else None
            latency = round((time.perf_counter() - started) * 1000, 3)
            hooks.call(_COMPLETE, call={**about, "result": result, "how": how, "latency_ms": latency,
                                        "metrics": metrics or {}})  # fmt: skip
        return result, how

    def _check_allowed(self, name: str, args: dict[str, Any] | None) -> None:
        """Refuse (:class:`ToolNotAllowed`) a call the code's allowed-tools forbid before a
        hook hears it: a hook may skip, answer or give a fallback only for a call the code
        may make, so no hook hands the code a result of a skill it may not call."""
        code_ctx = self.run.executor.code_ctx
        assert code_ctx is not None
        cm = self.run.cm
        by = f"agent code of {self.run.settings.name}"
        target = cm._resolve(name, code_ctx)
        check_call_as(Authority(code_ctx.skill.allowed_tools, True, by), target, args, cm.catalog.skills)

    def _about(self, name: str, args: dict[str, Any] | None, call: HostCall | None) -> dict[str, Any]:
        """What the tool-call hooks are told about a call."""
        self._count += 1
        record = self.run.record
        return {
            "id": call.key if call is not None else f"c{self._count}",
            "skill": name,
            "args": args,
            "step": self.run.state.steps,
            "run_id": record.run_id,
            "agent_id": record.agent_id,
        }

    async def _perform(
        self,
        name: str,
        args: dict[str, Any] | None,
        options: dict[str, Any],
        call: HostCall | None,
        entry: dict[str, Any] | None,
    ) -> tuple[Any, str]:
        """Make a host call, with this run's approval gate on it (see :meth:`_gate`)."""
        code_ctx = self.run.executor.code_ctx
        assert code_ctx is not None
        if options.pop("next", False):
            return await self._next(name, args), MADE
        internals: dict[str, Any] = {"approval_gate": functools.partial(self._gate, call)}
        if call is not None:  # agents started below this call find their place in the journal
            internals[SCOPE] = (self.run.journal, call)
        try:  # the pipeline itself, as ``code_ctx.manager.invoke`` would await it
            result = await pipeline.invoke(code_ctx._cm, name, args, code_ctx, {**options, "internals": internals})
        except CallSkipped as skipped:
            self.notes.append(f"[approval: the call of {skipped.skill} was skipped: not made, it returned None]")
            return None, SKIPPED
        finally:
            metrics = internals.get("metrics")
            if metrics and entry is not None:
                entry["metrics"] = metrics
        return result, ANSWERED if internals.get("answered") else MADE

    async def _gate(self, call: HostCall | None, request: ApprovalRequest) -> tuple[str, Any] | None:
        """The policy said ``ask`` for a host call from agent code. A resumed run applies
        the decision recorded for it; else an approver (the terminal, a session's, the
        manager's) answers approve, deny, skip or a result; else, unattended, a durable
        run is checkpointed (:class:`ApprovalPending`); else None: nobody could be asked.
        A stop of the run while the approver thinks refuses the call."""
        run = self.run
        if run.state.halted is not None:
            raise run.state.halted
        journal = run.journal
        if journal is not None and call is not None:
            verdict = journal.decision_for(call)
            if verdict is not None:
                await journal.run.settle()
                self._resolved(call, request, verdict, "decision")
                return verdict
        approver = approval.find_approver(run.cm)
        if approver is None and (journal is None or call is None or not journal.run.resumable):
            return None
        fields = request.to_json()
        run.reporter.emit("approval-requested", call=call.key if call is not None else None, **fields)
        if approver is not None:
            answered, verdict = await run.stopper.unless_stopped(approval.answer(approver, request))
            if not answered:
                reason = run.stopper.reason or "stopped"
                self._resolved(call, request, ("deny", f"the run was stopped ({reason})"), "stop")
                raise RunStopped(reason, message=f"the run was stopped ({reason}) while {request.skill} waited "
                                 "for approval: the call was not made")  # fmt: skip
            self._resolved(call, request, verdict, "approver")
            return verdict  # type: ignore[no-any-return]
        assert journal is not None and call is not None
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

    def _resolved(self, call: HostCall | None, request: ApprovalRequest, verdict: tuple[str, Any], by: str) -> None:
        """The ``approval-resolved`` event: the decision, and who made it (``approver``,
        ``decision``: recorded by ``approve`` and applied by a resumed run; ``stop``)."""
        action, detail = verdict
        extra = {"reason": detail} if action == "deny" else {"result": detail} if action == "result" else {}
        key = call.key if call is not None else None
        self.run.reporter.emit("approval-resolved", call=key, skill=request.skill, decision=action, by=by, **extra)

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
