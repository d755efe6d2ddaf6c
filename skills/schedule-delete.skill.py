"""Delete a schedule (by id or name); the runs it made stay recorded."""

frontmatter = {
    "name": "schedule-delete",
    "description": "Delete a schedule by its id or name: it runs no more. "
    "Its past runs stay in 'agent-apps runs list'.",
    "params": {
        "type": "object",
        "properties": {"id": {"type": "string", "minLength": 1, "description": "the schedule's id or name"}},
        "required": ["id"],
        "additionalProperties": False,
    },
    "metadata": {
        "category": "write",
        "visibility": "hidden",
        "tags": ["schedule"],
        "returns": {"type": "object", "required": ["id"]},
    },
}


async def main(ctx, args):
    store = ctx.manager.context_manager.state
    info = await store.call(store.schedules.delete, args["id"])
    return {"id": info.id, "name": info.name, "ref": info.ref, "deleted": True}
