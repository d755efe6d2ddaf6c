"""Schedule a skill: stored in the state store, run by ``agent-apps scheduler``.

The ref and its args are checked now (docs/scheduling.md): a bare name of a skill that
exists, args valid against its params, a call its maker could make directly, exactly one
of every / cron / at (every at least 1 s when agent code makes it). The maker's authority
is stored with it, and each run runs under it. Which refs may be scheduled at all can be
narrowed by allowed-tools constraints: ``schedule-create(ref=my-*)``.
"""

import time

from agent_apps.authority import Authority
from agent_apps.ref_args import check_ref
from agent_apps.timing import When

#: The shortest ``every`` of a schedule made by agent code, in seconds.
AGENT_CODE_EVERY = 1.0

frontmatter = {
    "name": "schedule-create",
    "description": "Schedule a skill to run later, unattended, in 'agent-apps scheduler': every N seconds, "
    "on a 5-field cron expression, or once at an ISO 8601 time. Returns the schedule; its id deletes it.",
    "params": {
        "type": "object",
        "properties": {
            "ref": {"type": "string", "pattern": "^[a-z0-9-]+$", "description": "the skill to run, by name"},
            "args": {"type": "object", "default": {}, "description": "its args (checked now against its params)"},
            "every": {"type": "number", "exclusiveMinimum": 0, "description": "run every N seconds"},
            "cron": {
                "type": "string",
                "description": "run on this cron expression: minute hour day-of-month month day-of-week",
            },
            "tz": {"type": "string", "description": "the cron expression's time zone, e.g. Europe/Paris "
                   "(default: the scheduler's local time)"},
            "at": {"type": "string", "description": "run once at this ISO 8601 time, e.g. 2026-12-01T09:00"},
            "catch_up": {
                "enum": ["none", "one", "all"],
                "default": "one",
                "description": "due times missed while no scheduler ran: skip them, run the latest once, or run each",
            },
            "name": {
                "type": "string",
                "pattern": "^[a-z0-9][a-z0-9-]*$",
                "maxLength": 64,
                "description": "a unique name for the schedule (schedule-delete takes it too)",
            },
        },
        "required": ["ref"],
        "additionalProperties": False,
    },
    "metadata": {
        "category": "admin",
        "visibility": "hidden",
        "tags": ["schedule"],
        # the ref it stores and its args: a maker that schedules this skill has them checked too
        "refs": {"ref": "args"},
        "returns": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id", "next"]},
    },
}


async def main(ctx, args):
    now = time.time()
    authority = Authority.of(ctx)
    least = AGENT_CODE_EVERY if authority is not None and authority.untrusted else 0.0
    when = When.parse(args, now=now, skill=ctx.skill.name, least=least)
    check_ref(ctx, args["ref"], args["args"])
    store = ctx.manager.context_manager.state
    info = await store.call(
        store.schedules.create,
        ref=args["ref"],
        args=args["args"],
        when=when,
        catch_up=args["catch_up"],
        name=args.get("name"),
        created_by=authority.by if authority is not None else None,
        authority=authority,
        now=now,
    )
    return info.to_json()
