"""``cm.stream``: a run's events in order as they happen (the same as its progress topic
and ``--events``), then its result and status; leaving early cancels; a slow reader
holds the run back instead of piling up events; errors come out of the loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_apps import ApprovalPending, SkillFailed
from agent_apps import run_stream as run_stream_module

pytestmark = pytest.mark.anyio

#: Waits (up to 20 s) for the file "go", which the test writes when it reads a
#: tool-call event: a stream that gave events only at the end would never write it.
WAIT_FOR_GO = """
import asyncio
from pathlib import Path
frontmatter = {"description": "Wait for go.", "params": {"type": "object"}}
async def main(ctx, args):
    go = Path(ctx.manager.context_manager.cwd) / "go"
    for _ in range(400):
        if go.exists():
            return "went"
        await asyncio.sleep(0.05)
    return "no go"
"""

NOTE = """
from pathlib import Path
frontmatter = {"description": "Write a note.", "params": {"type": "object"}}
async def main(ctx, args):
    (Path(ctx.manager.context_manager.cwd) / "note.txt").write_text("written")
    return "ok"
"""


def agent(turns: list[dict[str, Any]], **config: Any) -> dict[str, Any]:
    return {"prompt": "Test.", "user_message": "Go.", "config": {"agent": "agent-scripted", "script": turns, **config}}


async def test_events_arrive_in_order_as_they_happen_then_the_result(context_manager, write_skill):
    cm = context_manager
    write_skill("wait-for-go", WAIT_FOR_GO)
    progress: list[dict[str, Any]] = []
    cm.events.subscribe("run.*", lambda topic, event: progress.append(event))
    turns = [{"text": "Waiting.", "code": "print(await ctx.manager.invoke('wait-for-go', {}))"}, {"text": "Done."}]
    seen: list[dict[str, Any]] = []
    async with cm.stream("agent", agent(turns)) as run:
        assert len(run.run_id) == 32 and run.status is None
        async for event in run:
            seen.append(event)
            if event["type"] == "tool-call":
                (cm.cwd / "go").write_text("x")  # the code waits for this, live
    assert (run.result, run.status, run.error) == ("Done.", "done", None)
    kinds = [e["type"] for e in seen]
    assert kinds[0] == "agent-start" and kinds[-1] == "agent-complete"
    assert kinds[:4] == ["agent-start", "turn-start", "model-call", "model-response"]
    assert seen == progress  # the run's progress topic, run.RUN_ID, got the same events
    assert {e["run_id"] for e in seen} == {run.run_id} and progress[0] is seen[0]
    (result,) = [e["result"] for e in seen if e["type"] == "tool-result"]
    assert result.startswith("went")
    response = next(e for e in seen if e["type"] == "model-response")
    assert response["response"]["text"] == "Waiting." and "meta" not in response["response"]
    assert cm.state.runs.get(run.run_id).status == "done"


async def test_leaving_the_loop_early_cancels_the_run(context_manager, write_skill):
    cm = context_manager
    write_skill("note", NOTE)
    turns = [{"text": "Thinking.", "delay": 0.05}, {"text": "Writing.", "code": "await ctx.manager.invoke('note', {})"}]
    async with cm.stream("agent", agent(turns, persistent=True)) as run:
        async for event in run:
            if event["type"] == "turn-start":
                break
    assert run.status == "cancelled" and run.result is None
    assert not (cm.cwd / "note.txt").exists()
    assert cm.state.runs.get(run.run_id).status == "cancelled"


async def test_a_slow_reader_holds_the_run_back_and_loses_nothing(context_manager, monkeypatch):
    monkeypatch.setattr(run_stream_module, "BUFFER", 8)
    text = "x" * 8 * 300  # 300 message deltas of 8 characters
    most = 0
    deltas = 0
    async with context_manager.stream("agent", agent([{"text": text}], stream=True)) as run:
        async for event in run:
            deltas += event["type"] == "agent-message"
            for _ in range(20):  # a slow reader: the run gets the loop to itself meanwhile
                await asyncio.sleep(0)
            most = max(most, len(run._events))
    assert run.result == text and deltas == 300
    assert most <= 8 + 4  # the buffer, and the few events one step of the run sends


async def test_a_failed_run_raises_at_the_end_of_the_loop(context_manager):
    cm = context_manager
    seen = []
    with pytest.raises(SkillFailed, match="the script has no turn 2"):
        async with cm.stream("agent", agent([{"text": "One.", "code": "print(1)"}])) as run:
            async for event in run:
                seen.append(event["type"])
    assert run.status == "error" and isinstance(run.error, SkillFailed)
    assert seen[-1] == "agent-error"


async def test_a_run_waiting_for_approval_says_so(context_manager):
    cm = context_manager
    turns = [{"text": "Writing.", "code": "await ctx.manager.invoke('file-write', {'path': 'a', 'content': 'b'})"}]
    config = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}
    async with cm.stream("agent", agent(turns), config=config) as run:
        with pytest.raises(ApprovalPending):
            async for _event in run:
                pass
    assert run.status == "waiting-approval" and run.error.run_id == run.run_id


async def test_a_streamed_run_can_be_stopped_by_its_id(context_manager):
    cm = context_manager
    turns = [{"text": "One.", "code": "print(1)"}, {"text": "Two.", "code": "print(2)"}, {"text": "Three."}]
    async with cm.stream("agent", agent(turns)) as run:
        async for event in run:
            if event["type"] == "tool-result":
                assert cm.stop(run.run_id, "seen enough")
    assert (run.status, run.result) == ("stopped", "One.")


async def test_a_skill_that_is_not_an_agent_streams_no_events(context_manager, write_skill):
    write_skill("twice", "frontmatter = {'params': {'type': 'object'}}\nasync def main(ctx, args):\n    return 2\n")
    async with context_manager.stream("twice", {}) as run:
        assert [event async for event in run] == []
    assert (run.result, run.status) == (2, "done")


def test_iterating_outside_the_block_is_a_clear_error(context_manager):
    with pytest.raises(RuntimeError, match="inside 'async with cm.stream"):
        iter_ = context_manager.stream("agent", {})
        iter_.__aiter__()
