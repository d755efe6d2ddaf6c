"""``store.session_lock``: the queue of the runs of a session, on its own (the agent's
use of it is tested in tests/agent/test_session_serial.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from agent_apps.state import StateStore, session_queue

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def store(state_location):
    """A store on each backend: the queue is the same rows on both."""
    return StateStore(state_location)


def plant(store: StateStore, session: str, run_id: str, **fields) -> int:
    """A ticket as another process would have left it."""
    row = {"session": session, "run": run_id, "host": session_queue._HOST, "namespace": session_queue._NAMESPACE,
           "pid": os.getpid(), "started": None, "alive_at": time.time(), **fields}
    with store.db.write() as conn:
        return conn.execute(
            "INSERT INTO session_queue (session_id, run_id, host, namespace, pid, started, alive_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING ticket",
            tuple(row.values()),
        ).fetchone()[0]


def queued(store: StateStore) -> list[str]:
    """The runs that hold a ticket."""
    with store.db.read() as conn:
        return [run_id for (run_id,) in conn.execute("SELECT run_id FROM session_queue").fetchall()]


def dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


async def held(store: StateStore, session: str, run_id: str, log: list[str], pause: float = 0.0) -> None:
    async with store.session_lock(session, run_id):
        log.append(f"{run_id}+")
        await asyncio.sleep(pause)
        log.append(f"{run_id}-")


async def test_holders_of_one_session_never_overlap_and_go_in_arrival_order(store):
    log: list[str] = []
    tasks = []
    for n in range(5):
        tasks.append(asyncio.ensure_future(held(store, "s", f"r{n}", log, 0.02)))
        while f"r{n}" not in queued(store) and f"r{n}+" not in log:  # arrived: its ticket is in the store
            await asyncio.sleep(0.001)
    await asyncio.gather(*tasks)
    assert log == [f"r{n}{mark}" for n in range(5) for mark in "+-"]


async def test_sessions_do_not_wait_for_each_other(store):
    log: list[str] = []
    async with store.session_lock("a", "r1"):
        await asyncio.wait_for(held(store, "b", "r2", log), 10)
    assert log == ["r2+", "r2-"]


async def test_the_same_run_shares_its_turn(store):
    async with store.session_lock("s", "r1"):
        async with store.session_lock("s", "r1"):  # an agent inside the run
            pass


async def test_a_free_session_is_taken_in_one_transaction_and_given_back_in_one(store, monkeypatch):
    """The ticket is taken and the queue looked at in one write (a round trip less a
    run on PostgreSQL); the queue is read again only by a run that waits."""
    store.runs.latest()  # opened and migrated
    transactions = []

    def counted(kind, begin):
        def begin_counted():
            if store.db._joined() is None:  # a block inside a write is part of it
                transactions.append(kind)
            return begin()

        return begin_counted

    for kind in ("read", "write"):
        monkeypatch.setattr(store.db, kind, counted(kind, getattr(store.db, kind)))
    async with store.session_lock("s", "r1"):
        assert transactions == ["write"]
    assert transactions == ["write", "write"] and queued(store) == []
    # the run's row and what it reads first go in that same one transaction
    transactions.clear()
    opened = []
    opening, granted = lambda: opened.append("row"), lambda: store.sessions.begin("s")
    lock = store.session_lock("s", "r1", opening=opening, granted=granted)
    async with lock as turn:
        assert transactions == ["write"] and opened == ["row"] and turn.value.id == "s" and turn.value.memory is None
    assert transactions == ["write", "write"] and store.sessions.get("s").id == "s"
    plant(store, "s", "remote", host="elsewhere")
    transactions.clear()
    waiting = asyncio.ensure_future(held(store, "s", "r2", []))
    while "read" not in transactions:  # it looks again, the ticket taken in a write first
        await asyncio.sleep(0.01)
    assert not waiting.done() and transactions[0] == "write"
    with store.db.write() as conn:
        conn.execute("DELETE FROM session_queue WHERE run_id = 'remote'")
    await asyncio.wait_for(waiting, 10)


async def test_a_turn_given_back_in_the_runs_last_write_costs_no_transaction_more(store):
    """``SessionTurn.give_back`` inside a write deletes the ticket with it; once that
    committed, the block's end writes nothing. A write that failed gave nothing back:
    the block's end does, and the heartbeat's count of held tickets drops once."""
    store.runs.latest()
    queue = store._session_queue
    async with store.session_lock("s", "r1") as turn:
        assert queued(store) == ["r1"] and queue._held == 1
        with pytest.raises(RuntimeError):
            with store.db.write():
                turn.give_back()
                raise RuntimeError("the run's last write failed")
        assert queued(store) == ["r1"]  # rolled back with it
        with store.db.write():
            turn.give_back()
        turn.given_back()
        assert queued(store) == [] and not turn.held and queue._held == 0
        waiter = asyncio.ensure_future(held(store, "s", "r2", []))
        await asyncio.wait_for(waiter, 10)  # the next run goes on before the block ends
        writes = []
        write = store.db.write
        store.db.write = lambda: writes.append(1) or write()  # type: ignore[method-assign]
    assert writes == [] and queue._held == 0  # nothing more to give back
    async with store.session_lock("s", "r3"):  # a turn not given back: the block's end gives it back
        pass
    assert queued(store) == [] and queue._held == 0


@pytest.mark.parametrize(
    "left_by",
    [
        lambda: {"pid": dead_pid()},  # the process ended (kill -9)
        lambda: {"pid": os.getppid(), "started": "0"},  # its pid now runs another program
        lambda: {"host": "elsewhere", "alive_at": time.time() - session_queue.LEASE - 1},  # not refreshed
        lambda: {"namespace": "pid:[1]", "alive_at": 0.0},  # another container on this host
    ],
    ids=["dead-pid", "reused-pid", "stale-remote", "stale-container"],
)
async def test_a_ticket_of_a_process_that_is_gone_is_removed(store, left_by):
    plant(store, "s", "crashed", **left_by())
    await asyncio.wait_for(held(store, "s", "r1", []), 10)
    with store.db.read() as conn:
        assert conn.execute("SELECT count(*) FROM session_queue").fetchone()[0] == 0


async def test_a_live_ticket_elsewhere_is_waited_for(store):
    ticket = plant(store, "s", "remote", host="elsewhere")  # refreshed just now
    waiting = asyncio.ensure_future(held(store, "s", "r1", []))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    with store.db.write() as conn:  # the remote run ends
        conn.execute("DELETE FROM session_queue WHERE ticket = ?", (ticket,))
    await asyncio.wait_for(waiting, 10)


async def test_cancelling_a_wait_gives_the_place_back(store):
    plant(store, "s", "remote", host="elsewhere")
    waiting = asyncio.ensure_future(held(store, "s", "r1", []))
    await asyncio.sleep(0.1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    with store.db.read() as conn:
        assert [r[0] for r in conn.execute("SELECT run_id FROM session_queue").fetchall()] == ["remote"]


async def test_a_ticket_dropped_as_dead_queues_again(store):
    plant(store, "s", "remote", host="elsewhere")
    waiting = asyncio.ensure_future(held(store, "s", "r1", []))
    await asyncio.sleep(0.1)
    with store.db.write() as conn:  # as another machine would after this process stood still
        conn.execute("DELETE FROM session_queue WHERE run_id = 'r1'")
    await asyncio.sleep(0.2)
    with store.db.read() as conn:
        assert sorted(r[0] for r in conn.execute("SELECT run_id FROM session_queue").fetchall()) == ["r1", "remote"]
    with store.db.write() as conn:
        conn.execute("DELETE FROM session_queue WHERE run_id = 'remote'")
    await asyncio.wait_for(waiting, 10)


async def test_the_heartbeat_keeps_this_processs_tickets_fresh(store, monkeypatch):
    monkeypatch.setattr(session_queue, "HEARTBEAT", 0.05)
    async with store.session_lock("s", "r1"):
        with store.db.write() as conn:
            conn.execute("UPDATE session_queue SET alive_at = 0")
        for _ in range(200):
            await asyncio.sleep(0.01)
            with store.db.read() as conn:
                (alive_at,) = conn.execute("SELECT alive_at FROM session_queue").fetchone()
            if alive_at > 0:
                break
        assert alive_at > time.time() - 5


async def test_a_wait_cancelled_at_any_moment_leaves_no_ticket_behind(store):
    """Cancelled before, during or after its join (which the store's thread finishes
    anyway), a waiter never leaves a ticket that would hold the session for good."""
    plant(store, "s", "remote", host="elsewhere")
    for attempt in range(120):
        waiting = asyncio.ensure_future(held(store, "s", f"r{attempt}", []))
        for _ in range(attempt % 12):  # cancel after 0..11 turns of the event loop
            await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        with store.db.read() as conn:
            left = [r[0] for r in conn.execute("SELECT run_id FROM session_queue").fetchall()]
        assert left == ["remote"], (attempt, left)
    assert store._session_queue._held == 0  # and the heartbeat stopped
