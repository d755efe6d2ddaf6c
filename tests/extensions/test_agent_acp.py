"""agent-acp for real, offline: a real ACP agent CLI (tests/extensions/acp_agent.py, the
``acp`` package's agent side) as a subprocess over stdio, reaching the ``invoke`` tool
through agent-apps' own MCP endpoint with a real MCP client.

The conformance suite runs against this provider too (``TestAcpConformance`` below);
the other tests cover what is specific to it: the first prompt, turn inference, permissions
through the security policy, the stdio fallback, history, errors that name the command,
and that no process outlives the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from agent_apps import AgentAppsError, Cancelled, Signal
from agent_apps.testing.conformance import provider_suite

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(importlib.util.find_spec("acp") is None, reason="needs the 'acp' extra"),
]

AGENT = Path(__file__).with_name("acp_agent.py")


class AcpAgent:
    """The conformance suite's harness: agent-acp driving a real ACP agent CLI (a
    subprocess over stdio) whose model plays the script, and which calls ``invoke`` over
    our MCP endpoint with a real MCP client."""

    name = "agent-acp"

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.runs = 0

    def config(self, turns: list[dict]) -> dict:
        self.runs += 1
        path = os.path.join(self.directory, f"script-{self.runs}.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(turns, handle)
        return {"agent": "agent-acp", "command": [sys.executable, str(AGENT), path], "retry_delay": 0}


@contextlib.contextmanager
def acp_agent():
    with tempfile.TemporaryDirectory(prefix="agent-apps-acp-") as directory:
        yield AcpAgent(directory)


TestAcpConformance = provider_suite(acp_agent, name="TestAcpConformance")


@pytest.fixture
def script_file(tmp_path):
    count = iter(range(1000))

    def write(turns):
        path = tmp_path / f"script-{next(count)}.json"
        path.write_text(json.dumps(turns))
        return str(path)

    return write


@pytest.fixture
def events(context_manager):
    got = []
    context_manager.events.subscribe("acp-test", lambda topic, event: got.append(event))
    return got


@pytest.fixture
def run(context_manager, script_file):
    """``await run(turns, config=..., flags=[...], **agent_args)``: the agent's result."""

    async def run(turns, *, config=None, flags=(), signal=None, **args):
        call = {"prompt": "You are a test agent.", "user_message": "Do the test.", "events": "acp-test", **args}
        command = [sys.executable, str(AGENT), script_file(turns), *flags]
        call["config"] = {"agent": "agent-acp", "command": command, "retry_delay": 0, **(config or {})}
        return await context_manager.invoke("agent", call, signal=signal)

    return run


def of_type(events, kind):
    return [e for e in events if e["type"] == kind]


def one_line(exc, *words):
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text, text
    for word in words:
        assert word in text, text
    return text


# -- the protocol --------------------------------------------------------------------------------


async def test_tool_call_then_answer_reported_as_turns(run, events):
    turns = [
        {"reasoning": "Count first.", "text": "Counting.", "code": 'print(len("a b c".split()), "words")'},
        {"text": "There are 3 words."},
    ]
    assert await run(turns) == "There are 3 words."
    kinds = [e["type"] for e in events if e["type"] in ("turn-start", "tool-call", "tool-result", "turn-end")]
    assert kinds == ["turn-start", "tool-call", "tool-result", "turn-end", "turn-start", "turn-end"]
    (call,) = of_type(events, "tool-call")
    assert call["id"] == "call-1"  # the CLI's own toolCallId: it announced the call
    assert of_type(events, "tool-result")[0]["result"] == "3 words"
    messages = of_type(events, "agent-message")
    assert "".join(e["text"] for e in messages if e.get("reasoning")) == "Count first."
    assert "".join(e["text"] for e in messages if not e.get("reasoning")) == "Counting.There are 3 words."
    assert all(e["delta"] for e in messages)
    complete = of_type(events, "agent-complete")[0]
    assert complete["turns"] == 2 and complete["steps"] == 1
    assert complete["usage"]["input_tokens"] > 0 and complete["usage"]["output_tokens"] > 0


