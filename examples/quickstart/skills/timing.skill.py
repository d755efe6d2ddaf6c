"""A middleware skill: wraps an invocation, measures it, leaves the result alone."""

import time

frontmatter = {
    "description": "Record how long the wrapped skill took in ctx.locals['timing'].",
    "params": {"type": "object", "properties": {"label": {"type": "string", "default": "took"}}},
    "metadata": {"role": "middleware"},
}


async def main(ctx, args):
    start = time.perf_counter()
    try:
        return await ctx.manager.next()
    finally:
        ctx.locals["timing"] = {args["label"]: time.perf_counter() - start, "skill": ctx.target.skill.name}
