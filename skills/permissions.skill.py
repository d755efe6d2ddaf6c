"""The permission policy as a middleware skill (for ``middleware: [permissions]``)."""

from agent_apps.tools.middleware import permission_middleware

frontmatter = {
    "name": "permissions",
    "description": "Check each call against security.policy (allow / ask / deny by category and by "
    "skill name, different defaults for interactive and unattended runs) and ask the approver "
    "when the policy says ask. The tools plugin already installs this check globally; listing it "
    "again is harmless (each call is checked once).",
    "metadata": {"role": "middleware", "visibility": "hidden", "tags": ["security"]},
}


async def main(ctx, args):
    return await permission_middleware(ctx.target, ctx.manager.next)
