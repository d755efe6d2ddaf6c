"""What a scripted agent run asks of its state store: round trips to the store's thread,
transactions and (on PostgreSQL) statements, per run, counted (the load does not move
them).

    python benchmarks/bench_run_writes.py [--runs 50]

The runs are ``bench_postgres.py --only runs``'s (two turns, five host calls, a session
each, journal on), all at once, on SQLite and on a throwaway PostgreSQL server. Counted
by wrapping the store's own methods: ``Database.call`` (a round trip: one hand-off to
the store's thread), the backends' outermost read and write blocks (a transaction; a
block inside a write joins it and is not counted) and, on PostgreSQL, each statement
the store's code sends (``BEGIN`` and ``COMMIT`` not counted; an ``executemany`` is
one) and each statement the server runs (psycopg's: ``BEGIN``, ``COMMIT`` and
``ROLLBACK`` included, an ``executemany`` one a row).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bench_postgres as runs_bench

from agent_apps import ContextManager
from agent_apps.state import _db, _postgres, _sqlite

counts: collections.Counter[str] = collections.Counter()


def _outermost(db: Any) -> bool:
    return getattr(db, "_joined", lambda: None)() is None


def _count_blocks(cls: Any, kind: str) -> None:
    block = getattr(cls, kind)

    @contextlib.contextmanager
    def counted(self: Any) -> Iterator[Any]:
        if _outermost(self):
            counts["transactions"] += 1
            counts[f"{kind}s"] += 1
        with block(self) as conn:
            yield conn

    setattr(cls, kind, counted)


def _count() -> None:
    for kind in ("read", "write"):
        _count_blocks(_sqlite.SQLiteDatabase, kind)
        _count_blocks(_postgres.PostgresDatabase, kind)
    for name in ("execute", "executemany"):
        send = getattr(_postgres._Connection, name)

        def counted(self: Any, *args: Any, _send: Any = send) -> Any:
            counts["statements"] += 1
            return _send(self, *args)

        setattr(_postgres._Connection, name, counted)
    import psycopg

    run = psycopg.Connection.execute

    def counted_run(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        counts["server statements"] += 1
        return run(self, query, params, **kwargs)

    psycopg.Connection.execute = counted_run  # type: ignore[method-assign]
    run_many = psycopg.Cursor.executemany

    def counted_many(self: Any, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        params_seq = list(params_seq)
        counts["server statements"] += len(params_seq)
        return run_many(self, query, params_seq, **kwargs)

    psycopg.Cursor.executemany = counted_many  # type: ignore[method-assign]
    call = _db.Database.call

    async def counted_call(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        counts["round trips"] += 1
        return await call(self, fn, *args, **kwargs)

    _db.Database.call = counted_call  # type: ignore[method-assign]


def per_run(location: str, root: Path, runs: int) -> dict[str, float]:
    skills = root / "run-skills"
    skills.mkdir(exist_ok=True)
    (skills / "echo.skill.py").write_text(runs_bench.ECHO)
    cm = ContextManager([skills], cwd=root, home=root / "home", env=False, user=False, entry_points=False,
                        state=location)  # fmt: skip

    async def one(n: int) -> None:
        config = {"agent": "agent-scripted", "script": runs_bench.SCRIPT}
        result = await cm.invoke("agent", {"prompt": "bench", "memory": {"n": n}, "config": config}, session=f"s{n}")
        assert result == {"run": n, "calls": 5}, result

    async def main() -> None:
        await one(-1)  # the sandbox loaded, the store opened
        counts.clear()
        await asyncio.gather(*(one(n) for n in range(runs)))

    asyncio.run(main())
    cm.state.close()
    return {key: value / runs for key, value in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    options = parser.parse_args()
    from agent_apps.testing.postgres import PostgresServer

    _count()
    server = PostgresServer()
    server.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            figures = {"SQLite": per_run(str(root / "runs.db"), root, options.runs),
                       "PostgreSQL": per_run(server.url("runs"), root, options.runs)}  # fmt: skip
    finally:
        server.stop()
    print(f"per scripted run ({options.runs} at once, 2 turns, 5 host calls, a session each)")
    keys = ("round trips", "transactions", "writes", "reads", "statements", "server statements")
    print(f"{'':<12}" + "".join(f"{key:>18}" for key in keys))
    for name, figure in figures.items():
        print(f"{name:<12}" + "".join(f"{figure[key]:>18.1f}" if key in figure else f"{'-':>18}" for key in keys))


if __name__ == "__main__":
    sys.exit(main())
