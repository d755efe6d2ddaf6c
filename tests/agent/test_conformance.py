"""The provider conformance suite: every provider must pass it (seed 002, S5.1-S5.8).

Parametrized over the harnesses in ``providers.py``. It drives the real ``agent``
skill, the real sandbox and the provider under test, and checks the provider follows
the hook protocol: one turn without tools, tool results fed back, several calls in a
turn, errors as content, cancellation, multi-turn loops, the turn cap, directives.
"""

from __future__ import annotations

import asyncio

import pytest

from agent_apps import Cancelled, LimitExceeded, Signal

pytestmark = pytest.mark.anyio


@pytest.fixture
def events(context_manager):
    got = []
    context_manager.events.subscribe("conformance", lambda topic, event: got.append(event))
    return got


def types(events, *wanted):
    return [e["type"] for e in events if not wanted or e["type"] in wanted]


async def test_s5_1_no_tool_one_turn(harness, run_agent, events):
    result = await run_agent(harness, [{"text": "Hello there."}], events="conformance")
    assert result == "Hello there."
    assert types(events, "turn-start", "turn-end") == ["turn-start", "turn-end"]
    assert events[-1]["type"] == "agent-complete" and events[-1]["turns"] == 1


async def test_s5_2_tool_result_then_answer(harness, run_agent, events):
    turns = [
        {"text": "Counting.", "code": 'n = await ctx.manager.invoke("word-count", {"text": "a b c"})\nprint("n =", n)'},
        {"text": "There are 3 words."},
    ]
    assert await run_agent(harness, turns, events="conformance") == "There are 3 words."
    results = [e for e in events if e["type"] == "tool-result"]
    assert len(results) == 1 and "n = 3" in results[0]["result"]
    assert types(events, "turn-start") == ["turn-start", "turn-start"]


async def test_s5_3_several_calls_in_one_turn(harness, run_agent, events):
    turns = [{"code": ["print('first')", "print('second')"]}, {"text": "Both ran."}]
    assert await run_agent(harness, turns, events="conformance") == "Both ran."
    outputs = [e["result"] for e in events if e["type"] == "tool-result"]
    assert outputs == ["first", "second"]


async def test_s5_4_error_fed_back_as_content(harness, run_agent, events):
    turns = [{"code": "raise ValueError('bad input')"}, {"text": "I saw the error."}]
    assert await run_agent(harness, turns, events="conformance") == "I saw the error."
    (error,) = [e for e in events if e["type"] == "tool-error"]
    assert "ValueError: bad input" in error["result"]


async def test_s5_5_cancellation_mid_run(harness, run_agent, context_manager):
    signal = Signal()
    turns = [{"text": "thinking...", "delay": 60}]
    call = {"prompt": "p", "user_message": "u", "config": harness.config(turns)}
    task = asyncio.ensure_future(context_manager.invoke("agent", call, signal=signal))
    await asyncio.sleep(0.3)
    signal.cancel("stop the test")
    with pytest.raises(Cancelled, match="stop the test"):
        await asyncio.wait_for(task, 20)


async def test_s5_6_multi_turn_loop(harness, run_agent, events):
    turns = [
        {"code": "memory['n'] = 1"},
        {"code": "memory['n'] += 1"},
        {"code": "memory['n'] += 1\nprint(memory['n'])"},
        {"text": "Counted to three."},
    ]
    assert await run_agent(harness, turns, events="conformance") == "Counted to three."
    assert [e["result"] for e in events if e["type"] == "tool-result"][-1] == "3"
    assert len(types(events, "turn-start")) == 4


async def test_s5_7_turn_cap(harness, run_agent, events):
    # the run stops with the terminal message after the model's last text, not an error
    turns = [{"text": f"Step {i}.", "code": f"print({i})"} for i in range(6)]
    result = await run_agent(harness, turns, config={"max_turns": 2}, events="conformance")
    assert result == "Step 1.\n\nStopped: maximum turn limit reached"
    assert types(events, "turn-start") == ["turn-start", "turn-start"]
    assert events[-1]["type"] == "agent-complete" and events[-1]["status"] == "max_turns"
    # a run that must finish() a schema cannot end with text: a clear error
    returns = {"type": "integer"}
    with pytest.raises(LimitExceeded, match=r"Stopped: maximum turn limit reached \(2 turns\) before a valid"):
        await run_agent(harness, turns, config={"max_turns": 2}, returns=returns)


async def test_s5_8_signal_reaches_the_tool(harness, run_agent, context_manager):
    heard = []
    context_manager.events.subscribe("tool-*", lambda topic, event: heard.append(topic))
    signal = Signal()
    turns = [{"code": 'await ctx.manager.invoke("slow-tool", {"seconds": 60})'}, {"text": "unreachable"}]
    call = {"prompt": "p", "user_message": "u", "config": harness.config(turns)}
    task = asyncio.ensure_future(context_manager.invoke("agent", call, signal=signal))
    for _ in range(1000):  # bounded; a provider that starts a process needs a moment
        if "tool-started" in heard:
            break
        await asyncio.sleep(0.02)
    signal.cancel("user stop")
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 20)
    assert "tool-cancelled" in heard


async def test_s5_8_signal_interrupts_running_sandbox_code(harness, run_agent, context_manager):
    signal = Signal()
    turns = [{"code": "while True:\n    pass"}, {"text": "unreachable"}]
    call = {"prompt": "p", "user_message": "u", "config": {**harness.config(turns), "sandbox": {"timeout": 120}}}
    task = asyncio.ensure_future(context_manager.invoke("agent", call, signal=signal))
    await asyncio.sleep(0.5)
    signal.cancel("enough")
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 20)


async def test_directive_stop_is_obeyed(harness, run_agent):
    # the script has exactly one turn: a provider that calls the model again fails
    assert await run_agent(harness, [{"code": "ctx.manager.finish({'ok': True})"}]) == {"ok": True}


async def test_directive_deny_is_obeyed(harness, run_agent, events):
    turns = [{"code": ["ctx.manager.finish(1)", "print('must not run')"]}]
    assert await run_agent(harness, turns, events="conformance") == 1
    texts = [e["result"] for e in events if e["type"] in ("tool-result", "tool-error")]
    assert not any("must not run" in t for t in texts)
    assert any("denied" in t for t in texts)


async def test_directive_continue_with_message_is_obeyed(harness, run_agent):
    returns = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
    turns = [{"text": "The answer is 3."}, {"code": "ctx.manager.finish({'count': 3})"}]
    assert await run_agent(harness, turns, returns=returns) == {"count": 3}
