"""The ContextManager's operations as a skill, for code that reaches agent-apps only
through skills: a provider, a program on the other side of an MCP endpoint
(``expose_refs(ctx, ["context-manager"])``), a skill invoked by ref.

Every operation acts on behalf of the caller (the invocation that called this skill):
``invoke`` runs as the caller's own child, so the caller's allowed-tools, its hidden
skills and its untrusted flag apply, never this skill's; ``list``, ``describe`` and
``config`` show only what the caller may see. Called from outside any skill (Python,
the command line), the caller is the outside world, which may see everything.

Hidden and internal: a caller must name it in its allowed-tools, and agent code may
never call it (it would be a bridge around the sandbox's rules).
"""

frontmatter = {
    "name": "context-manager",
    "description": "The ContextManager's operations for programs that only call skills: "
    "invoke a ref, list and describe the skills the caller may use, resolve a skill's config.",
    "params": {
        "type": "object",
        "properties": {
            "op": {"enum": ["invoke", "list", "describe", "config"]},
            "ref": {"type": "string", "description": "invoke: a skill name, or any ref the caller may use"},
            "args": {"type": "object", "description": "invoke: the args"},
            "middleware": {
                "type": "array",
                "items": {"type": "string"},
                "description": "invoke: call-time middleware, 'name' or 'name(key=value)'",
            },
            "name": {"type": "string", "description": "describe, config: the skill"},
            "match": {"type": "string", "description": "list: a glob over names, or a word of the description"},
            "tag": {"type": "string", "description": "list: only skills with this tag"},
        },
        "required": ["op"],
        "additionalProperties": False,
        "allOf": [
            {"if": {"properties": {"op": {"const": "invoke"}}}, "then": {"required": ["ref"]}},
            {"if": {"properties": {"op": {"const": "describe"}}}, "then": {"required": ["name"]}},
        ],
    },
    "metadata": {"tags": ["meta-internal"], "visibility": "hidden"},
}


async def main(ctx, args):
    cm = ctx.manager.context_manager
    caller = ctx.parent  # None: called from outside any skill
    op = args["op"]
    if op == "invoke":
        options = {"signal": ctx.signal}
        if args.get("middleware"):
            options["middleware"] = args["middleware"]
        return await cm._invoke(args["ref"], args.get("args"), caller, options)
    if op == "list":
        query = {k: args[k] for k in ("match", "tag") if k in args}
        return await _discover(cm, caller, "skill-list", query, ctx)
    if op == "describe":
        return await _discover(cm, caller, "skill-describe", {"name": args["name"]}, ctx)
    # config: the cascade for a skill the caller may see (or the global one)
    name = args.get("name")
    if name is not None:
        await _discover(cm, caller, "skill-describe", {"name": name}, ctx)  # SkillNotFound unless visible
    resolved = cm.config_for(name) if name is not None else cm.cascade.resolve(None)
    return {"values": resolved.values, "sources": resolved.sources}


async def _discover(cm, caller, skill, query, ctx):
    """``skill-list``/``skill-describe`` as the caller would see them: run as the
    caller's child, as a system call (listing what one may use needs no permission)."""
    return await cm._invoke(skill, query, caller, {"signal": ctx.signal, "system": True})
