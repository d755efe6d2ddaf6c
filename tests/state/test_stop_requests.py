"""``store.runs.stop``: a stop asked of a run from another process, on both backends. A
run some process runs gets a request, which that process polls for; a run nothing runs
is stopped at once; an ended run is refused; the run's end voids a request."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent_apps.run_record import RunRecord
from agent_apps.state import NotFound, NotResumable, StateStore


def started(store: StateStore, run_id: str) -> RunRecord:
    record = RunRecord(run_id).child()
    store.runs.start_agent(record, name="worker")
    return record


def test_a_running_run_gets_a_request_that_its_end_voids(state_location):
    store = StateStore(state_location)
    record = started(store, "aaaa1111")
    started(store, "bbbb2222")
    assert store.runs.stop_requests(["aaaa1111", "bbbb2222"]) == {}
    seen = store.runs.latest()
    run, now = store.runs.stop("aaaa", "enough")  # a unique prefix
    assert (run.id, now, store.runs.get("aaaa1111").status) == ("aaaa1111", False, "running")
    assert store.runs.changed("aaaa1111", seen) is not None  # watchers (the console) see the request
    assert store.runs.changed("bbbb2222", seen) is None
    assert store.runs.stop_requests(["aaaa1111", "bbbb2222", "cccc3333"]) == {"aaaa1111": "enough"}
    assert store.runs.stop_requests([]) == {}
    store.runs.finish_agent(record, status="stopped", report={"status": "stopped"})
    assert store.runs.get("aaaa1111").status == "stopped"
    assert store.runs.stop_requests(["aaaa1111"]) == {}  # done with: a resumed run is not stopped by it
    with pytest.raises(NotResumable, match=r"cannot be stopped: it already ended \(status stopped\)"):
        store.runs.stop("aaaa1111", "again")


def test_a_run_waiting_for_approval_is_stopped_at_once(state_location):
    store = StateStore(state_location)
    record = started(store, "dddd4444")
    store.journal.begin("dddd4444", {"skill": "scribe"})
    store.journal.add("dddd4444", "a1", "m.1", "model", {"turn": 1, "response": {"text": "Half done."}})
    store.journal.add("dddd4444", "a1", "m.2", "model", {"turn": 2, "response": {"text": ""}})
    store.journal.add("dddd4444", "a1/1.1/a1", "m.1", "model", {"turn": 1, "response": {"text": "inner"}})
    store.runs.finish_agent(record, status="waiting-approval", report={"status": "waiting-approval"})
    store.journal.pend("dddd4444", {"skill": "file-write", "args": {}})
    seen = store.runs.latest()
    run, now = store.runs.stop("dddd4444", "not today")
    assert now and run.status == "waiting-approval"
    assert store.runs.get("dddd4444").status == "stopped"
    changed = store.runs.changed("dddd4444", seen)  # watchers see the run and its agent stopped
    assert changed is not None and [a.status for a in changed[1]] == ["stopped"]
    (agent,) = store.runs.agents("dddd4444")
    assert agent.status == "stopped"
    assert {k: agent.report[k] for k in ("status", "message", "result")} == {
        "status": "stopped", "message": "Stopped: not today", "result": "Half done.",
    }  # fmt: skip
    assert store.journal.checkpoint("dddd4444").pending is None
    with pytest.raises(NotResumable):
        store.journal.decide("dddd4444", "approve")


def test_a_run_whose_process_is_gone_is_stopped_at_once(state_location):
    """A run still marked running whose process died reads ``interrupted``: nothing would
    poll a request, so the stop ends it and its agents here."""
    store = StateStore(state_location)
    started(store, "eeee5555")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with store.db.write() as conn:
        conn.execute("UPDATE runs SET pid = ? WHERE id = ?", (int(gone.stdout), "eeee5555"))
    assert store.runs.get("eeee5555").status == "interrupted"
    run, now = store.runs.stop("eeee5555", "cleanup")
    assert now and run.status == "interrupted"
    assert store.runs.get("eeee5555").status == "stopped"
    assert [(a.status, a.report["message"]) for a in store.runs.agents("eeee5555")] == [("stopped", "Stopped: cleanup")]
    assert store.runs.stop_requests(["eeee5555"]) == {}


def test_an_unknown_run_is_not_found(state_location):
    store = StateStore(state_location)
    with pytest.raises(NotFound):
        store.runs.stop("nope", "x")


def test_the_poll_asks_about_any_number_of_runs_at_once(state_location):
    """A process polls for the stop requests of all the runs it runs in one statement
    with one parameter: more runs than a statement may have parameters (PostgreSQL
    65,535, SQLite 32,766) are asked about at once."""
    store = StateStore(state_location)
    started(store, "aaaa1111")
    store.runs.stop("aaaa1111", "enough")
    others = [f"run-{n}" for n in range(70_000)]
    assert store.runs.stop_requests([*others, "aaaa1111"]) == {"aaaa1111": "enough"}
    store.close()
