"""The run report: what happened, turn by turn (the model's text and reasoning, the code,
each host call with its args, result or error and latency, usage, cost and timings),
bounded, honouring retention, and the turn in flight written as it happens."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_apps.agent import content
from agent_apps.state.run_view import load_run

pytestmark = pytest.mark.anyio

#: A tool that waits until a file exists: the test decides when the call returns.
GATE = """
import asyncio, os
frontmatter = {
    "description": "Waits for a file.",
    "params": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}
async def main(ctx, args):
    while not os.path.exists(args["path"]):
        await asyncio.sleep(0.01)
    return "opened"
"""

FAILS = """
frontmatter = {"description": "Always fails.", "params": {"type": "object"}}
async def main(ctx, args):
    raise ValueError("the tool broke")
"""


def scripted(turns, **extra):
    return {"agent": "agent-scripted", "script": turns, **extra}


async def run_agent(cm, turns, *, config=None, user_message="Go.", **args):
    call = {"prompt": "Test.", "user_message": user_message, "config": {**scripted(turns), **(config or {})}, **args}
    return await cm.invoke("agent", call)


CALLS = """\
n = await ctx.manager.invoke('word-count', {'text': 'a b c'})
try:
    await ctx.manager.invoke('fails', {})
except Exception as exc:
    print('caught', exc)
