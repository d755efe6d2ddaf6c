"""Agents in sessions: history reaches the provider, memory carries over, every run is
recorded with its report and trace, compaction, retention, and the ``$agent`` sentinel."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from agent_apps import ArgsInvalid, SkillFailed

pytestmark = pytest.mark.anyio

# A provider that plays no model: it hands back what it was given.
ECHO = """
frontmatter = {
    "params": {"type": "object"},
    "metadata": {"visibility": "hidden", "tags": ["meta-internal", "provider"]},
}
async def main(ctx, args):
    return {"messages": args.get("messages"), "user_message": args["user_message"]}
"""


def scripted(turns, **extra):
    return {"agent": "agent-scripted", "script": turns, **extra}


async def agent(cm, turns, *, config=None, session=None, user_message="Go.", read_only=False, **args):
    call = {"prompt": "Test.", "user_message": user_message, "config": {**scripted(turns), **(config or {})}, **args}
    options = {"session": session} if session else {}
    if read_only:
        options["read_only"] = True
    return await cm.invoke("agent", call, **options)


ONE_CALL = [
    {"text": "Counting.", "code": "memory['n'] = memory.get('n', 0) + 1\nprint(memory['n'])"},
    {"text": "Done."},
]


async def test_the_second_run_of_a_session_gets_the_first_runs_messages(context_manager, write_skill):
    write_skill("echo-provider", ECHO)
    await agent(context_manager, ONE_CALL, session="s", user_message="count once")
    got = await context_manager.invoke(
        "agent", {"prompt": "P", "user_message": "and again", "config": {"agent": "echo-provider"}}, session="s"
    )
    assert got["user_message"] == "and again"
    messages = got["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[0] == {"role": "user", "text": "count once"}
    call = messages[1]["tool_calls"][0]
    assert messages[1]["text"] == "Counting." and call["name"] == "invoke" and "memory['n']" in call["input"]["code"]
    assert messages[2] == {"role": "tool", "tool_call_id": call["id"], "name": "invoke", "text": "1", "error": False}
    assert messages[3] == {"role": "assistant", "text": "Done."}
    # without a session a run starts from nothing, and providers see no 'messages' arg
    fresh = await context_manager.invoke("agent", {"prompt": "P", "config": {"agent": "echo-provider"}})
    assert fresh["messages"] is None


async def test_memory_carries_over_between_runs(context_manager):
    finish = [{"code": "memory['n'] = memory.get('n', 0) + 1\nctx.manager.finish(memory['n'])"}]
    assert await agent(context_manager, finish, session="m") == 1
    assert await agent(context_manager, finish, session="m") == 2
    assert await agent(context_manager, finish) == 1  # no session: fresh memory
    assert await agent(context_manager, finish, session="other") == 1
    assert context_manager.state.sessions.get("m").memory == {"n": 2}


def test_memory_and_history_survive_a_restart_of_the_process(tmp_path):
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "tally.skill.md").write_text(
        textwrap.dedent(
            """
            ---
            description: Keeps a tally.
            params: {type: object, properties: {n: {type: integer}}, required: [n]}
            metadata:
              model:
                agent: agent-scripted
                script:
                  - code: |
                      memory['tally'] = memory.get('tally', 0) + memory['args']['n']
                      ctx.manager.finish(memory['tally'])
            ---
            Tally.
            """
        ).lstrip()
    )
    env = {"AGENT_APPS_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    base = [sys.executable, "-m", "agent_apps", "invoke", "tally", "--path", str(skills), "--session", "t"]
    outs = [
        subprocess.run([*base, f"n={n}"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        for n in (3, 4)
    ]
    assert [o.stdout.strip() for o in outs] == ["3", "7"], [o.stderr for o in outs]
    shown = subprocess.run(
        [sys.executable, "-m", "agent_apps", "sessions", "show", "t", "--json"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    data = json.loads(shown.stdout)
    assert data["memory"]["tally"] == 7 and len(data["runs"]) == 2
    asked = [m["text"] for m in data["messages"] if m["role"] == "user"]
    assert len(asked) == 2 and '"n": 3' in asked[0] and '"n": 4' in asked[1]


async def test_every_run_is_recorded_with_its_report(context_manager, write_skill, tools):
    turns = [
        {"text": "Counting.", "code": "n = await ctx.manager.invoke('word-count', {'text': 'a b c'})\nprint(n)",
         "usage": {"input_tokens": 120, "output_tokens": 9}},
        {"text": "Oops.", "code": "raise ValueError('bad')", "usage": {"input_tokens": 150, "output_tokens": 5}},
        {"text": "There are 3.", "usage": {"input_tokens": 170, "output_tokens": 4}},
    ]  # fmt: skip
    assert await agent(context_manager, turns, name="counter") == "There are 3."
    store = context_manager.state
    (run,) = store.runs.list()
    assert run.status == "done" and run.session_id is None and run.name == "counter"
    assert (run.input_tokens, run.output_tokens) == (440, 18)
    (node,) = store.runs.agents(run.id)
    report = node.report
    assert report["status"] == "done" and report["result"] == "There are 3." and report["user_message"] == "Go."
    assert report["provider"] == "agent-scripted" and report["step_count"] == 3 and report["tool_call_count"] == 2
    assert report["usage"] == {"input_tokens": 440, "output_tokens": 18}
    first, second, third = report["steps"]
    assert first["type"] == "initial" and second["type"] == third["type"] == "followup"
    assert [s["finish_reason"] for s in report["steps"]] == ["tool_use", "tool_use", "end_turn"]
    assert all(s["model_latency_ms"] >= 0 for s in report["steps"])
    (ok,) = first["tool_calls"]
    assert ok["skills"] == ["word-count"] and ok["args"]["code"].startswith("n = await")
    assert ok["result_size"] == 1 and ok["error"] is None and ok["latency_ms"] > 0
    (bad,) = second["tool_calls"]
    assert bad["skills"] == [] and "ValueError: bad" in bad["error"]
    assert report["total_ms"] >= report["tool_ms"] > 0
    first_kinds = ["turn-start", "model-call", "model-response", "message"]
    assert node.trace and [e["type"] for e in node.trace][:4] == first_kinds  # stored by 'session'


async def test_nested_agents_belong_to_their_callers_run_and_not_its_session(context_manager, tools):
    inner = {"prompt": "in", "name": "inner", "config": {"agent": "agent-scripted", "script": [{"text": "inner done"}]}}
    turns = [{"code": f"r = await ctx.manager.invoke('agent', {inner!r})\nctx.manager.finish(r)"}]
    assert await agent(context_manager, turns, allowed_tools="agent", name="outer", session="n") == "inner done"
    store = context_manager.state
    (run,) = store.runs.list()
    outer, inner_agent = store.runs.agents(run.id)
    assert (outer.name, outer.depth, outer.parent_id, outer.session_id) == ("outer", 0, None, "n")
    assert (inner_agent.name, inner_agent.depth, inner_agent.parent_id) == ("inner", 1, outer.id)
    assert inner_agent.session_id is None and inner_agent.status == "done"
    assert [m.message.get("text") for m in store.sessions.messages("n")][0] == "Go."
    assert all(
        "inner done" != m.message.get("text") for m in store.sessions.messages("n") if m.message["role"] == "assistant"
    )


@pytest.mark.parametrize(
    ("config", "status"), [({"max_steps": 1}, "max_steps"), ({"max_turns": 2}, "max_turns")]
)
async def test_a_run_stopped_at_a_cap_is_recorded_with_its_status(context_manager, config, status):
    result = await agent(context_manager, [{"code": "x = 1"}] * 3, config=config, session="f")
    assert result.endswith("limit reached")  # the graceful stop: partial work, no error
    (run,) = context_manager.state.runs.list()
    assert run.status == status
    (node,) = context_manager.state.runs.agents(run.id)
    assert node.status == status and node.report.get("error") is None


async def test_a_failed_run_is_recorded_with_its_status(context_manager):
    with pytest.raises(SkillFailed):
        await agent(
            context_manager, [{"error": {"type": "ModelErrorException", "message": "down"}}], session="f"
        )
    (run,) = context_manager.state.runs.list()
    assert run.status == "error"
    (node,) = context_manager.state.runs.agents(run.id)
    assert node.status == "error" and node.report["error"]["type"] == "SkillFailed"


async def test_bad_session_ids_and_retention_values_are_clear_errors(context_manager):
    with pytest.raises(ArgsInvalid, match="bad session id"):
        await agent(context_manager, ONE_CALL, session="no spaces")
    with pytest.raises(ArgsInvalid, match="config.retention"):
        await agent(context_manager, ONE_CALL, config={"retention": "forever"})


# -- compaction ----------------------------------------------------------------------------


BIG = "x" * 2000  # about 500 tokens a message


async def chat(cm, n, *, config, session="c", read_only=False):
    return await agent(
        cm, [{"text": f"reply {n} {BIG}"}], config=config, session=session, user_message=f"say {n} {BIG}",
        read_only=read_only,
    )


def test_a_summary_nested_too_deep_is_kept_as_text():
    # the summarizer's answer is a model's text: JSON in it is parsed with bounds
    from agent_apps.agent.compaction import parse

    text = '{"summary": "deep", "facts": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert parse(text).text == text


async def test_compaction_summarizes_through_the_same_provider(context_manager, tmp_path, write_skill):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    summary = json.dumps({"summary": "They said 0 to 5.", "facts": ["The user counts upward."]})
    config = {
        "context_window": 9_000,
        "workspace": str(workspace),
        "compaction": {"reserve": 500, "model": {"script": [{"text": summary}]}},
    }
    write_skill("echo-provider", ECHO)
    for n in range(7):  # 14 messages of ~500 tokens: past 70% of (9,000 - system - 500)
        await chat(context_manager, n, config=config)
    got = await context_manager.invoke(
        "agent", {"prompt": "P", "user_message": "next", "config": {**config, "agent": "echo-provider"}}, session="c"
    )
    assert got["messages"][0] == {"role": "summary", "text": "They said 0 to 5."}
    assert got["messages"][-1]["text"].startswith("reply 6")
    info = context_manager.state.sessions.get("c")
    assert info.summary == "They said 0 to 5." and 0 < info.summary_through < 12
    memory = (workspace / "MEMORY.md").read_text()
    assert "## Auto-captured -- " in memory and "- The user counts upward." in memory
    runs = context_manager.state.runs.list(session="c")
    compactions = [a.report.get("compaction") for r in runs for a in context_manager.state.runs.agents(r.id)]
    done = [c for c in compactions if c]
    assert len(done) == 1 and done[0]["summarized"] and done[0]["strategy"] == "summarize"


async def test_when_the_summarizing_call_fails_the_old_part_is_dropped(context_manager, write_skill):
    config = {
        "context_window": 9_000,
        "compaction": {"reserve": 500, "model": {"script": [{"error": {"type": "ModelErrorException"}}]}},
    }
    write_skill("echo-provider", ECHO)
    for n in range(8):  # the 8th run starts past the threshold; its summarizer fails
        await chat(context_manager, n, config=config)
    info = context_manager.state.sessions.get("c")
    assert info.summary is None and info.summary_through > 0
    got = await context_manager.invoke(
        "agent", {"prompt": "P", "user_message": "next", "config": {**config, "agent": "echo-provider"}}, session="c"
    )
    assert got["messages"][0]["role"] == "user" and got["messages"][-1]["text"].startswith("reply 7")
    assert len(got["messages"]) < 16


# -- retention -----------------------------------------------------------------------------


SECRET = "the-launch-code-is-8841"


async def test_retention_none_leaves_no_message_content_in_the_database(context_manager, tmp_path):
    turns = [{"text": f"noted {SECRET}", "code": f"memory['x'] = '{SECRET}'\nprint('{SECRET}')"}, {"text": SECRET}]
    await agent(context_manager, turns, config={"retention": "none"}, session="private", user_message=SECRET)
    store = context_manager.state
    assert store.sessions.messages("private") == [] and store.sessions.get("private").memory is None
    (run,) = store.runs.list()
    (node,) = store.runs.agents(run.id)
    assert node.trace is None and "result" not in node.report and "user_message" not in node.report
    assert node.report["steps"][0]["tool_calls"][0]["result_size"] == len(SECRET)
    store.close()
    home = tmp_path / "agent-apps-home"
    raw = b"".join(p.read_bytes() for p in home.iterdir() if p.name.startswith("state.db"))
    assert raw and SECRET.encode() not in raw


async def test_retention_run_keeps_messages_only_while_the_run_lasts(context_manager):
    await agent(context_manager, ONE_CALL, session="r")  # kept
    seen = []
    turns = [
        {"code": "print('during')"},
        {"code": "ctx.manager.finish(1)"},
    ]

    async def watch(topic, event):
        if event["type"] == "turn-end":
            seen.append(len(context_manager.state.sessions.messages("r")))

    context_manager.events.subscribe("w", watch)
    await agent(context_manager, turns, config={"retention": "run"}, session="r", events="w", user_message="gone")
    assert max(seen) > 4  # stored as turns ended
    texts = [e.message.get("text") for e in context_manager.state.sessions.messages("r")]
    assert len(texts) == 4 and "gone" not in texts
    assert context_manager.state.sessions.get("r").memory == {"n": 1}


# -- off the record ------------------------------------------------------------------------

PROMPT_ECHO = """
frontmatter = {
    "params": {"type": "object"},
    "metadata": {"visibility": "hidden", "tags": ["meta-internal", "provider"]},
}
async def main(ctx, args):
    return {"messages": args.get("messages"), "prompt": args["prompt"]}
