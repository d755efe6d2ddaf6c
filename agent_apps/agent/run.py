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
turn-end       turn, result (text), usage?        {stop: true, result} or {continue: true, message?}
error          error {type, message, retryable},  {retry: true, delay} or {stop: true}
               attempt
retry          attempt, delay, error?             None
context-edit   removed, kept, reason?             None (see docs/agent.md, "context_edit")
=============  =================================  ==========================================
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..allowed_tools import parse_specs
from ..errors import AgentAppsError, ArgsInvalid, LimitExceeded, ResultInvalid, ToolNotAllowed
from ..skill import Skill, is_skill_name
from ..validation import check_runtime_schema, schema_problem
from .prompt import INVOKE_TOOL, cap, returns_reminder, system_prompt
from .tree import NESTING_KEY, AgentTree, Nesting, inherit_limits

if TYPE_CHECKING:
    from ..context import Context

__all__ = ["HOOK_PARAMS", "AgentRun"]

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


class AgentRun:
    """State and callbacks of one agent run (one sandbox, one provider call)."""

    def __init__(self, ctx: Context, args: Mapping[str, Any]) -> None:
        self.ctx = ctx
        self.cm = ctx.manager.context_manager
        #: The invocation this agent serves: the prompt skill (through agent-execute),
        #: or the skill that called ``agent`` directly.
        self.served = ctx.target or ctx.parent or ctx
        caller = ctx.parent
        self.untrusted_caller = caller is not None and bool(caller.internals.get("untrusted"))
        if self.untrusted_caller:
            _check_untrusted_call(ctx, args)
        resolved = self.cm.config_for(self.served.skill, {"model": dict(args.get("config") or {})})
        self.config: dict[str, Any] = resolved.values["model"]
        self.returns = args.get("returns")
        if self.returns is not None:
            try:
                check_runtime_schema(self.returns)
            except ValueError as exc:
                raise ArgsInvalid(ctx.skill.name, "returns", str(exc)) from None
        self.persistent = bool(self.config.get("persistent"))
        if self.persistent and self.returns is not None:
            raise ArgsInvalid(
                ctx.skill.name, "returns", "persistent mode never ends, so it cannot be combined with 'returns'"
            )
        # An agent nested in another gets at most the enclosing agent's limits (agent/tree.py).
        outer: Nesting | None = ctx.nonlocals.get(NESTING_KEY)
        self.max_turns = float("inf") if self.persistent else int(self.config.get("max_turns", 30))
        self.max_steps = int(self.config.get("max_steps", 30))
        if outer is None:
            self.nesting = Nesting(_tree_from(ctx, self.config.get("spawn")), 0, self.max_turns, self.max_steps)
        else:
            self.max_turns, self.max_steps = min(self.max_turns, outer.max_turns), min(self.max_steps, outer.max_steps)
            self.nesting = Nesting(outer.tree, outer.depth + 1, self.max_turns, self.max_steps)
        self.outer_limits = outer.limits if outer is not None else None
        ctx.nonlocals[NESTING_KEY] = self.nesting
        self.max_retries = int(self.config.get("max_retries", 3))
        self.allowed_tools: str | None = args.get("allowed_tools")
        if self.untrusted_caller and "allowed_tools" not in args:
            # a sub-agent started by agent code sees no more than that code does
            self.allowed_tools = caller.skill.allowed_tools  # type: ignore[union-attr]
        self.name: str = args.get("name") or self.served.skill.name
        self.prompt: str = args.get("prompt") or "You are a capable agent. Do the task you are given."
        self.user_message: str = args.get("user_message") or "Do the task."
        self.memory_seed: dict[str, Any] = dict(args.get("memory") or {})

        parent_scope = ctx.nonlocals.get("agent") or {}
        self.topic: str | None = args.get("events") or parent_scope.get("events")
        self.provider: str = self.config.get("agent") or "agent-strands"
        if not is_skill_name(self.provider):
            raise ArgsInvalid(ctx.skill.name, "config.agent", f"the provider must be a skill name, not {self.provider!r}")
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
        }
        self.trace: list[dict[str, Any]] = []
        self.usage = {"input_tokens": 0, "output_tokens": 0}
        self.turn = 0
        self.steps = 0
        self.exhausted = False
        self.finished = False
        self.value: Any = None
        self._turn_text: list[str] = []
        self._turn_calls = 0
        self._sandbox: Any = None
        self._release_memory: Any = None
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
        ctx, served, provider = self.ctx, self.served, self.provider
        visible = self.cm.visible_tools(self.allowed_tools, caller=served.skill.name, exclude=self.exclude)
        skill_dir = None
        if served.skill.path and served.skill.path.endswith("SKILL.md"):
            skill_dir = served.skill.path.rsplit("/", 1)[0]
        system = system_prompt(
            self.prompt, visible, returns=self.returns, memory_keys=list(self.memory_seed), skill_dir=skill_dir
        )
        served.nonlocals["agent"] = self.scope
        state = {"trace": self.trace, "usage": self.usage}
        served.locals["agent"] = state
        ctx.locals["agent"] = state
        self._emit("agent-start", provider=provider, mode=visible.mode, tools=[s.name for s in visible.tools])
        try:
            self.nesting.tree.admit(self.name, self.nesting.depth)
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
                text = await ctx.manager.invoke(
                    provider,
                    {
                        "prompt": system,
                        "config": self.config,
                        "invoke_ref": invoke_ref,
                        "hook_ref": hook_ref,
                        "user_message": self.user_message,
                        "skill_name": served.skill.name,
                    },
                )
            finally:
                stop_sandbox()
                await self._sandbox.close()
                self._release_memory()
            if self.returns is not None and not self.finished:
                raise ResultInvalid(
                    self.name, "", f"provider {provider!r} ended the run without a valid ctx.manager.finish() value"
                )
            result = self.value if self.finished else text
        except AgentAppsError as exc:
            self._emit("agent-error", error=exc.to_json())
            raise
        self._emit("agent-complete", result=result, turns=self.turn, steps=self.steps, usage=self.usage)
        return result

    # -- the invoke callback ---------------------------------------------------------

    async def invoke_tool(self, cctx: Context, args: dict[str, Any]) -> dict[str, Any]:
        """Run the model's code as an anonymous, untrusted skill through the pipeline."""
        if self.finished:
            return {"text": "The task is already finished; no more code runs.", "error": True}
        self.steps += 1
        if self.steps > self.max_steps:
            self.exhausted = True
            return {
                "text": f"Step limit reached ({self.max_steps} invoke calls): no more code will run. "
                "Stop and give your final answer.",
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

    async def _call_host(self, name: str, args: dict[str, Any] | None) -> Any:
        """A call from guest code: a child of the agent-code invocation (untrusted)."""
        assert self._code_ctx is not None
        return await self._code_ctx.manager.invoke(name, args)

    # -- the hook callback -----------------------------------------------------------

    async def hook(self, cctx: Context, event: dict[str, Any]) -> dict[str, Any] | None:
        kind = event["type"]
        self.trace.append({"type": kind, "timestamp": time.time(), **{k: v for k, v in event.items() if k != "type"}})
        handler = getattr(self, "_on_" + kind.replace("-", "_"), None)
        return await handler(event) if handler is not None else None

    async def _on_turn_start(self, event: dict[str, Any]) -> None:
        self.turn = int(event.get("turn") or self.turn + 1)
        self._turn_text, self._turn_calls = [], 0
        if self.turn > self.max_turns:
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
        self._emit("turn-end", turn=self.turn, usage=event.get("usage"))
        if self.exhausted:
            raise LimitExceeded(f"{self.name}: step limit ({self.max_steps} invoke calls) exhausted", skill=self.name)
        if self.finished:
            return {"stop": True, "result": self.value}
        if self._turn_calls:
            directive: dict[str, Any] = {"continue": True}
        elif self.persistent:
            directive = {"continue": True, "message": _CONTINUE}
        elif self.returns is not None:
            directive = {"continue": True, "message": returns_reminder(self.returns)}
        else:
            return {"stop": True, "result": text}
        if self.turn >= self.max_turns:
            raise LimitExceeded(f"{self.name}: turn limit ({self.max_turns}) reached", skill=self.name)
        return directive

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
        return {"context_id": self.scope["context_id"], "ancestor_context_id": self.scope["ancestor_context_id"]}


#: The model config keys agent code may set when it starts a sub-agent. Everything else
#: (endpoints, credentials, regions, sandbox limits) stays with the user's config: agent
#: code must not redirect model traffic or lift its own limits.
#: ``sandbox`` and the turn and step limits are allowed because a nested agent never gets
#: more than its caller has (agent/tree.py): agent code can only lower them.
UNTRUSTED_CONFIG_KEYS = frozenset(
    {"agent", "model_id", "max_turns", "max_steps", "temperature", "max_tokens", "top_p", "script", "stream", "sandbox"}
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


_POOL: Any = None


async def _acquire_sandbox(run: AgentRun) -> Any:
    """A sandbox from the process-wide pool (pre-instantiated, so a new agent does not
    wait), seeded with the run's memory and limited by ``config.sandbox`` (and by the
    enclosing agent's limits); its memory counts against the tree's budget."""
    global _POOL
    from ..sandbox import SandboxLimits, SandboxPool

    try:
        limits = inherit_limits(SandboxLimits.from_config(run.config.get("sandbox")), run.outer_limits)
    except (TypeError, ValueError) as exc:
        raise ArgsInvalid(run.ctx.skill.name, "config.sandbox", str(exc)) from None
    run.nesting.limits = limits
    run._release_memory = run.nesting.tree.reserve_memory(run.name, limits.memory_mb)
    try:
        if _POOL is None:
            _POOL = SandboxPool(size=2)
        return await _POOL.acquire(memory=run.memory_seed, limits=limits, call_host=run._call_host)
    except BaseException:
        run._release_memory()
        raise


def _tree_from(ctx: Context, spawn: Any) -> AgentTree:
    """The budgets of a tree this agent starts (it is the top-level agent)."""
    try:
        return AgentTree.from_config(spawn)
    except (TypeError, ValueError) as exc:
        raise ArgsInvalid(ctx.skill.name, "config.spawn", str(exc)) from None
