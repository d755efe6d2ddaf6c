"""Guardrails: input checks before each model call, output checks after each response,
in order; the first tripwire ends the run with status guardrail; an event per decision."""

from __future__ import annotations

import json

import pytest

from agent_apps import AgentAppsError, ConfigError, GuardrailTripped, SkillLoadError

pytestmark = pytest.mark.anyio

# trips when a user message holds a word (its param)
NO_WORD = """
frontmatter = {
    "params": {
        "type": "object",
        "properties": {"word": {"type": "string", "default": "forbidden"}},
        "additionalProperties": False,
    },
    "metadata": {"role": "guardrail", "kind": "input"},
}
async def main(ctx, args):
    texts = [m.get("text", "") for m in ctx.target.args["messages"] if m["role"] == "user"]
    if any(args["word"] in t for t in texts):
        return {"pass": False, "tripwire": True, "reason": f"the input mentions {args['word']!r}", "severity": "high"}
    return {"pass": True}
"""
# notes long inputs but lets them through
LONG_INPUT = """
frontmatter = {"metadata": {"role": "guardrail", "kind": "input"}}
async def main(ctx, args):
    size = sum(len(m.get("text", "")) for m in ctx.target.args["messages"])
    return {"pass": size < 20, "tripwire": False, "reason": f"{size} characters", "severity": "low"}
"""
# trips when the model's answer would run code that deletes
NO_DELETE = """
frontmatter = {"metadata": {"role": "guardrail", "kind": "output"}}
async def main(ctx, args):
    response = ctx.target.args["response"]
    codes = [c["input"].get("code", "") for c in response.get("tool_calls", [])]
    if any("delete" in code for code in codes):
        return {"pass": False, "tripwire": True, "reason": "the model wants to delete things", "severity": "critical"}
    return {"pass": True, "reason": "fine"}
"""
DELETE = """
frontmatter = {}
async def main(ctx, args):
    ctx.manager.emit("deleted", {})
    return "deleted"
"""
BROKEN = """
frontmatter = {"metadata": {"role": "guardrail", "kind": "output"}}
async def main(ctx, args):
    return "yes"
"""


@pytest.fixture
def guards(write_skill):
    for name, source in {
        "no-word": NO_WORD,
        "long-input": LONG_INPUT,
        "no-delete": NO_DELETE,
        "delete": DELETE,
        "broken-guard": BROKEN,
    }.items():
        write_skill(name, source)


@pytest.fixture
def events(context_manager):
    got: list[dict] = []
    context_manager.events.subscribe("g", lambda topic, event: got.append(event))
    return got


def scripted(turns, **extra):
    return {"agent": "agent-scripted", "script": turns, **extra}


async def run(cm, turns, guardrails, *, user_message="hello", harness=None, **extra):
    config = {**(harness.config(turns) if harness else scripted(turns)), "guardrails": guardrails, **extra}
    call = {"prompt": "P", "user_message": user_message, "config": config, "events": "g", "allowed_tools": "delete"}
    return await cm.invoke("agent", call)


async def test_an_input_tripwire_ends_the_run_with_status_guardrail(context_manager, guards, events):
    with pytest.raises(GuardrailTripped) as info:
        await run(context_manager, [{"text": "never"}], ["no-word"], user_message="do the forbidden thing")
    assert str(info.value) == "the input mentions 'forbidden'"
    assert (info.value.guardrail, info.value.kind, info.value.severity) == ("no-word", "input", "high")
    decisions = [e for e in events if e["type"] == "guardrail"]
    assert [(d["guardrail"], d["pass"], d["tripwire"]) for d in decisions] == [("no-word", False, True)]
    assert events[-1]["type"] == "agent-error" and events[-1]["status"] == "guardrail"
    assert not any(e["type"] == "agent-message" for e in events)  # the model was never called
    run_info = context_manager.state.runs.list(limit=1)[0]
    assert run_info.status == "guardrail"
    agent = context_manager.state.runs.agents(run_info.id)[0]
    assert agent.report["error"]["message"] == "the input mentions 'forbidden'"
    assert any(t["type"] == "guardrail" for t in agent.trace)


async def test_guardrails_run_in_order_before_each_call_and_a_failed_check_without_tripwire_goes_on(
    context_manager, guards, events
):
    turns = [{"code": "x = 1"}, {"text": "done"}]
    assert (
        await run(context_manager, turns, ["long-input", "no-word(word=zebra)"], user_message="hello there") == "done"
    )
    decisions = [(e["guardrail"], e["turn"], e["pass"]) for e in events if e["type"] == "guardrail"]
    # turn 1: a short input; turn 2: the conversation has grown past 20 characters
    assert decisions == [("long-input", 1, True), ("no-word", 1, True), ("long-input", 2, False), ("no-word", 2, True)]


