"""Durable runs at the edges the mutation run of the journal found (benchmarks/mutate.py):
what a resume replays (errors, identical calls), when it refuses (an agent asked
something else, a run that ended, one still running, a root that cannot be invoked
again), what a failed resume leaves, and what an exported decision carries."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from agent_apps import ApprovalPending, Cancelled, ContextManager, ReplayDiverged
from agent_apps.state.errors import NotResumable
from agent_apps.state.run_snapshot import export_run, import_run

pytestmark = pytest.mark.anyio

#: Unattended, file-write asks (the default would deny it).
ASK_WRITE = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}
WRITE = "await ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'x'})"
#: Counts its calls in a file, so calls made in any process are counted; a string tag only.
COUNTER = """
from pathlib import Path
frontmatter = {"params": {"type": "object", "properties": {"tag": {"type": "string"}}}}
async def main(ctx, args):
    log = Path(ctx.manager.context_manager.cwd) / "counter.log"
    with log.open("a") as fh:
        fh.write(args.get("tag", "") + "\\n")
    return len(log.read_text().splitlines())
"""


@pytest.fixture
def cm(context_manager, write_skill):
    write_skill("counter", COUNTER)
    return context_manager


def fresh(cm: ContextManager, **options: Any) -> ContextManager:
    """Another manager on the same store and skills, as a new process would have."""
    return ContextManager(
        search_path=[r.path for r in cm.roots() if r.origin == "path"], cwd=cm.cwd, home=cm.home, env=False,
        project=False, user=False, entry_points=False, state=cm.state.path, **options,
    )  # fmt: skip


def scripted(turns: list[dict[str, Any]]) -> dict[str, Any]:
    return {"prompt": "Test.", "user_message": "Go.", "config": {"agent": "agent-scripted", "script": turns}}


async def outputs_of_each_attempt(cm: ContextManager, turns: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The first tool result of a run that waits for approval (in a later turn), and that of
    its resume after approval (the turn replayed)."""
    first: list[str] = []
    cm.events.subscribe("first", lambda topic, e: first.append(e["result"]) if e["type"] == "tool-result" else None)
    with pytest.raises(ApprovalPending) as info:
        await cm.invoke("agent", {**scripted(turns), "events": "first"}, config=ASK_WRITE)
    other = fresh(cm)
    second: list[str] = []
    other.events.subscribe("first", lambda topic, e: second.append(e["result"]) if e["type"] == "tool-result" else None)
    other.approve(info.value.run_id)
    assert await other.resume(info.value.run_id) == "Done."
    return first, second


async def test_a_call_that_failed_fails_again_on_replay_with_its_type_and_message(cm):
    code = ("try:\n    await ctx.manager.invoke('counter', {'tag': 7})\nexcept Exception as e:\n"
            "    print('failed:', e.type, str(e))\n")  # fmt: skip
    first, second = await outputs_of_each_attempt(cm, [{"code": code}, {"code": WRITE}, {"text": "Done."}])
    assert "failed: ArgsInvalid counter: invalid args at tag: 7 is not of type 'string'" in first[0]
    assert second[0] == first[0]


async def test_identical_calls_replay_each_their_own_result(cm):
    call = "await ctx.manager.invoke('counter', {'tag': 'x'})"
    code = f"a = {call}\nb = {call}\nprint('results', a, b)"
    first, second = await outputs_of_each_attempt(cm, [{"code": code}, {"code": WRITE}, {"text": "Done."}])
    assert "results 1 2" in first[0] and second[0] == first[0]
    assert (cm.cwd / "counter.log").read_text() == "x\nx\n"  # neither made again


async def test_an_agent_asked_something_else_on_resume_diverges_and_does_nothing(cm, write_skill):
    """The root reads its task from a file outside the journal; the file changed."""
    write_skill(
        "from-file",
        "from pathlib import Path\nfrontmatter = {}\nasync def main(ctx, args):\n"
        "    task = (Path(ctx.manager.context_manager.cwd) / 'task.txt').read_text()\n"
        "    return await ctx.manager.invoke('agent', {'prompt': 'p', 'user_message': task, 'config': {\n"
        f"        'agent': 'agent-scripted', 'script': [{{'code': {WRITE!r}}}, {{'text': 'Done.'}}]}}}})\n",
    )
    (cm.cwd / "task.txt").write_text("write the note")
    with pytest.raises(ApprovalPending) as info:
        await cm.invoke("from-file", config=ASK_WRITE)
    (cm.cwd / "task.txt").write_text("delete everything")
    other = fresh(cm)
    other.approve(info.value.run_id)
    with pytest.raises(ReplayDiverged, match=r"was asked \"delete everything\" where the journal has \"write the "
                                             r"note\"; nothing was executed"):
        await other.resume(info.value.run_id)
    assert not (cm.cwd / "out.txt").exists()


async def test_a_run_whose_root_cannot_be_invoked_again_is_refused_the_call_not_checkpointed(cm):
    async def main(ctx, args):
        return await ctx.manager.invoke("agent", scripted([{"code": WRITE}, {"text": "Done."}]))

    events: list[dict] = []
    cm.events.subscribe("x", lambda topic, e: events.append(e))
    root = {"main": main}
    assert await cm.invoke(root, config=ASK_WRITE, nonlocals={"agent": {"events": "x"}}) == "Done."
    (error,) = [e["result"] for e in events if e["type"] == "tool-error"]
    assert "PermissionDenied" in error and not (cm.cwd / "out.txt").exists()
    assert cm.state.runs.list()[0].status == "done"


