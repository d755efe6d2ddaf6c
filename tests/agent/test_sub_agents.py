"""The helper skills of seed 003: ``delegate`` (a sub-agent on a fork of the session),
``chain`` (each result into the next agent) and ``consolidate`` (results merged by a
model), from Python, agent code and the command line; none gives a sub-agent more than
its caller has."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agent_apps import ToolNotAllowed
from agent_apps.testing.plugin import hermetic_manager

pytestmark = pytest.mark.anyio


def scripted(*turns: dict) -> dict:
    return {"agent": "agent-scripted", "script": list(turns)}


def finish(value: object) -> dict:
    return {"code": f"ctx.manager.finish({value!r})"}


def agents(cm, run_id=None):
    run_id = run_id or cm.state.runs.list()[0].id
    return cm.state.runs.agents(run_id)


async def test_delegate_runs_a_sub_agent_on_a_fork_of_the_callers_session(skills_path, tmp_path, state_location):
    cm = hermetic_manager([skills_path], tmp_path, state=state_location)  # SQLite, then PostgreSQL
    await cm.invoke("agent", {"prompt": "P.", "user_message": "Remember 42.", "config": scripted({"text": "Noted."})},
                    session="s1")  # fmt: skip
    sub = {"agent": "agent-scripted", "script": [{"text": "Sub here.", **finish("sub done")}]}
    code = f"ctx.manager.finish(await ctx.manager.invoke('delegate', {{'task': 'Recall it.', 'config': {sub!r}}}))"
    call = {"prompt": "P.", "user_message": "Delegate.", "allowed_tools": "delegate"}
    call["config"] = scripted({"code": code})
    assert await cm.invoke("agent", call, session="s1") == "sub done"

    forks = [s for s in cm.state.sessions.list() if s.id.startswith("s1.delegate-")]
    assert len(forks) == 1
    fork = [e.message for e in cm.state.sessions.messages(forks[0].id)]
    assert [m.get("text") for m in fork[:2]] == ["Remember 42.", "Noted."]  # the caller's conversation
    assert {"role": "user", "text": "Recall it."} in fork  # then the sub-agent's own turns
    original = [e.message.get("text") for e in cm.state.sessions.messages("s1")]
    assert "Recall it." not in original and "Sub here." not in original  # never into the caller's
    (sub_agent,) = [a for a in agents(cm) if a.depth == 1]
    assert sub_agent.session_id == forks[0].id


async def test_delegate_invoked_in_a_session_forks_it_too(context_manager):
    cm = context_manager
    first = {"prompt": "P.", "user_message": "Hi.", "config": scripted({"text": "Hello."})}
    await cm.invoke("agent", first, session="s3")
    assert await cm.invoke("delegate", {"task": "Go.", "config": scripted(finish(9))}, session="s3") == 9
    assert [e.message.get("text") for e in cm.state.sessions.messages("s3")] == ["Hi.", "Hello."]  # untouched
    (fork,) = [s.id for s in cm.state.sessions.list() if s.id != "s3"]
    assert fork.startswith("s3.delegate-") and len(cm.state.sessions.messages(fork)) > 2


async def test_chain_and_consolidate_invoked_in_a_session_leave_it_alone(context_manager):
    cm = context_manager
    first = {"prompt": "P.", "user_message": "Hi.", "config": scripted({"text": "Hello."})}
    await cm.invoke("agent", first, session="s4")
    steps = [{"task": "One.", "config": scripted(finish(1))}, {"task": "Two.", "config": scripted(finish(2))}]
    assert await cm.invoke("chain", {"steps": steps}, session="s4") == 2
    merge = scripted({"text": "merged"})
    assert await cm.invoke("consolidate", {"tasks": steps, "config": merge}, session="s4") == "merged"
    assert [e.message.get("text") for e in cm.state.sessions.messages("s4")] == ["Hi.", "Hello."]
    assert [s.id for s in cm.state.sessions.list()] == ["s4"]


async def test_delegate_outside_a_session_starts_a_fresh_sub_agent(context_manager):
    assert await context_manager.invoke("delegate", {"task": "Go.", "config": scripted(finish(8))}) == 8
    assert [a.session_id for a in agents(context_manager)] == [None]
    assert context_manager.state.sessions.list() == []


@pytest.mark.parametrize(
    ("helper", "args", "path"),
    [
        ("delegate", {"task": "t", "allowed_tools": "file-write"}, "allowed_tools"),
        ("delegate", {"task": "t", "config": {"base_url": "http://evil.example"}}, "config.base_url"),
        ("chain", {"steps": [{"task": "a"}, {"task": "b", "allowed_tools": "*"}]}, "steps.1.allowed_tools"),
        ("consolidate", {"tasks": [{"task": "a", "allowed_tools": "shell"}]}, "tasks.0.allowed_tools"),
        ("consolidate", {"results": [1], "config": {"endpoint_url": "http://x"}}, "config.endpoint_url"),
    ],
)
async def test_agent_code_cannot_widen_a_sub_agent_through_a_helper(context_manager, helper, args, path):
    code = (
        f"try:\n    await ctx.manager.invoke({helper!r}, {args!r})\n"
        "except Exception as exc:\n    ctx.manager.finish(f'{type(exc).__name__}: {exc}')"
    )
    call = {"prompt": "P.", "user_message": "Go.", "allowed_tools": f"{helper} word-count"}
    call["config"] = scripted({"code": code})
    refusal = await context_manager.invoke("agent", call)
    assert refusal.startswith("ToolNotAllowed: ") and f"(at {path})" in refusal, refusal
    assert len(agents(context_manager)) == 1  # no sub-agent started: checked before anything runs


async def test_a_code_skill_cannot_widen_either_and_its_sub_agents_keep_its_tools(context_manager, write_skill):
    write_skill("boss", """
        frontmatter = {"allowed-tools": "delegate word-count", "params": {"type": "object"}}
        async def main(ctx, args):
            return await ctx.manager.invoke("delegate", args)
    """)
    with pytest.raises(ToolNotAllowed) as info:
        await context_manager.invoke("boss", {"task": "t", "allowed_tools": "file-read"})
    assert info.value.path == "allowed_tools"
    code = (
        "try:\n    await ctx.manager.invoke('file-read', {'path': 'x'})\n"
        "except Exception as e:\n    ctx.manager.finish(type(e).__name__)"
    )
    assert await context_manager.invoke("boss", {"task": "t", "config": scripted({"code": code})}) == "ToolNotAllowed"
    narrower = {"task": "t", "allowed_tools": "word-count", "config": scripted(finish("ok"))}
    assert await context_manager.invoke("boss", narrower) == "ok"


async def test_chain_hands_each_result_to_the_next_agent(context_manager):
    cm = context_manager
    steps = [
        {"task": "Count.", "config": scripted(finish({"n": 2})), "name": "counter"},
        {"task": "Double it.", "config": scripted(finish(4)), "name": "doubler"},
    ]
    assert await cm.invoke("chain", {"steps": steps, "input": "two apples"}) == 4
    reports = {a.name: a.report for a in agents(cm)}
    assert reports["counter"]["user_message"].endswith("Your input:\ntwo apples")
    assert reports["doubler"]["user_message"].endswith('The result of the step before yours:\n{\n  "n": 2\n}')


#: A model-level middleware that tells the test what the model is sent.
SENT = """
frontmatter = {"metadata": {"role": "middleware", "level": "model"}}
async def main(ctx, args):
    ctx.manager.emit("sent", {"system": ctx.target.args["system"], "messages": ctx.target.args["messages"]})
    return await ctx.manager.next()