async def test_the_first_tripwire_wins_and_later_guardrails_do_not_run(context_manager, guards, events):
    with pytest.raises(GuardrailTripped, match="'zebra'"):
        await run(context_manager, [{"text": "x"}], ["no-word(word=zebra)", "long-input"], user_message="zebra")
    assert [e["guardrail"] for e in events if e["type"] == "guardrail"] == ["no-word"]


async def test_an_output_tripwire_stops_the_run_before_the_code_runs(context_manager, guards, events, harness):
    deleted: list[dict] = []
    context_manager.events.subscribe("deleted", lambda topic, event: deleted.append(event))
    turns = [{"code": "x = 1"}, {"code": "await ctx.manager.invoke('delete')"}, {"text": "done"}]
    with pytest.raises(GuardrailTripped, match="the model wants to delete things"):
        await run(context_manager, turns, ["no-delete"], harness=harness)
    assert deleted == []  # the answer was judged before the provider acted on it
    decisions = [(e["turn"], e["pass"]) for e in events if e["type"] == "guardrail"]
    assert decisions == [(1, True), (2, False)]
    assert events[-1]["status"] == "guardrail"


async def test_guardrail_config_errors_are_clear(context_manager, guards, write_skill):
    with pytest.raises(ConfigError, match="model.guardrails: 'delete' is not a guardrail"):
        await run(context_manager, [{"text": "x"}], ["delete"])
    with pytest.raises(ConfigError, match="model.guardrails: no skill named 'no-wrd' \\(did you mean no-word"):
        await run(context_manager, [{"text": "x"}], ["no-wrd"])
    with pytest.raises(AgentAppsError, match="no-word: invalid args"):
        await run(context_manager, [{"text": "x"}], ["no-word(word=1, extra=2)"])
    with pytest.raises(AgentAppsError, match="guardrail 'broken-guard' returned str, not a decision"):
        await run(context_manager, [{"text": "x"}], ["broken-guard"])


async def test_a_guardrail_needs_a_kind(context_manager, write_skill):
    path = write_skill(
        "kindless", 'frontmatter = {"metadata": {"role": "guardrail"}}\nasync def main(ctx, args):\n    pass\n'
    )
    with pytest.raises(SkillLoadError) as info:
        await run(context_manager, [{"text": "x"}], ["kindless"])
    assert str(path) in str(info.value) and "a guardrail needs 'metadata.kind': input" in str(info.value)


async def test_agents_started_by_agent_code_keep_their_callers_guardrails(context_manager, guards, events):
    child = {
        "prompt": "P",
        "name": "child",
        "user_message": "say the forbidden word",
        "config": {"agent": "agent-scripted", "script": [{"text": "x"}]},
    }
    lifted = {**child, "config": {**child["config"], "guardrails": []}}
    turns = [
        {"code": f"await ctx.manager.invoke('agent', {json.dumps(child)})"},
        {"code": f"await ctx.manager.invoke('agent', {json.dumps(lifted)})"},
        {"text": "done"},
    ]
    config = {**scripted(turns), "guardrails": ["no-word"]}
    call = {"prompt": "P", "config": config, "events": "g", "allowed_tools": "agent"}
    assert await context_manager.invoke("agent", call) == "done"
    errors = [e["result"] for e in events if e["type"] == "tool-error"]
    assert "GuardrailTripped: the input mentions 'forbidden'" in errors[0]
    assert "may not set config guardrails" in errors[1]  # agent code cannot lift them
    statuses = [e["status"] for e in events if e["type"] == "agent-error" and e["agent"] == "child"]
    assert statuses == ["guardrail"]


# asks a scripted agent for its opinion on each model call, and counts itself
JUDGE = """
frontmatter = {"metadata": {"role": "guardrail", "kind": "input"}}
async def main(ctx, args):
    ctx.manager.emit("judged", {})
    opinion = await ctx.manager.invoke(
        "agent", {"prompt": "Judge.", "config": {"agent": "agent-scripted", "script": [{"text": "fine"}]}}
    )
    return {"pass": opinion == "fine"}
"""


async def test_an_agent_a_guardrail_asks_is_not_guarded_by_it(context_manager, write_skill, events):
    """The guardrail's own agent is policy, not agent code: it keeps none of the run's
    guardrails (else each of its model calls would ask the guardrail again, without end)."""
    write_skill("judge", JUDGE)
    judged: list[dict] = []
    context_manager.events.subscribe("judged", lambda topic, event: judged.append(event))
    turns = [{"code": "x = 1"}, {"text": "done"}]
    assert await run(context_manager, turns, ["judge"]) == "done"
    assert len(judged) == 2  # once per model call of the guarded run, and only those
