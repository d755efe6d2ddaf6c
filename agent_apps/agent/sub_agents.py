"""What the helper skills ``delegate``, ``chain`` and ``consolidate`` share (seed 003's
multi-agent patterns): a sub-agent described by a short spec, checked against the
authority of whoever called the helper, then started as an ``agent`` run.

A spec is the ``agent`` skill's args under task-shaped names: ``task`` (the user
message), ``prompt`` (the system prompt), ``allowed_tools``, ``config`` (model keys),
``returns`` (a JSON Schema) and ``name``. Each helper's params spell out its schema
(a frontmatter is a literal), and tests/agent/test_sub_agents.py holds them equal.
Every spec of a call is checked before any
sub-agent starts, so a refused one leaves nothing half done. A sub-agent never has more
than the helper's caller (:func:`~agent_apps.authority.sub_agent_args`): its
allowed-tools are the caller's or a part of them, and from agent code its config keys
are those agent code may set.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Any

from ..authority import Authority, sub_agent_args
from ..errors import ToolNotAllowed

if TYPE_CHECKING:
    from ..context import Context

__all__ = ["DEFAULT_PROMPT", "as_text", "caller_session", "check_spec", "fork_session", "run_spec"]

#: The system prompt of a sub-agent whose spec names none.
DEFAULT_PROMPT = "You are a sub-agent. Do the task you are given, then finish with its result."

_AGENT_ARGS = {"allowed_tools": "allowed_tools", "config": "config", "returns": "returns", "name": "name"}


def check_spec(ctx: Context, spec: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``agent`` args for ``spec``, checked against the authority of the helper's
    caller; a refusal's path starts with ``where`` (the spec's place in the args)."""
    cm = ctx.manager.context_manager
    args = {"prompt": spec.get("prompt") or DEFAULT_PROMPT, "user_message": spec["task"]}
    args.update({arg: spec[key] for key, arg in _AGENT_ARGS.items() if key in spec})
    try:
        return sub_agent_args(Authority.of(ctx), cm.get("agent"), args, cm.catalog.skills)
    except ToolNotAllowed as exc:
        path = ".".join(part for part in (where, exc.path) if part) or None
        raise ToolNotAllowed(exc.caller, exc.callee, exc.reason, spec=exc.spec, path=path) from None


async def run_spec(
    ctx: Context, call: dict[str, Any], *, context: str | None = None, session: str | None = None
) -> Any:
    """Start the sub-agent ``call`` (what :func:`check_spec` made) as a child of the
    helper; ``context`` is added to its task, ``session`` is the one it continues."""
    # A helper invoked in a session serves no agent in it: without this, each sub-agent
    # would continue the caller's session (an agent continues the session of what it serves).
    ctx.internals.pop("session", None)
    if context:
        call = {**call, "user_message": f"{call['user_message']}\n\n{context}"}
    return await ctx.manager.invoke("agent", call, **({"session": session} if session else {}))


def caller_session(ctx: Context) -> str | None:
    """The session the helper's caller runs in: its agent's, or one the helper or an
    invocation above it was given; None when there is none. (A sub-agent serving the
    helper would otherwise continue that session itself.)"""
    if ctx.run.session_id:
        return ctx.run.session_id
    node: Context | None = ctx
    while node is not None:
        session = node.internals.get("session")
        if isinstance(session, str):
            return session
        node = node.parent
    return None


async def fork_session(ctx: Context, session: str) -> str:
    """A copy of ``session`` for a sub-agent (``SESSION.delegate-HEX``), which it writes
    into instead of the original; kept in the store like any session."""
    store = ctx.manager.context_manager.state
    fork = f"{session[:180]}.delegate-{secrets.token_hex(4)}"
    await store.call(store.sessions.fork, session, fork)
    return fork


def as_text(value: Any) -> str:
    """A result as the text another agent reads: strings as they are, else JSON."""
    return value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
