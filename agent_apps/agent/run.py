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
=============  =================================  ==========================================

Run statuses (``ctx.locals["agent"]["status"]``, and ``status`` in the final
``agent-complete`` or ``agent-error`` event): ``done``; ``max_turns`` and ``max_steps``
(the run stopped at a cap: its result is the model's last text followed by the terminal
message, or with ``returns`` a LimitExceeded); ``error``; ``cancelled``.

Middleware mode: when the served skill is a prompt skill with ``metadata.role:
middleware``, the agent serves the call that middleware wraps. Its code sees that call
as ``target`` and advances it with ``await target.manager.next()`` (a host call with
the ``next`` option, answered here by the served middleware's ``next()``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..allowed_tools import parse_specs
from ..config import call_config
from ..errors import (
    AgentAppsError,
    ArgsInvalid,
    Cancelled,
    LimitExceeded,
    MiddlewareError,
    ResultInvalid,
    ToolNotAllowed,
)
from ..skill import Skill, is_skill_name
from ..state.sessions import session_id_problem
from ..validation import schema_problem, validate_args
from .prompt import INVOKE_TOOL, cap, returns_reminder
from .recorder import RETENTIONS, Recorder
from .workspace import resolve_workspace

if TYPE_CHECKING:
    from ..context import Context

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
            _check_untrusted_call(ctx, args)
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
        self.persistent = bool(self.config.get("persistent"))
        if self.persistent and self.returns is not None:
            raise ArgsInvalid(
                ctx.skill.name, "returns", "persistent mode never ends, so it cannot be combined with 'returns'"
            )
        self.max_turns = float("inf") if self.persistent else int(self.config.get("max_turns", 30))
        self.max_steps = int(self.config.get("max_steps", 30))
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
        self.record = ctx.run.child(session_id=session)
        ctx._run = self.record
        self.recorder: Recorder | None = None

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
        self._code_ctx: Context | None = None
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
        self.recorder = recorder = Recorder(
            self.cm.state,
            self.record,
            name=self.name,
            provider=provider,
            model=self.config.get("model_id"),
            retention=self.retention,
            user_message=self.user_message,
        )
        memory = await recorder.start()
        if memory:  # the session's memory, under what this call seeds
            self.memory_seed = {**memory, **self.memory_seed}
        try:
            return await self._run(recorder, visible)
        except BaseException as exc:
            status = self.state["status"]  # set by _run for the errors it knows
            await recorder.finish("error" if status == "running" else status, error=exc)
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
        try:
            window: list[Any] = []
            if self.record.session_id is not None:
                window = await self._prompt_window(system)
            self._sandbox = await _acquire_sandbox(self)
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
                if _declares(self.cm, provider, "stable_prefix"):  # where a prompt cache may end
                    call["stable_prefix"] = context.composed.stable_prefix
                text = await ctx.manager.invoke(provider, call)
            finally:
                stop_sandbox()
                self.state.update(memory=self._sandbox.memory, turns=self.turn, steps=self.steps)
                await self._sandbox.close()
            if self.returns is not None and not self.finished:
                raise ResultInvalid(
                    self.name, "", f"provider {provider!r} ended the run without a valid ctx.manager.finish() value"
                )
            result = self._result(text)
        except (AgentAppsError, asyncio.CancelledError) as exc:
            if self.state["status"] == "running":
                self.state["status"] = "cancelled" if isinstance(exc, (Cancelled, asyncio.CancelledError)) else "error"
            error = exc.to_json() if isinstance(exc, AgentAppsError) else {"type": "Cancelled", "message": "cancelled"}
            self._emit("agent-error", error=error, status=self.state["status"])
            raise
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
        from ..sandbox import RunResult

        result = RunResult(**data)
        text = result.for_model()
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
        result = await self._sandbox.run(args["code"])
        return result.to_json()

    async def _call_host(self, name: str, args: dict[str, Any] | None, **options: Any) -> Any:
        """A call from guest code: a child of the agent-code invocation (untrusted), so
        the pipeline checks it and any ``middleware`` it names; ``next=True`` (the
        sandbox checked that it comes alone) advances the call this agent serves."""
        assert self._code_ctx is not None
        if self.recorder is not None:
            self.recorder.called(name)
        if options.pop("next", False):
            return await self._next(name, args)
        return await self._code_ctx.manager.invoke(name, args, **options)

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
        kind = event["type"]
        self.trace.append({"type": kind, "timestamp": time.time(), **{k: v for k, v in event.items() if k != "type"}})
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

    async def _on_turn_start(self, event: dict[str, Any]) -> None:
        self.turn = int(event.get("turn") or self.turn + 1)
        self._turn_text, self._turn_calls = [], 0
        if self.turn > self.max_turns:  # the provider ignored the stop directive
            self.state["status"] = "max_turns"
            raise LimitExceeded(f"{self.name}: turn limit ({self.max_turns}) reached", skill=self.name)
        self._emit("turn-start", turn=self.turn)

    async def _on_message(self, event: dict[str, Any]) -> None:
        text = str(event.get("text") or "")
        self._turn_text.append(text)
        self._emit("agent-message", text=text, delta=bool(event.get("delta")))

    async def _on_reasoning(self, event: dict[str, Any]) -> None:
        self._emit("agent-message", text=str(event.get("text") or ""), delta=bool(event.get("delta")), reasoning=True)

    async def _on_tool_call(self, event: dict[str, Any]) -> dict[str, Any]:
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
        for key in ("input_tokens", "output_tokens"):
            self.usage[key] += int((event.get("usage") or {}).get(key) or 0)
        text = event.get("result")
        if text is None:
            text = "".join(self._turn_text)
        if isinstance(text, str) and text.strip():
            self.last_text = text.strip()
        self._emit("turn-end", turn=self.turn, usage=event.get("usage"))
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

    # -- events ----------------------------------------------------------------------

    def _emit(self, kind: str, **fields: Any) -> None:
        if self.topic:
            self.cm.events.emit(
                self.topic,
                {"type": kind, "timestamp": time.time(), "agent": self.name, **self.scope_ids(), **fields},
            )

    def scope_ids(self) -> dict[str, Any]:
        """The ids that place this run in the tree of nested agents."""
        return {
            "context_id": self.scope["context_id"],
            "ancestor_context_id": self.scope["ancestor_context_id"],
            "run_id": self.record.run_id,
        }


#: The model config keys agent code may set when it starts a sub-agent. Everything else
#: (endpoints, credentials, regions, sandbox limits) stays with the user's config: agent
#: code must not redirect model traffic or lift its own limits.
UNTRUSTED_CONFIG_KEYS = frozenset(
    {"agent", "model_id", "max_turns", "max_steps", "temperature", "max_tokens", "top_p", "script", "stream"}
)


def _check_untrusted_call(ctx: Context, args: Mapping[str, Any]) -> None:
    """Agent code starting a sub-agent may not widen what agent code can do."""
    caller = ctx.parent
    assert caller is not None
    name = caller.skill.name
    config = args.get("config") or {}
    refused = sorted(set(config) - UNTRUSTED_CONFIG_KEYS)
    if refused:
        raise ToolNotAllowed(
            name, ctx.skill.name, f"agent code may not set config {', '.join(refused)} (it may set "
            f"{', '.join(sorted(UNTRUSTED_CONFIG_KEYS))})"
        )
    provider = config.get("agent")
    if provider is not None:
        skill = ctx.manager.context_manager.catalog.skills.get(provider) if is_skill_name(provider) else None
        if skill is None or "provider" not in skill.tags:
            raise ToolNotAllowed(name, ctx.skill.name, f"config.agent {provider!r} is not a provider skill")
    requested = args.get("allowed_tools")
    own = caller.skill.allowed_tools
    if requested is None or requested == own:
        return
    specs = parse_specs(own) if own else ()
    widening_ok = any(s.glob == "*" for s in specs) or any(
        s.matches_name(ctx.skill) and any(k == "allowed_tools" for k, _ in s.constraints) for s in specs
    )
    if not widening_ok:
        raise ToolNotAllowed(
            name, ctx.skill.name, "agent code may start a sub-agent only with its own allowed-tools, unless its "
            "allowed-tools says which, as in agent(allowed_tools=file-*)"
        )


def _declares(cm: Any, provider: str, arg: str) -> bool:
    """Whether the provider skill takes ``arg`` (optional args newer than a provider
    are sent only to providers that say they take them)."""
    skill = cm.catalog.skills.get(provider)
    props = (skill.params or {}).get("properties") if skill is not None else None
    return isinstance(props, dict) and arg in props


_POOL: Any = None


async def _acquire_sandbox(run: AgentRun) -> Any:
    """A sandbox from the process-wide pool (pre-instantiated, so a new agent does not
    wait), seeded with the run's memory and limited by ``config.sandbox``."""
    global _POOL
    from ..sandbox import SandboxLimits, SandboxPool

    try:
        limits = SandboxLimits.from_config(run.config.get("sandbox"))
    except ValueError as exc:
        raise ArgsInvalid(run.ctx.skill.name, "config.sandbox", str(exc)) from None
    if _POOL is None:
        _POOL = SandboxPool(size=2)
    served = {"skill": run.serving.skill.name, "args": run.serving.args} if run.serving is not None else None
    return await _POOL.acquire(memory=run.memory_seed, limits=limits, call_host=run._call_host, target=served)
