"""Run export and import: a versioned JSON snapshot of a run (``runs export|import``).

An export holds what the run is and what a resume needs, so a run checkpointed on one
machine can be approved and resumed on another:

* ``run`` and ``agents``: the run's row and its agents' reports and traces;
* ``checkpoint``: how to invoke its root again, the call waiting for approval
  (``pending``, also listed in ``pending_calls``) and the decision on it;
* ``journal``: every entry, in order (the source of truth for a resume);
* ``agents_state``: per agent path, read from the journal for people and tools: the
  system prompt layers, the tool names, the history (the window it was given, then
  every stored turn's messages) and the memory it started with;
* ``metadata``: who exported it, when, from which agent-apps.

Import checks the whole file before writing anything (naming the line and field of the
first problem) and refuses a run id the store has already. A run that was running when
exported comes back ``interrupted`` (its process is elsewhere): ``resume`` takes it up.

The file is untrusted data (CONTRACT section 13, docs/durability.md): it says how to
invoke the run's root again, and nothing more. Its root is a bare skill name, resolved
on the importing user's search path, with args agent code could pass it
(:func:`check_imported`); search-path entries, a working folder, an authority, call
config beyond the model keys agent code may set, and a decision on the pending call are
refused (the importing user decides with ``approve``). The imported run is marked so:
``resume`` checks its root again and runs it unattended. An export leaves out what only
made sense where the run ran (search path, working folder, authority, decision).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from ..authority import UNTRUSTED_CONFIG_KEYS, Authority, check_call_as
from ..errors import ToolNotAllowed
from ..run_record import id_problem
from ..skill import Skill, is_skill_name
from ._db import dump_json
from .errors import AlreadyExists, NotFound, SnapshotInvalid
from .runs import find_run, touch_run
from .sessions import session_id_problem
from .snapshot import _line, _parse, check_export

if TYPE_CHECKING:
    from . import StateStore

__all__ = ["FORMAT", "IMPORTED", "IMPORTED_KEYS", "VERSION", "check_imported", "export_run", "import_run",
           "tool_changes"]  # fmt: skip

FORMAT = "agent-apps/run"
VERSION = 1

#: What an imported run's invocation may hold: how to invoke its root again.
IMPORTED_KEYS = frozenset({"skill", "name", "args", "config", "session", "read_only", "attachments", "why"})
#: The authority an imported run's root is checked under: agent code's, with every
#: visible skill (no hidden or internal one, no wider sub-agent, no endpoint).
IMPORTED = Authority(None, True, "a run imported from a file")
#: Why an invocation key is refused on import (what it would take from the file).
_REFUSED = {
    "path": "search-path entries (its skills are found on this machine's search path: agent-apps resume --path DIR)",
    "cwd": "a working folder (it resumes in the working folder of agent-apps resume)",
    "authority": "an authority (whoever made it, the file cannot say what it may do here)",
    "imported": "an import mark",
}

_OBJECT_OR_NULL = {"type": ["object", "null"]}
SNAPSHOT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "format": {"const": FORMAT},
        "version": {"type": "integer", "minimum": 1},
        "run": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,100}$"},
                "name": {"type": "string"},
                "status": {"type": "string"},
                "session_id": {"type": ["string", "null"]},
                "tenant_id": {"type": ["string", "null"]},
                "started_at": {"type": "number"},
                "ended_at": {"type": ["number", "null"]},
                "usage": {"type": "object"},
                "cost_usd": {"type": "number", "minimum": 0},
            },
            "required": ["id", "name", "status", "started_at"],
        },
        "agents": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "parent_id": {"type": ["string", "null"]},
                    "depth": {"type": "integer", "minimum": 0},
                    "name": {"type": "string"},
                    "status": {"type": "string"},
                    "started_at": {"type": "number"},
                    "report": _OBJECT_OR_NULL,
                    "trace": {"type": ["array", "null"]},
                },
                "required": ["id", "depth", "name", "status", "started_at"],
            },
        },
        "checkpoint": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {
                        "invocation": {"type": "object"},
                        "pending": _OBJECT_OR_NULL,
                        "decision": _OBJECT_OR_NULL,
                        "attempts": {"type": "integer", "minimum": 0},
                    },
                    "required": ["invocation"],
                },
            ]
        },  # fmt: skip
        "journal": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "agent": {"type": "string"},
                    "key": {"type": "string"},
                    "kind": {"enum": ["start", "model", "code", "call", "turn"]},
                    "body": {"type": "object"},
                    "at": {"type": "number"},
                },
                "required": ["agent", "key", "kind", "body"],
            },
        },
    },
    "required": ["format", "version", "run", "agents", "journal"],
}


def export_run(store: StateStore, run_id: str) -> dict[str, Any]:
    run = store.runs.get(run_id)
    agents = store.runs.agents(run.id)
    point = store.journal.checkpoint(run.id)
    entries = store.journal.entries(run.id)
    info = run.to_json()  # a run whose process is gone is interrupted already
    return {
        "format": FORMAT,
        "version": VERSION,
        "run": info,
        "agents": [{k: v for k, v in a.to_json().items()} for a in agents],
        "checkpoint": _portable(point.to_json()) if point is not None else None,
        "pending_calls": [point.pending] if point is not None and point.pending else [],
        "journal": [e.to_json() for e in entries],
        "agents_state": _agents_state(entries),
        "metadata": {
            "exported_at": time.time(),
            "host": socket.gethostname(),
            "agent_apps": _version(),
            "store": store.path,
        },
    }


def import_run(
    store: StateStore, snapshot: Any, *, source: str = "<snapshot>", skills: Mapping[str, Skill] | None = None
) -> dict[str, Any]:
    """Check ``snapshot`` (parsed, or its JSON text for line numbers) and write the run;
    returns its ``run`` part as written. ``skills`` (a catalog, by name) checks the
    root's args against the skill they are for, when it is there."""
    text = snapshot if isinstance(snapshot, str) else None
    data = _parse(text, source) if text is not None else snapshot
    _check(data, text, source)
    run = dict(data["run"])
    if run["status"] == "running":
        run["status"] = "interrupted"  # its process is elsewhere (or gone): resume takes it up
    usage = run.get("usage") or {}
    point = data.get("checkpoint")
    if point is not None:
        check_imported(point["invocation"], skills, source=source, text=text)
        point = {**point, "invocation": {**point["invocation"], "imported": {"from": source, "at": time.time()}}}
    with store.db.write() as conn:
        try:
            find_run(conn, run["id"])
        except NotFound:
            pass
        else:
            raise AlreadyExists("run", run["id"], "it is in this store already; runs show lists it")
        made = conn.execute(
            "INSERT INTO runs (id, session_id, name, status, started_at, ended_at, pid, host, input_tokens, "
            "output_tokens, cost_usd, tenant_id) VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING",
            (run["id"], run.get("session_id"), run["name"], run["status"], run["started_at"], run.get("ended_at"),
             int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0),
             float(run.get("cost_usd") or 0), run.get("tenant_id")),
        ).rowcount  # fmt: skip
        if not made:  # imported by another process meanwhile
            raise AlreadyExists("run", run["id"], "it is in this store already; runs show lists it")
        conn.executemany(
            "INSERT INTO agents (run_id, id, parent_id, depth, name, session_id, status, started_at, ended_at, "
            "report, trace) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (run["id"], a["id"], a.get("parent_id"), a["depth"], a["name"], a.get("session_id"),
                 "interrupted" if a["status"] == "running" else a["status"], a["started_at"], a.get("ended_at"),
                 _dump(a.get("report")), _dump(a.get("trace")))
                for a in data["agents"]
            ],
        )  # fmt: skip
        store.journal.restore(conn, run["id"], point, data["journal"])
        touch_run(conn, store.db.dialect, run["id"])
    return run


