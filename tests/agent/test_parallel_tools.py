"""Parallel tool calls (model.parallel_tool_calls) and per-tool timeouts (model.tool_timeout)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio

# counts how many of its calls are in flight at once
GATE = """
import asyncio
frontmatter = {"params": {"type": "object", "properties": {"i": {"type": "integer"}, "s": {"type": "number"}}}}
state = {"now": 0, "peak": 0}
async def main(ctx, args):
    state["now"] += 1
    state["peak"] = max(state["peak"], state["now"])
    try:
        await asyncio.sleep(args.get("s", 0.3))
    finally:
        state["now"] -= 1
    return {"i": args["i"], "peak": state["peak"]}
"""


@pytest.fixture
def gate(write_skill):
    write_skill("gate", GATE)


@pytest.fixture
def events(context_manager):
    got: list[dict] = []
    context_manager.events.subscribe("p", lambda topic, event: got.append(event))
    return got


def call(i: int, seconds: float = 0.3) -> str:
    invoke = f"r = await ctx.manager.invoke('gate', {{'i': {i}, 's': {seconds}}})"
    return f"{invoke}\nmemory.setdefault('seen', []).append(r['i'])\nr"


async def run(cm, harness, turns, **config):
    call_args = {"prompt": "P", "events": "p", "allowed_tools": "gate", "config": {**harness.config(turns), **config}}
    return await cm.invoke("agent", call_args)


async def test_the_calls_of_one_answer_run_together_and_come_back_in_call_order(context_manager, gate, events, harness):
    # the first call takes longest: it ends last, yet its result comes first
    turns = [{"code": [call(0, 0.6), call(1, 0.3), call(2, 0.1)]}, {"text": "done"}]
    assert await run(context_manager, harness, turns) == "done"
    results = [e for e in events if e["type"] == "tool-result"]
    assert [json_of(e)["i"] for e in results] == [0, 1, 2]
    assert max(json_of(e)["peak"] for e in results) == 3  # all three were in flight at once
    calls = [e["id"] for e in events if e["type"] == "tool-call"]
    assert [e["id"] for e in results] == calls


async def test_one_after_the_other_when_parallel_calls_are_off(context_manager, gate, events, harness):
    turns = [{"code": [call(0), call(1), call(2)]}, {"text": "done"}]
    assert await run(context_manager, harness, turns, parallel_tool_calls=False) == "done"
    results = [json_of(e) for e in events if e["type"] == "tool-result"]
    assert [r["i"] for r in results] == [0, 1, 2] and max(r["peak"] for r in results) == 1


async def test_each_call_is_bounded_by_the_tool_timeout(context_manager, gate, events, harness):
    turns = [{"code": [call(0, 30), call(1, 0.1)]}, {"code": "ctx.manager.finish(memory['seen'])"}]
    assert await run(context_manager, harness, turns, tool_timeout=0.5) == [1]  # shared memory: the one that ended
    errors = [e["result"] for e in events if e["type"] == "tool-error"]
    assert len(errors) == 1
    assert "TimeoutError: this call ran longer than its time limit of 0.5 s (tool_timeout)" in errors[0]
    # alone, a call is bounded the same way
    events.clear()
    turns = [{"code": call(0, 30)}, {"text": "done"}]
    assert await run(context_manager, harness, turns, tool_timeout=0.5) == "done"
    (error,) = [e["result"] for e in events if e["type"] == "tool-error"]
    assert "TimeoutError" in error and "0.5 s" in error


async def test_finish_and_errors_stay_with_their_own_call(context_manager, gate, events):
    turns = [
        {"code": ["print('first'); raise ValueError('no')", "print('second'); ctx.manager.finish({'ok': 2})"]},
        {"text": "never"},
    ]
    config = {"agent": "agent-scripted", "script": turns}
    out = await context_manager.invoke("agent", {"prompt": "P", "events": "p", "config": config})
    assert out == {"ok": 2}
    error, result = [e for e in events if e["type"] in ("tool-error", "tool-result")]
    assert (
        error["type"] == "tool-error" and error["result"].startswith("first\n") and "ValueError: no" in error["result"]
    )
    assert result["result"] == 'second\nfinished with: {"ok": 2}'


def json_of(event: dict) -> dict:
    import json

    return json.loads(event["result"].splitlines()[-1])
