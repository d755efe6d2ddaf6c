"""Persisted event subscriptions (``event-subscribe`` with ``persist: true``).

A row is a topic glob and the ref of the skill to invoke with each event on it. Every
ContextManager subscribes the stored ones when it opens its state store, and
``agent-apps scheduler`` reads them again at every poll, so one made or removed in
another process takes effect there too (docs/scheduling.md).
"""

from __future__ import annotations

import builtins
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from ..authority import Authority
from ..events import PERSISTED_PREFIX
from ._db import Connection, Database
from .errors import NotFound

__all__ = ["SubscriptionInfo", "Subscriptions"]


@dataclass(frozen=True)
class SubscriptionInfo:
    """One persisted subscription; ``authority``: its maker's, which each invocation of
    ``ref`` runs under (None: made from Python or the command line)."""

    id: str
    topic: str
    ref: str
    created_at: float
    created_by: str | None
    authority: Authority | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "topic": self.topic,
            "ref": self.ref,
            "persist": True,
            "created_by": self.created_by,
            "authority": self.authority.to_json() if self.authority is not None else None,
        }


class Subscriptions:
    """``store.subscriptions``: add, list and remove persisted subscriptions."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add(
        self, topic: str, ref: str, *, created_by: str | None = None, authority: Authority | None = None
    ) -> SubscriptionInfo:
        info = SubscriptionInfo(PERSISTED_PREFIX + secrets.token_hex(6), topic, ref, time.time(), created_by, authority)
        stored = json.dumps(authority.to_json()) if authority is not None else None
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO subscriptions (id, topic, ref, created_at, created_by, authority) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (info.id, info.topic, info.ref, info.created_at, info.created_by, stored),
            )
        return info

    def list(self) -> builtins.list[SubscriptionInfo]:
        with self.db.read() as conn:
            return self.read(conn)

    def remove(self, ident: str) -> None:
        with self.db.write() as conn:
            if not conn.execute("DELETE FROM subscriptions WHERE id = ?", (ident,)).rowcount:
                raise NotFound("subscription", ident)

    @staticmethod
    def read(conn: Connection) -> builtins.list[SubscriptionInfo]:
        """The stored subscriptions, oldest first, through an open connection."""
        rows = conn.execute(
            "SELECT id, topic, ref, created_at, created_by, authority FROM subscriptions ORDER BY created_at, id"
        ).fetchall()
        return [
            SubscriptionInfo(
                row[0], row[1], row[2], row[3], row[4], Authority.from_json(json.loads(row[5])) if row[5] else None
            )
            for row in rows
        ]