def tool_changes(snapshot: dict[str, Any], cm: Any) -> list[str]:
    """Warnings for tools an agent of the run had that ``cm`` no longer offers it, or
    offers it now and it did not have (a resumed run's model sees today's tools)."""
    warnings = []
    for state in snapshot.get("agents_state") or ():
        then = set(state.get("tools") or ())
        skill = state.get("skill")
        if skill not in cm.catalog.skills:
            where = f"agent {state.get('name')} ({state['agent']})"
            warnings.append(f"{where}: its skill {skill!r} is not on the search path")
            continue
        visible = cm.visible_tools(state.get("allowed_tools"), caller=skill, exclude=state.get("exclude") or ())
        now = {s.name for s in visible.tools}
        removed, added = sorted(then - now), sorted(now - then)
        if removed:
            warnings.append(f"agent {state.get('name')} ({state['agent']}): tools removed since: {', '.join(removed)}")
        if added:
            warnings.append(f"agent {state.get('name')} ({state['agent']}): tools added since: {', '.join(added)}")
    return warnings


def check_imported(
    invocation: Mapping[str, Any],
    skills: Mapping[str, Skill] | None,
    *,
    source: str = "<snapshot>",
    text: str | None = None,
    stored: bool = False,
) -> None:
    """Raise :class:`SnapshotInvalid` (naming the field, and its line in ``text``) unless
    ``invocation``, an imported run's root, is one its file may ask for: only
    :data:`IMPORTED_KEYS`; a bare skill name; call config of model keys agent code may
    set; a valid session id; attachments as media parts, never paths; and, when
    ``skills`` has the skill, args that agent code with every visible skill could call
    it with (:data:`IMPORTED`). ``stored``: it is checked again as the store has it,
    with the mark the import gave it."""

    def refuse(field: str, problem: str) -> NoReturn:
        path = ["checkpoint", "invocation", *field.split(".")]
        raise SnapshotInvalid(problem, source=source, line=_line(text, path), field=".".join(path))

    for key in invocation:
        if key not in IMPORTED_KEYS and not (stored and key == "imported"):
            refuse(key, "an imported run may not bring " + _REFUSED.get(key, "this") + " from the file")
    skill = invocation.get("skill")
    if skill is not None and not is_skill_name(skill):
        refuse("skill", f"{str(skill)[:80]!r} is not a bare skill name ([a-z0-9-]+): an imported run's root is a "
               "skill of this machine's search path, never file://, inline://, a callback ref or a path")
    config = invocation.get("config") or {}
    if not isinstance(config, dict):
        refuse("config", "must be an object")
    for key, value in config.items():
        if key != "model" or not isinstance(value, dict):
            refuse(f"config.{key}", "an imported run may set only model config (the rest is this machine's)")
        for name in sorted(set(value) - UNTRUSTED_CONFIG_KEYS):
            refuse(f"config.model.{name}", "an imported run may set only model."
                   + ", model.".join(sorted(UNTRUSTED_CONFIG_KEYS)))
    session = invocation.get("session")
    problem = session_id_problem(session) if session is not None else None
    if problem:
        refuse("session", problem)
    if not isinstance(invocation.get("read_only", False), bool):
        refuse("read_only", "must be true or false")
    attachments = invocation.get("attachments")
    if attachments is not None and not isinstance(attachments, list):
        refuse("attachments", "must be a list")
    for index, part in enumerate(attachments or ()):
        if not isinstance(part, dict):  # a path would read a file of this machine
            refuse(f"attachments.{index}", "an imported run's attachments are media parts ({type, format, data}), "
                   "never paths")
    args = invocation.get("args")
    if args is not None and not isinstance(args, dict):
        refuse("args", "must be an object")
    target = skills.get(skill) if skills is not None and skill is not None else None
    if skills is not None and target is not None:
        try:
            check_call_as(IMPORTED, target, args, skills)
        except ToolNotAllowed as exc:
            refuse(f"args.{exc.path}" if exc.path else "skill", f"{exc.reason} (an imported run's root gets what "
                   f"agent code with every visible skill could ask of {target.name})")


