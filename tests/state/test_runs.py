"""``store.runs`` for readers that list and watch runs: filters, pages, waiting runs
first, change numbers, the turn in flight and running totals; on both backends."""

from __future__ import annotations

import threading
import time

import pytest

from agent_apps.run_record import RunRecord
from agent_apps.state import StateStore, _postgres, _sqlite
from agent_apps.state.runs import touch_run
from agent_apps.state.schema import MIGRATIONS

from .conftest import schema_version


def agent(store, name, *, session=None, status=None, report=None, parent=None):
    """Start an agent run (a new run, or one below ``parent``) and end it with ``status``."""
    record = (parent or RunRecord.new()).child(session_id=session)
    store.runs.start_agent(record, name=name)
    if status is not None:
        store.runs.finish_agent(record, status=status, report=report or {"usage": {}})
    return record


def test_runs_are_filtered_paged_and_waiting_ones_come_first(state_location):
    store = StateStore(state_location)
    for n in range(12):
        agent(store, f"skill-{n % 3}", session="s1" if n < 4 else None, status="done" if n % 4 else "error")
    waiting = agent(store, "skill-0", status="waiting-approval")
    agent(store, "skill-1", status="done", report={"usage": {}, "steps": [{"text": 'the "needle" 50%_off'}]})
    newest = store.runs.list()
    assert len(newest) == 14 and newest[0].name == "skill-1" and newest[1].id == waiting.run_id
    first = store.runs.list(waiting_first=True, limit=5)
    assert first[0].id == waiting.run_id and [r.id for r in first[1:]] == [newest[0].id, *[r.id for r in newest[2:5]]]
    pages = [store.runs.list(waiting_first=True, limit=5, offset=o) for o in (0, 5, 10)]
    assert [len(p) for p in pages] == [5, 5, 4]
    assert [r.id for p in pages for r in p] == [r.id for r in store.runs.list(waiting_first=True)]
    assert store.runs.count() == 14 and store.runs.count(status="error") == 3
    assert {r.status for r in store.runs.list(status="error")} == {"error"}
    assert store.runs.count(name="skill-2") == 4 and store.runs.count(session="s1", name="skill-0") == 2
    assert store.runs.names() == ["skill-0", "skill-1", "skill-2"]
    # text: the id (or part of it), the name, the session, and what the reports recorded
    assert [r.id for r in store.runs.list(text=waiting.run_id[3:12])] == [waiting.run_id]
    assert store.runs.count(text="ILL-2") == 4 and store.runs.count(text="s1") == 4
    assert store.runs.count(text='"needle" 50%_off') == 1
    assert store.runs.count(text="50%x") == 0 and store.runs.count(text="_") == 1  # % and _ are literal


def test_change_numbers_tell_a_watcher_what_changed_since_it_last_looked(state_location):
    store = StateStore(state_location)
    assert store.runs.latest() == 0
    record = agent(store, "outer")
    run, (outer,) = store.runs.changed(record.run_id, 0)
    assert run.status == "running" and outer.name == "outer" and outer.seq == run.seq == store.runs.latest()
    assert store.runs.changed(record.run_id, run.seq) is None
    other = agent(store, "elsewhere", status="done")  # another run changes: this one did not
    assert store.runs.changed(record.run_id, run.seq) is None and store.runs.latest() > run.seq
    seen = run.seq
    inner = agent(store, "inner", parent=record)
    run, agents = store.runs.changed(record.run_id, seen)
    assert [a.name for a in agents] == ["inner"] and run.seq > store.runs.get(other.run_id).seq
    seen = run.seq
    store.runs.live(record, '{"index": 0, "turn": 1, "text": "thinking"}')
    run, (changed,) = store.runs.changed(record.run_id, seen)
    assert changed.id == record.agent_id and changed.live == {"index": 0, "turn": 1, "text": "thinking"}
    seen = run.seq
    store.runs.report(record, {"usage": {"input_tokens": 7, "output_tokens": 1}, "steps": [{"index": 0}]})
    run, (changed,) = store.runs.changed(record.run_id, seen)
    assert changed.live is None and changed.report["steps"] == [{"index": 0}]
    assert (run.input_tokens, run.output_tokens) == (7, 1)  # running totals, before the agent ends
    store.runs.finish_agent(inner, status="done", report={"usage": {"input_tokens": 3}, "cost_usd": 0.25})
    store.runs.finish_agent(record, status="waiting-approval", report={"usage": {"input_tokens": 9}, "cost_usd": 1})
    run = store.runs.get(record.run_id)
    assert (run.status, run.input_tokens, run.output_tokens, run.cost_usd) == ("waiting-approval", 12, 0, 1.25)
    # a watcher of the run sees a decision on its pending call too
    store.journal.begin(record.run_id, {"skill": "outer"})
    store.journal.pend(record.run_id, {"skill": "file-write", "args": {}})
    seen = store.runs.get(record.run_id).seq
    store.journal.decide(record.run_id, "approve")
    assert store.runs.get(record.run_id).seq > seen
    # a live write for an agent that has ended is dropped (it arrived late)
    store.runs.live(inner, '{"index": 5}')
    assert next(a for a in store.runs.agents(record.run_id) if a.id == inner.agent_id).live is None


