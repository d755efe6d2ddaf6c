"""List the schedules of the state store, with each one's next due time and last run."""

from fnmatch import fnmatchcase

frontmatter = {
    "name": "schedule-list",
    "description": "List the scheduled skills: what runs when (every, cron or at), the next due time, "
    "and how the last run went.",
    "params": {
        "type": "object",
        "properties": {"match": {"type": "string", "description": "a glob over the skill run or the schedule's name"}},
        "additionalProperties": False,
    },
    "metadata": {"category": "read", "tags": ["schedule"], "returns": {"type": "array", "items": {"type": "object"}}},
}


async def main(ctx, args):
    store = ctx.manager.context_manager.state
    schedules = await store.call(store.schedules.list)
    match = args.get("match")
    return [
        info.to_json()
        for info in schedules
        if not match or fnmatchcase(info.ref, match) or (info.name and fnmatchcase(info.name, match))
    ]
