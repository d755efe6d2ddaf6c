"""List the skills the caller may use: how an agent in discovery mode explores."""

from fnmatch import fnmatchcase

frontmatter = {
    "name": "skill-list",
    "description": "List the skills you can call, with one-line descriptions. "
    "Filter by a glob over names (e.g. 'file-*'), a word in the description, or a tag.",
    "params": {
        "type": "object",
        "properties": {
            "match": {
                "type": "string",
                "maxLength": 200,
                "description": "glob over names, or a word to find in descriptions",
            },
            "tag": {"type": "string", "description": "only skills with this tag"},
        },
        "additionalProperties": False,
    },
    "metadata": {
        "tags": ["discovery"],
        "returns": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "description": {"type": "string"}},
                "required": ["name", "description"],
            },
        },
    },
}


async def main(ctx, args):
    visible = ctx.manager.context_manager.visible_to(ctx.parent)
    match = args.get("match")
    out = []
    for skill in visible.tools + visible.middleware:
        if args.get("tag") and args["tag"] not in skill.tags:
            continue
        if match and not (fnmatchcase(skill.name, match) or match.lower() in skill.description.lower()):
            continue
        description = skill.description.strip().splitlines()[0] if skill.description.strip() else ""
        if skill.is_middleware:
            description = f"(middleware) {description}"
        elif skill.guidance:  # read it with load-skills rather than call it
            description = f"(guidance) {description}"
        out.append({"name": skill.name, "description": description})
    return out
