"""Lifecycle hooks (seed 003): run and step start and complete with the step's report,
approval requested and resolved; tool-call hooks that skip a call, answer it or give a
fallback for a failed one, journaled so a resumed run does not ask again; metrics and
``skipped`` in tool-call reports; an approver (Python, or ``approve --result``) that
supplies a call's result."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_apps import ApprovalPending, ContextManager, hookimpl
from agent_apps.cli import main as cli_main
from agent_apps.testing.plugin import hermetic_manager
from agent_apps.tools import approval

pytestmark = pytest.mark.anyio

COUNTER = """
from pathlib import Path
frontmatter = {
    "description": "Count a call.",
    "params": {"type": "object", "properties": {"tag": {"type": "string"}}},
    "metadata": {"returns": {"type": "integer"}},
}
async def main(ctx, args):
    log = Path(ctx.manager.context_manager.cwd) / "counter.log"
    with log.open("a") as fh:
        fh.write(args.get("tag", "") + "\\n")
    n = len(log.read_text().splitlines())
    ctx.manager.metric("lines", n)
    ctx.manager.metric("tagged", bool(args.get("tag")))
    return n
"""

BROKEN = """
frontmatter = {"description": "Always fails.", "params": {"type": "object"}}
async def main(ctx, args):
    raise RuntimeError("the service is down")