def test_a_store_of_the_previous_schema_gains_the_columns_and_keeps_its_runs(state_location, monkeypatch):
    for backend in (_sqlite, _postgres):
        monkeypatch.setattr(backend, "MIGRATIONS", MIGRATIONS[:-1])
    old = StateStore(state_location)
    with old.db.write() as conn:
        conn.execute(
            "INSERT INTO runs (id, name, status, started_at, input_tokens) VALUES ('r1', 'old', 'done', 1.0, 5)"
        )
    old.close()
    for backend in (_sqlite, _postgres):
        monkeypatch.setattr(backend, "MIGRATIONS", MIGRATIONS)
    store = StateStore(state_location)
    (run,) = store.runs.list(waiting_first=True)
    assert (run.id, run.input_tokens, run.cost_usd, run.seq) == ("r1", 5, 0.0, 0)
    assert schema_version(state_location) == len(MIGRATIONS) and store.runs.latest() == 0
    record = agent(store, "new")
    assert store.runs.latest() == 1 and store.runs.get(record.run_id).seq == 1


def test_writers_at_once_number_their_changes_in_the_order_they_commit(state_location):
    """Runs changed by many threads (one store each, as processes would): every change
    gets a number of its own, and a watcher that saw N finds each later one above N."""
    StateStore(state_location).runs.latest()  # created and migrated once
    records = [agent(StateStore(state_location), f"writer-{n}") for n in range(4)]
    watcher = StateStore(state_location)
    seen, found = 0, {}

    def write(record):
        store = StateStore(state_location)
        for turn in range(15):
            store.runs.live(record, f'{{"index": 0, "turn": {turn}}}')
        store.close()

    writers = [threading.Thread(target=write, args=(record,)) for record in records]
    for thread in writers:
        thread.start()
    while True:
        done = not any(thread.is_alive() for thread in writers)
        latest = watcher.runs.latest()
        for record in records:
            changed = watcher.runs.changed(record.run_id, seen)
            if changed is not None:
                run, (changed_agent,) = changed
                assert run.seq > seen and changed_agent.seq > seen
                if changed_agent.live is not None:
                    found[record.run_id] = changed_agent.live["turn"]
        seen = latest
        if done:
            break
    for thread in writers:
        thread.join()
    assert watcher.runs.latest() == 4 + 4 * 15  # one number per change, none twice
    assert found == {record.run_id: 14 for record in records}  # the last change of each was seen


def test_a_watcher_never_passes_a_number_whose_change_has_not_committed(state_location):
    """A write holds number N uncommitted while another run's change, numbered N + 1,
    commits (on PostgreSQL; on SQLite it waits): the latest settled number stays below N
    until N commits, so a watcher that moves on to it cannot miss N's change."""
    store = StateStore(state_location)
    held_run, other_run = agent(store, "held"), agent(store, "other")
    seen = store.runs.latest()
    taken, release, numbers, answers = threading.Event(), threading.Event(), [], []

    def hold():
        holder = StateStore(state_location)
        with holder.db.write() as conn:
            touch_run(conn, holder.db.dialect, held_run.run_id)
            numbers.append(conn.execute("SELECT seq FROM runs WHERE id = ?", (held_run.run_id,)).fetchone()[0])
            taken.set()
            release.wait(30)
        holder.close()

    def other():
        StateStore(state_location).runs.live(other_run, '{"index": 0}')

    holding = threading.Thread(target=hold)
    holding.start()
    assert taken.wait(30)
    writing = threading.Thread(target=other)
    writing.start()
    writing.join(0.5)  # PostgreSQL: committed by now, numbered after the held change
    watching = threading.Thread(target=lambda: answers.append(StateStore(state_location).runs.latest()))
    watching.start()
    watching.join(0.5)
    (held,) = numbers
    assert all(answer < held for answer in answers)  # none yet (PostgreSQL waits), or one below N
    release.set()
    for thread in (holding, writing, watching):
        thread.join()
    assert store.runs.latest() == held + 1 and len(answers) == 1
    run, _ = store.runs.changed(held_run.run_id, seen)
    assert run.seq == held


