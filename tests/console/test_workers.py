"""A decision taken in the console resumes the run in a worker process, which follows
the run to its end, and stops with the console: nothing it started outlives it. On both
backends (a worker opens a PostgreSQL store with the URL's password, which the console
never shows)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from agent_apps import ApprovalPending
from agent_apps.console.guard import csrf_value

from .conftest import ASK_WRITE, BOUND, GATE, WRITE, scripted
from .test_guard import request


@pytest.fixture
def store_path(state_location):
    return state_location


def decide(console, run_id, action, reason=""):
    body = f"action={action}&reason={reason}&csrf={csrf_value(console.token)}"
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": console.base}
    return request(console, "POST", f"/runs/{run_id}/decide", headers=headers, body=body)


def wait_for(predicate, what):
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"never: {what}")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_resumed_run_goes_on_in_a_worker_that_stops_with_the_console(manager, write_skill, console, tmp_path):
    write_skill("gate", GATE)
    gate = tmp_path / "never-opened"
    turns = [{"code": WRITE % str(tmp_path / "out.txt")},
             {"code": f"await ctx.manager.invoke('gate', {{'path': {str(gate)!r}}})"}, {"text": "done"}]  # fmt: skip
    with pytest.raises(ApprovalPending) as waiting:
        manager.invoke_sync("agent", {"prompt": "P", "name": "gated", "config": scripted(turns)}, config=ASK_WRITE)
    run_id = waiting.value.run_id
    status, headers, _ = decide(console, run_id, "approve")
    assert status == 303 and headers["location"] == f"/runs/{run_id}"
    store = manager.state

    def at_the_gate():
        run = store.runs.get(run_id)
        live = [a.live for a in store.runs.agents(run_id) if a.live]
        hosts = [h for step in live for c in step.get("tool_calls") or () for h in c.get("host_calls") or ()]
        return run if run.status == "running" and any(h["skill"] == "gate" for h in hosts) else None

    run = wait_for(at_the_gate, "the resumed run reached the gate")
    assert (tmp_path / "out.txt").read_text() == "hello\n"  # the approved call was made
    worker = run.pid
    assert worker not in (os.getpid(), console.process.pid) and alive(worker)
    status, _, _ = decide(console, run_id, "approve")
    assert status == 409  # it waits for nothing now
    console.process.send_signal(signal.SIGINT)
    console.process.wait(BOUND)
    assert not alive(worker)  # stopped with the console
    assert store.runs.get(run_id).status == "cancelled"


def test_skip_resumes_the_run_with_the_call_not_made(manager, console, tmp_path):
    target = tmp_path / "skipped.txt"
    turns = [{"code": WRITE % str(target)}, {"text": "moving on"}]
    with pytest.raises(ApprovalPending) as waiting:
        manager.invoke_sync("agent", {"prompt": "P", "name": "skipper", "config": scripted(turns)}, config=ASK_WRITE)
    run_id = waiting.value.run_id
    assert decide(console, run_id, "skip")[0] == 303
    store = manager.state
    wait_for(lambda: store.runs.get(run_id).status == "done", "the resumed run ended")
    assert not target.exists()
    call = [a for a in store.runs.agents(run_id) if a.status == "done"][0].report["steps"][0]["tool_calls"][0]
    assert call["result"] == "wrote None\n[approval: the call of file-write was skipped: not made, it returned None]"
    assert decide(console, run_id, "deny", "too late")[0] == 409  # nothing waits any more
    status, _, body = decide(console, "f" * 32, "approve")
    assert status == 404 and "no run" in body


def test_a_run_stopped_while_it_waits_shows_stopped_with_the_reason(manager, console, tmp_path):
    """``runs stop`` on a run waiting for approval: the console shows it stopped, with
    why, and nothing waits for a decision any more."""
    turns = [{"code": WRITE % str(tmp_path / "never.txt")}, {"text": "moving on"}]
    with pytest.raises(ApprovalPending) as waiting:
        manager.invoke_sync("agent", {"prompt": "P", "name": "halted", "config": scripted(turns)}, config=ASK_WRITE)
    run_id = waiting.value.run_id
    manager.state.runs.stop(run_id, "not needed after all")
    status, _, body = request(console, "GET", f"/runs/{run_id}")
    assert status == 200 and "Stopped: not needed after all" in body and "s-stopped" in body
    assert decide(console, run_id, "approve")[0] == 409
    assert not (tmp_path / "never.txt").exists()
