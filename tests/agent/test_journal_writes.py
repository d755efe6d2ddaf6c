"""The journal's writes behind the run: entries queued while a batch is being written
wait for a batch of their own, due ``WRITE_DELAY`` after the first of them, so a steady
stream of host calls makes one store write per ``WRITE_DELAY`` (not one per store round
trip); ``flush()`` still writes everything at once, in order, and raises a failed
write every time."""

from __future__ import annotations

import asyncio
import time

import pytest

from agent_apps.agent import durable
from agent_apps.agent.durable import RunJournal
from agent_apps.run_record import RunRecord
from agent_apps.state import StateStore
from agent_apps.state.errors import StateError

from .conftest import no_timers

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def run_journal(tmp_path) -> RunJournal:
    """The journal of run ``r1`` (started, so its entries may be written)."""
    store = StateStore(str(tmp_path / "state.db"))
    store.runs.start_agent(RunRecord("r1").child(), name="worker")
    return RunJournal(store, "r1")


def keys(store: StateStore) -> list[str]:
    return [entry.key for entry in store.journal.entries("r1")]


async def test_entries_queued_during_a_write_wait_for_their_own_batch(tmp_path, monkeypatch):
    no_timers(monkeypatch)
    journal = run_journal(tmp_path)
    store = journal.store
    journal.write("a1", "h.1.1", "call", {"n": 1})
    journal._start()  # the first batch falls due
    writing = journal._writer
    assert writing is not None
    await asyncio.sleep(0)  # the write is under way on the store's thread
    journal.write("a1", "h.1.2", "call", {"n": 2})  # queued while the first batch is written
    journal.write("a1", "h.1.3", "call", {"n": 3})
    await asyncio.shield(writing)
    await asyncio.sleep(0)
    assert keys(store) == ["h.1.1"]  # the two others wait for their own batch
    assert journal._writer is None and journal._timer is not None  # ... which is due
    await journal.flush()
    assert keys(store) == ["h.1.1", "h.1.2", "h.1.3"]
    assert journal._timer is None  # nothing left to write
    store.close()


async def test_a_stream_of_entries_is_written_in_batches_due_after_the_first_of_each(tmp_path, monkeypatch):
    journal = run_journal(tmp_path)
    store = journal.store
    early: list[float] = []  # per batch before the flush: how long its first entry had waited
    write_rows = durable._write_rows

    def timed(store: StateStore, run_id: str, rows: list) -> None:
        early.append(time.time() - rows[0][4])
        write_rows(store, run_id, rows)

    monkeypatch.setattr(durable, "_write_rows", timed)
    for n in range(300):  # an entry every 0.2 ms or more, as calls that never stop
        journal.write("a1", f"h.1.{n + 1}", "call", {"n": n})
        await asyncio.sleep(0.0002)
    flushed = len(early)
    assert flushed > 1  # batches were written while entries kept coming
    await journal.flush()
    assert keys(store) == [f"h.1.{n + 1}" for n in range(300)]  # every one, in order
    # no batch started before its first entry was due (the clocks may differ by a few us)
    assert all(waited >= durable.WRITE_DELAY - 0.001 for waited in early[:flushed])
    store.close()


async def test_a_failed_write_is_raised_by_every_flush_and_later_entries_wait(tmp_path):
    journal = run_journal(tmp_path)
    store = journal.store
    orphan = RunJournal(store, "no-such-run")  # its entries break the store's foreign key
    orphan.write("a1", "h.1.1", "call", {"n": 1})
    with pytest.raises(StateError, match="FOREIGN KEY"):
        await orphan.flush()
    orphan.write("a1", "h.1.2", "call", {"n": 2})  # queued after the failure: never written
    with pytest.raises(StateError, match="FOREIGN KEY"):
        await orphan.flush()
    assert store.journal.entries("no-such-run") == []
    journal.write("a1", "h.1.1", "call", {"n": 1})  # another run's journal is not affected
    await journal.flush()
    assert keys(store) == ["h.1.1"]
    store.close()


async def test_a_flush_waits_for_what_was_queued_before_it_and_no_more(tmp_path, monkeypatch):
    no_timers(monkeypatch)
    journal = run_journal(tmp_path)
    store = journal.store
    journal.write("a1", "m.1", "model", {"turn": 1})
    journal.response_queued()
    assert journal.response_unsaved
    first = asyncio.ensure_future(journal.flush())
    await asyncio.sleep(0)  # its batch is under way
    journal.write("a1", "h.1.1", "call", {"n": 1})  # queued after the first flush began
    second = asyncio.ensure_future(journal.flush())  # asks for m.1, held by the batch in flight
    journal.write("a1", "h.1.2", "call", {"n": 2})
    await asyncio.gather(first)
    assert not journal.response_unsaved and keys(store) == ["m.1"]
    await second  # h.1.1 was queued before it: written in a batch of its own, with h.1.2
    assert keys(store) == ["m.1", "h.1.1", "h.1.2"]
    journal.write("a1", "h.1.3", "call", {"n": 3})
    third, fourth = journal.flush(), journal.flush()  # at once: one batch for both
    writes = store.db.write
    batches = []

    def counted():
        if store.db._joined() is None:  # an outermost write: a transaction
            batches.append(1)
        return writes()

    monkeypatch.setattr(store.db, "write", counted)
    await asyncio.gather(third, fourth)
    assert keys(store) == ["m.1", "h.1.1", "h.1.2", "h.1.3"] and len(batches) == 1
    store.close()


async def test_entries_nothing_acted_on_wait_longer_and_a_calls_outcome_pulls_its_batch_sooner(tmp_path):
    """A model response (or a code run's seed, the start, the turn in flight) makes its
    batch due UNACTED_DELAY later: the flushes before the calls acting on it write it
    anyway. A host call's outcome queued after it makes the batch due WRITE_DELAY after
    the call; later outcomes do not push it back."""
    journal = run_journal(tmp_path)
    loop = asyncio.get_running_loop()
    before = loop.time()
    journal.write("a1", "m.1", "model", {"turn": 1})
    journal.write("a1", "c.1", "code", {"seed": 1})
    assert journal._due >= before + durable.UNACTED_DELAY
    journal.write("a1", "h.1.1", "call", {"n": 1})
    due = journal._due
    assert due <= loop.time() + durable.WRITE_DELAY < before + durable.UNACTED_DELAY
    assert journal._timer is not None and journal._timer.when() == due  # the timer moved with it
    journal.write("a1", "h.1.2", "call", {"n": 2})
    assert journal._due == due and journal._timer.when() == due
    await journal.flush()
    assert keys(journal.store) == ["m.1", "c.1", "h.1.1", "h.1.2"] and journal._timer is None
    journal.store.close()
