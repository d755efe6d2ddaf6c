"""One agent run: the policy behind the ``agent`` skill.

The provider (the LLM loop) is another skill; it sees only two callback refs. Through
``invoke_ref`` it runs the model's code in the sandbox; through ``hook_ref`` it reports
every lifecycle event and receives the directives that decide what happens next. All
policy lives here: tool discovery, step and turn limits, structured returns,
persistence, retries, the trace and the events.

Hook events and their directives (seed 000):

=============  =================================  ==========================================
type           fields                             directive returned
=============  =================================  ==========================================
turn-start     turn                               None (raises LimitExceeded past max_turns)
message        text, delta?                       None
reasoning      text, delta?                       None
tool-call      tool, args, id?                    {allow: true} or {deny: reason}
tool-result    tool, args, result, id?            None
turn-end       turn, result (text), usage?,       {stop: true, result} or {continue: true, message?};
               latency_ms?, stop_reason?          at max_turns or max_steps: stop with the partial
                                                  result (see "Run statuses")
error          error {type, message, retryable},  {retry: true, delay} or {stop: true}
               attempt
retry          attempt, delay, error?             None
context-edit   removed, kept, reason?             None (see docs/agent.md, "context_edit")
model-call     turn, attempt, messages?, system?  {response?, messages?, system?} (see model_calls.py)
model-response turn, attempt, response,           {response?}
               latency_ms, replayed
=============  =================================  ==========================================

Run statuses (``ctx.locals["agent"]["status"]``, and ``status`` in the final
``agent-complete`` or ``agent-error`` event): ``done``; ``max_turns`` and ``max_steps``
(the run stopped at a cap: its result is the model's last text followed by the terminal
message, or with ``returns`` a LimitExceeded); ``error``; ``cancelled``;
``waiting-approval`` (a call from its code needs a human and nobody can be asked now:
the run was checkpointed, see ``durable.py`` and docs/durability.md).

Middleware mode: when the served skill is a prompt skill with ``metadata.role:
middleware``, the agent serves the call that middleware wraps. Its code sees that call
as ``target`` and advances it with ``await target.manager.next()`` (a host call with
the ``next`` option, answered here by the served middleware's ``next()``).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import tracing
from ..admission import Gate, mark_admitted
from ..authority import check_untrusted_agent_args
from ..budget import Ledger, Supervision, supervision_config
from ..config import call_config
from ..errors import (
    AgentAppsError,
    ApprovalPending,
    ArgsInvalid,
    BudgetExceeded,
    Cancelled,
    GuardrailTripped,
    LimitExceeded,
    MiddlewareError,
    ReplayDiverged,
    ResultInvalid,
    ToolNotAllowed,
)
from ..middleware import AGENT, MiddlewareFn, level_of, served_middleware
from ..run_record import AgentLimits
from ..skill import Skill, is_skill_name
from ..state.sessions import session_id_problem
from ..tools import approval
from ..tools.errors import CallSkipped
from ..validation import schema_error, schema_problem, validate_args
from .durable import SCOPE, AgentJournal, HostCall, RunJournal, failure, replay
from .guardrails import guardrails_for
from .model_calls import RESPONSE_SCHEMA, ModelCalls
from .model_middleware import ModelMiddleware
from .prompt import INVOKE_TOOL, cap, returns_reminder
from .recorder import RETENTIONS, Recorder
from .workspace import resolve_workspace

if TYPE_CHECKING:
    from ..context import Context
    from ..run_record import RunRecord
    from ..tools.approval import ApprovalRequest

__all__ = ["HOOK_PARAMS", "STOP_MESSAGES", "AgentRun"]

#: The hook callback's args: one event, tagged by ``type``.
HOOK_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {
            "enum": [
                "turn-start",
                "message",
                "reasoning",
                "tool-call",
                "tool-result",
                "turn-end",
                "error",
                "retry",
                "context-edit",
                "model-call",
                "model-response",
            ]
        }
    },
    "required": ["type"],
}

#: The invoke callback's result: what the provider hands back to the model.
INVOKE_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "error": {"type": "boolean"}, "finished": {"type": "boolean"}},
    "required": ["text", "error"],
}

_EXCLUDED = ("agent", "agent-execute")
#: How long the end of a run waits for the calls its code left running to unwind.
JOIN_GRACE = 5.0
#: Event loop ticks without a new call after which the parallel calls of a turn run.
SETTLE_TICKS = 3
#: The status of a run that ended with one of these errors (others: ``error``).
_STATUS_OF: dict[type, str] = {BudgetExceeded: "budget", GuardrailTripped: "guardrail"}
_CONTINUE = "Continue."

#: The terminal message of a run stopped at a cap, by status.
STOP_MESSAGES = {
    "max_turns": "Stopped: maximum turn limit reached",
    "max_steps": "Stopped: maximum step limit reached",
}


class AgentRun:
    """State and callbacks of one agent run (one sandbox, one provider call)."""

    def __init__(self, ctx: Context, args: Mapping[str, Any]) -> None:
        self.ctx = ctx
        self.cm = ctx.manager.context_manager
        #: The invocation this agent serves: the prompt skill (through agent-execute),
        #: or the skill that called ``agent`` directly.
        self.served = ctx.target or ctx.parent or ctx
        #: Middleware mode: the served skill is a prompt skill with ``role: middleware``,
        #: and this agent serves the call that middleware wraps.
        served_skill = self.served.skill
        self.serving: Context | None = (
            self.served.target if served_skill.is_middleware and served_skill.kind == "prompt" else None
        )
        caller = ctx.parent
        self.untrusted_caller = caller is not None and bool(caller.internals.get("untrusted"))
        if self.untrusted_caller:
            check_untrusted_agent_args(
                caller.skill, ctx.skill, args, self.cm.catalog.skills  # type: ignore[union-attr]
            )
        # The call layer: every invoke(..., config=...) above this run (a prompt skill
        # invoked with config={"model": ...} included), then the agent's own config arg.
        call = call_config(ctx, {"model": dict(args.get("config") or {})})
        resolved = self.cm.config_for(self.served.skill, call)
        self.config: dict[str, Any] = resolved.values["model"]
        #: ``model.workspace`` as an absolute folder (docs/context.md), or None.
        self.workspace = resolve_workspace(self.cm, self.served.skill, call)
        if self.workspace is not None:
            self.config["workspace"] = str(self.workspace)
        self.returns = args.get("returns")
        problem = schema_error(self.returns) if self.returns is not None else None
        if problem is not None:  # refused before the model is called, not at finish()
            raise ArgsInvalid(ctx.skill.name, "returns", problem)
        self.persistent = bool(self.config.get("persistent"))
        if self.persistent and self.returns is not None:
            raise ArgsInvalid(
                ctx.skill.name, "returns", "persistent mode never ends, so it cannot be combined with 'returns'"
            )
        # An agent below another gets at most that agent's limits (see _agent_limits).
        limits = _agent_limits(ctx, self.config, self.persistent)
        self.max_turns, self.max_steps = limits.max_turns, limits.max_steps
        self.max_retries = int(self.config.get("max_retries", 3))
        self.allowed_tools: str | None = args.get("allowed_tools")
        if self.untrusted_caller and "allowed_tools" not in args:
            # a sub-agent started by agent code sees no more than that code does
            self.allowed_tools = caller.skill.allowed_tools  # type: ignore[union-attr]
        self.name: str = args.get("name") or self.served.skill.name
        self.skill_dir: str | None = self.served.skill.folder
        self.prompt: str = args.get("prompt") or "You are a capable agent. Do the task you are given."
        self.user_message: str = args.get("user_message") or "Do the task."
        self.memory_seed: dict[str, Any] = dict(args.get("memory") or {})
        self.retention: str = self.config.get("retention") or "permanent"
        if self.retention not in RETENTIONS:
            raise ArgsInvalid(ctx.skill.name, "config.retention", f"must be one of {', '.join(RETENTIONS)}")
        # This agent's node in the run tree; everything below it (provider, code,
        # sub-agents) inherits it. A session continues only for the agent an invocation
        # serves: sub-agents started by agent code never write into their caller's.
        session = ctx.internals.get("session") or self.served.internals.get("session")
        if session is not None:
            if self.untrusted_caller:
                raise ToolNotAllowed(caller.skill.name, ctx.skill.name, "agent code may not choose a session")  # type: ignore[union-attr]
            problem = session_id_problem(session)
            if problem:
                raise ArgsInvalid(ctx.skill.name, "session", problem)
        self.supervision = supervision_config(resolved, model_id=self.config.get("model_id"))
        self.parallel = bool(self.config.get("parallel_tool_calls", True))
        self.tool_timeout = _tool_timeout(ctx, self.config.get("tool_timeout"))
        self.record = _child_record(ctx, self.name, self.supervision, session, limits)
        ctx._run = self.record
        self.ledger: Ledger = self.record.ledger  # type: ignore[assignment]
        self.recorder: Recorder | None = None
        #: Features that sit around each model call (journal, model middleware,
        #: guardrails, context layers) register here before the run starts.
        self.model_calls = ModelCalls()
        #: The journal (durable.py), when this run keeps one.
        self.journal: AgentJournal | None = None
        #: What stopped the run where it stood (a checkpoint for approval, a replay that
        #: diverged): every callback raises it from then on.
        self._halted: AgentAppsError | None = None
        self._notes: list[str] = []

        parent_scope = ctx.nonlocals.get("agent") or {}
        self.topic: str | None = args.get("events") or parent_scope.get("events")
        self.provider: str = self.config.get("agent") or "agent-strands"
        if not is_skill_name(self.provider):
            raise ArgsInvalid(
                ctx.skill.name, "config.agent", f"the provider must be a skill name, not {self.provider!r}"
            )
        # Nested agents hide the skills their ancestors serve, too (no loops through them).
        inherited = [*parent_scope.get("exclude", ()), parent_scope.get("skill_name")]
        self.exclude: list[str] = [*_EXCLUDED, ctx.skill.name, self.provider, *filter(None, inherited)]
        self.scope = {
            "events": self.topic,
            "context_id": self.served.id,
            "ancestor_context_id": parent_scope.get("context_id"),
            # what skill-list and skill-describe hide from this agent's code
            "skill_name": self.served.skill.name,
            "exclude": self.exclude,
            # the served skill's own folder, which this agent's code may read (tools/paths)
            "skill_dir": self.skill_dir,
            # its workspace (memory-search), the guidance it loaded and their folders
            "workspace": str(self.workspace) if self.workspace is not None else None,
            "loaded_skills": [],
            "loaded_folders": [],
            "retention": self.retention,
        }
        #: What the agents below this one's code keep (set when the run starts).
        self._inherited = parent_scope.get("around_model_calls") if _below_agent_code(ctx) else None
        self.trace: list[dict[str, Any]] = []
        self.usage = {"input_tokens": 0, "output_tokens": 0}
        #: What callers and middleware read after the run (ctx.locals["agent"]).
        self.state: dict[str, Any] = {"trace": self.trace, "usage": self.usage, "status": "running"}
        self.turn = 0
        self.steps = 0
        self.exhausted = False
        self.finished = False
        self.value: Any = None
        self.last_text = ""
        self._stopped: Any = None  # the partial result of a run stopped at a cap
        self._next_outcome: tuple[bool, Any] | None = None  # (ok, result or error) of next()
        self._turn_text: list[str] = []
        self._turn_calls = 0
        self._sandbox: Any = None
        self._release_memory: Any = None
        self._code_ctx: Context | None = None
        self._model_slot: Gate | None = None  # held while a model call is in flight
        self._reports_model_calls = False  # the provider sends model-call events
        self._model_middleware: ModelMiddleware | None = None
        self._turn_span: tracing.Span | None = None
        self._model_span: tracing.Span | None = None
        self._batch: list[tuple[str, asyncio.Future[Any]]] = []  # parallel calls forming one sandbox run
        self._calls: set[asyncio.Task[Any]] = set()  # host calls of the code in flight
        self._flusher: asyncio.Future[Any] | None = None  # the batch being run
        self._turn_tool_calls: int | None = None  # tool calls in this turn's model answer, if reported
        # The model's code runs as this anonymous skill: built once per run, so its
        # schema is compiled once; its allowed-tools are the agent's.
        self._code_skill = Skill(
            name="agent-code",
            description=f"code written by agent {self.name}",
            params={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
            allowed_tools=self.allowed_tools,
            kind="anonymous",
            _main=self._run_code,
        )

    # -- the run -------------------------------------------------------------------

    async def run(self) -> Any:
        served, provider = self.served, self.provider
        visible = self.cm.visible_tools(self.allowed_tools, caller=served.skill.name, exclude=self.exclude)
        self.journal = journal = self._open_journal()
        self.recorder = recorder = Recorder(
            self.cm.state,
            self.record,
            name=self.name,
            provider=provider,
            model=self.config.get("model_id"),
            retention=self.retention,
            user_message=self.user_message,
            journal=journal,
            price=self.supervision.price,
        )
        memory = await recorder.start()
        started = journal.started if journal is not None else None
        if started is not None:  # resumed: the memory it started with the first time
            self.memory_seed = dict(started.get("memory") or {})
        elif memory:  # the session's memory, under what this call seeds
            self.memory_seed = {**memory, **self.memory_seed}
        try:
            return await self._run(recorder, visible)
        except BaseException as exc:
            status = self.state["status"]  # set by _run for the errors it knows
            # shielded: a second cancel of this task must not lose the run's final status
            await asyncio.shield(recorder.finish("error" if status == "running" else status, error=exc))
            raise

    async def _run(self, recorder: Recorder, visible: Any) -> Any:
        from .assembly import assemble

        ctx, served, provider = self.ctx, self.served, self.provider
        served.nonlocals["agent"] = self.scope
        context = await assemble(self, visible)
        system = context.composed.text
        if self.allowed_tools is not None and any(s.guidance for s in visible.tools):
            # guidance it may see, it may load
            self._code_skill.allowed_tools = f"{self.allowed_tools} load-skills"
        recorder.set_system(system)
        self.state.update(run_id=self.record.run_id, agent_id=self.record.agent_id, retention=self.retention)
        self.state["context"] = recorder.report["context"] = context.describe()
        served.locals["agent"] = self.state
        ctx.locals["agent"] = self.state
        self._emit(
            "agent-start",
            provider=provider,
            mode=visible.mode,
            tools=[s.name for s in visible.tools],
            **({"warnings": context.warnings} if context.warnings else {}),
        )
        ids = {f"agent_apps.{key}": value for key, value in self.scope_ids().items()}
        tracing.annotate(ctx.span, {"agent_apps.agent": self.name, **ids})
        deadline = self._arm_deadline()
        try:
            window: list[Any] = []
            started = self.journal.started if self.journal is not None else None
            if started is not None:  # resumed: the window it was given the first time
                window = list(started.get("window") or ())
            elif self.record.session_id is not None:
                window = await self._prompt_window(system)
            if self.journal is not None:
                await self.journal.start(
                    {
                        "skill": served.skill.name,
                        "name": self.name,
                        "user_message": self.user_message,
                        "provider": provider,
                        "system": [{"name": layer.name, "text": layer.text} for layer in context.composed.layers],
                        "tools": [s.name for s in visible.tools],
                        "allowed_tools": self.allowed_tools,
                        "exclude": self.exclude,
                        "memory": self.memory_seed,
                        "window": window,
                    }
                )
            admitted = await self.cm.admission.admit_run(self.record.priority, ctx.signal)
            try:
                self._sandbox = await _acquire_sandbox(self)
            except BaseException:
                self.cm.admission.leave_run(admitted)
                raise
            stop_sandbox = ctx.signal.add_callback(lambda reason: self._sandbox.interrupt())
            try:
                invoke_ref = ctx.manager.callback(
                    self.invoke_tool,
                    name="agent-invoke",
                    params=INVOKE_TOOL["input_schema"],
                    description=INVOKE_TOOL["description"],
                )
                hook_ref = ctx.manager.callback(self.hook, name="agent-hook", params=HOOK_PARAMS)
                call: dict[str, Any] = {
                    "prompt": system,
                    "config": self.config,
                    "invoke_ref": invoke_ref,
                    "hook_ref": hook_ref,
                    "user_message": self.user_message,
                    "skill_name": served.skill.name,
                }
                if window:  # the session's earlier messages (the neutral format), before the user's
                    call["messages"] = window
                provider_skill = self.cm.get(provider)
                self._reports_model_calls = _declares_model_calls(provider_skill)
                self._sit_around_model_calls()
                if self.model_calls:
                    _require_model_calls(provider_skill)
                    call.update(self.model_calls.provider_args())
                if _takes_arg(provider_skill, "stable_prefix"):  # where a prompt cache may end
                    call["stable_prefix"] = context.composed.stable_prefix
                # A cancel (the deadline, cm.cancel, a parent's cancel) stops the provider
                # even when it does not look at its signal.
                text = await ctx.signal.guard(ctx.manager.invoke(provider, call))
                if self._halted is not None:  # the provider carried on past a halt: it still stops
                    raise self._halted
            finally:
                stop_sandbox()
                self._model_call_ended()
                if self._model_middleware is not None:
                    self._model_middleware.abort("the run ended")
                tracing.end(self._turn_span)
                self.state.update(memory=self._sandbox.memory, turns=self.turn, steps=self.steps)
                try:  # shielded: a second cancel must not leave the sandbox or a call running
                    await asyncio.shield(self._release())
                finally:
                    self._release_memory()
                    self.cm.admission.leave_run(admitted)
            if self.returns is not None and not self.finished:
                raise ResultInvalid(
                    self.name, "", f"provider {provider!r} ended the run without a valid ctx.manager.finish() value"
                )
            result = self._result(text)
        except (AgentAppsError, asyncio.CancelledError) as exc:
            halted = self._halted if isinstance(exc, AgentAppsError) else None
            over: BudgetExceeded | None = None
            if halted is not None:  # whatever the provider made of it, the halt is what happened
                self.state["status"] = "waiting-approval" if isinstance(halted, ApprovalPending) else "error"
                exc = halted
            elif isinstance(exc, (Cancelled, asyncio.CancelledError)) and self.state["status"] == "running":
                over = self.ledger.deadline_exceeded(time.time())  # stopped at a budget deadline
                self.state["status"] = "budget" if over is not None else "cancelled"
            elif self.state["status"] == "running":
                self.state["status"] = _STATUS_OF.get(type(exc), "error")
            reported = over if over is not None else exc
            error = (
                reported.to_json()
                if isinstance(reported, AgentAppsError)
                else {"type": "Cancelled", "message": "cancelled"}
            )
            self._emit("agent-error", error=error, status=self.state["status"])
            if halted is not None:
                raise halted from None
            if over is not None and isinstance(exc, Cancelled):
                raise over from exc
            raise
        finally:
            if deadline is not None:
                deadline.cancel()
        if self._stopped is None:
            self.state["status"] = "done"
        status = self.state["status"]
        stop = {"message": STOP_MESSAGES[status]} if status in STOP_MESSAGES else {}
        self._emit(
            "agent-complete", result=result, status=status, turns=self.turn, steps=self.steps, usage=self.usage, **stop
        )
        await recorder.finish(status, result=result)
        return result

    def _result(self, text: Any) -> Any:
        """The run's result: the ``finish()`` value; in middleware mode after ``next()``,
        the served call's own result (or its error); at a cap, the partial result; else
        the model's last text."""
        if self.finished:
            return self.value
        if self.serving is not None and self._next_outcome is not None:
            ok, outcome = self._next_outcome
            if ok:
                return outcome
            if isinstance(outcome, AgentAppsError):
                raise outcome
            raise MiddlewareError(
                self.served.skill.name,
                f"the call of {self.serving.skill.name!r} it served was interrupted "
                f"({type(outcome).__name__}) and the agent gave no result with ctx.manager.finish()",
            )
        return self._stopped if self._stopped is not None else text

    async def _prompt_window(self, system: str) -> list[Any]:
        """The session's earlier messages, compacted to fit (see docs/sessions.md)."""
        from .compaction import prompt_window

        assert self.record.session_id is not None and self.recorder is not None
        window, compaction = await prompt_window(
            self.ctx,
            provider=self.provider,
            config=self.config,
            session=self.record.session_id,
            system=system,
            persist=self.retention == "permanent",
        )
        if compaction is not None:
            self.recorder.compaction = compaction
            self.trace.append({"type": "compaction", "timestamp": time.time(), **compaction})
        return window

    # -- the invoke callback ---------------------------------------------------------

    async def invoke_tool(self, cctx: Context, args: dict[str, Any]) -> dict[str, Any]:
        """Run the model's code as an anonymous, untrusted skill through the pipeline."""
        if self._halted is not None:
            raise self._halted
        if self.finished:
            return {"text": "The task is already finished; no more code runs.", "error": True}
        self.steps += 1
        if self.steps > self.max_steps:
            self.exhausted = True
            return {
                "text": f"Step limit reached ({self.max_steps} invoke calls): no more code will run; "
                "the run stops at the end of this turn.",
                "error": True,
            }
        data = await cctx.manager.invoke(self._code_skill, {"code": args["code"]}, internals={"untrusted": True})
        if self._halted is not None:
            raise self._halted
        from ..sandbox import RunResult

        result = RunResult(**data)
        text = result.for_model()
        if self._notes:  # what happened to its calls that the code cannot tell (a skipped call)
            text = "\n".join([text, *self._notes]) if text else "\n".join(self._notes)
        if result.finished and not result.error:
            problem = schema_problem(self.returns, result.value) if self.returns is not None else None
            if problem is None:
                self.finished, self.value = True, result.value
                return {"text": cap(text), "error": False, "finished": True}
            path, message = problem
            text += (
                f"\nfinish() rejected: the value does not match the required schema at {path}: {message}. "
                "Fix it and call ctx.manager.finish() again."
            )
            return {"text": cap(text), "error": True}
        return {"text": cap(text), "error": result.error is not None}

    async def _run_code(self, actx: Context, args: dict[str, Any]) -> dict[str, Any]:
        self._code_ctx = actx
        if not self.parallel:
            return (await self._run_codes([args["code"]]))[0].to_json()
        # Parallel tool calls: the calls the provider dispatches together run as one
        # sandbox run, each piece a task on the guest's event loop (docs/supervision.md).
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._batch.append((args["code"], future))
        if len(self._batch) == 1:
            self._flusher = asyncio.ensure_future(self._flush_batch())
        return (await future).to_json()  # type: ignore[no-any-return]

    async def _run_codes(self, codes: list[str]) -> list[Any]:
        """One sandbox run of ``codes`` (one piece, or several run together). With a
        journal it is one code run there: one clock base and seed (the recorded ones
        when resumed) and its host calls numbered together, all journaled before the
        model sees their outcome."""
        self._notes = []
        journal = self.journal
        clock = journal.code_run(self.steps) if journal is not None else None
        if len(codes) == 1:
            results = [await self._sandbox.run(codes[0], self._tool_limit(), clock=clock)]
        else:
            results = await self._sandbox.run_batch(codes, [self.tool_timeout] * len(codes), clock=clock)
        if journal is not None:
            await journal.run.flush()
        return results

    def _tool_limit(self) -> float | None:
        """Seconds one invoke call may take: ``model.tool_timeout``, at most the sandbox's."""
        limit = self._sandbox.limits.timeout
        return limit if self.tool_timeout is None else min(limit, self.tool_timeout)

    async def _flush_batch(self) -> None:
        """Run the calls that arrived together: wait until no more arrive (a few event
        loop ticks; none when the model's answer had one call), then run them."""
        idle = 0
        while idle < SETTLE_TICKS and self._turn_tool_calls != 1:
            size = len(self._batch)
            await asyncio.sleep(0)
            idle = idle + 1 if len(self._batch) == size else 0
        batch, self._batch = self._batch, []
        try:
            results = await self._run_codes([code for code, _ in batch])
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            raise
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)

    async def _call_host(self, name: str, args: dict[str, Any] | None, **options: Any) -> Any:
        """A call from guest code: a child of the agent-code invocation (untrusted), so
        the pipeline checks it and any ``middleware`` it names; ``next=True`` (the
        sandbox checked that it comes alone) advances the call this agent serves.

        With a journal, a call the journal holds is answered from it (a resumed run),
        and every call made is journaled with its outcome before the code sees it."""
        assert self._code_ctx is not None and self.recorder is not None
        mark_admitted()  # agents started below this run (which holds a sandbox) never wait for one
        if self._halted is not None:
            raise self._halted
        task = asyncio.current_task()
        if task is not None:
            self._calls.add(task)
        try:
            return await self.recorder.host_call(name, args, self._journaled_call(name, args, options))
        finally:
            self._calls.discard(task)  # type: ignore[arg-type]

    async def _journaled_call(self, name: str, args: dict[str, Any] | None, options: dict[str, Any]) -> Any:
        journal = self.journal
        if journal is None:
            return await self._perform(name, args, options, None)
        call = journal.issue(name, args, next=bool(options.get("next")))
        try:
            entry = journal.replayed(call)
        except ReplayDiverged as exc:
            await self._halt(exc)
            raise
        if entry is not None:
            if call.next:  # the served call's outcome, as the first time (it is not made again)
                self._next_outcome = _next_outcome(entry.body)
            elif call.skill == "load-skills" and entry.body.get("ok"):  # its folders open again
                self._reload_guidance(call.args)
            return replay(entry)
        try:
            result = await self._perform(name, args, options, call)
        except (ApprovalPending, ReplayDiverged) as exc:  # the run stops here; nothing happened to journal
            await self._halt(exc)
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
        from .guidance import note_loaded

        names = (args or {}).get("skills") or ()
        guidance = {s.name: s for s in self.cm.visible_to(self._code_ctx).tools if s.guidance}
        note_loaded(self.scope, [guidance[n] for n in names if n in guidance])

    async def _perform(
        self, name: str, args: dict[str, Any] | None, options: dict[str, Any], call: HostCall | None
    ) -> Any:
        """Make a host call, with this run's approval gate on it (see :meth:`_gate`)."""
        assert self._code_ctx is not None
        if options.pop("next", False):
            return await self._next(name, args)
        internals: dict[str, Any] = {"approval_gate": functools.partial(self._gate, call)}
        if call is not None:  # agents started below this call find their place in the journal
            internals[SCOPE] = (self.journal, call)
        try:
            return await self._code_ctx.manager.invoke(name, args, internals=internals, **options)
        except CallSkipped as skipped:
            self._notes.append(f"[approval: the call of {skipped.skill} was skipped: not made, it returned None]")
            return _SKIPPED if call is not None else None

    async def _gate(self, call: HostCall | None, request: ApprovalRequest) -> tuple[str, str | None] | None:
        """The policy said ``ask`` for a host call from agent code. A resumed run applies
        the decision recorded for it; else an approver (the terminal, a session's, the
        manager's) answers approve, deny or skip; else, unattended, a durable run is
        checkpointed (:class:`ApprovalPending`); else None: nobody could be asked."""
        if self._halted is not None:
            raise self._halted
        journal = self.journal
        if journal is not None and call is not None:
            verdict = journal.decision_for(call)
            if verdict is not None:
                await journal.run.settle()
                return verdict
        approver = approval.find_approver(self.cm)
        if approver is not None:
            return await approval.answer(approver, request)
        if journal is None or call is None or not journal.run.resumable:
            return None
        pending = {
            "agent": journal.path,
            "agent_name": self.name,
            "step": call.step,
            "index": call.index,
            "skill": call.skill,
            "args": call.args,
            "category": request.category,
            "mode": request.mode,
            "rule": request.rule,
            "at": time.time(),
        }
        exc = ApprovalPending(self.record.run_id, pending)
        # the calls running beside it finish first, everything is journaled and the
        # checkpoint written; only then the code stops (which cancels this call's task)
        await self._halt(exc, interrupt=False)
        await journal.run.flush()
        store = self.cm.state
        await store.call(store.journal.pend, self.record.run_id, pending)
        if self._sandbox is not None:
            self._sandbox.interrupt()
        raise exc

    async def _halt(self, exc: AgentAppsError, *, interrupt: bool = True) -> None:
        """Stop the run where it stands: no new host call starts, the ones running finish
        (so their outcomes are journaled), then the code is interrupted (``interrupt``)
        and every callback raises ``exc`` until the provider gives up."""
        if self._halted is not None:
            return
        self._halted = exc
        current = asyncio.current_task()
        others = [task for task in self._calls if task is not current]
        if others:
            await asyncio.wait(others)
        if interrupt and self._sandbox is not None:
            self._sandbox.interrupt()

    def _open_journal(self) -> AgentJournal | None:
        """This run's journal: kept unless ``model.journal`` is false or retention is
        ``none``, and only with a provider that reports its model calls (a resumed run
        must replay them)."""
        if self.config.get("journal") is False or self.retention == "none":
            return None
        try:
            provider = self.cm.get(self.provider)
        except AgentAppsError:
            return None  # the provider call will say what is wrong
        if not _declares_model_calls(provider):
            return None
        journal = RunJournal.of(self.ctx).agent(self.ctx, name=self.name)
        self.model_calls.interceptors.insert(0, journal)  # outermost: a replayed answer meets nothing else
        return journal

    async def _release(self) -> None:
        """The run is over: close its sandbox, and wait (briefly) for what its code's
        calls left behind (a cancelled sub-agent recording its status, a subprocess
        being killed), so that nothing of the run outlives it."""
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            await asyncio.wait([self._flusher], timeout=JOIN_GRACE)
        await self._sandbox.close()
        pending = [task for task in self._calls if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=JOIN_GRACE)

    async def _next(self, name: str, args: dict[str, Any] | None) -> Any:
        """``target.manager.next(args)`` from agent code: the served middleware's own
        ``next()``, which validates the args against the served skill and refuses a
        second call (MiddlewareError, as for code middleware)."""
        serving = self.serving
        if serving is None:
            raise MiddlewareError(self.name, "ctx.manager.next() is only available when the agent serves as middleware")
        if name != serving.skill.name:
            raise ToolNotAllowed(
                self._code_skill.name, name, f"next() advances the served call of {serving.skill.name!r} only"
            )
        if args is not None:
            validate_args(serving.skill, args)  # a mistake the model can fix does not use next() up
        first = self._next_outcome is None
        if first:
            self._next_outcome = (False, None)  # in flight: a second call is refused
        try:
            result = await self.served.manager.next(args)
        except BaseException as exc:
            if first:
                self._next_outcome = (False, exc)
            raise
        self._next_outcome = (True, result)
        return result

    # -- the hook callback -----------------------------------------------------------

    async def hook(self, cctx: Context, event: dict[str, Any]) -> dict[str, Any] | None:
        if self._halted is not None:
            raise self._halted
        kind = event["type"]
        # A model call's messages repeat the whole conversation: the trace keeps the rest.
        skip = ("type", "messages", "system") if kind == "model-call" else ("type",)
        self.trace.append({"type": kind, "timestamp": time.time(), **{k: v for k, v in event.items() if k not in skip}})
        recorder = self.recorder
        if recorder is not None:
            recorder.observe(event)
        handler = getattr(self, "_on_" + kind.replace("-", "_"), None)
        if kind != "turn-end" or recorder is None:
            return await handler(event) if handler is not None else None
        directive = None
        try:
            directive = await handler(event)  # type: ignore[misc]
            return directive
        finally:  # the turn happened, whatever the policy decides: its messages are stored
            memory = self._sandbox.memory if self._sandbox is not None else None
            await recorder.end_turn(event, directive, memory)

    async def _on_model_call(self, event: dict[str, Any]) -> dict[str, Any]:
        directive = await self.model_calls.on_call(event)
        if "response" not in directive:  # the model is called now
            await self._model_call_started()
        return directive

    async def _on_model_response(self, event: dict[str, Any]) -> dict[str, Any]:
        self._model_call_ended()
        problem = schema_problem(RESPONSE_SCHEMA, event.get("response"))
        if problem is not None:
            path, message = problem
            raise AgentAppsError(
                f"{self.name}: provider {self.provider!r} reported a malformed model response ({path}: {message})",
                skill=self.name,
            )
        directive = await self.model_calls.on_response(event)
        self._turn_tool_calls = len(event["response"].get("tool_calls") or ())
        return directive

    async def _on_turn_start(self, event: dict[str, Any]) -> None:
        self.turn = int(event.get("turn") or self.turn + 1)
        self._turn_text, self._turn_calls, self._turn_tool_calls = [], 0, None
        if self.turn > self.max_turns:  # the provider ignored the stop directive
            self.state["status"] = "max_turns"
            raise LimitExceeded(f"{self.name}: turn limit ({self.max_turns}) reached", skill=self.name)
        self._budget(self.ledger.start_turn)
        tracing.end(self._turn_span)
        self._turn_span = tracing.start_span(f"turn {self.turn}", self.ctx, {"agent_apps.turn": self.turn})
        self._emit("turn-start", turn=self.turn)
        if not self._reports_model_calls:  # the model call follows (no model-call event will say so)
            await self._model_call_started()

    async def _on_message(self, event: dict[str, Any]) -> None:
        text = str(event.get("text") or "")
        self._turn_text.append(text)
        self._emit("agent-message", text=text, delta=bool(event.get("delta")))

    async def _on_reasoning(self, event: dict[str, Any]) -> None:
        self._emit("agent-message", text=str(event.get("text") or ""), delta=bool(event.get("delta")), reasoning=True)

    async def _on_tool_call(self, event: dict[str, Any]) -> dict[str, Any]:
        self._model_call_ended()
        self._turn_calls += 1
        args = event.get("args") or {}
        self._emit("tool-call", tool=event.get("tool"), code=args.get("code"), id=event.get("id"))
        if event.get("tool") != INVOKE_TOOL["name"]:
            return {"deny": f"unknown tool {event.get('tool')!r}: the only tool is 'invoke'"}
        if self.finished:
            return {"deny": "the task is already finished"}
        return {"allow": True}

    async def _on_tool_result(self, event: dict[str, Any]) -> None:
        result = event.get("result") or {}
        error = isinstance(result, dict) and result.get("error")
        text = result.get("text") if isinstance(result, dict) else str(result)
        self._emit("tool-error" if error else "tool-result", tool=event.get("tool"), result=text, id=event.get("id"))

    async def _on_turn_end(self, event: dict[str, Any]) -> dict[str, Any]:
        self._model_call_ended()
        usage: dict[str, Any] = event["usage"] if isinstance(event.get("usage"), dict) else {}
        for key in ("input_tokens", "output_tokens"):
            self.usage[key] += int(usage.get(key) or 0)
        if usage.get("estimated"):  # a provider that could only guess says so
            self.usage["estimated"] = True
        text = event.get("result")
        if text is None:
            text = "".join(self._turn_text)
        if isinstance(text, str) and text.strip():
            self.last_text = text.strip()
        self._emit("turn-end", turn=self.turn, usage=event.get("usage"))
        tracing.end(self._turn_span)
        self._turn_span = None
        price = self.supervision.price
        self.ledger.charge(usage, price.cost(usage) if price is not None else 0.0)
        self._budget(self.ledger.check)
        if self.finished:
            return {"stop": True, "result": self.value}
        if self.exhausted:
            return self._stop("max_steps", f"{self.max_steps} invoke calls")
        if self._turn_calls:
            directive: dict[str, Any] = {"continue": True}
        elif self.persistent:
            directive = {"continue": True, "message": _CONTINUE}
        elif self.returns is not None:
            directive = {"continue": True, "message": returns_reminder(self.returns)}
        else:
            return {"stop": True, "result": text}
        if self.turn >= self.max_turns:
            return self._stop("max_turns", f"{self.max_turns} turns")
        return directive

    def _stop(self, status: str, limit: str) -> dict[str, Any]:
        """End the run gracefully at a cap: the partial result is the model's last text
        and the terminal message. A run that must ``finish()`` a schema cannot end with
        text, so it fails with LimitExceeded (the trace and memory are kept all the same)."""
        message = self.state["message"] = STOP_MESSAGES[status]
        self.state["status"] = status
        if self.returns is not None:
            raise LimitExceeded(
                f"{self.name}: {message} ({limit}) before a valid ctx.manager.finish() value", skill=self.name
            )
        self._stopped = f"{self.last_text}\n\n{message}" if self.last_text else message
        return {"stop": True, "result": self._stopped}

    async def _on_error(self, event: dict[str, Any]) -> dict[str, Any]:
        self._model_call_ended()
        if self._model_middleware is not None:
            self._model_middleware.abort(str((event.get("error") or {}).get("message") or "error"))
        error = event.get("error") or {}
        attempt = int(event.get("attempt") or 1)
        retryable = bool(error.get("retryable")) if isinstance(error, dict) else False
        self._emit("agent-error", error=error, attempt=attempt)
        if self.persistent or (retryable and attempt <= self.max_retries):
            base = float(self.config.get("retry_delay", 1.0))
            return {"retry": True, "delay": min(base * 2 ** (attempt - 1), 30.0)}
        return {"stop": True}

    async def _on_retry(self, event: dict[str, Any]) -> None:
        self._emit("agent-error", retrying=True, attempt=event.get("attempt"), delay=event.get("delay"))

    # -- supervision -----------------------------------------------------------------

    def _sit_around_model_calls(self) -> None:
        """Register this run's guardrails and model-level middleware around its model
        calls, inside the journal: the guardrails, then the middleware onion."""
        inherited_fns, inherited_guards = self._inherited or ([], [])
        fns: list[MiddlewareFn] = []
        sources = [inherited_fns, served_middleware(self.cm, self.ctx, "model")]
        if self.served is not self.ctx:
            sources.append(served_middleware(self.cm, self.served, "model"))
        refs = [ref for ref in self.config.get("middleware") or () if ref != AGENT]
        sources.append([self.cm._middleware_fn(ref) for ref in refs])
        for fn in (fn for source in sources for fn in source):
            if level_of(fn) == "model" and fn not in fns:
                fns.append(fn)
        source = self.cm.config_for(self.served.skill).sources.get("model.guardrails", "config")
        own = self.config.get("guardrails") or []
        refs = own if not isinstance(own, list) else [*inherited_guards, *(r for r in own if r not in inherited_guards)]
        guards = {g.kind: g for g in guardrails_for(self, refs, source)}
        # agents this run's code starts keep its guardrails and model-level middleware
        self.scope["around_model_calls"] = (fns, refs)
        self._model_middleware = ModelMiddleware(self, fns) if fns else None
        # an onion (model_calls.py): guardrails outside the middleware, so input guardrails
        # see the call before it changes it and output guardrails the answer after
        around = [guards.get("input"), guards.get("output"), self._model_middleware]
        self.model_calls.interceptors += [interceptor for interceptor in around if interceptor is not None]

    def guardrail_decision(self, name: str, kind: str, turn: int, decision: dict[str, Any]) -> None:
        """Report one guardrail decision: a ``guardrail`` event and a trace entry."""
        fields = {"guardrail": name, "kind": kind, "turn": turn, **decision}
        self.trace.append({"type": "guardrail", "timestamp": time.time(), **fields})
        self._emit("guardrail", **fields)

    def _budget(self, check: Any) -> None:
        """Run a budget check; past a limit the run ends with status ``budget``."""
        try:
            check()
        except BudgetExceeded:
            self.state["status"] = "budget"
            raise

    def _arm_deadline(self) -> asyncio.TimerHandle | None:
        """Cancel this agent's tree when its budget deadline passes."""
        deadline = self.ledger.deadline()
        if deadline is None:
            return None
        signal = self.ctx.signal

        def expire() -> None:
            over = self.ledger.deadline_exceeded(time.time() + 0.001)
            signal.cancel(str(over) if over is not None else "deadline", error=over)

        loop = asyncio.get_running_loop()
        return loop.call_at(loop.time() + max(0.0, deadline - time.time()), expire)

    async def _model_call_started(self) -> None:
        """A model call is about to be made: wait for a slot of the provider's."""
        if self._model_slot is None:
            gate = self.cm.admission.model_calls(self.provider)
            await gate.acquire(self.record.priority, self.ctx.signal)
            self._model_slot = gate
            self._model_span = tracing.start_span("model call", self._turn_span or self.ctx)

    def _model_call_ended(self) -> None:
        if self._model_slot is not None:
            self._model_slot.release()
            self._model_slot = None
            tracing.end(self._model_span)
            self._model_span = None

    # -- events ----------------------------------------------------------------------

    def _emit(self, kind: str, /, **fields: Any) -> None:
        if self.topic:
            self.cm.events.emit(
                self.topic,
                {"type": kind, "timestamp": time.time(), "agent": self.name, **self.scope_ids(), **fields},
            )

    def scope_ids(self) -> dict[str, Any]:
        """The ids that place this run in the tree of nested agents."""
        record = self.record
        return {
            "context_id": self.scope["context_id"],
            "ancestor_context_id": self.scope["ancestor_context_id"],
            "run_id": record.run_id,
            "agent_id": record.agent_id,
            "parent_id": record.parent,
            "depth": record.depth,
        }


