"""Agent provider: any Agent Client Protocol (ACP) agent CLI runs the model loop.

The CLI (``model.command``) is started for the run, and reaches the one ``invoke`` tool
through an MCP server that agent-apps serves on the loopback for that run only. Its
messages, thoughts and ``invoke`` calls are reported through the hook protocol, so the
trace, events, limits and structured returns work as with agent-strands. See
``session.py`` for how ACP maps onto the protocol, and docs/providers.md.

Config keys (``model.*``)::

    command: "gemini --acp"      # the ACP agent CLI: a string (split like a shell) or a list
    env: {GEMINI_API_KEY: "${GEMINI_API_KEY}"}   # its environment beyond PATH, HOME...;
                                 # or a list of host variable names to pass on
    cwd: /path/to/project        # its working directory (default: the manager's)
    startup_timeout: 30          # seconds for it to start and open the session
    mcp_transport: auto          # auto | http | stdio: how it reaches the invoke tool

Each key is declared in ``metadata.config_keys`` (for agent-kiro too), so that a config
file holding it is valid while a typo of it is an error.

The ``acp`` extra (``agent-client-protocol``) is imported only when this provider runs.
"""

frontmatter = {
    "name": "agent-acp",
    "description": "Agent provider that runs an Agent Client Protocol agent CLI (model.command) as the model loop, "
    "with the invoke tool served to it over MCP.",
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
    "metadata": {
        "tags": ["meta-internal", "provider"],
        "visibility": "hidden",
        # the model.* keys this provider (and agent-kiro) reads beyond the agent's own
        "config_keys": ["model.command", "model.env", "model.cwd", "model.startup_timeout", "model.mcp_transport"],
    },
}


async def main(ctx, args):
    from .loader import provide

    return await provide(ctx, args, "agent-acp")
