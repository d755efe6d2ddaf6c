"""Supervision of agent trees: the run record, execution and spawn budgets, cancellation
(cm.cancel, timeouts, deadlines) and bad budget config, with the scripted provider."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_apps import BudgetExceeded, Cancelled, ConfigError, ContextManager, Signal
from agent_apps.budget import MAX_TOKENS, Price, clamp_usage

pytestmark = pytest.mark.anyio


def scripted(turns, **extra):
    return {"agent": "agent-scripted", "script": turns, **extra}


def sub_agent(name: str, turns: list[dict], **config) -> str:
    """Agent code that starts a scripted sub-agent and returns its result."""
    call = {"prompt": name, "name": name, "config": {"agent": "agent-scripted", "script": turns, **config}}
    return f"await ctx.manager.invoke('agent', {json.dumps(call)})"


async def agent(cm, turns, *, config=None, **args):
    call = {"prompt": "Test.", "user_message": "Go.", "config": {**scripted(turns), **(config or {})}, **args}
    return await cm.invoke("agent", call)


def agents_of(cm: ContextManager) -> dict[str, object]:
    """name -> AgentInfo of every agent of the latest run."""
    run = cm.state.runs.list(limit=1)[0]
    return {a.name: a for a in cm.state.runs.agents(run.id)}


# -- 1. the run tree -----------------------------------------------------------------


async def test_events_and_reports_carry_run_id_and_depth(context_manager, tools):
    events: list[dict] = []
    context_manager.events.subscribe("t", lambda topic, e: events.append(e))
    inner = sub_agent("inner", [{"text": "inner done"}])
    turns = [{"code": f"ctx.manager.finish({inner})"}]
    assert await agent(context_manager, turns, allowed_tools="agent", events="t", name="outer") == "inner done"
    by_agent = {}
    for event in events:
        by_agent.setdefault(event["agent"], []).append(event)
    assert set(by_agent) == {"outer", "inner"}
    run_ids = {e["run_id"] for e in events}
    assert len(run_ids) == 1
    assert {e["depth"] for e in by_agent["outer"]} == {0} and {e["depth"] for e in by_agent["inner"]} == {1}
    outer_id = by_agent["outer"][0]["agent_id"]
    assert {e["parent_id"] for e in by_agent["inner"]} == {outer_id}
    agents = agents_of(context_manager)
    inner_report = agents["inner"].report
    assert (inner_report["run_id"], inner_report["depth"], inner_report["parent"]) == (run_ids.pop(), 1, outer_id)
    assert inner_report["trace_id"] == inner_report["run_id"]  # no tracing set up: the run id
    assert inner_report["priority"] == "normal"


async def test_the_record_carries_deadline_token_and_budget(context_manager, write_skill, tools):
    write_skill(
        "peek",
        """
        frontmatter = {}
        async def main(ctx, args):
            r = ctx.run
            return {"deadline_in": r.deadline - __import__("time").time(), "same_signal": r.signal is not None,
                    "limits": r.ledger.to_json()["limits"], "priority": r.priority, "depth": r.depth,
                    "max_agents": r.spawn.max_agents}
        """,
    )
    turns = [{"code": "ctx.manager.finish(await ctx.manager.invoke('peek'))"}]
    config = {"budget": {"deadline_s": 30, "tokens": 5000}, "priority": "high", "spawn": {"max_agents": 7}}
    out = await agent(context_manager, turns, allowed_tools="peek", config=config)
    assert 20 < out["deadline_in"] <= 30
    assert out["limits"] == {"tokens": 5000, "deadline_s": 30.0}
    assert (out["priority"], out["depth"], out["max_agents"], out["same_signal"]) == ("high", 0, 7, True)


# -- 2. execution budget ---------------------------------------------------------------


async def test_a_nested_agent_that_would_overspend_is_stopped(context_manager, tools):
    child = sub_agent(
        "child",
        [
            {"code": "x = 1", "usage": {"input_tokens": 50, "output_tokens": 30}},
            {"code": "x = 2", "usage": {"input_tokens": 30, "output_tokens": 10}},  # 120 > 100
            {"text": "never", "usage": {"input_tokens": 1, "output_tokens": 1}},
        ],
    )
    turns = [
        {"code": f"r = {child}", "usage": {"input_tokens": 10, "output_tokens": 5}},
        {"text": "never reached"},
    ]
    with pytest.raises(BudgetExceeded) as info:
        await agent(context_manager, turns, allowed_tools="agent", config={"budget": {"tokens": 100}}, name="parent")
    assert info.value.limit == "model.budget.tokens" and info.value.allowed == 100
    assert info.value.used == 135  # the child's 120 rolled up, and the parent's own 15
    assert "model.budget.tokens = 100 reached (135 used)" in str(info.value)
    agents = agents_of(context_manager)
    assert agents["child"].status == "budget" and agents["parent"].status == "budget"
    child_report = agents["child"].report
    assert child_report["error"]["message"] == (
        "child: budget exceeded: model.budget.tokens = 100 reached (120 used; the budget of agent 'parent')"
    )
    assert child_report["step_count"] == 2  # the third turn never ran
    assert agents["parent"].report["budget"] == {
        "limits": {"tokens": 100},
        "used": {"input_tokens": 90, "output_tokens": 45, "cost_usd": 0.0, "turns": 3, "tokens": 135},
    }


async def test_usage_a_provider_lies_about_is_clamped_before_the_budget_counts_it(context_manager, tools):
    # A provider passes on what its peer said: -1e9 input tokens would give budget back,
    # and a string or NaN would break the sums. Each count is clamped where hook events
    # enter the run (budget.with_clamped_usage), whatever the provider.
    lies = [{"input_tokens": -1e9, "output_tokens": 40}, {"input_tokens": "many", "output_tokens": 40.9}]
    turns = [{"code": f"x = {n}", "usage": lies[n % 2]} for n in range(3)]
    turns.append({"text": "never", "usage": lies[0]})
    with pytest.raises(BudgetExceeded) as info:
        await agent(context_manager, turns, config={"budget": {"tokens": 120}})
    assert info.value.used == 120  # three turns of 40: the fourth is refused
    report = agents_of(context_manager)["agent"].report
    assert [step["usage"] for step in report["steps"]] == [{"input_tokens": 0, "output_tokens": 40}] * 3
    assert report["budget"]["used"]["tokens"] == 120


def test_clamp_usage_makes_every_count_a_whole_number_within_bounds():
    lies = {
        "input_tokens": -5, "output_tokens": float("nan"), "cache_read_tokens": float("inf"),
        "cache_write_tokens": 12.9,
        "a": "17", "b": "lots", "c": [1], "d": None, "e": True, "f": 10**400, "g": "1e999", "estimated": "yes",
    }  # fmt: skip
    assert clamp_usage(lies) == {
        "input_tokens": 0, "output_tokens": 0, "cache_read_tokens": MAX_TOKENS, "cache_write_tokens": 12,
        "a": 17, "b": 0, "c": 0, "d": 0, "e": 0, "f": MAX_TOKENS, "g": MAX_TOKENS, "estimated": False,
    }  # fmt: skip
    assert clamp_usage(None) == {} and clamp_usage("100") == {}
    assert clamp_usage({"estimated": True}) == {"estimated": True}
    assert Price(input=3.0, output=15.0).cost({"input_tokens": 10**400, "output_tokens": -1}) == 3.0 * MAX_TOKENS / 1e6


async def test_cost_budget_uses_the_price_table(context_manager, tools):
    usage = {"input_tokens": 100, "output_tokens": 50}
    config = {
        "model_id": "acme-large-2",
        "prices": {"acme-*": {"input": 1000, "output": 2000}},  # per million tokens: $0.2 per turn here
        "budget": {"cost_usd": 0.3},
    }
    turns = [{"code": "x = 1", "usage": usage}, {"code": "x = 2", "usage": usage}, {"text": "no", "usage": usage}]
    with pytest.raises(BudgetExceeded) as info:
        await context_manager.invoke(
            "agent",
            {"prompt": "P", "config": {**scripted(turns), "model_id": config["model_id"], "budget": config["budget"]}},
            config={"prices": config["prices"]},
        )
    assert info.value.limit == "model.budget.cost_usd" and info.value.used == pytest.approx(0.4)


async def test_cost_budget_without_a_price_is_a_clear_error(context_manager, tools):
    config = {**scripted([{"text": "hi"}]), "model_id": "nobody-knows-me", "budget": {"cost_usd": 1}}
    with pytest.raises(ConfigError) as info:
        await context_manager.invoke("agent", {"prompt": "P", "config": config})
    assert "no entry for model_id 'nobody-knows-me'" in str(info.value) and "prices" in str(info.value)


async def test_turn_budget_refuses_the_next_turn(context_manager, tools):
    turns = [{"code": "x = 1"}, {"code": "x = 2"}, {"code": "x = 3"}, {"text": "done"}]
    events: list[dict] = []
    context_manager.events.subscribe("b", lambda topic, e: events.append(e))
    with pytest.raises(BudgetExceeded) as info:
        await agent(context_manager, turns, config={"budget": {"turns": 2}}, events="b")
    assert "model.budget.turns = 2 reached (2 used; turn 3 refused)" in str(info.value)
    assert events[-1]["type"] == "agent-error" and events[-1]["status"] == "budget"
    assert events[-1]["error"]["limit"] == "model.budget.turns"


async def test_deadline_in_the_budget_stops_the_whole_tree(context_manager, tools):
    child = sub_agent("child", [{"text": "zzz", "delay": 30}])
    turns = [{"code": f"r = {child}"}, {"text": "never"}]
    started = time.monotonic()
    with pytest.raises(BudgetExceeded) as info:
        await agent(context_manager, turns, allowed_tools="agent", config={"budget": {"deadline_s": 0.5}}, name="p")
    assert time.monotonic() - started < 10
    assert info.value.limit == "model.budget.deadline_s" and info.value.used >= 0.5
    agents = agents_of(context_manager)
    assert agents["child"].status == "budget" and agents["p"].status == "budget"


async def test_a_sub_agent_cannot_outlive_its_parents_deadline(context_manager, write_skill, tools):
    # the child's own config allows an hour; the parent's 0.5 s still binds it
    child = sub_agent("child", [{"text": "zzz", "delay": 30}])
    turns = [{"code": f"r = {child}"}, {"text": "never"}]
    with pytest.raises(BudgetExceeded):
        await agent(context_manager, turns, allowed_tools="agent", config={"budget": {"deadline_s": 0.5}})
    assert agents_of(context_manager)["child"].report["deadline"] is not None


# -- 2. spawn budget -------------------------------------------------------------------


async def test_an_agent_spawning_agents_in_a_loop_is_stopped_at_max_agents(context_manager, tools):
    child = sub_agent("child", [{"text": "ok"}])
    loop = f"n = 0\nwhile True:\n    await {child.removeprefix('await ')}\n    n += 1\n    memory['n'] = n"
    events: list[dict] = []
    context_manager.events.subscribe("s", lambda topic, e: events.append(e))
    result = await agent(
        context_manager,
        [{"code": loop}, {"code": "ctx.manager.finish(memory['n'])"}],
        allowed_tools="agent",
        config={"spawn": {"max_agents": 4}},
        events="s",
    )
    assert result == 3  # the outermost agent and three children: four agents
    error = next(e for e in events if e["type"] == "tool-error")
    assert "BudgetExceeded" in error["result"] and "model.spawn.max_agents = 4 reached" in error["result"]
    run = context_manager.state.runs.list(limit=1)[0]
    assert len(context_manager.state.runs.agents(run.id)) == 4


async def test_max_depth_bounds_nesting(context_manager, write_skill, tools):
    # a prompt skill that starts itself again: the spawn budget ends the recursion
    write_skill(
        "deeper.skill.md",
        """---
