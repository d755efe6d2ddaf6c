"""One model call from a skill, with no tools: ``await ctx.llm(...)`` in a code skill,
``await ctx.manager.invoke("llm", {...})`` from agent code (docs/skills.md, "One model
call"). It uses the caller's model config, budgets and price table."""

frontmatter = {
    "name": "llm",
    "description": "Ask the model once, with no tools: a prompt (or messages), an optional system prompt and an "
    "optional JSON Schema for a structured answer. Returns the model's text, or the JSON value that matches "
    "the schema.",
    # it calls the provider skill only (ask() checks that config.agent names one)
    "allowed-tools": "*",
    "params": {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "the user's message"},
            "messages": {
                "type": "array",
                "minItems": 1,
                "maxItems": 1000,
                "description": "the conversation, oldest first; the user's message last (or prompt after it)",
                "items": {
                    "type": "object",
                    "properties": {"role": {"enum": ["user", "assistant"]}, "text": {"type": "string"}},
                    "required": ["role", "text"],
                    "additionalProperties": False,
                },
            },
            "system": {"type": "string", "description": "the system prompt"},
            "schema": {"type": ["object", "boolean"], "description": "JSON Schema the answer must match"},
            "config": {"type": "object", "description": "model config for this call (model_id, temperature, ...)"},
        },
        "anyOf": [{"required": ["prompt"]}, {"required": ["messages"]}],
        "additionalProperties": False,
    },
    "metadata": {"tags": ["model"]},
}


async def main(ctx, args):
    from agent_apps.agent.one_shot import ask

    return await ask(ctx, args)