"""


async def test_a_read_only_run_sees_the_session_and_writes_nothing_to_it(context_manager, write_skill, tmp_path):
    write_skill("prompt-echo", PROMPT_ECHO)
    store = context_manager.state
    await agent(context_manager, ONE_CALL, session="s", user_message="count once")
    before = store.sessions.export("s")
    # it sees the memory and the messages, and is told it is off the record
    seen = await agent(context_manager, ONE_CALL[:1] + [{"code": "ctx.manager.finish(memory['n'])"}],
                       session="s", read_only=True)
    assert seen == 2
    got = await context_manager.invoke(
        "agent", {"prompt": "P", "config": {"agent": "prompt-echo"}}, session="s", read_only=True
    )
    assert [m["role"] for m in got["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert "# Off the record" in got["prompt"][len(got["prompt"]) // 2 :]
    assert "# Off the record" not in (
        await context_manager.invoke("agent", {"prompt": "P", "config": {"agent": "prompt-echo"}}, session="t")
    )["prompt"]
    # nothing of either run reached the session: messages, memory, update time
    assert store.sessions.export("s") == before and store.sessions.get("s").memory == {"n": 1}
    runs = store.runs.list(session="s")
    assert [store.runs.agents(r.id)[0].report.get("read_only") for r in runs] == [True, True, None]
    # a session that does not exist is not made, and no run is recorded
    with pytest.raises(Exception, match="no session 'nope'"):
        await agent(context_manager, ONE_CALL, session="nope", read_only=True)
    assert not store.sessions.exists("nope") and not store.runs.list(session="nope")
    with pytest.raises(ValueError, match="read_only=True applies to a session: give session=ID too"):
        await agent(context_manager, ONE_CALL, read_only=True)


async def test_a_read_only_run_past_the_threshold_stores_no_summary_and_flushes_no_facts(context_manager, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    summary = json.dumps({"summary": "They said 0 to 6.", "facts": ["The user counts upward."]})
    config = {
        "context_window": 9_000,
        "workspace": str(workspace),
        "compaction": {"reserve": 500, "model": {"script": [{"text": summary}]}},
    }
    for n in range(7):  # past the threshold, not compacted (threshold 1.0)
        await chat(context_manager, n, config={**config, "compaction": {**config["compaction"], "threshold": 1.0}})
    before = context_manager.state.sessions.export("c")
    assert await chat(context_manager, 7, config=config, read_only=True)
    (run, *_) = context_manager.state.runs.list(session="c")
    compaction = context_manager.state.runs.agents(run.id)[0].report["compaction"]
    assert compaction["summarized"] and compaction["facts"] == 1  # compacted for this run
    assert context_manager.state.sessions.export("c") == before  # but nothing stored
    assert not (workspace / "MEMORY.md").exists()


# -- the $agent sentinel -------------------------------------------------------------------


COUNTER = """
frontmatter = {"metadata": {"role": "middleware"}}
async def main(ctx, args):
    ctx.manager.emit("wrapped", {"skill": ctx.target.skill.name})
    return await ctx.manager.next()