description: Go deeper.
allowed-tools: deeper
metadata:
  model:
    agent: agent-scripted
    spawn: {max_depth: 2}
    script:
      - code: "memory['below'] = await ctx.manager.invoke('deeper')"
      - text: done
---
Recurse.
""",
    )
    events: list[dict] = []
    context_manager.events.subscribe("d", lambda topic, e: events.append(e))
    assert await context_manager.invoke("deeper", nonlocals={"agent": {"events": "d"}}) == "done"
    errors = [e for e in events if e["type"] == "tool-error"]
    assert len(errors) == 1 and errors[0]["depth"] == 2
    assert "model.spawn.max_depth = 2 reached (3 used; agent 'deeper' would nest that deep)" in errors[0]["result"]
    run = context_manager.state.runs.list(limit=1)[0]
    assert sorted(a.depth for a in context_manager.state.runs.agents(run.id)) == [0, 1, 2]


# -- 3. cancellation ---------------------------------------------------------------------


def _sandbox_threads() -> int:
    from agent_apps.agent import executor

    pool = executor._POOL
    live = sum(1 for t in threading.enumerate() if t.name == "agent-apps-sandbox" and t.is_alive())
    return live - (pool.ready if pool is not None else 0)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


async def test_cm_cancel_stops_the_whole_tree_and_leaves_nothing_running(context_manager, write_skill, tools, tmp_path):
    pidfile = tmp_path / "pids"
    write_skill(
        "spawner",
        f"""
        from agent_apps.tools.subprocess import run
        frontmatter = {{}}
        async def main(ctx, args):
            await run(["sh", "-c", "sleep 300 & echo $! >> {pidfile}; echo $$ >> {pidfile}; wait"],
                      env={{"PATH": "/usr/bin:/bin"}}, timeout=600, signal=ctx.signal)
        """,
    )
    started = asyncio.Event()
    run_id: list[str] = []

    def on_event(topic, event):
        if event["type"] == "agent-start" and event["agent"] == "outer":
            run_id.append(event["run_id"])
        if event["type"] == "tool-call" and event["agent"] == "busy":
            started.set()

    context_manager.events.subscribe("c", on_event)
    busy = sub_agent("busy", [{"code": "await asyncio.gather(ctx.manager.invoke('spawner'), asyncio.sleep(0))"}])
    spin = sub_agent("spin", [{"code": "while True:\n    pass"}])
    both = f"{busy.removeprefix('await ')}, {spin.removeprefix('await ')}"
    turns = [{"code": f"await asyncio.gather({both})"}, {"text": "never"}]
    before = _sandbox_threads()
    task = asyncio.ensure_future(
        agent(
            context_manager,
            turns,
            allowed_tools="agent spawner",
            events="c",
            name="outer",
            config={"sandbox": {"timeout": 120}},
        )
    )
    await asyncio.wait_for(started.wait(), 20)
    for _ in range(200):  # the shell wrote both pids
        if pidfile.exists() and len(pidfile.read_text().split()) == 2:
            break
        await asyncio.sleep(0.05)
    pids = [int(p) for p in pidfile.read_text().split()]
    assert all(_alive(p) for p in pids)
    assert context_manager.cancel(run_id[0], "stop it") is True
    with pytest.raises(Cancelled) as info:
        await asyncio.wait_for(task, 20)
    assert "stop it" in str(info.value)
    statuses = {name: a.status for name, a in agents_of(context_manager).items()}
    assert statuses == {"outer": "cancelled", "busy": "cancelled", "spin": "cancelled"}
    for _ in range(100):
        if not any(_alive(p) for p in pids) and _sandbox_threads() <= before:
            break
        await asyncio.sleep(0.05)
    assert not any(_alive(p) for p in pids), "a child process survived"
    assert _sandbox_threads() <= before, "a sandbox thread survived"
    assert context_manager.cancel(run_id[0]) is False  # the run is over


async def test_timeout_option_cancels_the_run(context_manager, tools):
    with pytest.raises(Cancelled, match="timed out after 0.3 s"):
        await context_manager.invoke(
            "agent", {"prompt": "P", "config": scripted([{"text": "z", "delay": 30}])}, timeout=0.3
        )
    with pytest.raises(ValueError, match="timeout must be a number of seconds > 0"):
        await context_manager.invoke("agent", {"prompt": "P"}, timeout=-1)


def test_cli_timeout_cancels_and_reports(tmp_path, skills_path, write_skill):
    write_skill(
        "slow.skill.md",
        "---\ndescription: Slow.\nmetadata: {model: {agent: agent-scripted, script: [{text: z, delay: 60}]}}\n---\nP\n",
    )
    env = {**os.environ, "AGENT_APPS_STATE": str(tmp_path / "state.db")}

    def invoke(timeout: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "agent_apps", "invoke", "slow", "--timeout", timeout, "--path", str(skills_path)]
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)

    started = time.monotonic()
    proc = invoke("0.5")
    assert time.monotonic() - started < 30
    assert proc.returncode == 1 and "timed out after 0.5 s" in proc.stderr, proc.stderr
    bad = invoke("-3")
    assert bad.returncode == 2 and "--timeout: must be a number of seconds > 0, not '-3'" in bad.stderr


async def test_a_signal_cancel_reaches_a_nested_agent_that_ignores_its_signal(context_manager, write_skill, tools):
    # a provider that never looks at its signal is still stopped: the run's guard cancels it
    write_skill(
        "deaf-provider",
        """
        import asyncio
        frontmatter = {"params": {"type": "object"}, "metadata": {"tags": ["meta-internal", "provider"]}}
        async def main(ctx, args):
            await asyncio.sleep(60)
        """,
    )
    signal = Signal()
    task = asyncio.ensure_future(
        context_manager.invoke("agent", {"prompt": "P", "config": {"agent": "deaf-provider"}}, signal=signal)
    )
    await asyncio.sleep(0.3)
    signal.cancel("enough")
    with pytest.raises(Cancelled, match="enough"):
        await asyncio.wait_for(task, 10)


# -- 9. bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_config", "words"),
    [
        ("budget: {tokens: -5}", "model.budget.tokens must be an integer >= 0, not -5"),
        ("budget: {tokens: 0}", "model.budget.tokens must be a whole number > 0, not 0"),
        ("budget: {cost_usd: -0.5}", "model.budget.cost_usd must be a number > 0, not -0.5"),
        ("budget: {tokenz: 5}", "unknown config key 'model.budget.tokenz' (did you mean 'model.budget.tokens'?)"),
        ("budget: {turns: 2.5}", "model.budget.turns must be an integer >= 0, not 2.5"),
        ("spawn: {max_agents: 0}", "model.spawn.max_agents must be a whole number > 0, not 0"),
        ("spawn: {max_kids: 3}", "unknown config key 'model.spawn.max_kids'; known keys here: max_agents, max_depth"),
        ("priority: urgent", "model.priority must be one of background, low, normal, high, critical, not 'urgent'"),
        ("priority: hihg", "(did you mean 'high'?)"),
    ],
)
async def test_bad_budget_config_names_the_key_and_the_file(
    context_manager, write_skill, skills_path, model_config, words
):
    write_skill("task.skill.md", "---\ndescription: T.\n---\nDo it.\n")
    config = skills_path / "agent-apps.yaml"
    config.write_text(f"model:\n  agent: agent-scripted\n  script: [{{text: hi}}]\n  {model_config}\n")
    with pytest.raises(ConfigError) as info:
        await context_manager.invoke("task")
    message = str(info.value)
    assert words in message
    assert message.startswith(f"{config}:4: "), message
    config.write_text("model:\n  agent: agent-scripted\n  script: [{text: hi}]\n")
    assert await context_manager.invoke("task") == "hi"  # fixed: the manager keeps working


async def test_bad_admission_config_names_the_file(tmp_path, write_skill, skills_path):
    (tmp_path / "agent-apps.yaml").write_text("admission: {sandboxes: -1}\n")
    cm = ContextManager([skills_path], cwd=tmp_path, home=tmp_path / "home", env=False, user=False, entry_points=False)
    with pytest.raises(ConfigError, match=r"agent-apps.yaml:1: admission.sandboxes must be an integer >= 0, not -1"):
        await cm.invoke("agent", {"prompt": "P", "config": scripted([{"text": "hi"}])})
    (tmp_path / "agent-apps.yaml").write_text("admission: {sandboxes: 0}\n")
    cm = ContextManager([skills_path], cwd=tmp_path, home=tmp_path / "home", env=False, user=False, entry_points=False)
    with pytest.raises(ConfigError, match=r"agent-apps.yaml: admission.sandboxes must be a whole number >= 1, not 0"):
        await cm.invoke("agent", {"prompt": "P", "config": scripted([{"text": "hi"}])})
    (tmp_path / "agent-apps.yaml").write_text("admission: {sandbox: 3}\n")
    cm = ContextManager([skills_path], cwd=tmp_path, home=tmp_path / "home", env=False, user=False, entry_points=False)
    with pytest.raises(ConfigError, match=r"unknown config key 'admission.sandbox' \(did you mean 'admission.sa"):
        await cm.invoke("agent", {"prompt": "P", "config": scripted([{"text": "hi"}])})


async def test_bad_tool_timeout_is_refused(context_manager, tools):
    with pytest.raises(Exception, match=r"config.tool_timeout: must be a number of seconds > 0, not -1"):
        await agent(context_manager, [{"text": "hi"}], config={"tool_timeout": -1})


async def test_agent_code_cannot_lift_the_budget_of_the_agents_it_starts(context_manager, tools):
    events: list[dict] = []
    context_manager.events.subscribe("l", lambda topic, e: events.append(e))
    codes = [
        sub_agent("kid", [{"text": "hi"}], **{key: value})
        for key, value in (("budget", {}), ("spawn", {"max_agents": 1000}), ("priority", "critical"))
    ]
    turns = [{"code": codes}, {"text": "done"}]
    assert (
        await agent(context_manager, turns, allowed_tools="agent", events="l", config={"budget": {"tokens": 10**6}})
        == "done"
    )
    errors = [e["result"] for e in events if e["type"] == "tool-error"]
    assert len(errors) == 3
    for error, key in zip(errors, ("budget", "spawn", "priority"), strict=True):
        assert f"agent code may not set config {key}" in error
