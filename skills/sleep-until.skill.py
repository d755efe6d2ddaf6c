"""Sleep until a point in time. From agent code in a durable run, the sleep is resumable:
the code computes the time from its journaled clock (``time.time() + 3600``), so a resumed
run asks for the same time and sleeps only what is left of it, and not at all once the
call is in the journal (docs/durability.md, "Sleeping")."""

import time

from agent_apps.context import epoch_seconds
from agent_apps.errors import ArgsInvalid

frontmatter = {
    "name": "sleep-until",
    "description": "Wait until a time: seconds since the epoch (time.time() + 60) or ISO 8601 text with a zone "
    "('2026-11-27T08:00:00+00:00'); at most a year ahead. Returns {until, slept_s}; slept_s is 0 when the time "
    "has passed.",
    "params": {
        "type": "object",
        "properties": {"until": {"type": ["number", "string"], "description": "when to wake up"}},
        "required": ["until"],
        "additionalProperties": False,
    },
    "metadata": {
        "category": "read",
        "visibility": "hidden",
        "returns": {"type": "object", "required": ["until", "slept_s"]},
    },
}

#: The furthest ahead a sleep may reach: a typo of a few zeros would never wake up.
MAX_AHEAD_S = 366 * 24 * 3600


async def main(ctx, args):
    try:
        until = epoch_seconds(args["until"])
    except ValueError as exc:
        raise ArgsInvalid(ctx.skill.name, "until", str(exc)) from None
    if until - time.time() > MAX_AHEAD_S:
        raise ArgsInvalid(ctx.skill.name, "until", f"{args['until']!r} is more than a year ahead")
    return {"until": until, "slept_s": round(await ctx.sleep_until(until), 3)}
