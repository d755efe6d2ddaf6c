"""Agent provider: the Kiro CLI (``kiro-cli acp``) as the model loop, through agent-acp.

Everything of ``agent-acp`` applies (its config keys included); only the default
``model.command`` differs. Kiro CLI 1.25 and later serve ACP with ``kiro-cli acp``;
sign in once with ``kiro-cli login`` first. Set ``model.command`` to run another build
(for example ``["kiro-cli", "acp", "--agent-engine=v3"]``).
"""

frontmatter = {
    "name": "agent-kiro",
    "description": "Agent provider that runs the Kiro CLI (kiro-cli acp) as the model loop, with the invoke tool "
    "served to it over MCP.",
    "params": {
        "type": "object",
        "properties": {
            "prompt": {"type": "string"},
            "config": {"type": "object"},
            "invoke_ref": {"type": "string", "pattern": "^callback://"},
            "hook_ref": {"type": "string", "pattern": "^callback://"},
            "user_message": {"type": "string"},
            "skill_name": {"type": "string"},
            "messages": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["prompt", "invoke_ref", "hook_ref"],
    },
    "metadata": {"tags": ["meta-internal", "provider"], "visibility": "hidden"},
}

KIRO_COMMAND = ["kiro-cli", "acp"]


async def main(ctx, args):
    from .loader import provide

    return await provide(ctx, args, "agent-kiro", KIRO_COMMAND)
