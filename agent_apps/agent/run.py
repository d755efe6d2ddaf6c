"""One agent run: the policy behind the ``agent`` skill, as a few named steps.

The provider (the LLM loop) is another skill; it sees only two callback refs. Through
``invoke_ref`` it runs the model's code in the sandbox; through ``hook_ref`` it reports
every step of each turn and receives the directives that decide what happens next.
:meth:`AgentRun.run` reads top to bottom:

1. **settle** (in ``AgentRun()``): the settings, fixed and checked (:mod:`.settings`);
   the run's record in the run tree, once the spawn budget allows it (:mod:`.limits`);
   its state (:mod:`.run_state`).
2. **open**: the journal of a durable run (:mod:`.durable`), the recorder of its
   messages and report (:mod:`.recorder`), the memory its sandbox starts with.
3. **assemble**: the system prompt from its layers (:mod:`.assembly`), the tools; the
   ``agent-start`` event (:mod:`.reporting`).
4. **recall**: the session's earlier messages, compacted to fit (:mod:`.compaction`);
   what the run starts with, journaled (or checked against the journal when resumed).
5. **drive**: an admission slot, a sandbox (:mod:`.executor`), then the provider. It runs
   the turns: its hook events go to the turn policy (:mod:`.turns`), its code to the
   executor, the code's host calls to the gateway (:mod:`.gateway`), and what sits
   around its model calls is arranged in :mod:`.around_model`. Then all is released.
6. **complete**: the result, the status, the ``agent-complete`` event and the report;
   or **fail**: the status and the ``agent-error`` event.

Run statuses (``ctx.locals["agent"]["status"]``, and ``status`` in the final
``agent-complete`` or ``agent-error`` event): ``done``; ``max_turns`` and ``max_steps``
(the run stopped at a cap: its result is the model's last text followed by the terminal
message, or with ``returns`` a LimitExceeded); ``stopped`` (asked to stop gracefully,
see ``stopping.py``: its result is the model's last text, or with ``returns`` a
RunStopped); ``budget``; ``guardrail``; ``error``; ``cancelled``; ``waiting-approval``
(a call from its code needs a human and nobody can be asked now: the run was
checkpointed, see ``durable.py`` and docs/durability.md).

Lifecycle hooks (``hooks.py``) hear the run through its events, and the tool-call hooks
decide in the gateway.

Middleware mode: when the served skill is a prompt skill with ``metadata.role:
middleware``, the agent serves the call that middleware wraps. Its code sees that call
as ``target`` and advances it with ``await target.manager.next()`` (a host call with
the ``next`` option, answered by the gateway with the served middleware's ``next()``).

docs/architecture.md maps these rooms and says where a new feature goes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import tracing
from ..errors import (
    AgentAppsError,
    ApprovalPending,
    BudgetExceeded,
    Cancelled,
    GuardrailTripped,
    MiddlewareError,
    ResultInvalid,
    RunStopped,
    SkillFailed,
)
from ..state.window import reads_store
from .around_model import arrange_model_calls
from .assembly import Assembled, assemble
from .durable import AgentJournal, RunJournal
from .executor import CodeExecutor
from .gateway import HostCalls
from .hooks import RunHooks
from .limits import JOIN_GRACE, arm_deadline, child_record
from .model_calls import ModelCalls, declares_model_calls, require_model_calls
from .prompt import INVOKE_TOOL
from .recorder import STORE_TRACE, Recorder, error_of
from .reporting import RunReporter
from .run_state import RunState
from .settings import settle, takes_arg
from .stopping import StopControl
from .turns import HOOK_PARAMS, TurnPolicy

if TYPE_CHECKING:
    from ..allowed_tools import Visible
    from ..context import Context

__all__ = ["AgentRun"]

#: The status of a run that ended with one of these errors (others: ``error``).
_STATUS_OF: dict[type, str] = {BudgetExceeded: "budget", GuardrailTripped: "guardrail"}


class AgentRun:
    """One agent run (one sandbox, one provider call): its settings, its state, the
    parts that act on them, and the steps of :meth:`run`."""

    def __init__(self, ctx: Context, args: Mapping[str, Any]) -> None:
        self.ctx = ctx
        self.cm = ctx.manager.context_manager
        self.settings = settings = settle(ctx, args)
        # This agent's node in the run tree; everything below it (provider, code,
        # sub-agents) inherits it.
        self.record = child_record(ctx, settings.name, settings.supervision, settings.session, settings.limits)
        ctx._run = self.record
        self.state = RunState()
        #: The ``agent`` nonlocal of the served invocation (see RunSettings.scope).
        self.scope = settings.scope()
        #: What the sandbox's ``memory`` starts with (the open step adds a session's).
        self.memory_seed: dict[str, Any] = dict(settings.memory)
        #: The lifecycle hooks plugins implement (hooks.py).
        self.hooks = RunHooks(self)
        self.reporter = RunReporter(self.cm, settings, self.record, self.state, self.hooks)
        #: Whether the run is stopping, and why (a graceful stop, stopping.py).
        self.stopper = StopControl(self)
        #: Features that sit around each model call (journal, model middleware,
        #: guardrails, context layers) register here before the run starts.
        self.model_calls = ModelCalls()
        #: The journal (durable.py), when this run keeps one.
        self.journal: AgentJournal | None = None
        self.recorder: Recorder | None = None
        self.turns = TurnPolicy(self)
        self.executor = CodeExecutor(self)
        self.gateway = HostCalls(self)

    # What plugins read of the run (the ``agent_apps_context`` hook, docs/context.md).

    @property
    def config(self) -> dict[str, Any]:
        """The resolved ``model`` config."""
        return self.settings.config

    @property
    def user_message(self) -> str:
        return self.settings.user_message

    @property
    def served(self) -> Context:
        """The invocation this agent serves."""
        return self.settings.served

    # -- the steps -------------------------------------------------------------------

    async def run(self) -> Any:
        """Run the agent; returns its result (see the module docstring for the steps)."""
        settings = self.settings
        visible = self.cm.visible_tools(
            settings.allowed_tools, caller=settings.served.skill.name, exclude=settings.exclude
        )
        recorder = await self._open()
        self.stopper.open()
        try:
            context = await self._assemble(visible)
            deadline = arm_deadline(self.record.ledger, self.ctx.signal)  # type: ignore[arg-type]
            try:
                window = await self._recall(context, visible)
                text = await self._drive(context, window)
                result = self._result(text)
            except (AgentAppsError, asyncio.CancelledError) as exc:
                if not self._ends_stopped(exc):
                    halted, over = self._fail(exc)
                    if halted is not None:
                        raise halted from None
                    if over is not None and isinstance(exc, Cancelled):
                        raise over from exc
                    raise
                result = self._stopped()
            finally:
                if deadline is not None:
                    deadline.cancel()
            return await self._complete(result)
        except BaseException as exc:
            status = self.state.status  # set by the steps for the errors they know
            status, message = "error" if status == "running" else status, self.state.published.get("message")
            # shielded: a second cancel of this task must not lose the run's final status
            error = {key: value for key, value in self._error_of(exc).items() if key in ("type", "message")}
            await asyncio.shield(recorder.finish(status, error=error, message=message))
            raise
        finally:
            self.stopper.close()
            await self.hooks.drain(JOIN_GRACE)

    async def _open(self) -> Recorder:
        """Open the journal and the recorder, and settle the memory the sandbox starts
        with: a resumed run's first one, or the session's under what this call seeds."""
        settings = self.settings
        self.journal = journal = self._open_journal()
        self.recorder = recorder = Recorder(
            self.cm.state,
            self.record,
            name=settings.name,
            provider=settings.provider,
            model=settings.config.get("model_id"),
            retention=settings.retention,
            user_message=settings.user_message,
            attachments=settings.attachments,
            journal=journal,
            read_only=settings.read_only,
            price=settings.supervision.price,
            reads_history=reads_store(settings.config.get("history")),
        )
        request = self.ctx.locals.get(STORE_TRACE)
        if isinstance(request, dict):
            recorder.store_trace(self.state.trace, request)
        memory = await recorder.start()
        started = journal.started if journal is not None else None
        if started is not None:
            self.memory_seed = dict(started.get("memory") or {})
        elif memory:
            self.memory_seed = {**memory, **self.memory_seed}
        return recorder

    def _open_journal(self) -> AgentJournal | None:
        """This run's journal: kept unless ``model.journal`` is false or retention is
        ``none``, and only with a provider that reports its model calls (a resumed run
        must replay them)."""
        settings = self.settings
        if settings.config.get("journal") is False or settings.retention == "none":
            return None
        try:
            provider = self.cm.get(settings.provider)
        except AgentAppsError:
            return None  # the provider call will say what is wrong
        if not declares_model_calls(provider):
            return None
        journal = RunJournal.of(self.ctx).agent(self.ctx, name=settings.name)
        self.model_calls.interceptors.insert(0, journal)  # outermost: a replayed answer meets nothing else
        return journal

    async def _assemble(self, visible: Visible) -> Assembled:
        """Compose the system prompt, publish the run's state, announce the run."""
        settings, state, recorder = self.settings, self.state, self.recorder
        assert recorder is not None
        settings.served.nonlocals["agent"] = self.scope
        context = await assemble(self, visible)
        if settings.allowed_tools is not None and any(s.guidance for s in visible.tools):
            # guidance it may see, it may load
            self.executor.allow(f"{settings.allowed_tools} load-skills")
        recorder.set_system(context.composed.text)
        state.published.update(run_id=self.record.run_id, agent_id=self.record.agent_id, retention=settings.retention)
        state.published["context"] = recorder.report["context"] = context.describe()
        settings.served.locals["agent"] = state.published
        self.ctx.locals["agent"] = state.published
        self.reporter.emit(
            "agent-start",
            provider=settings.provider,
            mode=visible.mode,
            tools=[s.name for s in visible.tools],
            **({"warnings": context.warnings} if context.warnings else {}),
        )
        ids = {f"agent_apps.{key}": value for key, value in self.reporter.ids().items()}
        tenant = {"agent_apps.tenant_id": self.record.tenant_id} if self.record.tenant_id else {}
        tracing.annotate(self.ctx.span, {"agent_apps.agent": settings.name, **ids, **tenant})
        tracing.gen_ai(self.ctx.span, "invoke_agent", agent=settings.name, model=settings.config.get("model_id"))
        return context

    async def _recall(self, context: Assembled, visible: Visible) -> list[Any]:
        """The session's earlier messages (the neutral format), compacted to fit; with a
        journal, what the run starts with is journaled (resumed: taken from it)."""
        settings, journal = self.settings, self.journal
        window: list[Any] = []
        started = journal.started if journal is not None else None
        if started is not None:  # resumed: the window it was given the first time
            window = list(started.get("window") or ())
        elif self.record.session_id is not None:
            window = await self._prompt_window(context.composed.text)
        if journal is not None:
            journal.start(
                {
                    "skill": settings.served.skill.name,
                    "name": settings.name,
                    "user_message": settings.user_message,
                    "provider": settings.provider,
                    "system": [{"name": layer.name, "text": layer.text} for layer in context.composed.layers],
                    "tools": [s.name for s in visible.tools],
                    "allowed_tools": settings.allowed_tools,
                    "exclude": list(settings.exclude),
                    "memory": self.memory_seed,
                    "window": window,
                }
            )
        return window

    async def _prompt_window(self, system: str) -> list[Any]:
        """The session's earlier messages, compacted to fit (see docs/sessions.md)."""
        from .compaction import prompt_window

        settings = self.settings
        assert self.record.session_id is not None and self.recorder is not None
        window, compaction = await prompt_window(
            self.ctx,
            provider=settings.provider,
            config=settings.config,
            session=self.record.session_id,
            system=system,
            persist=settings.retention == "permanent" and not settings.read_only,
            flush=not settings.read_only,
            loaded=self.recorder.history_at_start,
        )
        if compaction is not None:
            self.recorder.compaction = compaction
            self.reporter.trace("compaction", compaction)
        return window

    async def _drive(self, context: Assembled, window: list[Any]) -> Any:
        """Take an admission slot and a sandbox, let the provider run the turns, then
        release everything (shielded: a second cancel must not leave anything running)."""
        ctx, admission = self.ctx, self.cm.admission
        admitted = await admission.admit_run(self.record.priority, ctx.signal)
        try:
            await self.executor.acquire(self.memory_seed)
        except BaseException:
            admission.leave_run(admitted)
            raise
        stop_sandbox = ctx.signal.add_callback(lambda reason: self.executor.interrupt())
        try:
            return await self._call_provider(context, window)
        finally:
            stop_sandbox()
            self.turns.close()
            state = self.state
            state.published.update(memory=self.executor.sandbox.memory, turns=state.turn, steps=state.steps)  # type: ignore[union-attr]
            try:
                await asyncio.shield(self._release())
            finally:
                self.executor.release_memory()
                admission.leave_run(admitted)

    async def _call_provider(self, context: Assembled, window: list[Any]) -> Any:
        """The provider's model loop, with the two callbacks: ``invoke`` (the executor)
        and ``hook`` (the turn policy); returns the model's last text."""
        ctx, settings = self.ctx, self.settings
        invoke_ref = ctx.manager.callback(
            self.executor.invoke,
            name="agent-invoke",
            params=INVOKE_TOOL["input_schema"],
            description=INVOKE_TOOL["description"],
        )
        hook_ref = ctx.manager.callback(self.turns.hook, name="agent-hook", params=HOOK_PARAMS)
        call: dict[str, Any] = {
            "prompt": context.composed.text,
            "config": settings.config,
            "invoke_ref": invoke_ref,
            "hook_ref": hook_ref,
            "user_message": settings.user_message,
            "skill_name": settings.served.skill.name,
        }
        if window:  # the session's earlier messages (the neutral format), before the user's
            call["messages"] = window
        provider = self.cm.get(settings.provider)
        self.turns.reports_model_calls = reported = declares_model_calls(provider)
        self.turns.model_middleware = arrange_model_calls(self, reported=reported)
        if self.model_calls:
            require_model_calls(provider)
            call.update(self.model_calls.provider_args())
        if takes_arg(provider, "stable_prefix"):  # where a prompt cache may end
            call["stable_prefix"] = context.composed.stable_prefix
        if settings.attachments:  # settle() refused a provider that cannot take them
            call["attachments"] = list(settings.attachments)
        # A cancel (the deadline, cm.cancel, a parent's cancel) stops the provider even
        # when it does not look at its signal.
        text = await ctx.signal.guard(ctx.manager.invoke(settings.provider, call))
        if self.state.halted is not None:  # the provider carried on past a halt: it still stops
            raise self.state.halted
        return text

    async def _release(self) -> None:
        """Close the sandbox, then wait (briefly) for what its code's calls left behind."""
        await self.executor.close()
        await self.gateway.unwind()

    def _result(self, text: Any) -> Any:
        """The run's result: the ``finish()`` value; in middleware mode after ``next()``,
        the served call's own result (or its error); at a cap, the partial result; else
        the model's last text."""
        state, settings = self.state, self.settings
        if settings.returns is not None and not state.finished:
            raise ResultInvalid(
                settings.name,
                "",
                f"provider {settings.provider!r} ended the run without a valid ctx.manager.finish() value",
            )
        if state.finished:
            return state.value
        serving = settings.serving
        if serving is not None and state.next_outcome is not None:
            ok, outcome = state.next_outcome
            if ok:
                return outcome
            if isinstance(outcome, AgentAppsError):
                raise outcome
            raise MiddlewareError(
                settings.served.skill.name,
                f"the call of {serving.skill.name!r} it served was interrupted "
                f"({type(outcome).__name__}) and the agent gave no result with ctx.manager.finish()",
            )
        return state.stopped if state.stopped is not None else text

    def _ends_stopped(self, exc: BaseException) -> bool:
        """Whether ``exc`` is how a stopping run ended: a turn refused (RunStopped), or
        the provider giving up on a model call not retried because of the stop."""
        if self.stopper.reason is None or self.state.halted is not None:
            return False
        return isinstance(exc, RunStopped) or (isinstance(exc, SkillFailed) and exc.skill == self.settings.provider)

    def _stopped(self) -> Any:
        """The result of a run that stopped gracefully between turns (see turns.py)."""
        try:
            return self.turns.stopped(self.stopper.reason or "stopped")
        except RunStopped as exc:  # it owed a finish() value
            self.reporter.emit("agent-error", error=exc.to_json(), status=self.state.status)
            raise

    async def _complete(self, result: Any) -> Any:
        """The run ended well (at a cap, or stopped): its status, event and report."""
        state = self.state
        if state.stopped is None:
            state.status = "done"
        status = state.status
        stop = {"message": state.published["message"]} if "message" in state.published else {}
        fields = {"turns": state.turn, "steps": state.steps, "usage": state.usage, **stop}
        self.reporter.emit("agent-complete", result=result, status=status, **fields)
        await self.recorder.finish(status, result=result, message=stop.get("message"))  # type: ignore[union-attr]
        return result

    def _fail(self, exc: BaseException) -> tuple[AgentAppsError | None, BudgetExceeded | None]:
        """The run failed with ``exc``: set its status and report the ``agent-error``
        event. Returns the halt that stopped it, if any (what happened, whatever the
        provider made of it), and the budget whose deadline cancelled it, if any."""
        state = self.state
        halted = state.halted if isinstance(exc, AgentAppsError) else None
        over: BudgetExceeded | None = None
        if halted is not None:
            state.status = "waiting-approval" if isinstance(halted, ApprovalPending) else "error"
        elif isinstance(exc, (Cancelled, asyncio.CancelledError)) and state.status == "running":
            over = self.record.ledger.deadline_exceeded(time.time())  # type: ignore[union-attr]
            state.status = "budget" if over is not None else "cancelled"
        elif state.status == "running":
            state.status = _STATUS_OF.get(type(exc), "error")
        reported = halted if halted is not None else over if over is not None else exc
        self.reporter.emit("agent-error", error=self._error_of(reported), status=state.status)
        return halted, over

    def _error_of(self, exc: BaseException) -> dict[str, Any]:
        return error_of(exc, self.ctx.signal)
