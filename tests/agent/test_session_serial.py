"""Runs of one session are serialized: a run started while another run of the session is
in progress waits for it, in arrival order, in one process and across processes; a
waiting run honours cancellation and its deadline; a killed process lets go."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agent_apps import BudgetExceeded, Cancelled, ContextManager
from agent_apps.state import StateStore

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

#: Marks ``{name}.started`` in the working folder, then waits until ``{name}.go`` exists.
GATE = """
import asyncio
from pathlib import Path
frontmatter = {"params": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}
async def main(ctx, args):
    folder = Path(ctx.manager.context_manager.cwd)
    (folder / f"{args['name']}.started").write_text("")
    while not (folder / f"{args['name']}.go").exists():
        await asyncio.sleep(0.01)
    return args["name"]
"""


def gated(name: str) -> list[dict]:
    """Two turns: the first waits at the gate called ``name``."""
    return [
        {"text": f"{name} one", "code": f"await ctx.manager.invoke('gate', {{'name': {name!r}}})"},
        {"text": f"{name} two"},
    ]


def call(name: str) -> dict:
    config = {"agent": "agent-scripted", "script": gated(name)}
    return {"prompt": "P", "user_message": f"user {name}", "config": config}


def history(store: StateStore, session: str) -> list[str]:
    """The session's messages as ``role:text`` (tool results by the gate's name)."""
    return [f"{e.message['role']}:{e.message.get('text')}" for e in store.sessions.messages(session)]


def expected(*names: str) -> list[str]:
    out = []
    for name in names:
        out += [f"user:user {name}", f"assistant:{name} one", f"tool:{name}", f"assistant:{name} two"]
    return out


async def wait_for(predicate, what: str, limit: float = 60.0) -> None:
    end = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > end:
            pytest.fail(f"never happened: {what}")
        await asyncio.sleep(0.01)


def tickets(store: StateStore, session: str) -> int:
    with store.db.read() as conn:
        return conn.execute("SELECT count(*) FROM session_queue WHERE session_id = ?", (session,)).fetchone()[0]


@pytest.fixture
def cm(context_manager, write_skill):
    write_skill("gate", GATE)
    return context_manager


async def test_runs_of_one_session_in_one_process_go_one_after_another_in_arrival_order(cm, tmp_path):
    first = asyncio.ensure_future(cm.invoke("agent", call("A"), session="s"))
    await wait_for(lambda: (tmp_path / "A.started").exists(), "A reached its gate")
    later = []
    for queued, name in enumerate(("B", "C", "D"), 2):  # each arrives once the one before is queued
        later.append(asyncio.ensure_future(cm.invoke("agent", call(name), session="s")))
        await wait_for(lambda n=queued: tickets(cm.state, "s") == n, f"{name} queued")
        (tmp_path / f"{name}.go").write_text("")  # its gate is open: only the session holds it
    assert not any((tmp_path / f"{n}.started").exists() for n in "BCD")  # none ran while A is in progress
    (tmp_path / "A.go").write_text("")
    results = await asyncio.gather(first, *later)
    assert results == ["A two", "B two", "C two", "D two"]
    assert history(cm.state, "s") == expected("A", "B", "C", "D")
    assert tickets(cm.state, "s") == 0


async def test_a_run_off_the_record_waits_for_the_session_and_reads_it_between_runs(cm, tmp_path):
    (tmp_path / "A.go").write_text("")
    assert await cm.invoke("agent", call("A"), session="s") == "A two"
    writing = asyncio.ensure_future(cm.invoke("agent", call("B"), session="s"))
    await wait_for(lambda: (tmp_path / "B.started").exists(), "B reached its gate")
    (tmp_path / "R.go").write_text("")
    reading = asyncio.ensure_future(cm.invoke("agent", call("R"), session="s", read_only=True))
    await wait_for(lambda: tickets(cm.state, "s") == 2, "the run off the record queued")
    assert not (tmp_path / "R.started").exists()  # it never reads B's half-written turn
    (tmp_path / "B.go").write_text("")
    assert await asyncio.gather(writing, reading) == ["B two", "R two"]
    assert history(cm.state, "s") == expected("A", "B") and tickets(cm.state, "s") == 0


async def test_other_sessions_and_runs_without_a_session_do_not_wait(cm, tmp_path):
    first = asyncio.ensure_future(cm.invoke("agent", call("A"), session="s"))
    await wait_for(lambda: (tmp_path / "A.started").exists(), "A reached its gate")
    for name in ("B", "C"):
        (tmp_path / f"{name}.go").write_text("")
    assert await cm.invoke("agent", call("B"), session="other") == "B two"
    assert await cm.invoke("agent", call("C")) == "C two"
    (tmp_path / "A.go").write_text("")
    assert await first == "A two"


async def test_a_waiting_run_honours_its_cancellation_and_the_session_goes_on(cm, tmp_path):
    first = asyncio.ensure_future(cm.invoke("agent", call("A"), session="s"))
    await wait_for(lambda: (tmp_path / "A.started").exists(), "A reached its gate")
    (tmp_path / "B.go").write_text("")
    (tmp_path / "C.go").write_text("")
    waiting = asyncio.ensure_future(cm.invoke("agent", call("B"), session="s"))
    await wait_for(lambda: tickets(cm.state, "s") == 2, "B queued")
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert tickets(cm.state, "s") == 1  # its place is given back
    timed = cm.invoke("agent", call("C"), session="s", timeout=0.3)  # the command line's --timeout
    with pytest.raises(Cancelled, match="timed out"):
        await timed
    statuses = {r.status for r in cm.state.runs.list(session="s")}
    assert statuses == {"running", "cancelled"}
    (tmp_path / "A.go").write_text("")
    assert await first == "A two"
    assert history(cm.state, "s") == expected("A")  # the cancelled runs left nothing in it
    (tmp_path / "D.go").write_text("")
    assert await cm.invoke("agent", call("D"), session="s") == "D two"


async def test_a_waiting_run_ends_at_its_deadline_with_status_budget(cm, tmp_path):
    first = asyncio.ensure_future(cm.invoke("agent", call("A"), session="s"))
    await wait_for(lambda: (tmp_path / "A.started").exists(), "A reached its gate")
    late = call("B")
    late["config"]["budget"] = {"deadline_s": 0.3}
    with pytest.raises(BudgetExceeded, match="deadline_s"):
        await cm.invoke("agent", late, session="s")
    (run,) = [r for r in cm.state.runs.list(session="s") if r.status != "running"]
    assert run.status == "budget" and tickets(cm.state, "s") == 1
    (tmp_path / "A.go").write_text("")
    assert await first == "A two"


NESTED = """
frontmatter = {"params": {"type": "object"}}
async def main(ctx, args):
    config = {"agent": "agent-scripted", "script": [{"text": "inner"}]}
    return await ctx.manager.invoke("agent", {"prompt": "P", "user_message": "in", "config": config}, session="s")
