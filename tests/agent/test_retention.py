"""``model.retention: run`` and durable runs (docs/durability.md, docs/sessions.md): a run
that stops to wait for approval has not ended, so it keeps its journal, its checkpoint
and its session's messages until a resume ends it; then they are gone. For the
outermost agent and for a sub-agent started by agent code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_apps import ApprovalPending, ContextManager

pytestmark = pytest.mark.anyio

#: Unattended, file-write asks (the default would deny it).
ASK_WRITE = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}
WRITE = "await ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'hello'})"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An agent-apps home whose user config keeps every run's content for the run only."""
    home = tmp_path / "agent-apps-home"
    home.mkdir()
    (home / "config.yaml").write_text("model: {retention: run}\n")
    return home


def starts(inner: list[dict]) -> str:
    """Agent code that starts a scripted sub-agent playing ``inner`` and prints its result."""
    call = {"prompt": "Inner.", "config": {"agent": "agent-scripted", "script": inner}}
    return f"print(await ctx.manager.invoke('agent', {call!r}))"


def manager(home: Path, skills_path: Path) -> ContextManager:
    """A manager reading ``home``'s config; a new one per process, on the same store."""
    return ContextManager(
        search_path=[skills_path], cwd=home.parent, home=home, env=False, project=False, entry_points=False
    )


def kept(cm: ContextManager, run_id: str) -> tuple[bool, int, int]:
    """(a checkpoint, journal entries, session messages) the store holds for the run."""
    store = cm.state
    messages = store.sessions.messages("s") if store.sessions.get("s") is not None else []
    return store.journal.checkpoint(run_id) is not None, len(store.journal.entries(run_id)), len(messages)


async def waits_then_resumes(home: Path, skills_path: Path, turns: list[dict]) -> str:
    cm = manager(home, skills_path)
    call = {"prompt": "Test.", "user_message": "Go.", "config": {"agent": "agent-scripted", "script": turns}}
    with pytest.raises(ApprovalPending) as info:
        await cm.invoke("agent", call, config=ASK_WRITE, session="s")
    run_id = info.value.run_id
    assert cm.state.runs.get(run_id).status == "waiting-approval"
    has_checkpoint, entries, messages = kept(cm, run_id)
    assert has_checkpoint and entries > 0 and messages > 0  # it has not ended
    other = manager(home, skills_path)
    other.approve(run_id)
    result = await other.resume(run_id)
    assert other.state.runs.get(run_id).status == "done"
    assert kept(other, run_id) == (False, 0, 0)  # now it has
    assert (home.parent / "out.txt").read_text() == "hello"
    return result


async def test_a_run_waiting_for_approval_keeps_what_a_resume_needs(home, skills_path):
    turns = [{"code": "x = 1"}, {"code": WRITE}, {"text": "Done."}]
    assert await waits_then_resumes(home, skills_path, turns) == "Done."


async def test_a_sub_agent_waiting_for_approval_keeps_what_a_resume_needs(home, skills_path):
    turns = [{"code": "x = 1"}, {"code": starts([{"code": WRITE}, {"text": "Inner done."}])}, {"text": "Outer done."}]
    assert await waits_then_resumes(home, skills_path, turns) == "Outer done."


async def test_a_sub_agents_retention_removes_its_own_journal_only(home, skills_path):
    """The outer agent keeps everything (its skill says permanent); the sub-agent its
    code starts has the user's ``run``: when it ends, its journal goes, not the run's."""
    script = [{"code": starts([{"code": "x = 1"}, {"text": "Inner done."}])}, {"text": "Outer done."}]
    model = {"agent": "agent-scripted", "retention": "permanent", "script": script}
    (skills_path / "keeper.skill.md").write_text(
        f"---\ndescription: Keeps its runs.\nallowed-tools: agent\nmetadata:\n  model: {json.dumps(model)}\n---\nGo.\n"
    )
    cm = manager(home, skills_path)
    assert await cm.invoke("keeper") == "Outer done."
    (run,) = cm.state.runs.list()
    agents = {entry.agent for entry in cm.state.journal.entries(run.id)}
    assert agents == {"a1"} and cm.state.journal.checkpoint(run.id) is not None


async def test_a_run_cancelled_mid_turn_leaves_no_journal(home, skills_path):
    """Cancelled after its code's host call was journaled: the run has ended, so its
    journal goes, host call included."""
    import asyncio

    from agent_apps import Cancelled, Signal

    (skills_path / "counter.skill.py").write_text(
        "frontmatter = {'params': {'type': 'object'}}\nasync def main(ctx, args):\n"
        "    ctx.manager.emit('counted', {})\n    return 1\n"
    )
    cm = manager(home, skills_path)
    counted = asyncio.Event()
    cm.events.subscribe("counted", lambda topic, event: counted.set())
    code = "await ctx.manager.invoke('counter', {})\nawait asyncio.sleep(60)"
    call = {"prompt": "Test.", "config": {"agent": "agent-scripted", "script": [{"code": code}, {"text": "never"}]}}
    signal = Signal()
    task = asyncio.ensure_future(cm.invoke("agent", call, signal=signal))
    await asyncio.wait_for(counted.wait(), 30)
    signal.cancel()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 30)
    (run,) = cm.state.runs.list()
    assert cm.state.runs.agents(run.id)[0].status == "cancelled"
    assert cm.state.journal.entries(run.id) == [] and cm.state.journal.checkpoint(run.id) is None


async def test_retention_run_without_a_journal_ends_nested_runs_cleanly(home, skills_path):
    (home / "config.yaml").write_text("model: {retention: run, journal: false}\n")
    inner = {"prompt": "Inner.", "config": {"agent": "agent-scripted", "script": [{"text": "Inner done."}]}}
    script = [{"code": f"ctx.manager.finish(await ctx.manager.invoke('agent', {inner!r}))"}, {"text": "failed"}]
    cm = manager(home, skills_path)
    call = {"prompt": "Test.", "allowed_tools": "agent", "config": {"agent": "agent-scripted", "script": script}}
    assert await cm.invoke("agent", call) == "Inner done."
    (run,) = cm.state.runs.list()
    assert [a.status for a in cm.state.runs.agents(run.id)] == ["done", "done"]