def test_a_run_of_two_outermost_agents_ends_with_the_last_and_counts_each_usage_once(state_location):
    """An agent's reports add what its totals grew by to the run's, however often it
    reports; the run ends when its last outermost agent does, with that one's status."""
    store = StateStore(state_location)
    base = RunRecord.new()
    first, second = base.child(), base.child()
    for record in (first, second):
        store.runs.start_agent(record, name="root")
    store.runs.report(first, {"usage": {"input_tokens": 5}, "cost_usd": 0.5})
    store.runs.report(second, {"usage": {"output_tokens": 1}})
    store.runs.report(first, {"usage": {"input_tokens": 8}, "cost_usd": 0.75})
    store.runs.finish_agent(first, status="done", report={"usage": {"input_tokens": 10}, "cost_usd": 1})
    run = store.runs.get(base.run_id)
    assert (run.status, run.ended_at) == ("running", None)
    assert (run.input_tokens, run.output_tokens, run.cost_usd) == (10, 1, 1.0)
    store.runs.finish_agent(second, status="error", report={"usage": {"output_tokens": 2}})
    run = store.runs.get(base.run_id)
    assert (run.status, run.input_tokens, run.output_tokens, run.cost_usd) == ("error", 10, 2, 1.0)
    assert run.ended_at is not None


def test_a_write_that_waits_for_another_on_the_same_run_is_numbered_after_it(state_location):
    """Two writes to one run: the second asks while the first holds the run's row and
    has no number yet (PostgreSQL: the second's UPDATE takes a number, then waits for
    the row). The second commits last and is numbered after the first, so the run's
    number never goes back and a watcher that saw the first sees the second."""
    store = StateStore(state_location)
    record = agent(store, "shared")
    locked, go, numbers = threading.Event(), threading.Event(), []

    def first():
        holder = StateStore(state_location)
        with holder.db.write() as conn:
            conn.execute("UPDATE runs SET seq = seq WHERE id = ?", (record.run_id,))
            locked.set()
            go.wait(30)
            touch_run(conn, holder.db.dialect, record.run_id)
            numbers.append(conn.execute("SELECT seq FROM runs WHERE id = ?", (record.run_id,)).fetchone()[0])
        holder.close()

    holding = threading.Thread(target=first)
    holding.start()
    assert locked.wait(30)
    second = threading.Thread(target=lambda: StateStore(state_location).runs.live(record, '{"index": 1}'))
    second.start()
    second.join(0.5)  # waiting for the run's row (PostgreSQL) or the store (SQLite)
    go.set()
    for thread in (holding, second):
        thread.join()
    (first_number,) = numbers
    run, (changed,) = store.runs.changed(record.run_id, first_number)
    assert run.seq > first_number and changed.seq == run.seq and changed.live == {"index": 1}
    assert store.runs.latest() == run.seq


@pytest.mark.parametrize("limit", [0, 3])
def test_a_page_past_the_end_is_empty(state_location, limit):
    store = StateStore(state_location)
    agent(store, "only", status="done")
    assert store.runs.list(limit=limit, offset=5) == []


def test_pruning_runs_is_a_change_watchers_see(state_location):
    store = StateStore(state_location)
    agent(store, "old", status="done")
    seen = store.runs.latest()
    assert [run.name for run in store.runs.prune(time.time() + 1)] == ["old"]
    assert store.runs.latest() > seen and store.runs.count() == 0


def test_the_writes_of_one_transaction_share_one_change_number(state_location):
    """An agent's turn (the turn in flight, then its report) commits as one change, not
    two: a watcher that saw it has nothing older to catch up on."""
    store = StateStore(state_location)
    record = agent(store, "outer")
    before = store.runs.latest()

    def turn() -> None:
        store.runs.live(record, '{"turn": 1}')
        store.runs.report(record, {"steps": [], "step_count": 1})

    store.db.together(turn)
    run, (outer,) = store.runs.get(record.run_id), store.runs.agents(record.run_id)
    assert store.runs.latest() == run.seq == outer.seq == before + 1
    store.runs.report(record, {"steps": [], "step_count": 2})  # a write of its own: a change of its own
    assert store.runs.latest() == store.runs.get(record.run_id).seq == before + 2
    store.close()
