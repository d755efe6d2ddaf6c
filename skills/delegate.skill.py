"""Hand a task to a sub-agent that starts from a copy of the caller's conversation (a
fork of its session) and writes into that copy, never into the caller's; it has at most
the caller's allowed-tools (docs/agent.md, "Delegate, chain, consolidate")."""

from agent_apps.agent.sub_agents import caller_session, check_spec, fork_session, run_spec

frontmatter = {
    "name": "delegate",
    "description": "Give a task to a sub-agent that sees a copy of this conversation (a fork of the session, if "
    "there is one; it writes into the copy) and has at most your allowed-tools; returns its result.",
    "allowed-tools": "agent",
    "params": {
        "type": "object",
        "properties": {
            "task": {"type": "string", "minLength": 1, "description": "what the sub-agent is to do"},
            "prompt": {"type": "string", "description": "its system prompt"},
            "allowed_tools": {"type": "string", "description": "its allowed-tools (yours or fewer)"},
            "config": {"type": "object", "description": "model config for it"},
            "returns": {"type": ["object", "boolean"], "description": "JSON Schema its result must match"},
            "name": {"type": "string", "description": "its name in reports and events"},
        },
        "required": ["task"],
        "additionalProperties": False,
    },
    "metadata": {"tags": ["agent", "helpers"], "visibility": "hidden"},
}


async def main(ctx, args):
    call = check_spec(ctx, args, "")
    session = caller_session(ctx)
    fork = await fork_session(ctx, session) if session is not None else None
    return await run_spec(ctx, call, session=fork)