print(n)"""


async def test_each_turn_holds_the_models_text_reasoning_code_host_calls_usage_cost_and_timings(
    context_manager, write_skill, tools
):
    write_skill("fails", FAILS)
    turns = [
        {"text": "Counting.", "reasoning": "I should count first.", "code": CALLS,
         "usage": {"input_tokens": 1000, "output_tokens": 100}},
        {"text": "There are 3.", "usage": {"input_tokens": 2000, "output_tokens": 10}},
    ]  # fmt: skip
    # claude-haiku-4-5 costs $1 in / $5 out per million tokens (the bundled price table)
    assert await run_agent(context_manager, turns, config={"model_id": "eu.claude-haiku-4-5"}) == "There are 3."
    store = context_manager.state
    (run,) = store.runs.list()
    (agent,) = store.runs.agents(run.id)
    report = agent.report
    first, second = report["steps"]
    assert first["text"] == "Counting." and first["reasoning"] == "I should count first."
    assert second["text"] == "There are 3." and "reasoning" not in second
    (call,) = first["tool_calls"]
    assert call["args"] == {"code": CALLS} and call["result"] == "caught fails failed: ValueError: the tool broke\n3"
    ok, failed = call["host_calls"]
    assert ok["skill"] == "word-count" and ok["args"] == {"text": "a b c"} and ok["result"] == 3
    assert ok["status"] == "ok" and ok["latency_ms"] > 0 and ok["result_size"] == 1
    assert ok["id"] == f"{call['id']}.1" and failed["id"] == f"{call['id']}.2"
    assert failed["status"] == "error" and failed["args"] == {}
    assert failed["error"]["type"] == "SkillFailed" and "the tool broke" in failed["error"]["message"]
    assert "result" not in failed
    # timings: wall-clock starts in order, durations that add up
    assert report["started_at"] <= first["started_at"] <= call["started_at"] <= ok["started_at"]
    assert ok["started_at"] <= failed["started_at"] <= second["started_at"]
    assert first["total_ms"] >= first["tool_ms"] == call["latency_ms"] >= ok["latency_ms"] + failed["latency_ms"]
    # usage and cost per turn and in total, on the report and on the run
    assert first["cost_usd"] == pytest.approx((1000 * 1 + 100 * 5) / 1e6)
    assert second["cost_usd"] == pytest.approx((2000 * 1 + 10 * 5) / 1e6)
    assert report["cost_usd"] == pytest.approx(first["cost_usd"] + second["cost_usd"])
    assert report["usage"] == {"input_tokens": 3000, "output_tokens": 110}
    assert (run.input_tokens, run.output_tokens) == (3000, 110)
    assert run.cost_usd == pytest.approx(report["cost_usd"]) and run.to_json()["cost_usd"] == pytest.approx(0.00355)


async def test_without_a_price_no_cost_is_claimed(context_manager):
    await run_agent(context_manager, [{"text": "hi", "usage": {"input_tokens": 5, "output_tokens": 1}}])
    (run,) = context_manager.state.runs.list()
    (agent,) = context_manager.state.runs.agents(run.id)
    assert "cost_usd" not in agent.report and "cost_usd" not in agent.report["steps"][0] and run.cost_usd == 0


async def test_a_sub_agent_is_nested_under_the_host_call_that_started_it(context_manager, tools):
    inner = scripted([{"text": "inner", "code": "ctx.manager.finish(await ctx.manager.invoke('word-count', "
                                                 "{'text': 'x y'}))"}])  # fmt: skip
    code = (
        f"a = await ctx.manager.invoke('agent', {{'prompt': 'p', 'name': 'first', 'config': {inner!r}}})\n"
        f"b = await ctx.manager.invoke('agent', {{'prompt': 'p', 'name': 'second', 'config': {inner!r}}})\n"
        "ctx.manager.finish([a, b])"
    )
    assert await run_agent(context_manager, [{"code": code}], name="outer") == [2, 2]
    (run,) = context_manager.state.runs.list()
    view = load_run(context_manager.state, run.id)
    (root,) = view.roots
    assert root.info.name == "outer" and not root.children
    (call,) = root.steps[0]["tool_calls"]
    first, second = call["host_calls"]
    assert [n.info.name for n in root.by_call[first["id"]]] == ["first"]
    assert [n.info.name for n in root.by_call[second["id"]]] == ["second"]
    nested = root.by_call[first["id"]][0]
    assert nested.report["parent_call"] == first["id"] and nested.info.parent_id == root.info.id
    # the nested agent's own calls are its own, not its caller's
    assert [h["skill"] for h in nested.steps[0]["tool_calls"][0]["host_calls"]] == ["word-count"]
    assert [n.info.name for n in view.walk()] == ["outer", "first", "second"]


async def test_big_texts_and_values_are_cut_and_say_how_big_they_were(context_manager, tools, monkeypatch):
    long_code = "x = 1\n" * 4000  # 24,000 characters
    code = long_code + "await ctx.manager.invoke('word-count', {'text': 'w ' * 5000})\nprint('r' * 20000)"
    await run_agent(context_manager, [{"text": "t" * 20000, "code": code}, {"text": "done"}])
    (run,) = context_manager.state.runs.list()
    (agent,) = context_manager.state.runs.agents(run.id)
    first = agent.report["steps"][0]
    assert len(first["text"]) == content.TEXT_LIMIT and first["text_cut"] == 20000
    (call,) = first["tool_calls"]
    assert call["args"]["code"] == code[: content.TEXT_LIMIT] and call["args"]["code_cut"] == len(code)
    # the result is what the model read: the agent cut it already, and said so
    assert call["result"].endswith("more characters cut]") and "result_cut" not in call
    (host,) = call["host_calls"]
    whole = json.dumps({"text": "w " * 5000}, ensure_ascii=False, separators=(",", ":"))
    assert host["args"] == whole[: content.VALUE_LIMIT] and host["args_cut"] == len(whole)
    assert agent.report["steps"][1]["text"] == "done" and "text_cut" not in agent.report["steps"][1]

    # a report keeps at most REPORT_LIMIT characters of content in all
    monkeypatch.setattr(content, "REPORT_LIMIT", 30)
    await run_agent(context_manager, [{"text": "a" * 20, "code": "print('b' * 20)"}, {"text": "c" * 20}])
    (agent,) = context_manager.state.runs.agents(context_manager.state.runs.list(limit=1)[0].id)
    one, two = agent.report["steps"]
    assert agent.report["user_message"] == "Go." and one["tool_calls"][0]["args"] == {"code": "print('b' * 20)"}
    assert one["tool_calls"][0]["result"] == "b" * 12 and one["tool_calls"][0]["result_cut"] == 20
    assert (one["text"], one["text_cut"], two["text"], two["text_cut"]) == ("", 20, "", 20)


SECRET = "the-launch-code-is-8841"


@pytest.mark.parametrize("retention", ["run", "none"])
async def test_a_report_without_retention_keeps_no_content_while_it_runs_or_after(
    context_manager, write_skill, tools, retention, tmp_path
):
    write_skill("gate", GATE)
    gate = tmp_path / "open"
    code = (
        f"await ctx.manager.invoke('word-count', {{'text': '{SECRET}'}})\n"
        f"await ctx.manager.invoke('gate', {{'path': {str(gate)!r}}})\nprint('{SECRET}')"
    )
    turns = [{"text": SECRET, "reasoning": SECRET, "code": code}, {"text": SECRET}]
    store = context_manager.state
    running = asyncio.ensure_future(
        run_agent(context_manager, turns, config={"retention": retention}, user_message=SECRET)
    )
    live = await _live_step(store, lambda step: any(h["skill"] == "gate" for h in _hosts(step)))
    gate.touch()
    await running
    (run,) = store.runs.list()
    (agent,) = store.runs.agents(run.id)
    for seen in (live, agent.report):
        assert SECRET not in json.dumps(seen)
    step = agent.report["steps"][0]
    assert "text" not in step and "reasoning" not in step and step["usage"]
    (call,) = step["tool_calls"]
    assert "args" not in call and "result" not in call and call["result_size"] == len(SECRET)
    assert [(h["skill"], h["status"], "args" in h, "result" in h) for h in call["host_calls"]] == [
        ("word-count", "ok", False, False),
        ("gate", "ok", False, False),
    ]


def _hosts(step):
    return [host for call in step.get("tool_calls") or () for host in call.get("host_calls") or ()]


async def _live_step(store, ready, timeout=60.0):
    """The turn in flight of the run's first agent, once ``ready(step)``, read the way a
    watcher in another process reads it: from the store, by change number."""
    seen = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        runs = await store.call(store.runs.list)
        if runs:
            changed = await store.call(store.runs.changed, runs[0].id, seen)
            if changed is not None:
                run, agents = changed
                seen = run.seq
                for agent in agents:
                    if agent.live is not None and ready(agent.live):
                        return agent.live
        await asyncio.sleep(0.01)
    raise AssertionError("the turn in flight never showed what was expected")


async def test_the_turn_in_flight_is_written_as_it_happens_and_cleared_when_it_ends(
    context_manager, write_skill, tools, tmp_path
):
    write_skill("gate", GATE)
    gate = tmp_path / "open"
    code = (
        "n = await ctx.manager.invoke('word-count', {'text': 'a b'})\n"
        f"await ctx.manager.invoke('gate', {{'path': {str(gate)!r}}})"
    )
    turns = [{"text": "Waiting at the gate.", "reasoning": "Why not.", "code": code}, {"text": "Through."}]
    store = context_manager.state
    running = asyncio.ensure_future(run_agent(context_manager, turns, config={"stream": True}))
    step = await _live_step(store, lambda step: [h["status"] for h in _hosts(step)] == ["ok", "running"])
    # what the model said and ran, the finished call with its result, the one in flight
    assert step["turn"] == 1 and step["text"] == "Waiting at the gate." and step["reasoning"] == "Why not."
    (call,) = step["tool_calls"]
    assert call["args"] == {"code": code} and "latency_ms" not in call
    done, waiting = call["host_calls"]
    assert done["result"] == 2 and done["latency_ms"] > 0 and waiting["args"] == {"path": str(gate)}
    assert "latency_ms" not in waiting
    (run,) = store.runs.list()
    assert run.status == "running"
    gate.touch()
    assert await running == "Through."
    (agent,) = store.runs.agents(run.id)
    assert agent.live is None and agent.status == "done"
    assert [h["status"] for h in _hosts(agent.report["steps"][0])] == ["ok", "ok"]


async def test_the_runs_tokens_grow_turn_by_turn_not_only_at_the_end(context_manager, write_skill, tools, tmp_path):
    write_skill("gate", GATE)
    gate = tmp_path / "open"
    turns = [
        {"code": "print(1)", "usage": {"input_tokens": 10, "output_tokens": 2}},
        {"code": f"await ctx.manager.invoke('gate', {{'path': {str(gate)!r}}})",
         "usage": {"input_tokens": 20, "output_tokens": 3}},
        {"text": "ok", "usage": {"input_tokens": 30, "output_tokens": 4}},
    ]  # fmt: skip
    store = context_manager.state
    running = asyncio.ensure_future(run_agent(context_manager, turns))
    await _live_step(store, lambda step: step["turn"] == 2 and _hosts(step))
    (run,) = store.runs.list()
    assert (run.status, run.input_tokens, run.output_tokens) == ("running", 10, 2)
    gate.touch()
    await running
    (run,) = store.runs.list()
    assert (run.status, run.input_tokens, run.output_tokens) == ("done", 60, 9)