"""


async def test_agent_middleware_wraps_agent_runs_only(context_manager, write_skill, tools):
    write_skill("counter", COUNTER)
    write_skill(
        "asker.skill.md",
        "---\ndescription: Asks.\nmetadata:\n  model:\n    agent: agent-scripted\n    middleware: [counter]\n"
        "    script:\n      - code: |\n          n = await ctx.manager.invoke('word-count', {'text': 'a b'})\n"
        "          ctx.manager.finish(n)\n---\nAsk.\n",
    )
    wrapped = []
    context_manager.events.subscribe("wrapped", lambda topic, e: wrapped.append(e["skill"]))
    assert await context_manager.invoke("asker") == 2
    assert wrapped == ["agent"]  # the agent run, not word-count, not the prompt skill itself
    # and the default agent middleware ('session') still stored the trace
    (run,) = context_manager.state.runs.list()
    (node,) = context_manager.state.runs.agents(run.id)
    assert node.trace and node.name == "asker"
    # elsewhere the sentinel stands for nothing
    assert await context_manager.invoke("word-count", {"text": "x"}, middleware=["$agent"]) == 1


# -- every provider ------------------------------------------------------------------------


async def test_every_provider_takes_the_session_window_and_reports_its_turns(harness, context_manager, tools):
    """Provider conformance for sessions: the earlier messages reach the model (they
    count in the next run's input tokens) and turn-end carries latency and stop reason."""
    first_turns = [{"text": "Counting.", "code": "print(len('a b c'.split()))"}, {"text": "Three."}]
    config = harness.config(first_turns)
    call = {"prompt": "Test.", "user_message": "Count the words of 'a b c'.", "config": config}
    assert await context_manager.invoke("agent", call, session="conf") == "Three."
    config = harness.config([{"text": "Still three."}])
    again = {**call, "user_message": "How many again?", "config": config}
    assert await context_manager.invoke("agent", again, session="conf") == "Still three."
    store = context_manager.state
    runs = store.runs.list(session="conf")
    (second,), (first,) = (store.runs.agents(run.id) for run in runs)
    steps = first.report["steps"] + second.report["steps"]
    assert [s["finish_reason"] for s in steps] == ["tool_use", "end_turn", "end_turn"]
    assert all(s["model_latency_ms"] >= 0 for s in steps)
    assert second.report["steps"][0]["usage"]["input_tokens"] > first.report["steps"][0]["usage"]["input_tokens"]
    assert [m.message["role"] for m in store.sessions.messages("conf")] == [
        "user", "assistant", "tool", "assistant", "user", "assistant"
    ]  # fmt: skip


async def test_a_cancelled_run_is_recorded_as_cancelled(context_manager):
    import asyncio

    from agent_apps import Cancelled, Signal

    signal = Signal()
    turns = [{"text": "a", "code": "print(1)"}, {"text": "b", "delay": 60}]
    call = {"prompt": "P", "config": scripted(turns), "events": "c"}
    started = asyncio.Event()
    context_manager.events.subscribe(
        "c", lambda topic, e: e["type"] == "turn-start" and e["turn"] == 2 and started.set()
    )
    task = asyncio.create_task(context_manager.invoke("agent", call, signal=signal, session="c"))
    await asyncio.wait_for(started.wait(), 60)
    signal.cancel("user")
    with pytest.raises(Cancelled):
        await task
    (run,) = context_manager.state.runs.list()
    assert run.status == "cancelled"
    assert len(context_manager.state.sessions.messages("c")) == 3  # the first turn, kept
