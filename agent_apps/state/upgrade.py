"""Upgrading a state store: the statements that bring it from the migrations it has had
to all of them.

A store's version says which migrations it has had, and a store written by a
development build of agent-apps (whose migrations were numbered otherwise before they
were released) can have more or fewer of the tables and columns than its version
says: a migration would then fail on a table that is already there, or the store
would miss a table the code needs. So an upgrade does not trust the number alone: a
migration whose tables and columns the store has is done, what a migration makes and
the store already has is not made again, and a migration the store claims but whose
tables or columns it lacks is made good. A repair never makes again, nor writes into,
what a later migration removed.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence

__all__ = ["SchemaObject", "missing", "statements", "upgrade"]

#: What a statement of a migration makes, as the store's catalog names it:
#: ``("table", name)``, ``("index", name, table)``, ``("sequence", name)`` or
#: ``("column", table, name)``; names in lower case.
SchemaObject = tuple[str, ...]

_MAKES = (
    (re.compile(r"CREATE\s+(?:VIRTUAL\s+)?TABLE\s+(\w+)", re.I), "table"),
    (re.compile(r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+(\w+)\s+ON\s+(\w+)", re.I), "index"),
    (re.compile(r"CREATE\s+SEQUENCE\s+(\w+)", re.I), "sequence"),
    (re.compile(r"ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)", re.I), "column"),
)
_DROP = re.compile(r"DROP\s+TABLE\s+(\w+)", re.I)
_TABLE_NAMED = re.compile(r"\b(?:INTO|UPDATE|FROM|TABLE)\s+(\w+)", re.I)
_COMMENT = re.compile(r"--[^\n]*")


def statements(script: str) -> list[str]:
    """The statements of a migration's script, one by one, comments dropped (SQLite's
    tokenizer finds their ends; ``executescript`` would commit)."""
    found: list[str] = []
    buffer = ""
    for line in _COMMENT.sub("", script).splitlines(keepends=True):
        if not buffer and not line.strip():
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            found.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        found.append(buffer.strip())
    return found


def _makes(statement: str) -> SchemaObject | None:
    for pattern, kind in _MAKES:
        if match := pattern.match(statement):
            return (kind, *(name.lower() for name in match.groups()))
    return None


def _apply(objects: set[SchemaObject], statement: str) -> None:
    """Update ``objects`` for what ``statement`` makes or drops."""
    if made := _makes(statement):
        objects.add(made)
    elif drop := _DROP.match(statement):
        table = drop[1].lower()
        objects -= {o for o in objects if (o[0] == "table" and o[1] == table) or (o[0] != "table" and table in o[1:])}


def _schema(scripts: Sequence[str]) -> set[SchemaObject]:
    """What a store has after all of ``scripts``: what they make, less what they drop."""
    objects: set[SchemaObject] = set()
    for script in scripts:
        for statement in statements(script):
            _apply(objects, statement)
    return objects


def missing(scripts: Sequence[str], present: set[SchemaObject]) -> set[SchemaObject]:
    """What the last of ``scripts`` should have left in a store that ``present`` lacks."""
    return _schema(scripts) - present


def upgrade(scripts: Sequence[str], version: int, present: set[SchemaObject]) -> Iterator[str]:
    """The statements, in order, that bring a store that has had ``version`` of
    ``scripts`` (its catalog: ``present``) to all of them. A migration whose tables and
    columns (those the last script keeps) the store has is taken as done, whatever the
    version says; one that is not done runs, less what the store already has; and of
    one the version claims, only what the last script keeps is made or written.
    ``present`` follows the statements as they are yielded, which the caller runs in one
    transaction."""
    final = _schema(scripts)
    for number, script in enumerate(scripts, 1):
        todo = statements(script)
        repair = number <= version
        kept = [made for made in map(_makes, todo) if made in final]
        if (kept or repair) and all(made in present for made in kept):
            continue
        for statement in todo:
            made = _makes(statement)
            if made is not None and made in present:
                continue
            if repair and (made not in final if made else _writes_into_dropped(statement, final)):
                continue
            yield statement
            _apply(present, statement)


def _writes_into_dropped(statement: str, final: set[SchemaObject]) -> bool:
    return any(("table", name.lower()) not in final for name in _TABLE_NAMED.findall(statement))
