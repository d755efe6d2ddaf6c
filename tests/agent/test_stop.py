"""A graceful stop: ``cm.stop`` and ``agent-apps runs stop``. The host call in flight
finishes, no further turn starts, the run ends ``stopped`` with the model's last text;
sub-agents stop with it; a stop reaches a run in another process through the state
store (SQLite, and PostgreSQL across machines), and ends a run waiting for approval."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agent_apps import ApprovalPending, ContextManager, RunStopped
from agent_apps.cli import main as cli_main
from agent_apps.state import NotResumable
from agent_apps.tools import approval

from .conftest import COUNTER

pytestmark = pytest.mark.anyio

#: Asks the run it is part of to stop (as a user would, from elsewhere), then returns.
STOPPER = """
frontmatter = {"description": "Stop my run.", "params": {"type": "object"}}
async def main(ctx, args):
    assert ctx.manager.context_manager.stop(ctx.run.run_id, "enough")
    return "asked"
"""

#: Writes its run's id to a file, then waits until the run was asked to stop (by any
#: process): the call in flight when the stop came.
WAITER = """
import asyncio
from pathlib import Path
frontmatter = {"description": "Wait for a stop.", "params": {"type": "object"}}
async def main(ctx, args):
    (Path(ctx.manager.context_manager.cwd) / "run_id").write_text(ctx.run.run_id)
    for _ in range(1200):
        if ctx.run.tree.stop_reason is not None:
            return "saw the stop: " + ctx.run.tree.stop_reason
        await asyncio.sleep(0.05)
    return "no stop came"
