"""Helpers for tests that run on both backends: another store beside one, and the raw
schema version of a store."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from agent_apps.state import is_postgres_url


def sibling(location: str, name: str) -> str:
    """Another new store of the same backend: a file beside it, or another schema."""
    if not is_postgres_url(location):
        return str(Path(location).with_name(f"{name}.db"))
    parts = urlsplit(location)
    query = dict(parse_qsl(parts.query))
    query["schema"] = f"{query.get('schema', 'agent_apps')}_{name}"
    return urlunsplit(parts._replace(query=urlencode(query)))


def pg_connect(url: str) -> Any:
    """A psycopg connection (autocommit) whose search path is the store's schema."""
    import psycopg

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema", "agent_apps")
    return psycopg.connect(
        urlunsplit(parts._replace(query=urlencode(query))), autocommit=True, options=f"-c search_path={schema}"
    )


def schema_version(location: str) -> int:
    if not is_postgres_url(location):
        with sqlite3.connect(location) as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
    with pg_connect(location) as conn:
        return int(conn.execute("SELECT version FROM schema_version").fetchone()[0])


def set_schema_version(location: str, version: int) -> None:
    if not is_postgres_url(location):
        conn = sqlite3.connect(location)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.commit()
        conn.close()
        return
    with pg_connect(location) as conn:
        conn.execute("UPDATE schema_version SET version = %s", (version,))
