"""Search the agent's memory: the workspace's MEMORY.md, AGENTS.md and HEARTBEAT.md,
full-text indexed in the state store (BM25) and, with the extra ``embeddings``, ranked
by meaning too (hybrid; docs/context.md). The agent uses it to fill the memory section
of its system prompt, and its code may call it to look further."""

frontmatter = {
    "name": "memory-search",
    "description": "Search your memory (MEMORY.md, AGENTS.md and HEARTBEAT.md of your workspace) for entries "
    "about a topic; returns the best matching entries, best first.",
    "params": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 10000, "description": "words to look for"},
            "k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5, "description": "entries at most"},
            "workspace": {
                "type": "string",
                "description": "the workspace folder; agent code searches its own agent's and may not set it",
            },
            "search": {
                "enum": ["auto", "hybrid", "fts"],
                "description": "hybrid: by words and meaning; fts: by words only; auto (default): hybrid when "
                "the embedding model is installed",
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
    import asyncio
    from pathlib import Path

    from agent_apps.agent.settings import memory_search_options
    from agent_apps.agent.workspace import MEMORY_FILES
    from agent_apps.context import agent_scope
    from agent_apps.errors import ArgsInvalid
    from agent_apps.state.embeddings import embedder_for
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
    files = [folder / name for name in MEMORY_FILES]
    # model.context.search and embedding_model: the agent's (whose run or code this call
    # serves), else this call's own config; the call's search arg comes first
    agent = ctx.nonlocals.get("agent")
    if isinstance(agent, dict) and "memory" in agent:
        options = agent["memory"] or {}
    else:
        options = memory_search_options(ctx, ctx.manager.config().get("model") or {}, cm.cwd)
    embedder = await asyncio.to_thread(
        embedder_for, args.get("search") or options.get("search") or "auto", options.get("embedding_model")
    )
    store = cm.state
    denied = path_policy(ctx).denied_for_files_of(folder)
    if embedder is None:
        hits = await store.call(store.memory.search, files, args["query"], k=args["k"], denied=denied)
    else:  # embedding is slow work: not on the store's thread, where it would hold up the rest
        hits = await asyncio.to_thread(
            store.memory.search, files, args["query"], k=args["k"], denied=denied, embedder=embedder
        )
    return [{**hit, "file": Path(hit["file"]).name} for hit in hits]  # the file's name in the workspace
