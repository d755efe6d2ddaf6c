"""Merge many results into one with a model call: the results given, and those of
sub-agents it runs at the same time (each with at most the caller's allowed-tools);
``schema`` makes the merged answer a validated JSON value (docs/agent.md, "Delegate,
chain, consolidate")."""

import asyncio

from agent_apps.agent.sub_agents import as_text, check_spec, run_spec
from agent_apps.authority import Authority, sub_agent_args

frontmatter = {
    "name": "consolidate",
    "description": "Merge results into one answer with a model call: the results given, and those of sub-agents "
    "it runs in parallel (tasks, each with at most your allowed-tools). Returns the merged text, or the JSON "
    "value that matches schema.",
    "allowed-tools": "agent llm",
    "params": {
        "type": "object",
        "properties": {
            "results": {"type": "array", "maxItems": 100, "description": "results to merge (any JSON)"},
            "tasks": {
                "type": "array",
                "maxItems": 20,
                "description": "sub-agents to run in parallel",
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
            "instructions": {"type": "string", "description": "how to merge them"},
            "schema": {"type": ["object", "boolean"], "description": "JSON Schema of the merged answer"},
            "config": {"type": "object", "description": "model config for the merging call"},
        },
        "anyOf": [{"required": ["results"]}, {"required": ["tasks"]}],
        "additionalProperties": False,
    },
    "metadata": {"tags": ["agent", "helpers"], "visibility": "hidden"},
}

SYSTEM = (
    "You consolidate several results of work on one task into a single answer: keep what they agree on, "
    "resolve or point out what they contradict, and drop repetition. Keep names, numbers and paths exact."
)


async def main(ctx, args):
    cm = ctx.manager.context_manager
    calls = [check_spec(ctx, task, f"tasks.{i}") for i, task in enumerate(args.get("tasks") or ())]
    config = args.get("config") or {}
    if config:  # the merging call's model keys: those its caller could give a sub-agent
        sub_agent_args(Authority.of(ctx), cm.get("llm"), {"config": config}, cm.catalog.skills)
    results = list(args.get("results") or ())
    results += await asyncio.gather(*(run_spec(ctx, call) for call in calls))
    listed = "\n\n".join(f"Result {i}:\n{as_text(r)}" for i, r in enumerate(results, 1))
    system = SYSTEM + (f"\n\n{args['instructions']}" if args.get("instructions") else "")
    merge = {"prompt": listed, "system": system}
    merge.update({key: args[key] for key in ("schema", "config") if key in args})
    return await ctx.manager.invoke("llm", merge)