"""


async def test_consolidate_runs_tasks_in_parallel_and_merges_with_a_model(context_manager, write_skill):
    cm = context_manager
    write_skill("sent", SENT)
    sent = []
    cm.events.subscribe("sent", lambda topic, event: sent.append(event))
    tasks = [{"task": f"Part {i}.", "config": scripted(finish(f"part {i}")), "name": f"p{i}"} for i in (1, 2)]
    merged = {**scripted({"text": '{"summary": "parts 1 and 2", "count": 3}'}), "middleware": ["sent"]}
    schema = {"type": "object", "required": ["summary", "count"]}
    result = await cm.invoke("consolidate", {"results": ["part 0"], "tasks": tasks, "schema": schema, "config": merged})
    assert result == {"summary": "parts 1 and 2", "count": 3}
    assert sorted(a.name for a in agents(cm)) == ["p1", "p2"]
    (call,) = sent  # one model call merged them all: the results given, then the tasks', in order
    assert call["messages"][-1]["text"] == "Result 1:\npart 0\n\nResult 2:\npart 1\n\nResult 3:\npart 2"
    assert call["system"].startswith("You consolidate") and '"required": ["summary", "count"]' in call["system"]


def test_the_helpers_on_the_command_line(tmp_path):
    steps = [{"task": "One.", "config": scripted(finish(1))}, {"task": "Two.", "config": scripted(finish(2))}]
    (tmp_path / "args.json").write_text(json.dumps({"steps": steps}))
    cmd = [sys.executable, "-m", "agent_apps", "invoke", "chain", "--args", "@args.json", "-q"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"
    bad = subprocess.run([*cmd[:5], "steps:=[]"], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert bad.returncode == 2 and "steps" in bad.stderr


def test_the_three_helpers_take_the_same_sub_agent_spec(context_manager):
    skills = {name: context_manager.get(name).params for name in ("delegate", "chain", "consolidate")}
    delegate = skills["delegate"]
    assert skills["chain"]["properties"]["steps"]["items"] == delegate
    assert skills["consolidate"]["properties"]["tasks"]["items"] == delegate
