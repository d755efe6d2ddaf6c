"""One model call outside an agent's turns: the ``llm`` skill (``ctx.llm``) and the
summary of compaction.

The provider skill runs like an agent run of one turn: a system prompt of the caller's,
the task as the user message (after earlier messages, if any), a hook that stops at the
first turn's end and refuses every tool call. Any provider can therefore play it, the
offline ``agent-scripted`` included, with the model config it would have in an agent.

The call is accounted like a turn of an agent: it takes a turn from the execution budget
before the model is asked (:meth:`~agent_apps.budget.Ledger.start_turn`) and charges its
usage, priced, after. The account is the ledger of the agent whose run made the call (so
its limits and those above it hold); outside any agent, the calls of one run share one
account with the limits of the first call's config.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import _json, tracing
from ..authority import Authority, check_untrusted_agent_args
from ..budget import Ledger, supervision_config, with_clamped_usage
from ..config import call_config
from ..errors import ArgsInvalid, ResultInvalid
from ..validation import schema_error, schema_problem
from .model_calls import ModelCalls, require_model_calls
from .model_middleware import ModelMiddleware, model_level_middleware
from .prompt import INVOKE_TOOL

if TYPE_CHECKING:
    from ..budget import Supervision
    from ..config import Resolved
    from ..context import Context
    from ..middleware import MiddlewareFn
    from ..state.messages import Message

__all__ = ["DEFAULT_SYSTEM", "OneShot", "ask", "one_shot"]

#: The system prompt of an ``llm`` call that names none.
DEFAULT_SYSTEM = "You are a helpful assistant. Answer the user's message directly."


@dataclass
class OneShot:
    """What the model answered: its text and the usage it reported (clamped)."""

    text: str
    usage: dict[str, Any] = field(default_factory=dict)


async def one_shot(
    ctx: Context,
    provider: str,
    config: dict[str, Any],
    *,
    system: str,
    user_message: str,
    messages: list[Message] | None = None,
    resolved: Resolved | None = None,
    middleware: Sequence[MiddlewareFn] = (),
    refusal: str = "no tools in this call: answer with text",
) -> OneShot:
    """Ask the model of ``provider`` (with the ``model`` config ``config``) once.

    ``messages`` come before ``user_message`` in the conversation. With ``resolved``
    (the cascade ``config`` came from), the call is accounted as the module docstring
    says; without, it is not (compaction's summary, which the agent accounts as part
    of its run). ``middleware`` (model-level) sits
    around the call, which needs a provider that reports its model calls. ``refusal``
    is what a tool call gets.
    """
    manager = ctx.manager
    cm = manager.context_manager
    supervision = supervision_config(resolved, model_id=config.get("model_id")) if resolved is not None else None
    ledger = _ledger(ctx, supervision) if supervision is not None else None
    if ledger is not None:
        ledger.start_turn()
    answer = OneShot("")
    onion = ModelMiddleware(ctx, ctx.skill.name, middleware) if middleware else None
    model_calls = ModelCalls([onion] if onion is not None else [])

    async def hook(hook_ctx: Context, event: dict[str, Any]) -> dict[str, Any] | None:
        kind = event.get("type")
        if kind == "model-call" and model_calls:
            return await model_calls.on_call(event)
        if kind == "model-response" and model_calls:
            return await model_calls.on_response(with_clamped_usage(event))
        if kind == "turn-end":
            answer.usage = dict(with_clamped_usage(event).get("usage") or {})
            return {"stop": True, "result": event.get("result") or ""}
        if kind == "tool-call":
            return {"deny": refusal}
        if kind == "error":
            if onion is not None:
                onion.abort(str((event.get("error") or {}).get("message") or "error"))
            return {"stop": True}
        return None

    async def no_tools(invoke_ctx: Context, args: dict[str, Any]) -> dict[str, Any]:
        return {"text": refusal, "error": True}

    hook_ref = manager.callback(hook, name="one-shot-hook", params={"type": "object"})
    invoke_ref = manager.callback(no_tools, name="one-shot-invoke", params=INVOKE_TOOL["input_schema"])
    call: dict[str, Any] = {
        "prompt": system,
        "config": {**config, "max_turns": 1, "persistent": False},
        "invoke_ref": invoke_ref,
        "hook_ref": hook_ref,
        "user_message": user_message,
        "skill_name": ctx.skill.name,
    }
    if messages:
        call["messages"] = messages
    if model_calls:
        require_model_calls(cm.get(provider))
        call.update(model_calls.provider_args())
    try:
        text = await ctx.signal.guard(manager.invoke(provider, call))
    finally:
        cm.release(hook_ref)
        cm.release(invoke_ref)
        if onion is not None:
            onion.abort("the call ended")
    answer.text = text if isinstance(text, str) else "" if text is None else str(text)
    if ledger is not None and supervision is not None:
        price = supervision.price
        ledger.charge(answer.usage, price.cost(answer.usage) if price is not None else 0.0)
    return answer



def _ledger(ctx: Context, supervision: Supervision) -> Ledger:
    """The account a call draws on: the agent's that made it (its limits and those
    above it hold), else the one its run keeps for calls outside any agent."""
    record = ctx.run
    if record.ledger is not None:
        return record.ledger
    if record.tree.outside_agents is None:
        record.tree.outside_agents = Ledger(
            supervision.budget, None, name=ctx.skill.name, started=time.time(), sources=supervision.sources
        )
    return record.tree.outside_agents


async def ask(ctx: Context, args: dict[str, Any]) -> Any:
    """The ``llm`` skill (``ctx`` is its invocation): the caller's model config with the
    call's ``config`` on top, one model call, and its text, or the JSON value that
    matches ``schema`` (docs/skills.md, "One model call")."""
    cm = ctx.manager.context_manager
    overrides = dict(args.get("config") or {})
    authority = Authority.of(ctx)
    if authority is not None and authority.untrusted:  # agent code: the keys it may set for a sub-agent
        check_untrusted_agent_args(authority.stand_in(), ctx.skill, {"config": overrides}, cm.catalog.skills)
    resolved = _model_config(ctx, overrides)
    config: dict[str, Any] = resolved.values["model"]
    provider = config.get("agent") or "agent-strands"
    skill = cm.catalog.skills.get(provider) if isinstance(provider, str) else None
    if skill is None or "provider" not in skill.tags:
        raise ArgsInvalid(ctx.skill.name, "config.agent", f"{provider!r} is not a provider skill")
    system = args.get("system") or DEFAULT_SYSTEM
    schema = args.get("schema")
    if schema is not None:
        problem = schema_error(schema)
        if problem is not None:  # refused before the model is asked
            raise ArgsInvalid(ctx.skill.name, "schema", problem)
        system += (
            "\n\nAnswer with one JSON value that matches this JSON Schema, and nothing else (no prose, no code "
            "fence):\n" + json.dumps(schema)
        )
    messages: list[Message] = [dict(m) for m in args.get("messages") or ()]  # type: ignore[misc]
    if "prompt" in args:
        messages.append({"role": "user", "text": args["prompt"]})
    if not messages or messages[-1].get("role") != "user":
        where = "messages" if "messages" in args else ""
        raise ArgsInvalid(ctx.skill.name, where, "give a prompt, or messages whose last one is the user's")
    last = messages.pop()
    scope = ctx.nonlocals.get("agent") or {}  # an enclosing agent's: its middleware holds here too
    inherited: tuple[list[MiddlewareFn], list[Any]] = scope.get("around_model_calls") or ([], [])
    served = [ctx.parent] if ctx.parent is not None else []
    answer = await one_shot(
        ctx, provider, config, system=system, user_message=last.get("text") or "", messages=messages,
        resolved=resolved, middleware=model_level_middleware(cm, inherited[0], served, config),
    )
    tracing.annotate(ctx.span, {f"gen_ai.usage.{k}": v for k, v in answer.usage.items() if k.endswith("_tokens")})
    if schema is None:
        return answer.text
    value = json_answer(answer.text)
    problem_at = schema_problem(schema, value) if value is not _NOT_JSON else ("", "the model's answer is not JSON")
    if problem_at is not None:
        path, problem = problem_at
        path = path.removeprefix("value").lstrip(".")  # relative to the answer
        raise ResultInvalid(ctx.skill.name, path, f"{problem} (the model answered {answer.text[:200]!r})")
    return value


def _model_config(ctx: Context, overrides: dict[str, Any]) -> Resolved:
    """The cascade of the ``llm`` call ``ctx``: its caller's, with ``overrides`` on top.
    Agent code's calls have the config of the agent whose code it is, resolved as the
    agent resolved it (its served skill, its call layers and its ``config`` arg)."""
    cm = ctx.manager.context_manager
    caller = ctx.parent
    if caller is None:
        return cm.config_for(ctx.skill, call_config(ctx, {"model": overrides}))
    agent = caller.parent if caller.internals.get("untrusted") else None
    while agent is not None and agent.skill.name != "agent":
        agent = agent.parent
    if agent is None:
        return cm.config_for(caller.skill, call_config(ctx, {"model": overrides}))
    served = agent.target or agent.parent or agent  # what the agent serves, as settings.settle() finds it
    own = agent.args.get("config") if isinstance(agent.args, dict) else None
    return cm.config_for(served.skill, call_config(agent, {"model": {**(own or {}), **overrides}}))


#: What :func:`json_answer` returns for text that holds no JSON value.
_NOT_JSON: Any = object()


def json_answer(text: str) -> Any:
    """The JSON value a model's text holds: the whole text, else the part inside a code
    fence, else from the first ``{`` or ``[`` to the last ``}`` or ``]``."""
    body = text.strip()
    candidates = [body]
    if body.startswith("```"):
        candidates.append(body.split("\n", 1)[-1].rsplit("```", 1)[0])
    starts = [i for i in (body.find("{"), body.find("[")) if i != -1]
    end = max(body.rfind("}"), body.rfind("]"))
    if starts and end > min(starts):
        candidates.append(body[min(starts) : end + 1])
    for candidate in candidates:
        try:  # bounded: a reply nested 100,000 deep is text, not a crash
            return _json.loads(candidate)
        except ValueError:
            continue
    return _NOT_JSON
