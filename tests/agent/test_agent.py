"""The agent policy: discovery, returns, limits, persistence, retries, trace, events,
memory, the untrusted sandbox, agent-execute and the command line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

import pytest

from agent_apps import ArgsInvalid, Cancelled, LimitExceeded, ResultInvalid, Signal, SkillFailed
from agent_apps.testing import default_sigint

pytestmark = pytest.mark.anyio

PROMPT_PROVIDER = """
frontmatter = {"params": {"type": "object"}, "metadata": {"visibility": "hidden", "tags": ["meta-internal"]}}
async def main(ctx, args):
    return {"prompt": args["prompt"], "args": sorted(args), "config": args["config"].get("model_id")}
"""


def scripted(turns, **extra):
    return {"agent": "agent-scripted", "script": turns, **extra}


async def agent(cm, turns, *, config=None, **args):
    call = {"prompt": "Test.", "user_message": "Go.", "config": {**scripted(turns), **(config or {})}, **args}
    return await cm.invoke("agent", call)


async def test_provider_receives_only_serializable_args(context_manager, write_skill, tools):
    write_skill("echo-provider", PROMPT_PROVIDER)
    result = await context_manager.invoke(
        "agent", {"prompt": "Be brief.", "config": {"agent": "echo-provider", "model_id": "m-1"}}
    )
    assert result["args"] == ["config", "hook_ref", "invoke_ref", "prompt", "skill_name", "user_message"]
    assert result["config"] == "m-1"
    assert result["prompt"].startswith("Be brief.")


async def test_constrained_mode_inlines_matching_tools_with_params(context_manager, write_skill, tools):
    write_skill("echo-provider", PROMPT_PROVIDER)
    prompt = (
        await context_manager.invoke(
            "agent", {"prompt": "P", "allowed_tools": "word-count secret", "config": {"agent": "echo-provider"}}
        )
    )["prompt"]
    assert "async def word_count(text: str) -> int:" in prompt  # a stub: typed args and result
    assert 'return await ctx.manager.invoke("word-count", {"text": text})' in prompt
    assert "async def secret() -> Any:" in prompt  # hidden, but named
    assert "slow_tool" not in prompt and "skill-list" not in prompt


async def test_discovery_mode_names_only_explicit_tools_plus_explorers(context_manager, write_skill, tools):
    write_skill("echo-provider", PROMPT_PROVIDER)
    write_skill(
        "audit",
        'frontmatter = {"description": "Audit calls.", '
        '"params": {"type": "object", "properties": {"level": {"type": "string"}}}, '
        '"metadata": {"role": "middleware"}}\n'
        'async def main(ctx, args):\n    return await ctx.manager.next()\n',
    )
    prompt = (
        await context_manager.invoke(
            "agent", {"prompt": "P", "allowed_tools": "* word-count", "config": {"agent": "echo-provider"}}
        )
    )["prompt"]
    for name in ("word_count", "skill_list", "skill_describe"):
        assert f"async def {name}(" in prompt
    assert "slow_tool" not in prompt and "async def secret" not in prompt
    assert "async def agent(" not in prompt and "echo-provider" not in prompt
    assert "## Middleware you can activate" in prompt and "- `audit(level: str = ...)`: Audit calls." in prompt


async def test_self_recursion_excluded_unless_named(context_manager, write_skill, tools):
    write_skill("echo-provider", PROMPT_PROVIDER)
    write_skill(
        "greeter.skill.md", "---\ndescription: Greets.\nmetadata: {model: {agent: echo-provider}}\n---\nGreet.\n"
    )
    write_skill(
        "greeter2.skill.md",
        "---\ndescription: Greets too.\nallowed-tools: greeter2 word-count\n"
        "metadata: {model: {agent: echo-provider}}\n---\nGreet.\n",
    )
    # discovery mode: the explorers are inlined; greeter itself must not be reachable by listing either
    prompt = (await context_manager.invoke("greeter"))["prompt"]
    assert "async def greeter(" not in prompt
    prompt2 = (await context_manager.invoke("greeter2"))["prompt"]
    assert "async def greeter2(task: str = ...) -> Any:" in prompt2


async def test_skill_list_from_agent_code_hides_self_agent_and_hidden(context_manager, write_skill, tools):
    write_skill(
        "lister.skill.md",
        "---\ndescription: Lists.\nmetadata:\n  model:\n    agent: agent-scripted\n    script:\n"
        "      - code: |\n          names = [s['name'] for s in await ctx.manager.invoke('skill-list')]\n"
        "          ctx.manager.finish(names)\n---\nList.\n",
    )
    names = await context_manager.invoke("lister")
    assert "word-count" in names and "skill-list" in names
    assert not {"lister", "agent", "agent-scripted", "secret", "agent-execute"} & set(names)


async def test_prompt_skill_end_to_end_with_returns_and_task(context_manager, write_skill, tools):
    write_skill(
        "counter.skill.md",
        """
        ---
        description: Count words.
        allowed-tools: word-count
        metadata:
          returns: {type: object, properties: {count: {type: integer}}, required: [count]}
          model:
            agent: agent-scripted
            script:
              - code: |
                  ctx.manager.finish({"count": await ctx.manager.invoke("word-count", {"text": "one two"})})
        ---
        Count the words of the task.
        """,
    )
    assert await context_manager.invoke("counter", {"task": "one two"}) == {"count": 2}


async def test_an_invalid_returns_schema_is_refused_before_the_model_is_called(context_manager, write_skill, tools):
    from agent_apps import SkillLoadError

    events = []
    context_manager.events.subscribe("t", lambda topic, e: events.append(e))
    path = write_skill(
        "broken.skill.md",
        """
        ---
        description: A prompt skill whose result schema is broken.
        metadata:
          returns: {type: object, properties: {count: {type: integr}}}
          model: {agent: agent-scripted, script: [{code: "ctx.manager.finish({'count': 1})"}]}
        ---
        Count.
        """,
    )
    with pytest.raises(SkillLoadError) as info:
        await context_manager.invoke("broken", nonlocals={"agent": {"events": "t"}})
    assert str(info.value).startswith(f"{path}:3: metadata.returns.properties.count.type is not a valid JSON Schema")
    assert events == []  # no agent started, no model called
    with pytest.raises(ArgsInvalid, match=r"agent: invalid args at returns: not a valid JSON Schema at type: 'integr'"):
        await agent(context_manager, [{"code": "ctx.manager.finish(1)"}], returns={"type": "integr"}, events="t")
    assert events == []


async def test_invalid_finish_is_reported_to_the_model(context_manager, tools):
    events = []
    context_manager.events.subscribe("t", lambda topic, e: events.append(e))
    returns = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
    turns = [{"code": "ctx.manager.finish({'count': 'three'})"}, {"code": "ctx.manager.finish({'count': 3})"}]
    assert await agent(context_manager, turns, returns=returns, events="t") == {"count": 3}
    (error,) = [e for e in events if e["type"] == "tool-error"]
    assert "finish() rejected" in error["result"] and "value.count" in error["result"]


async def test_returns_not_met_fails_clearly_when_script_ends(context_manager, tools):
    returns = {"type": "integer"}
    with pytest.raises(SkillFailed, match="script has no turn 2"):
        await agent(context_manager, [{"text": "no"}], returns=returns)


async def test_step_limit(context_manager, tools):
    events = []
    context_manager.events.subscribe("t", lambda topic, e: events.append(e))
    turns = [{"text": "Three at once.", "code": ["print(1)", "print(2)", "print(3)"]}, {"text": "never"}]
    result = await agent(context_manager, turns, config={"max_steps": 2}, events="t")
    assert result == "Three at once.\n\nStopped: maximum step limit reached"
    errors = [e["result"] for e in events if e["type"] == "tool-error"]
    assert errors and "Step limit reached (2 invoke calls)" in errors[0]
    assert events[-1]["type"] == "agent-complete" and events[-1]["status"] == "max_steps"
    with pytest.raises(LimitExceeded, match=r"maximum step limit reached \(2 invoke calls\)"):
        await agent(context_manager, turns, config={"max_steps": 2}, returns={"type": "integer"})


CAPPED = """
frontmatter = {"allowed-tools": "agent", "params": {"type": "object", "properties": {"returns": {"type": "boolean"}}}}
async def main(ctx, args):
    script = [{"text": f"Working on part {i}.", "code": "memory['done'] = memory.get('done', 0) + 1"} for i in range(5)]
    call = {"prompt": "P", "config": {"agent": "agent-scripted", "script": script, "max_turns": 3}}
    if args.get("returns"):
        call["returns"] = {"type": "integer"}
    try:
        result = await ctx.manager.invoke("agent", call)
    except Exception as exc:
        result = f"{type(exc).__name__}: {exc}"
    state = ctx.locals["agent"]
    return {"result": result, "status": state["status"], "message": state.get("message"), "memory": state["memory"],
            "turns": state["turns"], "trace": [t["type"] for t in state["trace"]]}
