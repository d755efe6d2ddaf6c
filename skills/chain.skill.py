"""Run sub-agents one after another, each given the result of the one before (the first
the chain's ``input``); returns the last one's result. Each has at most the caller's
allowed-tools, and every step is checked before the first starts (docs/agent.md,
"Delegate, chain, consolidate")."""

from agent_apps.agent.sub_agents import as_text, check_spec, run_spec

frontmatter = {
    "name": "chain",
    "description": "Run sub-agents in order, each given the previous one's result (the first: input); returns the "
    "last one's result. Each has at most your allowed-tools.",
    "allowed-tools": "agent",
    "params": {
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "minItems": 1,
                "maxItems": 20,
                "description": "the sub-agents, in order",
                "items": {
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
            },
            "input": {"description": "what the first step is given (any JSON)"},
        },
        "required": ["steps"],
        "additionalProperties": False,
    },
    "metadata": {"tags": ["agent", "helpers"], "visibility": "hidden"},
}


async def main(ctx, args):
    calls = [check_spec(ctx, step, f"steps.{i}") for i, step in enumerate(args["steps"])]
    result, given = args.get("input"), "input" in args
    for i, call in enumerate(calls):
        if i == 0:
            context = f"Your input:\n{as_text(result)}" if given else None
        else:
            context = f"The result of the step before yours:\n{as_text(result)}"
        result = await run_spec(ctx, call, context=context)
    return result
