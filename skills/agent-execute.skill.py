"""Runs a prompt skill (``*.skill.md``, ``NAME/SKILL.md``): its body is the prompt, its
args the task, and its allowed-tools and ``metadata.returns`` bound the agent."""

import json

frontmatter = {
    "name": "agent-execute",
    "description": "Run the served prompt skill as an agent.",
    "allowed-tools": "agent",
    "metadata": {"tags": ["meta-internal"], "visibility": "hidden"},
}


async def main(ctx, args):
    served = ctx.target
    if served is None or served.skill.kind != "prompt":
        raise ValueError("agent-execute runs prompt skills; invoke the prompt skill itself instead")
    skill = served.skill
    task = dict(served.args)
    message = task.pop("task", None)
    if task:  # declared params beyond a free-form task: hand them over as JSON
        message = (f"{message}\n\n" if message else "") + "Arguments:\n" + json.dumps(task, indent=2)
    if skill.metadata.get("role") == "middleware" and served.target is not None:
        # middleware mode: the task is the call it serves (the system prompt shows it)
        serve = f"Serve the call of {served.target.skill.name}."
        message = f"{serve}\n\n{message}" if message else serve
    call = {
        "prompt": skill.body or "",
        "user_message": message or "Do the task.",
        "name": skill.name,
        # the args, exactly, for the model's code (no re-typing of paths or numbers)
        "memory": {"args": served.args},
    }
    if skill.allowed_tools is not None:
        call["allowed_tools"] = skill.allowed_tools
    if skill.returns is not None:
        call["returns"] = skill.returns
    return await ctx.manager.invoke("agent", call, target=served)
