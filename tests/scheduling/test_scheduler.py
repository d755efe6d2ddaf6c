"""The scheduler, driven by a fake clock: one run per due time, catch-up after a
restart, two schedulers on one store, skills that disappear, clean stops."""

from __future__ import annotations

import asyncio
import logging

import pytest

from agent_apps import ContextManager
from agent_apps.scheduling import Scheduler, When
from agent_apps.state import StateStore

from .conftest import lines

pytestmark = pytest.mark.anyio


def create(cm, clock, log, *, every=10.0, catch_up="one", ref="counter", n=None, **when):
    args = {"log": str(log)} if n is None else {"log": str(log), "n": n}
    schedule = When(every=every) if not when else When(**when)
    return cm.state.schedules.create(ref=ref, args=args, when=schedule, catch_up=catch_up, now=clock.time())


async def tick(scheduler):
    tasks = await scheduler.tick()
    await scheduler.wait_idle()
    return len(tasks)


def due_times(store, schedule):
    return [row["due_at"] for row in store.schedules.runs_of(schedule.id)]


async def test_one_run_per_due_time_each_recorded_as_a_run(context_manager, clock, counter):
    cm = context_manager
    schedule = create(cm, clock, counter)
    scheduler = Scheduler(cm, clock=clock)
    clock.advance(9.9)
    assert await tick(scheduler) == 0
    clock.advance(0.1)
    assert await tick(scheduler) == 1
    assert await tick(scheduler) == 0  # the same due time never runs again
    clock.advance(10)
    assert await tick(scheduler) == 1
    t0 = schedule.created_at
    assert due_times(cm.state, schedule) == [t0 + 10, t0 + 20]
    ran = lines(counter)
    assert len(ran) == 2
    runs = {run.id: run for run in cm.state.runs.list()}
    assert {line["run"] for line in ran} == set(runs)  # the skill ran under the recorded run id
    assert all(run.name == "counter" and run.status == "done" and run.ended_at for run in runs.values())
    listed = cm.state.schedules.get(schedule.id)
    assert listed.runs == 2 and listed.last["status"] == "done" and listed.next_at == t0 + 30


@pytest.mark.parametrize(
    ("catch_up", "ran", "missed"),
    [("none", [], 5), ("one", [60], 4), ("all", [20, 30, 40, 50, 60], 0)],
)
async def test_missed_runs_after_a_restart_follow_catch_up(context_manager, clock, counter, catch_up, ran, missed):
    cm = context_manager
    schedule = create(cm, clock, counter, catch_up=catch_up)
    t0 = schedule.created_at
    clock.advance(10)
    assert await tick(Scheduler(cm, clock=clock)) == 1
    # the scheduler is down for 55 s; a new one starts, with due times 20 to 60 missed
    clock.advance(55)
    restarted = Scheduler(ContextManager(**_same(cm)), clock=clock, grace=2, concurrency=2)
    total = 0
    for _ in range(5):  # two at a time (concurrency 2): the rest wait for a free slot
        total += await tick(restarted)
    assert total == len(ran)
    assert due_times(cm.state, schedule) == [t0 + 10] + [t0 + t for t in ran]
    info = cm.state.schedules.get(schedule.id)
    assert info.missed == missed and info.next_at == t0 + 70


async def test_none_still_runs_a_due_time_within_grace(context_manager, clock, counter):
    cm = context_manager
    schedule = create(cm, clock, counter, catch_up="none")
    clock.advance(35)  # due times 10, 20, 30; the latest is 5 s late
    assert await tick(Scheduler(cm, clock=clock, grace=60)) == 1
    assert due_times(cm.state, schedule) == [schedule.created_at + 30]


async def test_all_makes_up_only_the_latest_missed_runs(context_manager, clock, counter, monkeypatch):
    from agent_apps.state import schedules

    monkeypatch.setattr(schedules, "MAX_CATCH_UP", 3)
    cm = context_manager
    schedule = create(cm, clock, counter, every=1, catch_up="all")
    clock.advance(10.5)  # due times 1..10
    assert await tick(Scheduler(cm, clock=clock)) == 3
    t0 = schedule.created_at
    assert due_times(cm.state, schedule) == [t0 + 8, t0 + 9, t0 + 10]
    assert cm.state.schedules.get(schedule.id).missed == 7


