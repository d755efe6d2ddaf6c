"""Invoke a skill with every event on a topic: for this ContextManager's lifetime, or
stored in the state store with ``persist: true`` (docs/scheduling.md). Each delivery
runs under the authority of whoever subscribed (docs/security.md, "Deferred work")."""

import secrets

from agent_apps.authority import Authority
from agent_apps.errors import ArgsInvalid
from agent_apps.ref_args import check_ref
from agent_apps.validation import validate_args

frontmatter = {
    "name": "event-subscribe",
    "description": "Subscribe a skill to an event topic (a glob such as 'agent.*'): it is invoked with "
    "{topic, event} for each event. Lives as long as this ContextManager, or with persist: true is "
    "stored and subscribed again wherever the state store is opened. Returns the id for event-unsubscribe.",
    "params": {
        "type": "object",
        "properties": {
            "topic": {"type": "string", "minLength": 1, "maxLength": 200, "description": "a topic, or a glob"},
            "ref": {"type": "string", "pattern": "^[a-z0-9-]+$", "description": "the skill to invoke, by name"},
            "persist": {"type": "boolean", "default": False, "description": "store it in the state store"},
        },
        "required": ["topic", "ref"],
        "additionalProperties": False,
    },
    "metadata": {
        "category": "admin",
        "visibility": "hidden",
        "tags": ["events"],
        "returns": {"type": "object", "required": ["id", "topic", "ref", "persist"]},
    },
}


async def main(ctx, args):
    topic, ref = args["topic"], args["ref"]
    skill = check_ref(ctx, ref, {"topic": topic, "event": {}}, validate=False)
    try:  # the event's own fields vary; the skill must at least take {topic, event}
        validate_args(skill, {"topic": topic, "event": {}})
    except ArgsInvalid as exc:
        if not exc.path.startswith("event"):
            raise ArgsInvalid(ctx.skill.name, "ref", f"{ref!r} cannot take {{topic, event}} args: {exc}") from None
    cm = ctx.manager.context_manager
    authority = Authority.of(ctx)
    if args["persist"]:
        store = cm.state
        by = authority.by if authority is not None else None
        info = await store.call(store.subscriptions.add, topic, ref, created_by=by, authority=authority)
        ident = info.id
    else:
        ident = "sub-" + secrets.token_hex(6)
    cm.events.subscribe(topic, ref, id=ident, authority=authority)
    return {"id": ident, "topic": topic, "ref": ref, "persist": args["persist"]}