@pytest.mark.parametrize(
    ("turns", "config", "status"),
    [
        ([{"text": "Done."}], {}, "done"),
        ([{"code": "x = 1"}, {"code": "x = 2"}], {"max_turns": 1}, "max_turns"),
        ([{"code": "x = 1"}, {"code": "x = 2"}], {"budget": {"turns": 1}}, "budget"),
    ],
)
async def test_a_run_that_ended_for_good_is_not_resumed(cm, turns, config, status):
    call = scripted(turns)
    call["config"].update(config)
    try:
        await cm.invoke("agent", call)
    except Exception:  # the budget's end is an error; the run's status says which end it was
        pass
    (run,) = cm.state.runs.list()
    assert run.status == status
    with pytest.raises(NotResumable, match=rf"it already ended \(status {status}\)"):
        await fresh(cm).resume(run.id)


async def test_a_run_still_running_is_not_resumed_elsewhere(cm):
    task = asyncio.ensure_future(cm.invoke("agent", scripted([{"text": "slow", "delay": 30}])))
    try:
        for _ in range(400):  # until the run and its journal exist
            await asyncio.sleep(0.05)
            runs = cm.state.runs.list()
            if runs and cm.state.journal.checkpoint(runs[0].id) is not None:
                break
        with pytest.raises(NotResumable, match=rf"it is still running \(process {os.getpid()}\)"):
            await fresh(cm).resume(runs[0].id)
    finally:
        task.cancel()
        with pytest.raises((Cancelled, asyncio.CancelledError)):
            await task


async def test_a_resume_that_fails_before_an_agent_starts_leaves_no_run_running(cm, write_skill, skills_path):
    write_skill("noter.skill.md", "---\ndescription: Notes.\nallowed-tools: file-write\nmetadata:\n  model:\n"
                f"    agent: agent-scripted\n    script: [{{code: \"{WRITE}\"}}, {{text: Done.}}]\n---\nNote.\n")
    with pytest.raises(ApprovalPending) as info:
        await cm.invoke("noter", config=ASK_WRITE)
    (skills_path / "noter.skill.md").unlink()  # gone before the resume
    other = fresh(cm)
    other.approve(info.value.run_id)
    with pytest.raises(Exception, match="noter"):
        await other.resume(info.value.run_id)
    assert other.state.runs.get(info.value.run_id).status == "error"


async def test_each_resume_counts_as_an_attempt(cm):
    turns = [{"code": WRITE}, {"code": WRITE.replace("out.txt", "two.txt")}, {"text": "Done."}]
    with pytest.raises(ApprovalPending) as info:
        await cm.invoke("agent", scripted(turns), config=ASK_WRITE)
    run_id = info.value.run_id
    assert cm.state.journal.checkpoint(run_id).attempts == 1
    other = fresh(cm)
    other.approve(run_id)
    with pytest.raises(ApprovalPending):  # the second write asks in its turn
        await other.resume(run_id)
    assert other.state.journal.checkpoint(run_id).attempts == 2
    other.approve(run_id)
    assert await fresh(cm).resume(run_id) == "Done."
    assert cm.state.journal.checkpoint(run_id).attempts == 3


async def test_a_run_moved_to_another_store_is_decided_there_and_keeps_its_attempts(skills_path, tmp_path):
    """Approved here, exported, imported elsewhere: the decision stays here (the importing
    user decides), the count of attempts travels. (The ask policy is the project's: an
    imported run brings model config only.)"""
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text(
        "security: {mode: unattended, policy: {unattended: {ask: [file-write]}}}\n"
    )

    def manager(state: str) -> ContextManager:
        return ContextManager(search_path=[skills_path], cwd=project, home=tmp_path / "home", env=False,
                              project=True, user=False, entry_points=False, state=state)  # fmt: skip

    here = manager(str(tmp_path / "here.db"))
    turns = [{"code": WRITE}, {"code": WRITE.replace("out.txt", "two.txt")}, {"text": "Done."}]
    with pytest.raises(ApprovalPending) as info:
        await here.invoke("agent", scripted(turns))
    run_id = info.value.run_id
    here.approve(run_id)
    with pytest.raises(ApprovalPending):  # a second attempt, waiting for the second write
        await here.resume(run_id)
    here.approve(run_id)
    moved = manager(str(tmp_path / "other.db"))
    import_run(moved.state, export_run(here.state, run_id))
    point = moved.state.journal.checkpoint(run_id)
    assert point.decision is None and point.attempts == 2
    with pytest.raises(NotResumable, match="waits for approval of file-write"):
        await moved.resume(run_id)
    moved.approve(run_id)
    assert await moved.resume(run_id) == "Done."
    assert (project / "two.txt").read_text() == "x"


async def test_the_journal_store_refuses_what_it_cannot_record(cm):
    with pytest.raises(ApprovalPending) as info:
        await cm.invoke("agent", scripted([{"code": WRITE}, {"text": "Done."}]), config=ASK_WRITE)
    run_id = info.value.run_id
    with pytest.raises(ValueError, match="a decision is one of approve, deny, skip, result, not 'maybe'"):
        cm.state.journal.decide(run_id, "maybe")
    with pytest.raises(ValueError, match="a call is either denied, skipped or given a result: one of them"):
        cm.approve(run_id, deny="no", skip=True)
    entries = cm.state.journal.entries(run_id, agent="a1")
    assert entries and {e.agent for e in entries} == {"a1"} and cm.state.journal.entries(run_id, agent="a9") == []

