"""The agent, as a skill: discovers tools, runs the model's code in a sandbox, enforces
limits and returns, and delegates the LLM loop to a provider skill (``model.agent``)."""

frontmatter = {
    "name": "agent",
    "description": "Run an LLM agent that acts by writing Python code calling skills; returns its result.",
    "allowed-tools": "*",
    "params": {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "the system prompt"},
            "user_message": {"type": "string", "description": "the task: the first user message"},
            "config": {"type": "object", "description": "model config; the call layer of the cascade"},
            "allowed_tools": {"type": "string", "description": "space-delimited allowed-tools specs for the agent"},
            "returns": {"type": ["object", "boolean"], "description": "JSON Schema the result must match"},
            "events": {"type": "string", "description": "event-bus topic for live agent events"},
            "name": {"type": "string", "description": "display name in logs and events"},
            "memory": {"type": "object", "description": "JSON data seeded into the sandbox's memory"},
            "attachments": {
                "type": "array",
                "items": {"type": "object"},
                "description": "images and documents for the user message: "
                "[{type: image|document, format, data (base64), name?}]",
            },
            "context": {
                "type": ["string", "object"],
                "description": "per-task context: a dynamic layer of the system prompt after the stable ones; "
                "a text, or {text, merge_parent, metadata}",
            },
        },
        "additionalProperties": False,
    },
    "metadata": {"tags": ["agent"]},
}


async def main(ctx, args):
    from agent_apps.agent import AgentRun

    return await AgentRun(ctx, args).run()