"""


async def test_an_agent_inside_a_run_of_the_session_shares_its_turn(cm, write_skill):
    write_skill("nested", NESTED)
    code = "ctx.manager.finish(await ctx.manager.invoke('nested'))"
    outer = {"prompt": "P", "user_message": "out", "allowed_tools": "nested",
             "config": {"agent": "agent-scripted", "script": [{"code": code}]}}
    assert await asyncio.wait_for(cm.invoke("agent", outer, session="s"), 60) == "inner"


# -- across processes ----------------------------------------------------------------------


def start(tmp_path: Path, name: str) -> subprocess.Popen[str]:
    skill = tmp_path / "skills" / f"run-{name.lower()}.skill.md"
    model = textwrap.indent(json.dumps({"agent": "agent-scripted", "script": gated(name)}, indent=2), "    ")
    skill.write_text(f"---\ndescription: Run {name}.\nmetadata:\n  model:\n{model}\n---\nP\n")
    return subprocess.Popen(
        [sys.executable, "-m", "agent_apps", "invoke", f"run-{name.lower()}", "--path", "skills", "--session", "s",
         f"task=user {name}"],
        cwd=tmp_path, env={**os.environ, "AGENT_APPS_HOME": str(tmp_path / "home")},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.fixture
def project(tmp_path):
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "gate.skill.py").write_text(textwrap.dedent(GATE))
    return tmp_path


async def test_two_invokes_of_one_session_at_once_keep_its_history_whole(project):
    a = start(project, "A")
    try:
        await wait_for(lambda: (project / "A.started").exists(), "A reached its gate")
        store = StateStore(project / "home" / "state.db")
        (project / "B.go").write_text("")
        b = start(project, "B")
        # B arrives while A is in progress: queued (fixed), or run to its end (not)
        await wait_for(lambda: tickets(store, "s") == 2 or b.poll() is not None, "B arrived")
        assert not (project / "B.started").exists()
        (project / "A.go").write_text("")
        assert a.wait(60) == 0 and b.wait(60) == 0, a.stderr.read() + b.stderr.read()  # type: ignore[union-attr]
    finally:
        a.kill()
    assert history(store, "s") == expected("A", "B")


async def test_a_run_killed_with_9_lets_the_next_one_go_at_once(project):
    a = start(project, "A")
    try:
        await wait_for(lambda: (project / "A.started").exists(), "A reached its gate")
        store = StateStore(project / "home" / "state.db")
        (project / "B.go").write_text("")
        b = start(project, "B")
        await wait_for(lambda: tickets(store, "s") == 2, "B queued behind A")
        a.send_signal(signal.SIGKILL)
        a.wait(30)
        assert b.wait(60) == 0, b.stderr.read()  # type: ignore[union-attr]
    finally:
        a.kill()
    assert history(store, "s") == expected("B")  # A died inside its first turn: nothing of it stored
    assert tickets(store, "s") == 0
    assert {r.status for r in store.runs.list(session="s")} == {"interrupted", "done"}


def test_a_fresh_manager_sees_no_ticket_left_behind(tmp_path):
    cm = ContextManager(search_path=[], cwd=tmp_path, home=tmp_path / "h", env=False, project=False,
                        user=False, entry_points=False)
    config = {"agent": "agent-scripted", "script": [{"text": "hi"}]}
    for _ in range(3):
        assert cm.invoke_sync("agent", {"prompt": "P", "config": config}, session="s") == "hi"
    assert tickets(cm.state, "s") == 0
