"""End an event subscription made by event-subscribe (a persisted one everywhere)."""

from agent_apps.state import NotFound

frontmatter = {
    "name": "event-unsubscribe",
    "description": "End an event subscription by the id event-subscribe returned; a persisted one is also "
    "removed from the state store.",
    "params": {
        "type": "object",
        "properties": {"id": {"type": "string", "minLength": 1, "description": "the subscription's id"}},
        "required": ["id"],
        "additionalProperties": False,
    },
    "metadata": {
        "category": "write",
        "visibility": "hidden",
        "tags": ["events"],
        "returns": {"type": "object", "required": ["id"]},
    },
}


async def main(ctx, args):
    ident = args["id"]
    cm = ctx.manager.context_manager
    found = cm.events.unsubscribe(ident)
    if ident.startswith("psub-"):
        store = cm.state
        try:
            await store.call(store.subscriptions.remove, ident)
            found = True
        except NotFound:
            pass
    if not found:
        raise NotFound("subscription", ident, "event-subscribe returns the ids")
    return {"id": ident, "removed": True}