"""


def counted(root: Path) -> list[str]:
    log = root / "counter.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def cm(context_manager, write_skill):
    write_skill("counter", COUNTER)
    write_skill("stopper", STOPPER)
    write_skill("waiter", WAITER)
    return context_manager


async def run_agent(cm: ContextManager, turns: list[dict[str, Any]], **args: Any) -> Any:
    call = {"prompt": "Test.", "user_message": "Work.", "config": {"agent": "agent-scripted", "script": turns}, **args}
    return await cm.invoke("agent", call, nonlocals={"agent": {"events": "t"}})


def listen(cm: ContextManager) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    cm.events.subscribe("t", lambda topic, event: events.append(event))
    return events


def asked_turns(events: list[dict[str, Any]]) -> list[int]:
    return [e["turn"] for e in events if e["type"] == "model-response" and e["agent"] == "agent"]


async def test_the_call_in_flight_finishes_no_new_call_or_turn_starts_and_the_last_text_is_the_result(cm):
    events = listen(cm)
    turns = [
        {"text": "Counting.", "code": "print(await ctx.manager.invoke('counter', {'tag': 'one'}))"},
        {"text": "Stopping myself.", "code": "print(await ctx.manager.invoke('stopper', {}))\n"
         "await ctx.manager.invoke('counter', {'tag': 'after'})"},
        {"text": "Never said."},
    ]  # fmt: skip
    assert await run_agent(cm, turns) == "Stopping myself."
    assert counted(cm.cwd) == ["one"]  # the call after the stop was refused
    assert asked_turns(events) == [1, 2]  # turn 3 never started
    (result,) = [e["result"] for e in events if e["type"] == "tool-error"]
    assert "asked" in result and "RunStopped: the run was stopped (enough): no new call starts" in result
    done = events[-1]
    assert (done["type"], done["status"], done["message"], done["result"]) == (
        "agent-complete", "stopped", "Stopped: enough", "Stopping myself.",
    )  # fmt: skip
    (run,) = cm.state.runs.list()
    assert run.status == "stopped"
    (agent,) = cm.state.runs.agents(run.id)
    report = agent.report
    assert report["status"] == "stopped" and report["message"] == "Stopped: enough"
    assert report["result"] == "Stopping myself." and len(report["steps"]) == 2
    calls = report["steps"][1]["tool_calls"][0]["host_calls"]
    assert [(c["skill"], c["skipped"], bool(c.get("error"))) for c in calls] == [
        ("stopper", False, False), ("counter", False, True),
    ]  # fmt: skip


async def test_a_stopped_run_lets_the_next_run_of_its_session_go(cm):
    """One run of a session at a time: a run that ends stopped gives its turn back, so
    the next run of the session goes on (and sees the stopped run's messages)."""
    stopping = [{"text": "Stopping.", "code": "print(await ctx.manager.invoke('stopper', {}))"}, {"text": "Never."}]
    call = {"prompt": "Test.", "user_message": "Work.", "config": {"agent": "agent-scripted", "script": stopping}}
    assert await cm.invoke("agent", call, session="s1") == "Stopping."
    call = {"prompt": "Test.", "user_message": "Again.", "config": {"agent": "agent-scripted",
                                                                     "script": [{"text": "Next."}]}}  # fmt: skip
    assert await asyncio.wait_for(cm.invoke("agent", call, session="s1"), 60) == "Next."
    assert [r.status for r in cm.state.runs.list(session="s1")] == ["done", "stopped"]
    users = [e.message["text"] for e in cm.state.sessions.messages("s1") if e.message["role"] == "user"]
    assert users == ["Work.", "Again."]


async def test_a_stop_during_a_model_call_lets_the_turn_end_and_denies_its_code(cm):
    events = listen(cm)

    def stop_at_turn_two(topic: str, event: dict[str, Any]) -> None:
        if event["type"] == "model-call" and event["turn"] == 2:
            assert cm.stop(event["run_id"])  # while "the model" thinks

    cm.events.subscribe("t", stop_at_turn_two)
    turns = [
        {"text": "One.", "code": "print(await ctx.manager.invoke('counter', {'tag': 'one'}))"},
        {"text": "Two, partly.", "code": "await ctx.manager.invoke('counter', {'tag': 'two'})", "delay": 0.05},
        {"text": "Never said."},
    ]
    assert await run_agent(cm, turns) == "Two, partly."
    assert counted(cm.cwd) == ["one"] and asked_turns(events) == [1, 2]
    (denied,) = [e["result"] for e in events if e["type"] == "tool-error"]
    assert denied == "Tool call denied: the run was stopped (stop requested): no more code runs"
    assert events[-1]["status"] == "stopped" and events[-1]["message"] == "Stopped: stop requested"
    (agent,) = cm.state.runs.agents(cm.state.runs.list()[0].id)
    assert agent.report["steps"][1]["tool_calls"][0]["skipped"] is True


async def test_a_run_that_owes_a_finish_value_fails_with_run_stopped_and_keeps_its_status(cm):
    turns = [{"text": "Half way.", "code": "await ctx.manager.invoke('stopper', {})"}, {"text": "x"}]
    with pytest.raises(RunStopped, match=r"the run was stopped \(enough\) before a valid ctx.manager.finish"):
        await run_agent(cm, turns, returns={"type": "integer"})
    (run,) = cm.state.runs.list()
    assert run.status == "stopped"


async def test_a_sub_agent_stops_with_its_run_and_hands_its_partial_result_to_its_parent(cm):
    events = listen(cm)
    inner = {"agent": "agent-scripted", "script": [
        {"text": "Inner working.", "code": "await ctx.manager.invoke('stopper', {})"},
        {"text": "Inner never."},
    ]}  # fmt: skip
    turns = [
        {"text": "Delegating.", "code": "r = await ctx.manager.invoke('agent', {'name': 'inner', 'user_message': "
         f"'go', 'allowed_tools': 'stopper', 'config': {inner!r}}})\nprint('inner said:', r)"},
        {"text": "Outer never."},
    ]  # fmt: skip
    assert await run_agent(cm, turns, allowed_tools="agent stopper") == "Delegating."
    ends = {e["agent"]: (e["status"], e["result"]) for e in events if e["type"] == "agent-complete"}
    assert ends == {"inner": ("stopped", "Inner working."), "agent": ("stopped", "Delegating.")}
    (result,) = [e["result"] for e in events if e["type"] == "tool-result" and e["agent"] == "agent"]
    assert "inner said: Inner working." in result  # the host call in flight finished with it


async def test_a_stop_while_an_approver_thinks_refuses_that_call_and_ends_the_run(cm):
    events = listen(cm)
    asked = asyncio.Event()

    async def slow_approver(request: approval.ApprovalRequest) -> bool:
        asked.set()
        await asyncio.Event().wait()  # a human who never answers
        return True

    async def stop_when_asked() -> None:
        await asked.wait()
        (running,) = list(cm._runs)
        assert cm.stop(running, "no answer came")

    turns = [{"text": "Writing.", "code": "await ctx.manager.invoke('file-write', {'path': 'x.txt', 'content': 'x'})"},
             {"text": "Never."}]  # fmt: skip
    config = {"security": {"mode": "interactive", "policy": {"interactive": {"ask": ["file-write"]}}}}
    with approval.session(slow_approver):
        stopper = asyncio.ensure_future(stop_when_asked())
        call = {"prompt": "T.", "user_message": "W.", "config": {"agent": "agent-scripted", "script": turns}}
        result = await cm.invoke("agent", call, config=config, nonlocals={"agent": {"events": "t"}})
        await stopper
    assert result == "Writing." and not (cm.cwd / "x.txt").exists()
    kinds = [(e["type"], e.get("decision"), e.get("by")) for e in events if e["type"].startswith("approval-")]
    assert kinds == [("approval-requested", None, None), ("approval-resolved", "deny", "stop")]
    assert events[-1]["status"] == "stopped"


async def test_stop_returns_false_for_a_run_that_is_not_in_progress(cm):
    assert cm.stop("0123456789abcdef") is False
    await run_agent(cm, [{"text": "Done."}])
    (run,) = cm.state.runs.list()
    assert cm.stop(run.id) is False  # it ended


# -- a run nothing runs: waiting for approval ---------------------------------------------------------


async def test_stopping_a_run_waiting_for_approval_ends_it_stopped_with_the_last_text(cm, capsys, monkeypatch):
    monkeypatch.setenv("AGENT_APPS_STATE", cm.state.path)  # the command line's store is the manager's
    write = "await ctx.manager.invoke('file-write', {'path': 'o.txt', 'content': 'x'})"
    turns = [{"text": "About to write.", "code": write}, {"text": "Done."}]
    config = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}
    call = {"prompt": "T.", "user_message": "W.", "config": {"agent": "agent-scripted", "script": turns}}
    with pytest.raises(ApprovalPending) as info:
        await cm.invoke("agent", call, config=config)
    run_id = info.value.run_id
    assert cli_main(["runs", "stop", run_id[:12], "--reason", "not today"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"stopped run {run_id} (it was waiting-approval); its status is stopped"
    assert cm.state.runs.get(run_id).status == "stopped"
    (agent,) = cm.state.runs.agents(run_id)
    assert (agent.status, agent.report["message"], agent.report["result"]) == (
        "stopped", "Stopped: not today", "About to write.",
    )  # fmt: skip
    with pytest.raises(NotResumable, match="status stopped"):
        cm.approve(run_id)
    with pytest.raises(NotResumable, match=r"it already ended \(status stopped\)"):
        await cm.resume(run_id)
    assert cli_main(["runs", "stop", run_id]) == 2
    assert "cannot be stopped: it already ended (status stopped)" in capsys.readouterr().err
    assert cli_main(["runs", "stop", "feedface"]) == 2
    assert "no run 'feedface'" in capsys.readouterr().err


# -- another process, another machine ------------------------------------------------------------------

WAITS = """\
---
description: Waits, then works on.
metadata:
  model:
    agent: agent-scripted
    script:
      - text: "Waiting for a stop."
        code: |
          print(await ctx.manager.invoke("waiter", {}))
          await ctx.manager.invoke("counter", {"tag": "after"})
      - text: "Never said."
---
Wait.
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    import os

    env = {"AGENT_APPS_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    for name in ("AGENT_APPS_CACHE_DIR", "XDG_CACHE_HOME"):  # the compiled sandbox, where this process has it
        if os.environ.get(name):
            env[name] = os.environ[name]
    return {**env, **extra}


def _project(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    for name, source in (("counter", COUNTER), ("waiter", WAITER)):
        (skills / f"{name}.skill.py").write_text(textwrap.dedent(source))
    (skills / "waits.skill.md").write_text(WAITS)


def _stop_from_elsewhere(tmp_path: Path, runner: dict[str, str], stopper: dict[str, str]) -> tuple[Any, Any]:
    """Run ``waits`` in one process, stop it with ``runs stop --wait`` from another;
    returns both processes' outcomes."""
    cmd = [sys.executable, "-m", "agent_apps", "invoke", "waits", "--path", "skills"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=runner, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "run_id").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        run_id = (tmp_path / "run_id").read_text()
        stop = subprocess.run(
            [sys.executable, "-m", "agent_apps", "runs", "stop", run_id[:12], "--wait", "--reason", "from afar"],
            cwd=tmp_path, env=stopper, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return stop, (proc.returncode, out, err, run_id)


def test_runs_stop_stops_a_run_in_another_process(tmp_path):
    _project(tmp_path)
    env = _env(tmp_path)
    stop, (code, out, err, run_id) = _stop_from_elsewhere(tmp_path, env, env)
    assert stop.returncode == 0, stop.stderr
    assert stop.stdout.splitlines()[0].startswith(f"asked run {run_id} (process ")
    assert stop.stdout.splitlines()[-1] == f"run {run_id} ended: stopped"
    assert code == 1 and out.strip() == "Waiting for a stop."
    assert "error: waits: Stopped: from afar (1 turn, 1 step); the partial result is on stdout" in err
    assert counted(tmp_path) == []  # the call after the one in flight was refused
    shown = subprocess.run([sys.executable, "-m", "agent_apps", "runs", "show", run_id, "--json"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    (agent,) = json.loads(shown.stdout)["agents"]
    (call,) = agent["report"]["steps"][0]["tool_calls"]
    assert [(c["skill"], bool(c.get("error"))) for c in call["host_calls"]] == [("waiter", False), ("counter", True)]
    (result,) = [e["result"]["text"] for e in agent["trace"] if e["type"] == "tool-result"]
    assert "saw the stop: from afar" in result and "RunStopped" in result
    text = subprocess.run([sys.executable, "-m", "agent_apps", "runs", "show", run_id], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert f"run {run_id}: stopped" in text.stdout and "  Stopped: from afar" in text.stdout, text.stderr


def test_on_a_shared_postgresql_store_a_run_is_stopped_from_another_machine(tmp_path, postgres_url):
    _project(tmp_path)
    machines = [_env(tmp_path, AGENT_APPS_HOME=str(tmp_path / f"machine{i}"), AGENT_APPS_STATE=postgres_url)
                for i in range(2)]  # fmt: skip
    stop, (code, out, err, run_id) = _stop_from_elsewhere(tmp_path, machines[0], machines[1])
    assert stop.returncode == 0, stop.stderr
    assert stop.stdout.splitlines()[-1] == f"run {run_id} ended: stopped"
    assert code == 1 and out.strip() == "Waiting for a stop.", err
    assert counted(tmp_path) == []


async def test_watching_for_stop_requests_keeps_no_manager_alive(tmp_path):
    """The watch of the store for stop requests lives in a weak map keyed by the manager:
    a manager that ran agents is freed (the sandbox pool holds the last run only)."""
    import gc
    import weakref

    from agent_apps.testing.plugin import hermetic_manager

    managers = []
    for i in range(4):
        cm = hermetic_manager([], tmp_path / f"m{i}", state=str(tmp_path / f"s{i}.db"))
        await run_agent(cm, [{"text": "Done."}])
        managers.append(weakref.ref(cm))
    del cm
    gc.collect()
    assert sum(ref() is not None for ref in managers) <= 1
