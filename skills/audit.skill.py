"""The tool-level audit log: one JSON line per invocation of every skill it wraps.

Activate it for everything (``middleware: [audit]`` in a config file), for the skills
below a directory (that directory's ``agent-apps.yaml``), for one skill (frontmatter) or
for one call (``invoke(..., middleware=["audit"])``). Where the lines go is config, not
a param, so that whoever activates it cannot point it at another file::

    audit:
      file: /var/log/agent-apps/audit.jsonl   # '-' for stderr; default: audit.jsonl in
                                              # the agent-apps home (~/.agent-apps)

Each line::

    {"time": "2026-05-09T12:00:00.123456+00:00", "skill": "file-read", "id": "3f2a1c-18",
     "caller": "agent-code", "caller_id": "3f2a1c-17", "run": "3f2a1c-9", "depth": 3,
     "args": "{\"path\": \"notes.txt\"}", "duration_ms": 1.25, "ok": true}

``run`` is the agent run the call belongs to (the id of the invocation the agent serves),
``caller``/``caller_id`` the invocation that made the call; failures have ``"ok": false``
and ``"error": {"type", "message"}``. Values of args whose names look secret (key, token,
secret, password, authorization, credential) are written as ``"***"``. Each line is one
``write`` to the file opened with ``O_APPEND``, so concurrent processes do not mix their
lines, and a rotated file is picked up at the next line.
"""

import datetime
import json
import os
import re
import sys
import time

from agent_apps.host_files import private_folder

frontmatter = {
    "description": "Middleware: append one JSON line per invocation (skill, args, duration, ok or error, "
    "caller and agent run) to an audit log.",
    "params": {
        "type": "object",
        "properties": {
            "level": {
                "enum": ["info", "error"],
                "default": "info",
                "description": "info: every invocation; error: failed ones only",
            },
            "args_chars": {
                "type": "integer",
                "minimum": 0,
                "default": 300,
                "description": "the args are written as JSON cut to this many characters (0: left out)",
            },
        },
        "additionalProperties": False,
    },
    # hidden: an operator's tool, not one for the model (left out of agents' prompts)
    "metadata": {"role": "middleware", "tags": ["audit"], "visibility": "hidden", "config_keys": ["audit.file"]},
}

_SECRET = re.compile(r"key|token|secret|password|passwd|authorization|credential", re.IGNORECASE)


async def main(ctx, args):
    start = time.perf_counter()
    error = None
    try:
        return await ctx.manager.next()
    except BaseException as exc:  # cancellations are logged too, then go on
        error = exc
        raise
    finally:
        if error is not None or args["level"] == "info":
            _write(ctx, args, _record(ctx, args, time.perf_counter() - start, error))


def _record(ctx, args, seconds, error):
    served = ctx.target
    caller = served.parent
    run = (served.nonlocals.get("agent") or {}).get("context_id")
    record = {
        "time": datetime.datetime.now(datetime.UTC).isoformat(),
        "skill": served.skill.name,
        "id": served.id,
        "caller": caller.skill.name if caller is not None else None,
        "caller_id": caller.id if caller is not None else None,
        "run": run,
        "depth": served.depth,
    }
    if args["args_chars"]:
        text = json.dumps(_redacted(served.args), ensure_ascii=False, default=repr)
        record["args"] = text if len(text) <= args["args_chars"] else text[: args["args_chars"]] + "…"
    record["duration_ms"] = round(seconds * 1000, 3)
    record["ok"] = error is None
    if error is not None:
        message = str(error) or type(error).__name__
        record["error"] = {"type": type(error).__name__, "message": message[:1000]}
    return record


def _redacted(value):
    if isinstance(value, dict):
        return {k: "***" if _SECRET.search(str(k)) else _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def _write(ctx, args, record):
    line = json.dumps(record, ensure_ascii=False, default=repr) + "\n"
    target = _log_file(ctx)
    if target == "-":
        sys.stderr.write(line)
        sys.stderr.flush()
        return
    private_folder(os.path.dirname(target))
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _log_file(ctx):
    """``audit.file`` from the served skill's config (cached on it until a reload)."""
    skill = ctx.target.skill
    target = skill._cache.get("audit.file")
    if target is None:
        cm = ctx.manager.context_manager
        configured = (cm.config_for(skill).values.get("audit") or {}).get("file")
        if configured and configured != "-":
            configured = str(cm.cwd / os.path.expanduser(configured))
        target = skill._cache["audit.file"] = configured or str(cm.home / "audit.jsonl")
    return target