async def test_first_prompt_carries_system_prompt_and_task(run):
    result = await run([{"echo": "prompt"}], prompt="SYSTEM-PROMPT", user_message="THE-TASK")
    assert "SYSTEM-PROMPT" in result and result.rstrip().endswith("THE-TASK")
    assert "invoke" in result  # the policy's tool documentation is part of the system prompt


async def test_session_history_reaches_the_first_prompt(context_manager, script_file):
    # the provider called directly, as the agent skill calls it, with a session's messages
    hooks = []

    async def hook(ctx, event):
        hooks.append(event)
        return {"stop": True, "result": event.get("result")} if event["type"] == "turn-end" else None

    messages = [
        {"role": "user", "text": "Remember the number 17."},
        {
            "role": "assistant",
            "text": "Noted.",
            "tool_calls": [{"id": "t1", "name": "invoke", "input": {"code": "x = 17"}}],
        },
        {"role": "tool", "tool_call_id": "t1", "name": "invoke", "text": "ok"},
    ]
    args = {
        "prompt": "SYSTEM-PROMPT",
        "config": {"command": [sys.executable, str(AGENT), script_file([{"echo": "prompt"}])]},
        "invoke_ref": context_manager.callback(lambda ctx, a: {"text": "", "error": False}),
        "hook_ref": context_manager.callback(hook),
        "user_message": "THE-TASK",
        "messages": messages,
    }
    result = await context_manager.invoke("agent-acp", args)
    assert "user: Remember the number 17." in result and "x = 17" in result and "[result]\nok" in result
    assert result.index("SYSTEM-PROMPT") < result.index("Remember") < result.index("THE-TASK")


async def test_stop_directive_mid_prompt_cancels_the_agent(run, events):
    # finish() in the first turn: the stop comes when the agent speaks again, and the
    # rest of its prompt is cancelled (session/cancel)
    turns = [{"code": "ctx.manager.finish({'ok': True})"}, {"text": "All done."}, {"code": "print('never')"}]
    assert await run(turns) == {"ok": True}
    assert "never" not in json.dumps(events)
    assert not any("All done" in e.get("text", "") for e in of_type(events, "agent-message"))


async def test_returns_reminder_is_the_next_prompt_in_the_same_session(run, events):
    returns = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
    turns = [{"text": "The answer is 3."}, {"echo": "prompt", "code": "ctx.manager.finish({'count': 3})"}]
    assert await run(turns, returns=returns) == {"count": 3}
    texts = "".join(e["text"] for e in of_type(events, "agent-message"))
    assert "finish" in texts.split("The answer is 3.", 1)[1]  # the reminder came as the second prompt


async def test_usage_reported_by_the_agent_is_used(run, events):
    turns = [{"text": "Hi.", "usage": {"input_tokens": 900, "output_tokens": 12}}]
    assert await run(turns) == "Hi."
    (end,) = of_type(events, "turn-end")
    assert end["usage"] == {"input_tokens": 900, "output_tokens": 12}


async def test_usage_the_agent_reports_is_kept_whole_after_tool_calls(run, events, context_manager):
    """ACP reports a prompt's usage once, at its end: a smaller report than our estimate
    of the prompt's model calls is kept as it is, not outweighed by the estimate."""
    turns = [{"code": "print('x' * 4000)"}, {"text": "Hi.", "usage": {"input_tokens": 123, "output_tokens": 45}}]
    assert await run(turns) == "Hi."
    assert [e.get("usage") for e in of_type(events, "turn-end")] == [None, {"input_tokens": 123, "output_tokens": 45}]
    (complete,) = of_type(events, "agent-complete")
    assert complete["usage"] == {"input_tokens": 123, "output_tokens": 45}