async def test_a_cron_schedule_runs_at_its_minutes(context_manager, clock, counter):
    from datetime import UTC, datetime

    cm = context_manager
    clock.now = datetime(2026, 11, 23, 9, 1, tzinfo=UTC).timestamp()
    schedule = create(cm, clock, counter, every=None, cron="*/5 * * * *", tz="UTC")
    scheduler = Scheduler(cm, clock=clock)
    for minute, expected in ((4, 0), (5, 1), (7, 0), (10, 1), (16, 1)):
        clock.now = datetime(2026, 11, 23, 9, minute, tzinfo=UTC).timestamp()
        assert await tick(scheduler) == expected, minute
    assert [datetime.fromtimestamp(t, UTC).minute for t in due_times(cm.state, schedule)] == [5, 10, 15]


async def test_an_at_schedule_runs_once(context_manager, clock, counter):
    cm = context_manager
    schedule = create(cm, clock, counter, every=None, at=clock.time() + 30)
    scheduler = Scheduler(cm, clock=clock)
    clock.advance(31)
    assert await tick(scheduler) == 1
    clock.advance(3600)
    assert await tick(scheduler) == 0
    info = cm.state.schedules.get(schedule.id)
    assert info.next_at is None and info.runs == 1 and info.to_json()["next"] is None


async def test_a_schedule_whose_skill_disappears_is_logged_recorded_and_the_scheduler_goes_on(
    context_manager, clock, counter, write_skill, skills_path, caplog
):
    cm = context_manager
    write_skill("doomed", "frontmatter = {'description': 'Soon gone.'}\nasync def main(ctx, args):\n    return 1\n")
    doomed = cm.state.schedules.create(ref="doomed", args={}, when=When(every=10), now=clock.time())
    fine = create(cm, clock, counter)
    scheduler = Scheduler(cm, clock=clock)
    clock.advance(10)
    assert await tick(scheduler) == 2
    (skills_path / "doomed.skill.py").unlink()
    caplog.set_level(logging.INFO, "agent_apps.scheduler")
    for _ in range(2):
        clock.advance(10)
        assert await tick(scheduler) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and all("no skill named 'doomed'" in e and "schedule stays" in e for e in errors)
    runs = cm.state.schedules.runs_of(doomed.id)
    assert [r["status"] for r in runs] == ["done", "error", "error"]
    assert "SkillNotFound" in runs[-1]["error"]
    assert cm.state.runs.get(runs[-1]["run_id"]).status == "error"
    assert [r["status"] for r in cm.state.schedules.runs_of(fine.id)] == ["done"] * 3
    # the skill comes back (another file): the next due time runs it again
    write_skill("doomed", "frontmatter = {'description': 'Back.'}\nasync def main(ctx, args):\n    return 2\n")
    clock.advance(10)
    await tick(scheduler)
    assert cm.state.schedules.runs_of(doomed.id)[-1]["status"] == "done"


async def test_a_failing_run_is_recorded_with_its_error(context_manager, clock, counter, write_skill):
    cm = context_manager
    write_skill("broken", "frontmatter = {'description': 'Fails.'}\nasync def main(ctx, args):\n    1 / 0\n")
    schedule = cm.state.schedules.create(ref="broken", args={}, when=When(every=5), now=clock.time())
    bad_args = create(cm, clock, counter, n=1)
    write_skill("counter", "frontmatter = {'description': 'No args now.'}\nasync def main(ctx, args):\n    return 0\n")
    clock.advance(5.5)
    scheduler = Scheduler(cm, clock=clock)
    await tick(scheduler)
    clock.advance(5)
    await tick(scheduler)
    (run,) = cm.state.schedules.runs_of(schedule.id)[-1:]
    assert run["status"] == "error" and "ZeroDivisionError" in run["error"]
    (run,) = cm.state.schedules.runs_of(bad_args.id)
    assert run["status"] == "error" and "ArgsInvalid" in run["error"] and "takes no args" in run["error"]


