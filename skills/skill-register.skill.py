"""Register a skill for this ContextManager from a JSON definition (docs/scheduling.md)."""

from agent_apps.errors import AgentAppsError, ArgsInvalid
from agent_apps.ref_args import registered_skill

frontmatter = {
    "name": "skill-register",
    "description": "Make a named skill for this ContextManager from a definition: a prompt skill "
    "{description, body, params?, returns?, tags?, model?} or an existing skill with fixed args "
    "{ref, args, description?, tags?}. It cannot shadow an existing skill; replace: true replaces one "
    "registered before. Returns the skill's description.",
    "params": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$", "maxLength": 64},
            "definition": {
                "type": "object",
                "properties": {
                    "description": {"type": "string", "maxLength": 1024},
                    "body": {"type": "string", "minLength": 1, "description": "a prompt skill's instructions"},
                    "params": {"type": "object", "description": "JSON Schema of the args"},
                    "returns": {"type": "object", "description": "JSON Schema of the result"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "allowed-tools": {"type": "string"},
                    "model": {"type": "object"},
                    "ref": {"type": "string", "pattern": "^[a-z0-9-]+$", "description": "the skill to wrap"},
                    "args": {"type": "object", "description": "the fixed args given to ref"},
                },
                "additionalProperties": False,
            },
            "replace": {"type": "boolean", "default": False, "description": "replace a skill registered before"},
        },
        "required": ["name", "definition"],
        "additionalProperties": False,
    },
    "metadata": {
        "category": "write",
        "visibility": "hidden",
        "tags": ["skills"],
        # the ref an alias calls and its fixed args: checked for whoever stores a call of this skill
        "refs": {"definition.ref": "definition.args"},
        "returns": {"type": "object", "required": ["name"]},
    },
}


async def main(ctx, args):
    skill = registered_skill(ctx, args["name"], args["definition"])
    try:
        ctx.manager.context_manager.register(skill, replace=args["replace"])
    except AgentAppsError as exc:
        raise ArgsInvalid(ctx.skill.name, "name", str(exc)) from None
    return skill.describe()
