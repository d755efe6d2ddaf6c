"""Load guidance skills into the agent's context: their full text and their files."""

frontmatter = {
    "name": "load-skills",
    "description": "Load guidance skills by name: returns the full instructions of each and the files in its "
    "folder (which file-read may then read). Guidance skills are listed in your instructions by name and "
    "description; skill-list marks them (guidance).",
    "params": {
        "type": "object",
        "properties": {
            "skills": {
                "type": "array",
                "items": {"type": "string", "pattern": "^[a-z0-9-]+$"},
                "minItems": 1,
                "maxItems": 20,
                "description": "names of guidance skills",
            }
        },
        "required": ["skills"],
        "additionalProperties": False,
    },
    "metadata": {"category": "read", "tags": ["guidance"], "returns": {"type": "string"}},
}


async def main(ctx, args):
    import difflib

    from agent_apps.agent.guidance import remember, render
    from agent_apps.errors import ArgsInvalid

    visible = ctx.manager.context_manager.visible_to(ctx.parent)
    guidance = {s.name: s for s in visible.tools if s.guidance}
    chosen = []
    for index, name in enumerate(args["skills"]):
        skill = guidance.get(name)
        if skill is None:
            close = difflib.get_close_matches(name, list(guidance), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            known = ", ".join(sorted(guidance)) or "(none)"
            raise ArgsInvalid(
                "load-skills", f"skills[{index}]", f"{name!r} is not a guidance skill you can load{hint}; "
                f"those you can: {known}"
            )
        if skill not in chosen:
            chosen.append(skill)
    await remember(ctx, chosen)
    return "\n---\n\n".join(render(skill) for skill in chosen)