"""


def counted(root: Path) -> list[str]:
    log = root / "counter.log"
    return log.read_text().splitlines() if log.exists() else []


class Recorder:
    """A plugin that hears every lifecycle hook, and decides as told."""

    def __init__(self, start: Any = None, fallback: Any = None) -> None:
        self.heard: list[tuple[str, dict[str, Any]]] = []
        self.start, self.fallback = start, fallback

    @hookimpl
    def agent_apps_run_start(self, agent, event):
        self.heard.append(("run_start", event))

    @hookimpl
    def agent_apps_run_complete(self, agent, event):
        self.heard.append(("run_complete", event))

    @hookimpl
    def agent_apps_step_start(self, agent, event):
        self.heard.append(("step_start", event))

    @hookimpl
    async def agent_apps_step_complete(self, agent, event):  # an async one is awaited
        await asyncio.sleep(0)
        self.heard.append(("step_complete", event))

    @hookimpl
    def agent_apps_approval_requested(self, agent, event):
        self.heard.append(("approval_requested", event))

    @hookimpl
    def agent_apps_approval_resolved(self, agent, event):
        self.heard.append(("approval_resolved", event))

    @hookimpl
    def agent_apps_tool_call_start(self, agent, call):
        self.heard.append(("tool_call_start", call))
        return self.start(call) if self.start else None

    @hookimpl
    def agent_apps_tool_call_complete(self, agent, call):
        self.heard.append(("tool_call_complete", call))

    @hookimpl
    def agent_apps_tool_call_error(self, agent, call, error):
        self.heard.append(("tool_call_error", {**call, "error": str(error)}))
        return self.fallback(call, error) if self.fallback else None

    def names(self) -> list[str]:
        return [name for name, _ in self.heard]


def manager(tmp_path: Path, skills_path: Path, *plugins: object) -> ContextManager:
    return hermetic_manager([skills_path], tmp_path, plugins=plugins)


@pytest.fixture
def skills(write_skill, skills_path):
    write_skill("counter", COUNTER)
    write_skill("broken", BROKEN)
    return skills_path


async def run_agent(cm: ContextManager, turns: list[dict[str, Any]], **options: Any) -> Any:
    call = {"prompt": "T.", "user_message": "Go.", "config": {"agent": "agent-scripted", "script": turns}}
    return await cm.invoke("agent", call, **options)


async def test_lifecycle_hooks_hear_the_run_and_each_step_with_its_report(tmp_path, skills):
    plugin = Recorder()
    cm = manager(tmp_path, skills, plugin)
    turns = [{"text": "Counting.", "code": "print(await ctx.manager.invoke('counter', {'tag': 'a'}))"},
             {"text": "Done."}]  # fmt: skip
    assert await run_agent(cm, turns) == "Done."
    assert plugin.names() == [
        "run_start", "step_start", "tool_call_start", "tool_call_complete", "step_complete",
        "step_start", "step_complete", "run_complete",
    ]  # fmt: skip
    heard = dict(plugin.heard[:2])
    assert heard["run_start"]["type"] == "agent-start" and heard["step_start"]["turn"] == 1
    step = plugin.heard[4][1]["step"]
    assert plugin.heard[4][1]["type"] == "turn-end"
    assert {"index", "model_latency_ms", "usage", "finish_reason", "tool_calls", "tool_ms"} <= set(step)
    assert step["finish_reason"] == "tool_use" and step["usage"]["estimated"] is True
    (call,) = step["tool_calls"]
    assert call["skipped"] is False and call["skills"] == ["counter"]
    (host,) = call["host_calls"]
    assert host["skill"] == "counter" and host["skipped"] is False and host["metrics"] == {"lines": 1, "tagged": True}
    assert isinstance(host["latency_ms"], float)
    complete = plugin.heard[3][1]
    assert (complete["skill"], complete["args"], complete["result"], complete["how"]) == (
        "counter", {"tag": "a"}, 1, "made",
    )  # fmt: skip
    assert complete["metrics"] == {"lines": 1, "tagged": True} and complete["id"] == "h.1.1"
    end = plugin.heard[-1][1]
    assert (end["type"], end["status"], end["result"]) == ("agent-complete", "done", "Done.")
    (run,) = cm.state.runs.list()
    (agent,) = cm.state.runs.agents(run.id)
    assert agent.report["steps"][0]["tool_calls"][0]["host_calls"][0]["metrics"] == {"lines": 1, "tagged": True}


async def test_a_start_hook_skips_or_answers_a_call_and_the_code_sees_it(tmp_path, skills):
    def decide(call: dict[str, Any]) -> Any:
        tag = call["args"].get("tag")
        return {"skip": True} if tag == "skip-me" else {"result": 42} if tag == "answer-me" else None

    plugin = Recorder(start=decide)
    cm = manager(tmp_path, skills, plugin)
    events: list[dict[str, Any]] = []
    cm.events.subscribe("t", lambda topic, event: events.append(event))
    code = ("a = await ctx.manager.invoke('counter', {'tag': 'skip-me'})\n"
            "b = await ctx.manager.invoke('counter', {'tag': 'answer-me'})\n"
            "c = await ctx.manager.invoke('counter', {'tag': 'real'})\nprint(a, b, c)")  # fmt: skip
    assert await run_agent(cm, [{"code": code}, {"text": "Done."}], nonlocals={"agent": {"events": "t"}}) == "Done."
    assert counted(cm.cwd) == ["real"]  # only the third was made
    (result,) = [e["result"] for e in events if e["type"] == "tool-result"]
    assert result.startswith("None 42 1")
    assert "[hook: the call of counter was skipped: not made, it returned None]" in result
    assert "[hook: the call of counter was answered by a hook: not made]" in result
    (run,) = cm.state.runs.list()
    calls = cm.state.runs.agents(run.id)[0].report["steps"][0]["tool_calls"][0]["host_calls"]
    assert [(c["skipped"], c.get("answered", False)) for c in calls] == [(True, False), (True, True), (False, False)]
    journal = {e.key: e.body for e in cm.state.journal.entries(run.id) if e.kind == "call"}
    assert journal["h.1.1"] == {"skill": "counter", "args": {"tag": "skip-me"}, "ok": True, "result": None,
                                "skipped": True}  # fmt: skip
    assert journal["h.1.2"]["result"] == 42 and journal["h.1.2"]["skipped"] is True
    assert journal["h.1.3"]["result"] == 1 and "skipped" not in journal["h.1.3"]


async def test_an_error_hook_gives_a_fallback_result(tmp_path, skills):
    plugin = Recorder(fallback=lambda call, error: {"result": "cached answer"} if call["skill"] == "broken" else None)
    cm = manager(tmp_path, skills, plugin)
    events: list[dict[str, Any]] = []
    cm.events.subscribe("t", lambda topic, event: events.append(event))
    code = "print(await ctx.manager.invoke('broken', {}))"
    await run_agent(cm, [{"code": code}, {"text": "Done."}], nonlocals={"agent": {"events": "t"}})
    (result,) = [e["result"] for e in events if e["type"] == "tool-result"]
    assert result.startswith("cached answer")
    (error,) = [c for name, c in plugin.heard if name == "tool_call_error"]
    assert "the service is down" in error["error"]
    (run,) = cm.state.runs.list()
    (entry,) = [e.body for e in cm.state.journal.entries(run.id) if e.key == "h.1.1"]
    assert entry["ok"] is True and entry["fallback"] is True and entry["result"] == "cached answer"


async def test_no_hook_answers_a_call_the_allowed_tools_forbid(tmp_path, skills):
    """A start hook that answers every call, and an error hook that gives a fallback for
    every failure, still leave a call of a skill outside the agent's allowed-tools
    refused: the code gets ToolNotAllowed, no hook hears the call, nothing is made."""
    plugin = Recorder(start=lambda call: {"result": 7}, fallback=lambda call, error: {"result": "fallback"})
    cm = manager(tmp_path, skills, plugin)
    events: list[dict[str, Any]] = []
    cm.events.subscribe("t", lambda topic, event: events.append(event))
    code = ("try:\n    await ctx.manager.invoke('broken', {})\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, exc)\nprint(await ctx.manager.invoke('counter', {}))")  # fmt: skip
    call = {"prompt": "T.", "user_message": "Go.", "allowed_tools": "counter",
            "config": {"agent": "agent-scripted", "script": [{"code": code}, {"text": "Done."}]}}  # fmt: skip
    assert await cm.invoke("agent", call, nonlocals={"agent": {"events": "t"}}) == "Done."
    (result,) = [e["result"] for e in events if e["type"] == "tool-result"]
    assert result.startswith("ToolNotAllowed") and "broken" in result
    assert result.splitlines()[1] == "7"  # an allowed call is still the hook's to answer
    heard = [c["skill"] for name, c in plugin.heard if name in ("tool_call_start", "tool_call_error")]
    assert heard == ["counter"]
    assert counted(cm.cwd) == []


async def test_a_directive_that_is_not_one_fails_the_call(tmp_path, skills):
    cm = manager(tmp_path, skills, Recorder(start=lambda call: {"run": "later"}))
    events: list[dict[str, Any]] = []
    cm.events.subscribe("t", lambda topic, event: events.append(event))
    await run_agent(cm, [{"code": "await ctx.manager.invoke('counter', {})"}, {"text": "Done."}],
                    nonlocals={"agent": {"events": "t"}})  # fmt: skip
    (error,) = [e["result"] for e in events if e["type"] == "tool-error"]
    assert "hook agent_apps_tool_call_start returned {'run': 'later'}" in error and counted(cm.cwd) == []


async def test_a_failing_hook_that_only_hears_changes_nothing(tmp_path, skills, caplog):
    class Broken:
        @hookimpl
        def agent_apps_step_start(self, agent, event):
            raise RuntimeError("hook bug")

    cm = manager(tmp_path, skills, Broken())
    assert await run_agent(cm, [{"text": "Done."}]) == "Done."
    assert "hook agent_apps_step_start failed" in caplog.text


# -- journaled: a resumed run does not ask again ------------------------------------------------------

ASK_WRITE = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}
TURNS = [
    {"text": "Count, skip, then write.",
     "code": "a = await ctx.manager.invoke('counter', {'tag': 'skip-me'})\n"
             "r = await ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'x'})\nprint(a, r)"},
    {"text": "Done."},
]  # fmt: skip


async def test_what_a_hook_decided_is_replayed_on_resume_not_asked_again(tmp_path, skills):
    plugin = Recorder(start=lambda call: {"skip": True} if call["skill"] == "counter" else None)
    cm = manager(tmp_path, skills, plugin)
    with pytest.raises(ApprovalPending) as info:
        await run_agent(cm, TURNS, config=ASK_WRITE)
    run_id = info.value.run_id
    requested = [e for name, e in plugin.heard if name == "approval_requested"]
    assert [(e["skill"], e["call"]) for e in requested] == [("file-write", "h.1.2")]

    def only_new_calls(call: dict[str, Any]) -> None:  # the call that waited was never made: asked again
        assert call["skill"] == "file-write", f"asked again about {call}"

    never = Recorder(start=only_new_calls)
    other = hermetic_manager([skills], tmp_path, plugins=[never], state=cm.state.path)
    other.approve(run_id)
    events: list[dict[str, Any]] = []
    other.events.subscribe("t", lambda topic, event: events.append(event))
    assert await other.resume(run_id, nonlocals={"agent": {"events": "t"}}) == "Done."
    assert counted(cm.cwd) == [] and (cm.cwd / "out.txt").read_text() == "x"
    assert [c["skill"] for name, c in never.heard if name == "tool_call_start"] == ["file-write"]
    resolved = [e for e in events if e["type"] == "approval-resolved"]
    assert [(e["decision"], e["by"], e["call"]) for e in resolved] == [("approve", "decision", "h.1.2")]
    assert not [e for e in events if e["type"] == "approval-requested"]  # asked once, the first time


# -- the approver supplies the result -----------------------------------------------------------------


async def test_a_python_approver_supplies_a_result_checked_against_returns(tmp_path, skills):
    cm = manager(tmp_path, skills)
    events: list[dict[str, Any]] = []
    cm.events.subscribe("t", lambda topic, event: events.append(event))
    answers = iter([approval.Result(7), approval.Result("seven")])
    code = ("print(await ctx.manager.invoke('counter', {'tag': 'a'}))\n"
            "try:\n    await ctx.manager.invoke('counter', {'tag': 'b'})\n"
            "except Exception as e:\n    print(type(e).__name__, e)")  # fmt: skip
    config = {"security": {"mode": "interactive", "policy": {"interactive": {"ask": ["counter"]}}}}
    with approval.session(lambda request: next(answers)):
        await run_agent(cm, [{"code": code}, {"text": "Done."}], config=config, nonlocals={"agent": {"events": "t"}})
    assert counted(cm.cwd) == []  # neither call was made
    (result,) = [e["result"] for e in events if e["type"] == "tool-result"]
    assert result.startswith("7\n")
    assert "ResultInvalid counter: invalid result" in result and "'seven' is not of type 'integer'" in result
    resolved = [(e["decision"], e.get("result"), e["by"]) for e in events if e["type"] == "approval-resolved"]
    assert resolved == [("result", 7, "approver"), ("result", "seven", "approver")]


async def test_approve_result_on_the_command_line_answers_the_waiting_call(tmp_path, skills, capsys, monkeypatch):
    cm = manager(tmp_path, skills)
    monkeypatch.setenv("AGENT_APPS_STATE", cm.state.path)
    turns = [{"text": "Writing.", "code": "print('wrote:', await ctx.manager.invoke('file-write', "
              "{'path': 'out.txt', 'content': 'x'}))"}, {"text": "Done."}]  # fmt: skip
    with pytest.raises(ApprovalPending) as info:
        await run_agent(cm, turns, config=ASK_WRITE)
    run_id = info.value.run_id
    assert cli_main(["approve", run_id, "--result", "{not json"]) == 2
    assert "error: --result is not valid JSON" in capsys.readouterr().err
    answer = '{"path": "elsewhere.txt", "bytes": 0}'  # file-write's returns schema holds for it
    assert cli_main(["approve", run_id, "--result", answer]) == 0
    assert f'answered file-write {{"path": "out.txt", "content": "x"}} with {answer}' in capsys.readouterr().out
    events: list[dict[str, Any]] = []
    cm.events.subscribe("t", lambda topic, event: events.append(event))
    assert await cm.resume(run_id, nonlocals={"agent": {"events": "t"}}) == "Done."
    assert not (cm.cwd / "out.txt").exists()
    (result,) = [e["result"] for e in events if e["type"] == "tool-result"]
    assert result.startswith("wrote: {'path': 'elsewhere.txt', 'bytes': 0}")
    (entry,) = [e.body for e in cm.state.journal.entries(run_id) if e.key == "h.1.1"]
    assert entry["result"] == {"path": "elsewhere.txt", "bytes": 0} and entry["skipped"] is True


def test_a_result_is_one_decision_among_the_others(tmp_path, skills):
    cm = manager(tmp_path, skills)
    with pytest.raises(ValueError, match="one of them"):
        cm.approve("x", skip=True, result=1)
    with pytest.raises(ValueError, match="result must be JSON"):
        cm.approve("x", result=object())
