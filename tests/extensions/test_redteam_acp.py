"""Hostile ACP agent CLIs: agent-acp against tests/extensions/hostile_acp_agent.py, which
writes raw JSON-RPC lines the ``acp`` package would refuse to send.

What must hold (docs/security.md, "What a peer can do"): a cancellation stops the run
at once whatever the agent sends (a flood, silence, a deaf ear to SIGTERM), a turn's
output is capped (``model.max_output_kb``), usage is clamped, a message past the line
limit or nested too deep ends the run (or fails the request it answers) with a clear
error and no traceback, and what the agent prints or writes to stderr reaches an error
message cut short, never a file that grows.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_apps import AgentAppsError, Cancelled, Signal

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(importlib.util.find_spec("acp") is None, reason="needs the 'acp' extra"),
]

AGENT = Path(__file__).with_name("hostile_acp_agent.py")


@pytest.fixture
def events(context_manager):
    got: list[dict[str, Any]] = []
    context_manager.events.subscribe("redteam-acp", lambda topic, event: got.append(event))
    return got


@pytest.fixture
def run(context_manager):
    async def run(mode, *, config=None, signal=None):
        call = {"prompt": "You are a test agent.", "user_message": "Do it.", "events": "redteam-acp"}
        command = [sys.executable, str(AGENT), mode]
        call["config"] = {"agent": "agent-acp", "command": command, "max_retries": 0, **(config or {})}
        return await context_manager.invoke("agent", call, signal=signal)

    return run


def messages(events):
    return [e for e in events if e["type"] == "agent-message"]


def agents_alive() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if str(AGENT) in cmdline and state != "Z":
                found.append(cmdline)
    return found


def one_line(exc: BaseException, *words: str) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text and len(text) < 1000, text[:2000]
    for word in words:
        assert word in text, text
    return text


# -- 1. a cancellation stops the run, whatever the agent sends -----------------------------------


async def test_a_timer_cancelling_a_flood_of_chunks_stops_the_run_at_the_next_one(run, events):
    signal = Signal()
    at_cancel: list[int] = []
    signal.add_callback(lambda reason: at_cancel.append(len(messages(events))))
    task = asyncio.ensure_future(run("flood", signal=signal, config={"max_output_kb": 1_000_000}))
    while len(messages(events)) < 200:
        await asyncio.sleep(0.01)
    asyncio.get_running_loop().call_later(0.3, signal.cancel, "deadline")
    with pytest.raises(Cancelled, match="deadline"):
        await asyncio.wait_for(task, 60)
    assert len(messages(events)) - at_cancel[0] <= 1
    assert agents_alive() == []


async def test_a_flood_of_chunks_leaves_the_event_loop_a_turn_at_every_one(run, events, context_manager):
    # a callback scheduled while the flood is reported (a deadline's timer) runs before
    # the next few chunks are
    loop = asyncio.get_running_loop()
    lags: list[int] = []

    def probe(topic, event):
        seen = len(messages(events))
        if event["type"] == "agent-message" and seen % 200 == 0 and len(lags) < 10:
            loop.call_soon(lambda: lags.append(len(messages(events)) - seen))

    context_manager.events.subscribe("redteam-acp", probe)
    signal = Signal()
    task = asyncio.ensure_future(run("flood", signal=signal, config={"max_output_kb": 1_000_000}))
    while len(lags) < 10 and not task.done():
        await asyncio.sleep(0.01)
    signal.cancel("enough")
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, 60)
    assert len(lags) >= 10 and max(lags) <= 2, lags


async def test_an_agent_deaf_to_cancel_eof_and_sigterm_is_killed(run, events):
    signal = Signal()
    task = asyncio.ensure_future(run("deaf", signal=signal))
    while not [e for e in events if e["type"] == "turn-start"]:
        await asyncio.sleep(0.01)
    signal.cancel("Ctrl-C")
    with pytest.raises(Cancelled, match="Ctrl-C"):
        await asyncio.wait_for(task, 60)
    assert agents_alive() == []


# -- 1. a turn's output is capped ---------------------------------------------------------------


async def test_a_turn_past_max_output_kb_ends_the_run(run, events):
    with pytest.raises(AgentAppsError) as info:
        await run("big-turn", config={"max_output_kb": 16})
    one_line(info.value, "said more than model.max_output_kb (16 KB) in turn 1")
    assert info.value.code == "OutputTooLarge"
    assert len("".join(e["text"] for e in messages(events))) <= 16 * 1024
    assert agents_alive() == []


async def test_a_turn_within_max_output_kb_goes_through(run):
    assert (await run("big-turn")).startswith("0000 zzz")  # 64 KB, under the default 1024


# -- 3. usage is clamped ----------------------------------------------------------------------


async def test_a_huge_usage_is_clamped(run, events):
    # (the acp package itself refuses a negative count: the turn's usage is then estimated)
    assert await run("usage") == "Done."
    (end,) = [e for e in events if e["type"] == "turn-end"]
    assert end["usage"] == {"input_tokens": 10**9, "output_tokens": 40}


# -- 8, 9. unreadable messages end the run (or the request) with a clear error -----------------------


async def test_an_answer_nested_too_deep_fails_the_prompt_at_once(run, capfd):
    with pytest.raises(AgentAppsError) as info:
        await asyncio.wait_for(run("deep"), 60)  # without the fix: no answer until the deadline
    one_line(info.value, "could not read the answer: JSON nested deeper than 128 levels")
    assert "Traceback" not in capfd.readouterr().err


def test_a_message_past_the_line_limit_ends_the_run_with_a_clear_error(tmp_path):
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "task.skill.md").write_text("---\ndescription: A task.\n---\nDo it.\n")
    command = f"[{sys.executable}, {AGENT}, huge]"
    (tmp_path / "agent-apps.yaml").write_text(f"model:\n  agent: agent-acp\n  command: {command}\n")
    done = subprocess.run(
        [sys.executable, "-m", "agent_apps", "invoke", "task"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HUGE_MB": "120"},  # past the 50 MB line limit, and past what the pipe buffers
    )
    assert done.returncode == 1
    assert "sent a message longer than 50 MB (one JSON-RPC line at most)" in done.stderr
    assert "Traceback" not in done.stderr and "Event loop is closed" not in done.stderr, done.stderr[-3000:]
    assert len(done.stderr) < 2000
    assert agents_alive() == []


# -- 5, 6. what the agent says reaches an error message cut short -------------------------------------


async def test_a_megabyte_error_is_cut_short(run):
    with pytest.raises(AgentAppsError) as info:
        await run("error")
    one_line(info.value, "failed: boom boom")


async def test_megabyte_lines_of_noise_are_cut_short(run):
    with pytest.raises(AgentAppsError) as info:
        await run("babble", config={"startup_timeout": 3})
    one_line(info.value, "does not speak the Agent Client Protocol: it printed 'Usage: uuu")


async def test_twenty_megabytes_of_stderr_keep_only_their_tail(run):
    with pytest.raises(AgentAppsError) as info:
        await run("stderr")
    one_line(info.value, "exited with status 4 before answering initialize", "/ fatal: gave up")
