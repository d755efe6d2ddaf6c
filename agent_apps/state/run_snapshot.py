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
"""

from __future__ import annotations

import json
import socket
import time
from typing import TYPE_CHECKING, Any

from .errors import AlreadyExists, NotFound, SnapshotInvalid
from .runs import find_run, touch_run
from .snapshot import _line, _parse, check_export

if TYPE_CHECKING:
    from . import StateStore

__all__ = ["FORMAT", "VERSION", "export_run", "import_run", "tool_changes"]

FORMAT = "agent-apps/run"
VERSION = 1

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
    info = run.to_json()
    info.pop("process_gone", None)
    if run.process_gone:
        info["status"] = "interrupted"
    return {
        "format": FORMAT,
        "version": VERSION,
        "run": info,
        "agents": [{k: v for k, v in a.to_json().items()} for a in agents],
        "checkpoint": point.to_json() if point is not None else None,
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


def import_run(store: StateStore, snapshot: Any, *, source: str = "<snapshot>") -> dict[str, Any]:
    """Check ``snapshot`` (parsed, or its JSON text for line numbers) and write the run;
    returns its ``run`` part as written."""
    text = snapshot if isinstance(snapshot, str) else None
    data = _parse(text, source) if text is not None else snapshot
    _check(data, text, source)
    run = dict(data["run"])
    if run["status"] == "running":
        run["status"] = "interrupted"  # its process is elsewhere (or gone): resume takes it up
    usage = run.get("usage") or {}
    point = data.get("checkpoint")
    with store.db.write() as conn:
        try:
            find_run(conn, run["id"])
        except NotFound:
            pass
        else:
            raise AlreadyExists("run", run["id"], "it is in this store already; runs show lists it")
        conn.execute(
            "INSERT INTO runs (id, session_id, name, status, started_at, ended_at, pid, host, input_tokens, "
            "output_tokens, cost_usd) VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?)",
            (run["id"], run.get("session_id"), run["name"], run["status"], run["started_at"], run.get("ended_at"),
             int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0),
             float(run.get("cost_usd") or 0)),
        )  # fmt: skip
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
        touch_run(conn, run["id"])
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
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _version() -> str:
    from .. import __version__

    return __version__