def _next_outcome(body: dict[str, Any]) -> tuple[bool, Any]:
    """What a journaled ``next()`` call left for the run's result (see ``_result``)."""
    if body.get("ok"):
        return True, body.get("result")
    error = body.get("error") or {}
    return False, AgentAppsError(f"{error.get('type')}: {error.get('message')}")


def _child_record(
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


def _tool_timeout(ctx: Context, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
        raise ArgsInvalid(ctx.skill.name, "config.tool_timeout", f"must be a number of seconds > 0, not {value!r}")
    return float(value)


def _below_agent_code(ctx: Context) -> bool:
    """Whether this agent run was started, at any depth, by an agent's code (not by
    the policy around the agent's model calls, as a guardrail or middleware agent is)."""
    node = ctx.parent
    while node is not None and node.skill.name != "agent":
        if node.internals.get("untrusted"):
            return True
        node = node.parent
    return False


def _declares_model_calls(provider: Skill) -> bool:
    declared = provider.metadata.get("provider")
    return isinstance(declared, dict) and bool(declared.get("model_calls"))


def _require_model_calls(provider: Skill) -> None:
    """A feature that sits around model calls needs a provider that reports them."""
    if not _declares_model_calls(provider):
        raise AgentAppsError(
            f"provider {provider.name!r} does not report its model calls (metadata.provider.model_calls), which "
            "this run needs (a resumed durable run, model-level middleware or guardrails); use a provider that "
            "does, such as agent-strands or agent-scripted",
            skill=provider.name,
        )


#: A host call skipped by the approver (journaled as such; the code gets None).
_SKIPPED: Any = object()

def _takes_arg(provider: Skill, arg: str) -> bool:
    """Whether the provider skill takes ``arg`` (optional args newer than a provider
    are sent only to providers that say they take them)."""
    props = (provider.params or {}).get("properties")
    return isinstance(props, dict) and arg in props


_POOL: Any = None


async def _acquire_sandbox(run: AgentRun) -> Any:
    """A sandbox from the process-wide pool (pre-instantiated, so a new agent does not
    wait), seeded with the run's memory and limited by the agent's limits (its
    ``config.sandbox``, lowered to the enclosing agent's); its ``memory_mb`` counts
    against the run's ``model.spawn.max_memory_mb`` until the run releases it."""
    global _POOL
    from ..sandbox import SandboxPool

    record = run.record
    limits = record.limits.sandbox  # type: ignore[union-attr]
    run._release_memory = record.tree.reserve_memory(run.name, limits.memory_mb, record.spawn)  # type: ignore[arg-type]
    try:
        if _POOL is None:
            _POOL = SandboxPool(size=2)
        served = {"skill": run.serving.skill.name, "args": run.serving.args} if run.serving is not None else None
        return await _POOL.acquire(memory=run.memory_seed, limits=limits, call_host=run._call_host, target=served)
    except BaseException:
        run._release_memory()
        raise


def _agent_limits(ctx: Context, config: Mapping[str, Any], persistent: bool) -> AgentLimits:
    """The agent's limits: its own config's, each lowered to the enclosing agent's (a
    sub-agent, or a prompt skill's agent below another agent, never gets more)."""
    from ..sandbox import SandboxLimits

    try:
        sandbox = SandboxLimits.from_config(config.get("sandbox"))
    except (TypeError, ValueError) as exc:
        raise ArgsInvalid(ctx.skill.name, "config.sandbox", str(exc)) from None
    turns = float("inf") if persistent else int(config.get("max_turns", 30))
    own = AgentLimits(sandbox, turns, int(config.get("max_steps", 30)))
    above = ctx.run.limits
    return own if above is None else above.tighter(own)
