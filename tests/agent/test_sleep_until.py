"""``ctx.sleep_until`` and the ``sleep-until`` skill: a cancellable sleep to a point in
time, which a resumed durable run does not sleep again (the code computes the time from
its journaled clock, so the resumed call asks for the same time, now passed)."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from agent_apps import ArgsInvalid, Cancelled, ContextManager
from agent_apps.context import epoch_seconds

pytestmark = pytest.mark.anyio

SLEEPER = """
frontmatter = {"params": {"type": "object"}, "allowed-tools": "sleep-until"}
async def main(ctx, args):
    ctx.manager.emit("sleeper", {"run": ctx.run.run_id})
    return await ctx.sleep_until(args["until"])
"""

#: Tells the test when agent code has computed its wake-up time (and what it is).
MARK = """
frontmatter = {"params": {"type": "object"}}
async def main(ctx, args):
    ctx.manager.emit("mark", {"until": args["until"], "run": ctx.run.run_id})
    return "marked"
"""


def test_a_time_is_a_datetime_a_number_or_iso_text_and_nothing_else():
    moment = datetime.datetime(2026, 11, 27, 8, 0, tzinfo=datetime.UTC)
    assert epoch_seconds(moment) == epoch_seconds("2026-11-27T08:00:00+00:00") == moment.timestamp()
    assert epoch_seconds(12) == 12.0
    for bad, error in [("tomorrow", ValueError), (float("nan"), ValueError), (True, TypeError), ([1], TypeError)]:
        with pytest.raises(error):
            epoch_seconds(bad)


async def test_a_passed_time_does_not_sleep_and_a_cancel_ends_a_sleep(context_manager, write_skill):
    write_skill("sleeper", SLEEPER)
    assert await context_manager.invoke("sleeper", {"until": time.time() - 5}) == 0.0
    runs: list[str] = []
    context_manager.events.subscribe("sleeper", lambda topic, event: runs.append(event["run"]))
    task = asyncio.ensure_future(context_manager.invoke("sleeper", {"until": time.time() + 3600}))
    while not runs:
        await asyncio.sleep(0.01)
    assert context_manager.cancel(runs[0], "wake up")
    with pytest.raises(Cancelled, match="wake up"):
        await task


async def test_the_skill_refuses_bad_times_naming_the_arg(context_manager):
    for until in ["soon", time.time() + 400 * 24 * 3600]:
        with pytest.raises(ArgsInvalid) as info:
            await context_manager.invoke("sleep-until", {"until": until})
        assert info.value.path == "until"
    assert (await context_manager.invoke("sleep-until", {"until": "2000-01-01T00:00:00+00:00"}))["slept_s"] == 0


async def test_a_resumed_durable_run_does_not_sleep_again_for_time_already_passed(context_manager, write_skill):
    write_skill("mark", MARK)
    code = (
        "import time\n"
        "until = time.time() + 1.0\n"  # the journaled clock: the same number on resume
        "await ctx.manager.invoke('mark', {'until': until})\n"
        "ctx.manager.finish(await ctx.manager.invoke('sleep-until', {'until': until}))"
    )
    call = {
        "prompt": "T.",
        "user_message": "Wait, then report.",
        "allowed_tools": "mark sleep-until",
        "config": {"agent": "agent-scripted", "script": [{"code": code}]},
    }
    marks: list[dict] = []
    context_manager.events.subscribe("mark", lambda topic, event: marks.append(event))
    task = asyncio.ensure_future(context_manager.invoke("agent", call))
    while not marks:
        await asyncio.sleep(0.01)
    run_id, until = marks[0]["run"], marks[0]["until"]
    journal = context_manager.state.journal
    while not any(e.kind == "call" and e.body.get("skill") == "mark" for e in journal.entries(run_id)):
        await asyncio.sleep(0.01)  # the mark call is journaled (within milliseconds): the sleep has begun
    assert context_manager.cancel(run_id)
    with pytest.raises(Cancelled):
        await task
    assert context_manager.state.runs.get(run_id).status == "cancelled"
    while time.time() <= until:  # the time the run was to sleep until passes while it is stopped
        await asyncio.sleep(0.05)

    other = ContextManager(
        search_path=[r.path for r in context_manager.roots() if r.origin == "path"],
        cwd=context_manager.cwd,
        home=context_manager.home,
        env=False,
        project=False,
        user=False,
        entry_points=False,
        state=context_manager.state.path,
    )
    other.events.subscribe("mark", lambda topic, event: marks.append(event))
    result = await other.resume(run_id)
    assert result == {"until": until, "slept_s": 0}  # the same time, passed: no sleep at all
    assert len(marks) == 1  # the call before the sleep came from the journal


#: Writes the time agent code will sleep until into a file, for the test to read.
MARK_FILE = """
from pathlib import Path
frontmatter = {"params": {"type": "object"}}
async def main(ctx, args):
    (Path(ctx.manager.context_manager.cwd) / "until.txt").write_text(repr(args["until"]))
    return "marked"
"""


def _journaled(store, skill: str) -> bool:
    """Whether the store's run has journaled a call of ``skill``."""
    runs = store.runs.list()
    entries = store.journal.entries(runs[0].id) if runs else []
    return any(e.kind == "call" and e.body.get("skill") == skill for e in entries)


def test_a_run_killed_while_it_sleeps_is_resumed_in_another_process_without_sleeping_again(tmp_path):
    code = (
        "import time\n"
        "until = time.time() + 1.5\n"
        "await ctx.manager.invoke('mark', {'until': until})\n"
        "ctx.manager.finish(await ctx.manager.invoke('sleep-until', {'until': until}))"
    )
    model = {"agent": "agent-scripted", "script": [{"code": code}]}
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "mark.skill.py").write_text(MARK_FILE)
    (skills / "waiter.skill.md").write_text(
        "---\ndescription: Waits.\nallowed-tools: mark sleep-until\n"
        f"metadata:\n  model: {json.dumps(model)}\n---\nWait, then report.\n"
    )
    env = {"AGENT_APPS_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    for name in ("AGENT_APPS_CACHE_DIR", "XDG_CACHE_HOME"):  # the compiled sandbox, where this process has it
        if os.environ.get(name):
            env[name] = os.environ[name]
    agent_apps = [sys.executable, "-m", "agent_apps"]
    proc = subprocess.Popen([*agent_apps, "invoke", "waiter", "--path", "skills"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "until.txt").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the run never reached its sleep"
            time.sleep(0.05)
        store = ContextManager(state=str(tmp_path / "home" / "state.db"), env=False, project=False, user=False).state
        while not _journaled(store, "mark"):  # then the sleep has begun
            assert proc.poll() is None and time.monotonic() < deadline, "the run never reached its sleep"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    until = float((tmp_path / "until.txt").read_text())
    while time.time() <= until:  # the time passes while no process runs the agent
        time.sleep(0.05)

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*agent_apps, *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    run_id = json.loads(cli("runs", "list", "--json").stdout)[0]["id"]
    resumed = cli("resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"until": until, "slept_s": 0}


def test_sleep_until_on_the_command_line(tmp_path):
    cmd = [sys.executable, "-m", "agent_apps", "invoke", "sleep-until", "--json"]
    done = subprocess.run([*cmd, "until=2000-01-01T00:00:00+00:00"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"until": 946684800.0, "slept_s": 0}
    bad = subprocess.run([*cmd, "until=next week"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "until" in bad.stderr and "ISO 8601" in bad.stderr
