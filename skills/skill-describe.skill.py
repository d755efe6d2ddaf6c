"""Describe one skill the caller may use: its args schema, result schema, docs and its
typed Python stub (what the system prompt shows for the skills it lists)."""

frontmatter = {
    "name": "skill-describe",
    "description": "Describe a skill you can call: its description, its args (JSON Schema), its result and "
    "its Python stub (how to call it).",
    "params": {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "the skill's name"}},
        "required": ["name"],
        "additionalProperties": False,
    },
    "metadata": {"tags": ["discovery"], "returns": {"type": "object"}},
}


async def main(ctx, args):
    from agent_apps.errors import SkillNotFound

    cm = ctx.manager.context_manager
    visible = cm.visible_to(ctx.parent)
    names = {s.name for s in visible.tools + visible.middleware}
    if args["name"] not in names:
        raise SkillNotFound(args["name"], suggestions=[n for n in sorted(names) if args["name"] in n][:3])
    from agent_apps.stubs import skill_stub

    data = cm.describe(args["name"])
    data.pop("path", None)  # the agent has no use for host paths
    data["stub"] = skill_stub(cm.get(args["name"]))
    return data