async def test_two_schedulers_on_one_store_never_run_a_due_time_twice(context_manager, clock, counter):
    cm = context_manager
    schedules = [create(cm, clock, counter, every=1, catch_up="all", n=i) for i in range(3)]
    # two managers, two connections to one file: the claims really contend for its lock
    a = Scheduler(ContextManager(**_same(cm)), clock=clock)
    b = Scheduler(ContextManager(**_same(cm)), clock=clock)
    for _ in range(15):
        clock.advance(1)
        await asyncio.gather(a.tick(), b.tick())
        await asyncio.gather(a.wait_idle(), b.wait_idle())
    for schedule in schedules:
        t0 = schedule.created_at
        assert due_times(cm.state, schedule) == [t0 + k for k in range(1, 16)]
    assert len(lines(counter)) == 45 == len(cm.state.runs.list(limit=None))


async def test_scheduled_runs_are_unattended(context_manager, clock, write_skill):
    cm = context_manager
    write_skill("writer", """
        frontmatter = {"description": "Writes a file.", "allowed-tools": "file-write"}
        async def main(ctx, args):
            return await ctx.manager.invoke("file-write", {"path": "out.txt", "content": "x"})
    """)
    schedule = cm.state.schedules.create(ref="writer", args={}, when=When(every=1), now=clock.time())
    clock.advance(1)
    await tick(Scheduler(cm, clock=clock))
    (run,) = cm.state.schedules.runs_of(schedule.id)
    assert run["status"] == "error" and "not permitted in unattended mode" in run["error"]


async def test_a_scheduled_agent_run_is_one_run_with_its_agent(context_manager, clock, write_skill):
    cm = context_manager
    write_skill("greeter.skill.md", """
        ---
        description: Greets.
        metadata:
          model:
            agent: agent-scripted
            script:
              - text: "Hello."
        ---
        Greet.
    """)
    schedule = cm.state.schedules.create(ref="greeter", args={}, when=When(every=1), now=clock.time())
    clock.advance(1)
    await tick(Scheduler(cm, clock=clock))
    (run,) = cm.state.schedules.runs_of(schedule.id)
    assert run["status"] == "done"
    info = cm.state.runs.get(run["run_id"])
    (agent,) = cm.state.runs.agents(run["run_id"])
    assert info.status == "done" and info.name == "greeter" and agent.report["result"] == "Hello."


async def test_the_run_loop_stops_cleanly_and_records_runs_in_flight_as_cancelled(context_manager, write_skill):
    cm = context_manager
    write_skill("slow", """
        import asyncio
        frontmatter = {"description": "Slow."}
        async def main(ctx, args):
            await asyncio.sleep(30)
    """)
    schedule = cm.state.schedules.create(ref="slow", args={}, when=When(every=0.05))
    scheduler = Scheduler(cm, poll=0.05, concurrency=1)
    loop = asyncio.create_task(scheduler.run())
    for _ in range(200):
        if scheduler.running:
            break
        await asyncio.sleep(0.02)
    assert scheduler.running == 1
    scheduler.stop()
    assert await asyncio.wait_for(loop, 10) == 1
    (run,) = cm.state.schedules.runs_of(schedule.id)
    assert run["status"] == "cancelled" and cm.state.runs.get(run["run_id"]).status == "cancelled"


async def test_persisted_subscriptions_hear_the_schedulers_events(
    context_manager, clock, counter, write_skill, tmp_path
):
    cm = context_manager
    heard = tmp_path / "heard.log"
    write_skill("on-run", f"""
        import json
        frontmatter = {{"description": "Logs events.", "params": {{"type": "object"}}}}
        async def main(ctx, args):
            with open({str(heard)!r}, "a") as fh:
                fh.write(json.dumps(args["event"]) + "\\n")
    """)
    create(cm, clock, counter, every=1)
    # made by another process: the scheduler picks it up at its next pass
    StateStore(cm.state.path).subscriptions.add("scheduler", "on-run")
    scheduler = Scheduler(cm, clock=clock)
    await scheduler.sync_subscriptions()
    clock.advance(1)
    await tick(scheduler)
    await cm.events.drain()
    (event,) = lines(heard)
    assert event["type"] == "schedule-run" and event["status"] == "done" and event["ref"] == "counter"


def _same(cm):
    """The arguments of a manager like ``cm`` (the same skills and state store)."""
    return {
        "search_path": cm._explicit,
        "cwd": cm.cwd,
        "home": cm.home,
        "state": cm.state.path,
        "env": False,
        "project": False,
        "user": False,
        "entry_points": False,
    }