"""


async def test_turn_cap_keeps_the_partial_work(context_manager, write_skill, tools):
    write_skill("capped", CAPPED)
    out = await context_manager.invoke("capped")
    assert out["result"] == "Working on part 2.\n\nStopped: maximum turn limit reached"
    assert (out["status"], out["message"], out["turns"]) == ("max_turns", "Stopped: maximum turn limit reached", 3)
    assert out["memory"] == {"done": 3}
    assert out["trace"].count("turn-end") == 3 and out["trace"].count("tool-result") == 3
    # with a schema to finish: an error, and the partial work is still there for the caller
    out = await context_manager.invoke("capped", {"returns": True})
    assert out["result"].startswith("LimitExceeded: capped: Stopped: maximum turn limit reached (3 turns)")
    assert (out["status"], out["memory"]) == ("max_turns", {"done": 3})


async def test_status_of_failed_and_cancelled_runs(context_manager, tools):
    events = []
    context_manager.events.subscribe("s", lambda topic, e: events.append(e))
    with pytest.raises(SkillFailed):
        await agent(context_manager, [{"error": {"type": "AccessDenied", "message": "no"}}], events="s")
    assert events[-1]["type"] == "agent-error" and events[-1]["status"] == "error"
    signal = Signal()
    task = asyncio.ensure_future(
        context_manager.invoke(
            "agent", {"prompt": "P", "events": "s", "config": scripted([{"text": "zzz", "delay": 60}])}, signal=signal
        )
    )
    await asyncio.sleep(0.3)
    signal.cancel()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 10)
    assert events[-1]["type"] == "agent-error" and events[-1]["status"] == "cancelled"


def test_cli_turn_cap_prints_the_partial_result_and_exits_1(tmp_path, skills_path, write_skill):
    write_skill(
        "busy.skill.md",
        "---\ndescription: Busy.\nmetadata:\n  model:\n    agent: agent-scripted\n    max_turns: 2\n    script:\n"
        "      - {text: Reading., code: 'memory[\"a\"] = 1'}\n      - {text: Writing., code: 'memory[\"b\"] = 2'}\n"
        "      - {text: never}\n---\nBe busy.\n",
    )
    run = subprocess.run(
        [sys.executable, "-m", "agent_apps", "invoke", "busy", "--path", str(skills_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert run.returncode == 1, run.stderr
    assert run.stdout == "Writing.\n\nStopped: maximum turn limit reached\n"
    assert "■ busy: Stopped: maximum turn limit reached (2 turns, 2 steps" in run.stderr
    assert run.stderr.splitlines()[-1] == (
        "error: busy: Stopped: maximum turn limit reached (2 turns, 2 steps; model.max_turns sets the limit); "
        "the partial result is on stdout"
    )


async def test_a_run_cancelled_while_its_row_is_written_ends_cancelled_not_running(context_manager, monkeypatch):
    # the store's write of the run's row is in flight (held here) when the cancel comes:
    # the row is written all the same, so the run must end there, not stay "running"
    entered, release = threading.Event(), threading.Event()
    start_agent = context_manager.state.runs.start_agent

    def held(*args, **kwargs):
        entered.set()
        release.wait(30)
        return start_agent(*args, **kwargs)

    monkeypatch.setattr(context_manager.state.runs, "start_agent", held)
    signal = Signal()
    task = asyncio.ensure_future(
        context_manager.invoke("agent", {"prompt": "P", "config": scripted([{"text": "never"}])}, signal=signal)
    )
    assert await asyncio.to_thread(entered.wait, 30)
    signal.cancel()
    release.set()
    with pytest.raises(Cancelled):
        await task
    [run] = context_manager.state.runs.list()
    [row] = context_manager.state.runs.agents(run.id)
    assert (run.status, row.status, row.report["step_count"]) == ("cancelled", "cancelled", 0)


async def test_persistent_rejects_returns_and_keeps_going(context_manager, tools):
    with pytest.raises(ArgsInvalid, match="persistent mode never ends"):
        await agent(context_manager, [], config={"persistent": True}, returns={"type": "integer"})
    signal = Signal()
    events = []
    context_manager.events.subscribe("p", lambda topic, e: events.append(e))
    turns = [{"text": "idle"}] * 3 + [{"text": "waiting", "delay": 60}]
    task = asyncio.ensure_future(
        context_manager.invoke(
            "agent", {"prompt": "P", "config": scripted(turns, persistent=True), "events": "p"}, signal=signal
        )
    )
    for _ in range(200):
        if len([e for e in events if e["type"] == "turn-start"]) == 4:
            break
        await asyncio.sleep(0.02)
    signal.cancel()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 10)
    assert len([e for e in events if e["type"] == "turn-end"]) == 3  # text-only turns did not end it


async def test_transient_errors_are_retried_with_backoff(context_manager, tools):
    events = []
    context_manager.events.subscribe("t", lambda topic, e: events.append(e))
    turns = [
        {"error": {"type": "ThrottlingException", "message": "slow down", "retryable": True}},
        {"error": {"type": "ThrottlingException", "message": "slow down", "retryable": True}},
        {"text": "ok now"},
    ]
    assert await agent(context_manager, turns, config={"retry_delay": 0.01}, events="t") == "ok now"
    retries = [e for e in events if e.get("retrying")]
    assert [r["delay"] for r in retries] == [0.01, 0.02]
    with pytest.raises(SkillFailed, match="AccessDenied"):
        await agent(context_manager, [{"error": {"type": "AccessDenied", "message": "no"}}])


async def test_trace_events_usage_and_scope(context_manager, write_skill, tools):
    write_skill(
        "runner",
        """
        frontmatter = {"allowed-tools": "agent"}
        async def main(ctx, args):
            result = await ctx.manager.invoke("agent", {
                "prompt": "P", "events": "run", "name": "outer",
                "config": {"agent": "agent-scripted", "script": [
                    {"text": "hi", "reasoning": "hmm", "code": "print('x')",
                     "usage": {"input_tokens": 7, "output_tokens": 2}},
                    {"text": "bye"}]},
            })
            return {"result": result, "trace": ctx.locals["agent"]["trace"], "usage": ctx.locals["agent"]["usage"],
                    "scope": dict(ctx.nonlocals["agent"]), "ctx_id": ctx.id}
        """,
    )
    events = []
    context_manager.events.subscribe("run", lambda topic, e: events.append(e))
    out = await context_manager.invoke("runner")
    assert out["result"] == "bye"
    kinds = [t["type"] for t in out["trace"]]
    assert kinds[:9] == [
        "turn-start",
        "model-call",
        "model-response",
        "reasoning",
        "message",
        "tool-call",
        "tool-result",
        "turn-end",
        "turn-start",
    ]
    assert all(isinstance(t["timestamp"], float) for t in out["trace"])
    assert out["usage"]["input_tokens"] >= 7 and out["usage"]["output_tokens"] >= 2
    scope = out["scope"]
    assert (scope["events"], scope["context_id"], scope["ancestor_context_id"]) == ("run", out["ctx_id"], None)
    assert scope["skill_name"] == "runner" and "agent-scripted" in scope["exclude"]
    assert [e["type"] for e in events][0] == "agent-start" and events[-1]["type"] == "agent-complete"
    assert {e["type"] for e in events} <= {
        "agent-start",
        "turn-start",
        "turn-end",
        "tool-call",
        "tool-result",
        "tool-error",
        "agent-message",
        "agent-error",
        "agent-complete",
        "model-call",
        "model-response",
    }
    assert all(e["agent"] == "outer" and "timestamp" in e for e in events)


async def test_nested_agents_form_a_tree(context_manager, write_skill, tools):
    inner_turns = json.dumps([{"text": "inner done"}])
    turns = [
        {
            "code": "r = await ctx.manager.invoke('agent', {'prompt': 'inner', 'name': 'inner', "
            f"'config': {{'agent': 'agent-scripted', 'script': {inner_turns}}}}})\nctx.manager.finish(r)"
        }
    ]
    events = []
    context_manager.events.subscribe("tree", lambda topic, e: events.append(e))
    result = await agent(context_manager, turns, allowed_tools="agent", events="tree", name="outer")
    assert result == "inner done"
    starts = {e["agent"]: e for e in events if e["type"] == "agent-start"}
    assert starts["inner"]["ancestor_context_id"] == starts["outer"]["context_id"]


async def test_memory_seeded_and_persistent_across_turns(context_manager, tools):
    turns = [{"code": "memory['n'] = memory['start'] + 1"}, {"code": "ctx.manager.finish(memory['n'] * 10)"}]
    assert await agent(context_manager, turns, memory={"start": 4}) == 50


async def test_agent_code_is_untrusted(context_manager, write_skill, tools, tmp_path):
    attempts = {
        "file": "await ctx.manager.invoke('file:///etc/passwd')",
        "inline": "await ctx.manager.invoke('inline://frontmatter={}')",
        "hidden": "await ctx.manager.invoke('secret')",
        "outside": "await ctx.manager.invoke('slow-tool', {'seconds': 0})",
        "provider": "await ctx.manager.invoke('agent-scripted', {'prompt': 'x', 'invoke_ref': 'a', 'hook_ref': 'b'})",
    }
    events = []
    context_manager.events.subscribe("u", lambda topic, e: events.append(e))
    turns = [{"code": list(attempts.values())}, {"text": "done"}]
    await agent(context_manager, turns, allowed_tools="word-count", events="u")
    errors = [e["result"] for e in events if e["type"] == "tool-error"]
    assert len(errors) == len(attempts)
    assert all("ToolNotAllowed" in e for e in errors), errors


async def test_untrusted_flag_does_not_leak_to_called_skills(context_manager, write_skill, tools):
    write_skill(
        "uses-inline",
        """
        frontmatter = {}
        async def main(ctx, args):
            return [ctx.internals.get("untrusted", False),
                    await ctx.manager.invoke(
                        "inline://frontmatter = {}\\nasync def main(ctx, args):\\n    return 'inline ok'\\n")]
        """,
    )
    turns = [{"code": "ctx.manager.finish(await ctx.manager.invoke('uses-inline'))"}]
    assert await agent(context_manager, turns) == [False, "inline ok"]


async def test_every_guest_call_goes_through_middleware(context_manager, write_skill, tools, skills_path):
    write_skill(
        "count-calls",
        'frontmatter = {"metadata": {"role": "middleware"}}\nasync def main(ctx, args):\n'
        '    ctx.manager.emit("mw", {"skill": ctx.target.skill.name})\n    return await ctx.manager.next()\n',
    )
    (skills_path / "agent-apps.yaml").write_text("middleware: [count-calls]\n")
    context_manager.reload()
    seen = []
    context_manager.events.subscribe("mw", lambda topic, e: seen.append(e["skill"]))
    await agent(context_manager, [{"code": "await ctx.manager.invoke('word-count', {'text': 'a'})"}, {"text": "ok"}])
    assert "word-count" in seen


async def test_provider_that_ignores_returns_is_caught(context_manager, write_skill, tools):
    write_skill(
        "lazy-provider",
        'frontmatter = {"params": {"type": "object"}, "metadata": {"visibility": "hidden"}}\n'
        'async def main(ctx, args):\n    return "I ignore hooks"\n',
    )
    with pytest.raises(ResultInvalid, match="without a valid ctx.manager.finish"):
        await context_manager.invoke(
            "agent", {"prompt": "P", "returns": {"type": "integer"}, "config": {"agent": "lazy-provider"}}
        )


def test_cli_shows_progress_and_events(tmp_path, skills_path, write_skill):
    write_skill(
        "word-count",
        "frontmatter = {'params': {'type': 'object', 'properties': {'text': {'type': 'string'}}}}\n"
        "async def main(ctx, args):\n    return len(args['text'].split())\n",
    )
    write_skill(
        "demo.skill.md",
        "---\ndescription: Demo.\nallowed-tools: word-count\n"
        "metadata:\n  model:\n    agent: agent-scripted\n    script:\n"
        "      - text: Counting now.\n        code: |\n"
        "          print(await ctx.manager.invoke('word-count', {'text': 'a b'}))\n"
        "      - text: Two words.\n---\nCount.\n",
    )
    base = [sys.executable, "-m", "agent_apps", "invoke", "demo", "--path", str(skills_path)]
    run = subprocess.run(base, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Two words.\n"
    assert "▶ demo" in run.stderr and "— turn 1" in run.stderr and "⚙ invoke" in run.stderr and "→ 2" in run.stderr
    assert "✓ demo (2 turns, 1 step, ~" in run.stderr and " out tokens (estimated))" in run.stderr
    run = subprocess.run([*base, "--events"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    kinds = [json.loads(line)["type"] for line in run.stderr.splitlines()]
    assert kinds[0] == "agent-start" and kinds[-1] == "agent-complete" and "tool-result" in kinds


def test_cli_ctrl_c_stops_a_running_agent(tmp_path, skills_path, write_skill):
    import signal as signals

    write_skill(
        "spin.skill.md",
        "---\ndescription: Spins.\nmetadata:\n  model:\n    agent: agent-scripted\n"
        "    sandbox: {timeout: 300}\n    script:\n"
        "      - code: |\n          while True:\n              pass\n---\nSpin.\n",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_apps", "invoke", "spin", "--path", str(skills_path)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    line = ""
    while "⚙ invoke" not in line:
        line = proc.stderr.readline()
        assert line, "the agent never started"
    proc.send_signal(signals.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err


async def test_context_edit_events_land_in_the_trace(context_manager, write_skill, tools):
    write_skill(
        "long-runner",
        """
        frontmatter = {"allowed-tools": "agent"}
        async def main(ctx, args):
            turns = [{"code": f"print('x' * 300)  # {i}"} for i in range(5)] + [{"text": "done"}]
            await ctx.manager.invoke("agent", {"prompt": "P", "config": {
                "agent": "agent-scripted", "script": turns,
                "context_edit": args.get("edit", False), "context_keep": 2}})
            return [t for t in ctx.locals["agent"]["trace"] if t["type"] == "context-edit"]
        """.replace(
            "frontmatter = {",
            'frontmatter = {"params": {"type": "object", "properties": {"edit": {"type": "boolean"}}}, ',
        ),
    )
    edits = await context_manager.invoke("long-runner", {"edit": True})
    assert edits and all(e["removed"] > 0 and e["kept"] == 2 for e in edits)
    assert await context_manager.invoke("long-runner", {"edit": False}) == []


async def test_cancelled_agent_leaves_no_thread_behind(context_manager, tools):
    import threading
    from collections import Counter

    def threads():
        return sorted(t.name for t in threading.enumerate())

    await agent(context_manager, [{"text": "warm the pool"}])
    await asyncio.sleep(0.3)  # let the pool refill
    before = threads()
    signal = Signal()
    turns = [{"code": "while True:\n    pass"}]
    task = asyncio.ensure_future(
        context_manager.invoke(
            "agent", {"prompt": "P", "config": {**scripted(turns), "sandbox": {"timeout": 120}}}, signal=signal
        )
    )
    await asyncio.sleep(0.5)
    signal.cancel()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 20)
    def left_behind():  # threads of earlier tests' stores may end meanwhile: only new ones count
        return Counter(threads()) - Counter(before)

    for _ in range(100):  # the spinning sandbox's thread ends; the pool refills to its size
        if not left_behind():
            break
        await asyncio.sleep(0.05)
    assert not left_behind()


EVIL = (
    "inline://frontmatter = {'params': {'type': 'object'}}\\n"
    "def main(ctx, args):\\n    open(%r, 'w').write('pwned')\\n    return {}\\n"
)

ESCAPES = {
    # agent code calls a provider directly, handing it refs to host code
    "provider-direct": (
        "*",
        "await ctx.manager.invoke('agent-scripted', {'prompt': 'p', 'config': {'script': [{'text': 't'}]},"
        " 'invoke_ref': EVIL, 'hook_ref': EVIL})",
        "may not call internal skills",
    ),
    # agent code names host code as the sub-agent's provider
    "provider-inline": (
        "agent(allowed_tools=word-count)",
        "await ctx.manager.invoke('agent', {'prompt': 'p', 'allowed_tools': 'word-count', 'config': {'agent': EVIL}})",
        "is not a provider skill",
    ),
    # agent code points the sub-agent's model at another endpoint
    "endpoint": (
        "agent",
        "await ctx.manager.invoke('agent', {'prompt': 'p', 'config': {'endpoint_url': 'http://127.0.0.1:9'}})",
        "may not set config endpoint_url",
    ),
    # agent code without hidden skills starts a sub-agent that may call everything
    "widen": (
        None,
        "await ctx.manager.invoke('agent', {'prompt': 'p', 'allowed_tools': '*'})",
        "only with its own allowed-tools",
    ),
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
async def test_agent_code_cannot_escape_through_providers_or_sub_agents(context_manager, tools, tmp_path, name):
    allowed, code, words = ESCAPES[name]
    marker = tmp_path / "pwned"
    code = f"EVIL = {EVIL % str(marker)!r}\n{code}"
    events = []
    context_manager.events.subscribe("x", lambda topic, e: events.append(e))
    extra = {"allowed_tools": allowed} if allowed is not None else {}
    await agent(context_manager, [{"code": code}, {"text": "done"}], events="x", **extra)
    (error,) = [e["result"] for e in events if e["type"] == "tool-error"]
    assert "ToolNotAllowed" in error and words in error
    assert not marker.exists()


async def test_providers_only_accept_callback_refs(context_manager, tools):
    from agent_apps import ArgsInvalid

    with pytest.raises(ArgsInvalid, match="invoke_ref"):
        await context_manager.invoke(
            "agent-scripted", {"prompt": "p", "invoke_ref": "inline://x", "hook_ref": "callback://agent-hook.x"}
        )


async def test_nested_agent_does_not_see_the_skill_its_ancestor_serves(context_manager, write_skill, tools):
    write_skill("echo-provider", PROMPT_PROVIDER.replace('["meta-internal"]', '["meta-internal", "provider"]'))
    write_skill(
        "outer-skill.skill.md",
        "---\ndescription: Outer.\nmetadata:\n  model:\n    agent: agent-scripted\n    script:\n"
        "      - code: |\n"
        "          r = await ctx.manager.invoke('agent', {'prompt': 'inner', 'config': {'agent': 'echo-provider'}})\n"
        "          ctx.manager.finish(r['prompt'])\n---\nOuter.\n",
    )
    prompt = await context_manager.invoke("outer-skill")
    assert "### outer-skill" not in prompt and "outer-skill" not in prompt
