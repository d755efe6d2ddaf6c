"""Search the agent's memory: the workspace's MEMORY.md and AGENTS.md, full-text indexed
in the state store (BM25). The agent uses it to fill the memory section of its system
prompt, and its code may call it to look further."""

frontmatter = {
    "name": "memory-search",
    "description": "Search your memory (MEMORY.md and AGENTS.md of your workspace) for entries about a "
    "topic; returns the best matching entries, best first.",
    "params": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 10000, "description": "words to look for"},
            "k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5, "description": "entries at most"},
            "workspace": {
                "type": "string",
                "description": "the workspace folder; agent code searches its own agent's and may not set it",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "metadata": {
        "category": "read",
        "tags": ["memory"],
        "returns": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "file": {"type": "string"},
                    "line": {"type": "integer"},
                    "heading": {"type": "string"},
                    "score": {"type": "number"},
                },
                "required": ["text", "file", "line"],
            },
        },
    },
}


async def main(ctx, args):
    from pathlib import Path

    from agent_apps.agent.workspace import MEMORY_FILES
    from agent_apps.context import agent_scope
    from agent_apps.errors import ArgsInvalid
    from agent_apps.tools import path_policy

    scope = agent_scope(ctx)
    if scope is not None:  # agent code: its own agent's workspace, nothing else
        if "workspace" in args:
            raise ArgsInvalid("memory-search", "workspace", "agent code searches its own agent's workspace")
        workspace = scope.get("workspace")
    else:
        workspace = args.get("workspace")
    if not workspace:
        return []
    cm = ctx.manager.context_manager
    folder = cm.cwd / Path(workspace).expanduser()
    store = cm.state
    files = [folder / name for name in MEMORY_FILES]
    denied = path_policy(ctx).denied_for_files_of(folder)
    hits = await store.call(store.memory.search, files, args["query"], k=args["k"], denied=denied)
    return [{**hit, "file": Path(hit["file"]).name} for hit in hits]  # the file's name in the workspace
