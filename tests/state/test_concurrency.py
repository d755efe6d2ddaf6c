"""Writers at once, each with a store of its own (as processes on several machines have):
what one transaction reads and then changes, no other changes in between.

On SQLite a write transaction holds the whole file; on PostgreSQL the rows it reads to
decide are locked (``FOR UPDATE``, and ``SKIP LOCKED`` for schedule claims). The same
tests hold both to it, with threads released at once by a barrier.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from agent_apps import ApprovalPending, ContextManager
from agent_apps.scheduling import When
from agent_apps.state import NotResumable, StateStore

WRITERS = 6


def at_once(location: str, work: Callable[[StateStore, int], Any], count: int = WRITERS) -> list[Any]:
    """Run ``work(store, i)`` in ``count`` threads, each on a store of its own, started
    together; returns what each returned or raised."""
    stores = [StateStore(location) for _ in range(count)]
    for store in stores:
        store.sessions.exists("warm-up")  # opened before the race: the race is the work
    barrier = threading.Barrier(count)
    outcomes: list[Any] = [None] * count

    def one(i: int) -> None:
        barrier.wait(timeout=30)
        try:
            outcomes[i] = work(stores[i], i)
        except Exception as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for store in stores:
        store.close()
    return outcomes


def test_metadata_merged_at_once_loses_no_key(state_location):
    StateStore(state_location).sessions.append("s", [{"role": "user", "text": "hi"}])
    for _ in range(3):
        at_once(state_location, lambda store, i: store.sessions.update_meta("s", {f"k{i}": i}))
    assert StateStore(state_location).sessions.get("s").meta == {f"k{i}": i for i in range(WRITERS)}


def test_a_run_is_taken_up_by_one_resume_only(tmp_path, state_location):
    cm = ContextManager(cwd=tmp_path, home=tmp_path / "home", env=False, project=False, user=False,
                        state=state_location)  # fmt: skip
    script = [{"text": "Writing.", "code": "await ctx.manager.invoke('file-write', {'path': 'x', 'content': 'y'})"}]
    config = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}
    call = {"prompt": "Write.", "user_message": "Go.", "config": {"agent": "agent-scripted", "script": script}}
    with pytest.raises(ApprovalPending) as info:
        cm.invoke_sync("agent", call, config=config)
    run_id = info.value.run_id
    cm.approve(run_id)
    outcomes = at_once(state_location, lambda store, i: store.journal.claim(run_id))
    taken = [o for o in outcomes if not isinstance(o, Exception)]
    refused = [o for o in outcomes if isinstance(o, NotResumable)]
    assert len(taken) == 1 and len(refused) == WRITERS - 1, outcomes
    assert all("it is still running" in str(o) for o in refused)
    assert StateStore(state_location).journal.checkpoint(run_id).attempts == 2


def test_schedulers_at_once_claim_each_due_time_once(state_location):
    store = StateStore(state_location)
    start = 1_795_000_000.0
    made = [store.schedules.create(ref="nothing", args={}, when=When(every=10), now=start) for _ in range(40)]
    for step in (1, 2, 3):  # three due times of each schedule, each claimed by a pass at once
        now = start + 10 * step
        at_once(state_location, lambda s, i, now=now: _claim_all(s, now))
    claimed = [(row["due_at"], row["run_id"]) for s in made for row in store.schedules.runs_of(s.id)]
    assert len(claimed) == 40 * 3 and len({run for _, run in claimed}) == 40 * 3
    for schedule in made:
        assert [row["due_at"] for row in store.schedules.runs_of(schedule.id)] == [start + 10, start + 20, start + 30]
        assert store.schedules.get(schedule.id).next_at == start + 40
    assert {run.status for run in store.runs.list()} == {"running"} and len(store.runs.list()) == 120
    # down for a while: of each schedule's five missed due times the latest runs, four are counted missed
    at_once(state_location, lambda s, i: _claim_all(s, start + 80))
    for schedule in made:
        info = store.schedules.get(schedule.id)
        assert (info.runs, info.missed, info.next_at) == (4, 4, start + 90)


def _claim_all(store: StateStore, now: float) -> int:
    """Claim a few at a time, as a scheduler with few free slots does, until none is left."""
    total = 0
    while True:
        claimed = store.schedules.claim(now, limit=3, grace=60)
        if not claimed.claims:
            return total
        total += len(claimed.claims)
