"""Session export and import: a versioned JSON snapshot.

An export holds everything that makes the session what it is (messages with their
numbers, run ids and times, memory, summary, token anchor, metadata); importing it gives
back the same session, so ``export(import(export(s))) == export(s)``. Import checks the
whole file before writing anything and names the line and field of the first problem.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import AlreadyExists, NotFound, SnapshotInvalid
from .messages import MESSAGE_SCHEMA, Message, estimate_tokens, stale_form

if TYPE_CHECKING:
    from ._db import Database

__all__ = ["FORMAT", "VERSION", "export_session", "import_session"]

FORMAT = "agent-apps/session"
VERSION = 1

_NUMBER = {"type": "number"}
_COUNT = {"type": "integer", "minimum": 0}
SNAPSHOT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "format": {"const": FORMAT},
        "version": {"type": "integer", "minimum": 1},
        "id": {"type": "string"},
        "created_at": _NUMBER,
        "updated_at": _NUMBER,
        "last_seq": _COUNT,
        "memory": {"type": ["object", "null"]},
        "summary": {"type": ["string", "null"]},
        "summary_through": _COUNT,
        "anchor": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "properties": {"tokens": _COUNT, "seq": _COUNT},
                    "required": ["tokens", "seq"],
                    "additionalProperties": False,
                },
            ]
        },
        "meta": {
            "type": "object",
            # guidance the session's agents loaded, named as skills of the search path
            "properties": {"loaded_skills": {"type": "array", "items": {"type": "string", "pattern": "^[a-z0-9-]+$"}}},
        },
        "messages": {
            "type": "array",
            "items": {
                "allOf": [
                    MESSAGE_SCHEMA,
                    {
                        "properties": {
                            "seq": {"type": "integer", "minimum": 1},
                            "created_at": _NUMBER,
                            "run_id": {"type": ["string", "null"]},
                        },
                        "required": ["seq"],
                    },
                ]
            },
        },
    },
    "required": ["format", "version", "id", "messages"],
}

_ENVELOPE = ("seq", "created_at", "run_id")


def export_session(db: Database, session_id: str) -> dict[str, Any]:
    with db.read() as conn:
        row = conn.execute(
            "SELECT created_at, updated_at, seq, memory, summary, summary_through, anchor_tokens, anchor_seq, meta "
            "FROM sessions WHERE id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            raise NotFound("session", session_id, "agent-apps sessions list shows the sessions")
        rows = conn.execute(
            "SELECT seq, created_at, run_id, body FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
    created, updated, last, memory, summary, through, anchor_tokens, anchor_seq, meta = row
    return {
        "format": FORMAT,
        "version": VERSION,
        "id": session_id,
        "created_at": created,
        "updated_at": updated,
        "last_seq": last,
        "memory": json.loads(memory) if memory is not None else None,
        "summary": summary,
        "summary_through": through,
        "anchor": {"tokens": anchor_tokens, "seq": anchor_seq} if anchor_tokens is not None else None,
        "meta": json.loads(meta) if meta else {},
        "messages": [{"seq": seq, "created_at": at, "run_id": run, **json.loads(body)} for seq, at, run, body in rows],
    }


def import_session(db: Database, snapshot: Any, *, as_id: str | None = None, source: str = "<snapshot>") -> str:
    """Check ``snapshot`` (a parsed export, or its JSON text for line numbers) and
    create the session; returns its id."""
    from .sessions import session_id_problem

    text = snapshot if isinstance(snapshot, str) else None
    data = _parse(text, source) if text is not None else snapshot
    _check(data, text, source)
    session_id = as_id or data["id"]
    problem = session_id_problem(session_id)
    if problem:
        field = None if as_id else "id"
        raise SnapshotInvalid(problem, source=source, line=_line(text, ["id"]) if field else None, field=field)
    messages = data["messages"]
    now = time.time()
    rows = []
    for item in messages:
        message: Message = {k: v for k, v in item.items() if k not in _ENVELOPE}  # type: ignore[assignment]
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        at = item.get("created_at", now)
        stale = stale_form(message)
        rows.append(
            (session_id, item["seq"], item.get("run_id"), at, message["role"], estimate_tokens(message), body,
             None if stale is None else json.dumps(stale, ensure_ascii=False, separators=(",", ":")))
        )  # fmt: skip
    last = max([data.get("last_seq", 0), *(item["seq"] for item in messages)])
    anchor = data.get("anchor") or {}
    memory = data.get("memory")
    with db.write() as conn:
        made = conn.execute(
            "INSERT INTO sessions (id, created_at, updated_at, seq, tokens, memory, summary, summary_through, "
            "anchor_tokens, anchor_seq, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (
                session_id,
                data.get("created_at", now),
                data.get("updated_at", now),
                last,
                sum(row[5] for row in rows),
                None if memory is None else json.dumps(memory, ensure_ascii=False, separators=(",", ":")),
                data.get("summary"),
                data.get("summary_through", 0),
                anchor.get("tokens"),
                anchor.get("seq"),
                json.dumps(data.get("meta") or {}, ensure_ascii=False, separators=(",", ":")),
            ),
        ).rowcount
        if not made:
            raise AlreadyExists("session", session_id, "import it under another id with --as NEW, or rm it first")
        conn.executemany(
            "INSERT INTO messages (session_id, seq, run_id, created_at, role, tokens, body, stale) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    return session_id


# -- checking ----------------------------------------------------------------------------


def _parse(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotInvalid(f"not valid JSON: {exc.msg}", source=source, line=exc.lineno) from None


def check_export(
    data: Any, text: str | None, source: str, *, format: str, version: int, schema: dict[str, Any], kind: str
) -> None:
    """Refuse what is not an export of ``format`` (of a ``kind``: session, run), is
    newer than ``version``, or breaks ``schema``, naming the line and field."""
    if not isinstance(data, dict) or data.get("format") != format:
        how = f"agent-apps {kind}s export {'ID' if kind == 'session' else kind.upper()}"
        raise SnapshotInvalid(
            f"not an agent-apps {kind} export (its 'format' must be {format!r}; make one with {how})",
            source=source,
            line=_line(text, ["format"]) if isinstance(data, dict) else 1,
            field="format" if isinstance(data, dict) else None,
        )
    found = data.get("version")
    if isinstance(found, int) and not isinstance(found, bool) and found > version:
        raise SnapshotInvalid(
            f"written by a newer agent-apps (export version {found}; this version reads up to {version})",
            source=source,
            line=_line(text, ["version"]),
            field="version",
        )
    import jsonschema

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if error is not None:
        path = list(error.absolute_path)
        raise SnapshotInvalid(error.message, source=source, line=_line(text, path), field=_dotted(path) or None)


def _check(data: Any, text: str | None, source: str) -> None:
    check_export(data, text, source, format=FORMAT, version=VERSION, schema=SNAPSHOT_SCHEMA, kind="session")
    previous = 0
    for index, item in enumerate(data["messages"]):
        if item["seq"] <= previous:
            raise SnapshotInvalid(
                f"message numbers must increase (got {item['seq']} after {previous})",
                source=source,
                line=_line(text, ["messages", index, "seq"]),
                field=f"messages[{index}].seq",
            )
        previous = item["seq"]
    through = data.get("summary_through", 0)
    if through > max(previous, data.get("last_seq", 0)):
        raise SnapshotInvalid(
            f"summary_through ({through}) is past the last message ({previous})",
            source=source,
            line=_line(text, ["summary_through"]),
            field="summary_through",
        )


def _dotted(path: Sequence[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_WS = re.compile(r"[ \t\n\r]*")


def _line(text: str | None, path: Sequence[Any]) -> int | None:
    """The line of the value at ``path`` in JSON ``text`` (None when not found)."""
    if text is None:
        return None
    try:
        offset = _locate(text, 0, list(path))
    except (ValueError, IndexError):
        return None
    return None if offset is None else text.count("\n", 0, offset) + 1


def _locate(text: str, pos: int, path: list[Any]) -> int | None:
    decoder = json.JSONDecoder()
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if not path:
        return pos
    key, rest = path[0], path[1:]
    opening = text[pos]
    if opening not in "{[":
        return None
    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    index = 0
    while text[pos] not in "}]":
        if opening == "{":
            name, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
            pos = _WS.match(text, pos).end() + 1  # type: ignore[union-attr]  # the colon
            if name == key:
                return _locate(text, pos, rest)
        elif index == key:
            return _locate(text, pos, rest)
        _, pos = decoder.raw_decode(text, _WS.match(text, pos).end())  # type: ignore[union-attr]
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if text[pos] == ",":
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        index += 1
    return None
