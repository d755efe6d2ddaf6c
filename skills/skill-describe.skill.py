"""Describe one skill the caller may use: its args schema, result schema and docs."""

frontmatter = {
    "name": "skill-describe",
    "description": "Describe a skill you can call: its description, its args (JSON Schema) and its result.",
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
    data = cm.describe(args["name"])
    data.pop("path", None)  # the agent has no use for host paths
    return data