def _portable(point: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint as an export carries it: its invocation without what only made sense
    where the run ran (search path, working folder, authority), and no decision (the
    importing user decides)."""
    invocation = {k: v for k, v in point["invocation"].items() if k in IMPORTED_KEYS}
    return {**point, "invocation": invocation, "decision": None}


def _agents_state(entries: list[Any]) -> list[dict[str, Any]]:
    states: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.kind == "start":
            body = entry.body
            states[entry.agent] = {
                "agent": entry.agent,
                "name": body.get("name"),
                "skill": body.get("skill"),
                "system": body.get("system") or [],
                "tools": body.get("tools") or [],
                "allowed_tools": body.get("allowed_tools"),
                "exclude": body.get("exclude") or [],
                "memory": body.get("memory"),
                "history": list(body.get("window") or ()),
            }
        elif entry.kind == "turn" and entry.agent in states:
            states[entry.agent]["history"] += entry.body.get("messages") or []
    return list(states.values())


def _check(data: Any, text: str | None, source: str) -> None:
    check_export(data, text, source, format=FORMAT, version=VERSION, schema=SNAPSHOT_SCHEMA, kind="run")
    tenant = data["run"].get("tenant_id")
    problem = id_problem(tenant, "tenant id") if tenant is not None else None
    if problem:
        raise SnapshotInvalid(problem, source=source, line=_line(text, ["run", "tenant_id"]), field="run.tenant_id")
    point = data.get("checkpoint")
    if point is not None and point.get("decision") is not None:
        raise SnapshotInvalid(
            "an imported run's pending call is decided here (agent-apps approve RUN), not in the file",
            source=source,
            line=_line(text, ["checkpoint", "decision"]),
            field="checkpoint.decision",
        )
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(data["journal"]):
        key = (entry["agent"], entry["key"])
        if key in seen:
            raise SnapshotInvalid(
                f"entry {entry['key']!r} of agent {entry['agent']!r} appears twice",
                source=source,
                line=_line(text, ["journal", index, "key"]),
                field=f"journal[{index}].key",
            )
        seen.add(key)


def _dump(value: Any) -> str | None:
    return None if value is None else dump_json(value)


def _version() -> str:
    from .. import __version__

    return __version__
