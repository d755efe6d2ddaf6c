"""``ctx.sleep_until`` and the ``sleep-until`` skill: a cancellable sleep to a point in
time, which a resumed durable run does not sleep again (the code computes the time from
its journaled clock, so the resumed call asks for the same time, now passed)."""

from __future__ import annotations

import asyncio
import datetime
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
    await asyncio.sleep(0.1)  # the mark call is journaled within milliseconds; the sleep has begun
    run_id, until = marks[0]["run"], marks[0]["until"]
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