async def test_usage_is_estimated_and_marked_when_the_agent_reports_none(run, events):
    assert await run([{"code": "print(1)"}, {"text": "Hi there."}]) == "Hi there."
    usage = [e.get("usage") for e in of_type(events, "turn-end")]
    assert usage[0] is None  # the prompt goes on: its usage comes with its last turn
    assert usage[1]["estimated"] is True and usage[1]["output_tokens"] > 0
    one_call = -(-len("Hi there.") // 4)
    assert usage[1]["input_tokens"] > one_call  # both model calls read the conversation


async def test_env_and_cwd_reach_the_cli(run, tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_SECRET", "s3cret")
    monkeypatch.setenv("NOT_PASSED", "x")
    work = tmp_path / "work"
    work.mkdir()
    config = {"env": {"ACP_TEST_TOKEN": "${HOST_SECRET}"}, "cwd": str(work)}
    said = await run([{"echo": "env:ACP_TEST_TOKEN,env:NOT_PASSED,cwd"}], config=config)
    assert said == f"s3cret|<unset>|{work.resolve()} {work.resolve()}"


async def test_stdio_fallback_when_the_agent_has_no_http_mcp(run, events):
    turns = [{"code": "print(6 * 7)"}, {"text": "Forty-two."}]
    assert await run(turns, flags=["--no-http"]) == "Forty-two."
    assert of_type(events, "tool-result")[0]["result"] == "42"


# -- permissions -----------------------------------------------------------------------------------


async def test_permissions_allow_deny_and_unattended_ask(run, context_manager, events):
    unattended = {"security": {"mode": "unattended", "policy": {"unattended": {"allow": ["acp-edit"]}}}}
    turns = [
        {"permission": {"kind": "read", "title": "read notes.txt"}, "code": "print('r')"},
        {"permission": {"kind": "edit", "title": "edit notes.txt"}, "code": "print('e')"},
        {"permission": {"kind": "execute", "title": "make deploy"}, "code": "print('x')"},
        {"permission": {"kind": "other", "title": "switch model"}},
    ]
    call = {
        "prompt": "p",
        "user_message": "u",
        "events": "acp-test",
        "config": {"agent": "agent-acp", "command": [sys.executable, str(AGENT), _write(turns)]},
    }
    await context_manager.invoke("agent", call, config=unattended)
    said = "".join(e["text"] for e in of_type(events, "agent-message"))
    assert "permission 'read notes.txt': yes" in said  # read: allowed in both modes
    assert "permission 'edit notes.txt': yes" in said  # write, but listed in allow
    assert "permission 'make deploy': no" in said  # execute counts as write: denied unattended
    assert "permission 'switch model': no" in said  # other counts as admin: no one to ask


async def test_a_tool_that_only_looks_like_ours_goes_through_the_policy(run, context_manager, events):
    # titled invoke, with our input's shape: a tool of the CLI's own all the same, as our
    # MCP endpoint is serving no such call; unattended, a write or admin tool is refused
    code = {"code": "import os; os.system('touch pwned')"}
    turns = [
        {"permission": {"kind": "execute", "title": "invoke", "raw_input": code}, "code": "print(1)"},
        {"permission": {"kind": "other", "title": "mcp__agent-apps__invoke", "raw_input": code}, "code": "print(2)"},
        {"permission": {"kind": "read", "title": "invoke", "raw_input": code}},
    ]
    call = {
        "prompt": "p",
        "user_message": "u",
        "events": "acp-test",
        "config": {"agent": "agent-acp", "command": [sys.executable, str(AGENT), _write(turns)]},
    }
    await context_manager.invoke("agent", call, config={"security": {"mode": "unattended"}})
    said = "".join(e["text"] for e in of_type(events, "agent-message"))
    assert "permission 'invoke': no" in said  # execute counts as write
    assert "permission 'mcp__agent-apps__invoke': no" in said  # other counts as admin
    assert "permission 'invoke': yes" in said  # read is allowed unattended: by the policy, not as ours


async def test_a_call_our_endpoint_is_serving_is_ours(run, context_manager, write_skill, events):
    # the CLI asks about a call while our endpoint runs it (same tool call id, same code):
    # that one is ours, allowed whatever the policy says of the CLI's own tools
    write_skill("gate", """
        import asyncio
        frontmatter = {"description": "Says the call is in flight, then waits for the CLI's question."}
        async def main(ctx, args):
            folder = ctx.manager.context_manager.cwd
            (folder / "in-flight").write_text("")
            for _ in range(3000):
                if (folder / "asked").exists():
                    return (folder / "asked").read_text()
                await asyncio.sleep(0.01)
            return "never asked"
    """)  # fmt: skip
    turns = [{"code": "print(await ctx.manager.invoke('gate', {}))", "ask_in_flight": "invoke"}, {"text": "Done."}]
    assert await run(turns, config={}, allowed_tools="gate") == "Done."
    (result,) = of_type(events, "tool-result")
    assert result["result"] == "permission 'invoke': yes"


def _write(turns):
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    with handle:
        json.dump(turns, handle)
    return handle.name


# -- clear errors naming the command ------------------------------------------------------------------


async def test_a_cli_that_is_not_installed(run, context_manager):
    call = {"prompt": "p", "user_message": "u", "config": {"agent": "agent-acp", "command": "no-such-acp-cli --acp"}}
    with pytest.raises(AgentAppsError) as info:
        await context_manager.invoke("agent", call)
    one_line(info.value, "agent-acp:", "'no-such-acp-cli' is not installed", "model.command")


async def test_agent_kiro_names_its_default_command(context_manager, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    call = {"prompt": "p", "user_message": "u", "config": {"agent": "agent-kiro"}}
    with pytest.raises(AgentAppsError) as info:
        await context_manager.invoke("agent", call)
    one_line(info.value, "agent-kiro:", "'kiro-cli' is not installed")


async def test_a_cli_that_exits_early(run):
    with pytest.raises(AgentAppsError) as info:
        await run([], flags=["--exit-early"])
    one_line(info.value, "acp_agent.py", "exited with status 3 before answering initialize", "not logged in")


async def test_a_cli_that_speaks_another_protocol_version(run):
    with pytest.raises(AgentAppsError) as info:
        await run([], flags=["--protocol", "7"])
    one_line(info.value, "acp_agent.py", "speaks ACP protocol version 7", "version 1")


async def test_a_program_that_does_not_speak_acp(run):
    with pytest.raises(AgentAppsError) as info:
        await run([], flags=["--garbage"], config={"startup_timeout": 3})
    one_line(info.value, "does not speak the Agent Client Protocol", "Usage: acp_agent")


async def test_a_bad_command_setting(context_manager):
    call = {"prompt": "p", "user_message": "u", "config": {"agent": "agent-acp", "command": 42}}
    with pytest.raises(AgentAppsError) as info:
        await context_manager.invoke("agent", call)
    one_line(info.value, "model.command must name the ACP agent CLI")


async def test_a_failing_prompt_is_an_error_event_then_one_line(run, events):
    with pytest.raises(AgentAppsError) as info:
        await run([{"error": "the model is down"}])
    one_line(info.value, "failed", "the model is down")
    assert of_type(events, "agent-error")


def _provider_module():
    """The provider's implementation, as the skill loader imported it."""
    path = str(Path(__file__).resolve().parents[2] / "extensions" / "agent" / "acp" / "session.py")
    return next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == path)


async def test_calls_announced_together_stay_one_turn_however_late_their_announcements_are_read(
    run, events, monkeypatch
):
    """The run reads what the CLI streams in a task of its own, which lags behind on a busy
    machine. Before: a call announced with the first but read after the first call's
    result was taken for the agent's next turn; the first call had finished the task, so
    the run stopped there, and the second call was refused without a word (the
    conformance suite's test_directive_deny_is_obeyed failed under load)."""
    assert await run([{"text": "Loaded."}]) == "Loaded."
    client = _provider_module()._Client
    real = client.session_update
    held: list = []
    released = asyncio.Event()

    async def lagging(self, session_id, update, **kwargs):
        """From the second call's announcement on, updates reach the run only once the
        first call's result has been reported: the reader fell behind."""
        second = getattr(update, "session_update", None) == "tool_call" and update.tool_call_id == "call-2"
        if not released.is_set() and (held or second):
            held.append(update)
            if len(held) == 1:
                while not of_type(events, "tool-result"):
                    await asyncio.sleep(0.01)
                for late in held:  # in the order the CLI sent them
                    await real(self, session_id, late, **kwargs)
                released.set()
            return
        await real(self, session_id, update, **kwargs)

    monkeypatch.setattr(client, "session_update", lagging)
    events.clear()
    turns = [{"code": ["ctx.manager.finish(1)", "print('must not run')"]}]
    assert await run(turns, config={"parallel_tool_calls": False}) == 1
    texts = [e["result"] for e in events if e["type"] in ("tool-result", "tool-error")]
    assert released.is_set() and not any("must not run" in t for t in texts)
    assert any("denied" in t for t in texts), texts


# -- cancellation and processes -------------------------------------------------------------------------


@pytest.fixture
def started(context_manager):
    """The processes this test started (its descendants: the CLI, the bridge the CLI
    started), as ``{pid: (start time, command line)}``, seen at each tool call while the
    run goes on; only these are looked at after the run, never every process on the
    machine (other runs of these tests may be going on beside it)."""
    seen = {}

    def snapshot(topic, event):
        if event["type"] in ("tool-call", "tool-result"):
            seen.update(_descendants(os.getpid()))

    context_manager.events.subscribe("acp-test", snapshot)
    return seen


def _stat(pid):
    """``(parent pid, state, start time)`` of a process, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), fields[0], fields[19]


def _descendants(root):
    children = {}
    for entry in Path("/proc").iterdir():
        stat = _stat(entry.name) if entry.name.isdigit() else None
        if stat is not None:
            children.setdefault(stat[0], []).append(int(entry.name))
    found, todo = {}, [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found[pid] = (_stat(pid)[2], command)
            except (OSError, TypeError):
                continue
            todo.append(pid)
    return found


def _still_alive(started):
    """The command lines of the processes in ``started`` that are still running (the same
    process: the same start time; not a zombie)."""
    alive = []
    for pid, (start, command) in started.items():
        stat = _stat(pid)
        if stat is not None and stat[2] == start and stat[1] != "Z":
            alive.append(command)
    return alive


async def test_cancellation_cancels_the_session_and_leaves_no_process(run, events, started):
    signal = Signal()
    turns = [{"text": "Working.", "code": "print('step')"}, {"text": "thinking...", "delay": 60}]
    task = asyncio.ensure_future(run(turns, signal=signal))
    for _ in range(500):
        if of_type(events, "tool-result"):
            break
        await asyncio.sleep(0.02)
    signal.cancel("stop it")
    with pytest.raises(Cancelled, match="stop it"):
        await asyncio.wait_for(task, 20)
    assert any(str(AGENT) in command for _, command in started.values())
    assert _still_alive(started) == []


async def test_a_run_whose_task_is_cancelled_leaves_no_request_unretrieved(run, events, started):
    """Before: cancelling the asyncio task of a run while its prompt was in flight left the
    prompt's task to fail with the connection's close, its exception never retrieved."""
    loop = asyncio.get_running_loop()
    reported = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda loop, context: reported.append(context.get("message")))
    try:
        task = asyncio.ensure_future(run([{"code": "print('step')"}, {"text": "thinking...", "delay": 60}]))
        for _ in range(500):
            if of_type(events, "tool-result"):
                break
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(3):  # a task's unretrieved exception is reported when the task is collected
            gc.collect()
            await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    assert reported == []
    assert _still_alive(started) == []


@pytest.mark.parametrize("flags", [[], ["--no-http"]])
async def test_no_child_process_outlives_the_run(run, script_file, flags, started):
    # with --no-http the CLI also starts the stdio bridge: a grandchild, in a session of its own
    turns = [{"code": "print('hi')"}, {"text": "Done."}]
    assert await run(turns, flags=flags) == "Done."
    commands = [command for _, command in started.values()]
    assert any(str(AGENT) in command for command in commands), commands
    assert any("agent_apps.mcp.bridge" in command for command in commands) == bool(flags), commands
    assert _still_alive(started) == []
