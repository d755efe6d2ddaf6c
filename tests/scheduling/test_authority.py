"""Schedules and persisted subscriptions run under the authority of whoever made them
(CONTRACT section 13): agent code cannot schedule more than it could call directly, a
schedule made by agent code runs, later and in another process's manager, as that code
would, and a subscription fired in another ContextManager does too."""

from __future__ import annotations

import json
import time

import pytest

from agent_apps import ContextManager
from agent_apps.authority import Authority
from agent_apps.cli import main as cli_main
from agent_apps.errors import ArgsInvalid
from agent_apps.scheduling import Scheduler, When
from agent_apps.state import StateStore, _postgres, _sqlite
from agent_apps.state.schema import MIGRATIONS

from .conftest import ALLOW, FakeClock

pytestmark = pytest.mark.anyio

#: Agent code: try each (label, skill, args) of ATTEMPTS, report what happened.
PROBE = """
out = {}
for label, ref, args in ATTEMPTS:
    try:
        out[label] = ["ALLOWED", await ctx.manager.invoke(ref, args)]
    except HostError as e:
        out[label] = [type(e).__name__, str(e)]
ctx.manager.finish(out)
"""

SKILLS = {
    "my-report": """
        frontmatter = {"description": "A report.", "params": {"type": "object"}}
        async def main(ctx, args):
            return "report"
    """,
    "other-report": """
        frontmatter = {"description": "Not for the scheduled agent."}
        async def main(ctx, args):
            return "other"
    """,
    "who-called": """
        import json
        frontmatter = {"description": "Logs who invoked it.", "params": {"type": "object"}}
        async def main(ctx, args):
            caller = ctx.parent
            seen = {"caller": caller and caller.skill.name, "allowed": caller and caller.skill.allowed_tools,
                    "untrusted": bool(caller and caller.internals.get("untrusted")), "topic": args.get("topic")}
            with open(ctx.manager.context_manager.cwd / "who.log", "a") as fh:
                fh.write(json.dumps(seen) + "\\n")
            return seen
    """,
}


@pytest.fixture
def skills(write_skill):
    for name, source in SKILLS.items():
        write_skill(name, source)


def agent_call(attempts, allowed_tools):
    code = f"ATTEMPTS = {attempts!r}\n" + PROBE
    return {
        "prompt": "Test.",
        "user_message": "Go.",
        "config": {"agent": "agent-scripted", "script": [{"code": code}]},
        "allowed_tools": allowed_tools,
    }


async def probe(cm, attempts, allowed_tools):
    return await cm.invoke("agent", agent_call(attempts, allowed_tools), config=ALLOW)


def fresh(cm):
    """Another manager on the same skills and store, as another process would have."""
    return ContextManager(search_path=cm._explicit, cwd=cm.cwd, home=cm.home, state=cm.state.path, env=False,
                          project=False, user=False, entry_points=False)  # fmt: skip


def reports(cm):
    """The results of the agents of every run in the store."""
    return [agent.report.get("result") for run in cm.state.runs.list() for agent in cm.state.runs.agents(run.id)]


async def test_agent_code_cannot_schedule_more_than_it_could_call(context_manager, skills):
    scheduled_agent = {"prompt": "p", "config": {"agent": "agent-scripted", "script": [{"text": "hi"}]}}
    out = await probe(context_manager, [
        ("wide", "schedule-create", {"ref": "agent", "args": {**scheduled_agent, "allowed_tools": "*"}, "every": 60}),
        ("endpoint", "schedule-create", {"ref": "agent", "every": 60,
                                         "args": {"prompt": "p", "config": {"endpoint_url": "http://127.0.0.1:9"}}}),
        ("other", "schedule-create", {"ref": "other-report", "every": 60}),
        ("narrow", "schedule-create", {"ref": "agent", "args": {**scheduled_agent, "allowed_tools": "my-report"},
                                       "every": 60}),
        ("fast", "schedule-create", {"ref": "my-report", "every": 0.5}),
        ("tiny", "schedule-create", {"ref": "my-report", "every": 1e-300}),
        ("second", "schedule-create", {"ref": "my-report", "every": 1}),
    ], allowed_tools="schedule-create agent my-report")  # fmt: skip
    assert out["wide"][0] == "ToolNotAllowed", out["wide"]
    assert "agent-code may not call agent (at args.allowed_tools): agent code may start a sub-agent only with its own" \
        in out["wide"][1]
    assert out["endpoint"][0] == "ToolNotAllowed" and "(at args.config.endpoint_url)" in out["endpoint"][1]
    assert out["other"][0] == "ToolNotAllowed" and "not in allowed-tools" in out["other"][1]
    for label in ("fast", "tiny"):
        assert out[label][0] == "ArgsInvalid" and "invalid args at every: schedules made by agent code run at most " \
            "once every 1 s" in out[label][1], out[label]
    assert out["narrow"][0] == out["second"][0] == "ALLOWED"
    stored = context_manager.state.schedules.list()
    assert sorted(s.ref for s in stored) == ["agent", "my-report"]
    for schedule in stored:
        assert schedule.authority.untrusted and schedule.authority.allowed_tools == "schedule-create agent my-report"
        assert schedule.to_json()["authority"]["by"] == "agent code of agent"


async def test_only_schedule_create_does_not_let_agent_code_schedule_an_agent(context_manager, skills):
    out = await probe(context_manager, [
        ("agent", "schedule-create", {"ref": "agent", "args": {"prompt": "p", "allowed_tools": "*"}, "every": 60}),
    ], allowed_tools="schedule-create")  # fmt: skip
    assert out["agent"][0] == "ToolNotAllowed" and "(at ref): not in allowed-tools 'schedule-create'" in out["agent"][1]
    assert context_manager.state.schedules.list() == []


async def test_a_schedule_made_by_agent_code_runs_as_that_code_later_elsewhere(context_manager, skills):
    # the scheduled agent has no allowed-tools of its own: it gets its maker's, not every skill
    scheduled = agent_call([("mine", "my-report", {}), ("other", "other-report", {})], None)
    del scheduled["allowed_tools"]
    out = await probe(context_manager, [
        ("make", "schedule-create", {"ref": "agent", "args": scheduled, "every": 5}),
    ], allowed_tools="schedule-create agent my-report")  # fmt: skip
    assert out["make"][0] == "ALLOWED", out
    elsewhere = fresh(context_manager)
    clock = FakeClock(time.time() + 10)
    scheduler = Scheduler(elsewhere, clock=clock)
    assert len(await scheduler.tick()) == 1
    await scheduler.wait_idle()
    (schedule,) = elsewhere.state.schedules.list()
    (ran,) = elsewhere.state.schedules.runs_of(schedule.id)
    assert ran["status"] == "done", ran
    (result,) = [r for r in reports(elsewhere) if isinstance(r, dict) and "mine" in r]
    assert result["mine"] == ["ALLOWED", "report"]
    assert result["other"][0] == "ToolNotAllowed", result  # a top-level agent would have had it


async def test_a_stored_schedule_asking_for_more_is_refused_when_it_runs(context_manager, skills):
    # a row the checks of schedule-create never saw (an older agent-apps wrote it, or the
    # maker's skills changed since): the run is refused before the agent starts
    wide = agent_call([("other", "other-report", {})], "*")
    maker = Authority("schedule-create agent", untrusted=True, by="agent code of helper")
    schedule = context_manager.state.schedules.create(
        ref="agent", args=wide, when=When(every=60), authority=maker, now=time.time() - 61
    )
    scheduler = Scheduler(fresh(context_manager), clock=FakeClock(time.time()))
    assert len(await scheduler.tick()) == 1
    await scheduler.wait_idle()
    (ran,) = context_manager.state.schedules.runs_of(schedule.id)
    assert ran["status"] == "error"
    assert ran["error"].startswith("ToolNotAllowed: agent-code may not call agent (at allowed_tools)"), ran
    assert not [r for r in reports(context_manager) if isinstance(r, dict)]  # no agent ran


async def test_a_schedule_made_by_a_skill_runs_under_that_skills_allowed_tools(context_manager, write_skill, skills):
    # a skill (not agent code) may start any agent its allowed-tools allow; it may not
    # schedule a skill it could not call
    write_skill("my-setup", """
        frontmatter = {"description": "Sets up schedules.", "allowed-tools": "schedule-create agent who-called"}
        async def main(ctx, args):
            made = []
            for ref, call in (("who-called", {}), ("agent", {"prompt": "p", "allowed_tools": "*",
                              "config": {"agent": "agent-scripted", "script": [{"text": "wide"}]}})):
                schedule = {"ref": ref, "args": call, "every": 0.5}
                made.append((await ctx.manager.invoke("schedule-create", schedule))["id"])
            try:
                await ctx.manager.invoke("schedule-create", {"ref": "other-report", "every": 60})
            except Exception as exc:
                made.append(str(exc))
            return made
    """)  # fmt: skip
    made = await context_manager.invoke("my-setup", {}, config=ALLOW)
    assert "my-setup may not call other-report (at ref): not in allowed-tools" in made[2]
    info = context_manager.state.schedules.get(made[0])
    assert info.authority.untrusted is False and info.created_by == "my-setup"
    scheduler = Scheduler(fresh(context_manager), clock=FakeClock(time.time() + 1))
    assert len(await scheduler.tick()) == 2
    await scheduler.wait_idle()
    seen = json.loads((context_manager.cwd / "who.log").read_text())
    assert seen == {"caller": "my-setup", "allowed": "schedule-create agent who-called", "untrusted": False,
                    "topic": None}  # fmt: skip
    assert "wide" in reports(context_manager)


async def test_a_subscription_fired_in_another_manager_runs_under_its_maker(
    context_manager, skills, write_skill, caplog
):
    write_skill("my-listener", SKILLS["who-called"])
    out = await probe(context_manager, [
        ("sub", "event-subscribe", {"topic": "deploy.*", "ref": "who-called", "persist": True}),
        ("mine", "event-subscribe", {"topic": "deploy.*", "ref": "my-listener", "persist": True}),
    ], allowed_tools="event-subscribe who-called my-*")  # fmt: skip
    assert out["sub"][0] == out["mine"][0] == "ALLOWED"
    # since then the user made my-listener hidden: its maker's my-* no longer reaches it
    write_skill("my-listener", SKILLS["who-called"].replace('"Logs who invoked it."', '"Logs who invoked it.", '
                                                            '"metadata": {"visibility": "hidden"}'))  # fmt: skip
    elsewhere = fresh(context_manager)
    assert len(elsewhere.state.subscriptions.list()) == 2  # opening the store subscribes what it holds
    elsewhere.events.emit("deploy.web", {"version": 2})
    await elsewhere.events.drain()
    seen = [json.loads(line) for line in (context_manager.cwd / "who.log").read_text().splitlines()]
    assert seen == [{"caller": "agent-code", "allowed": "event-subscribe who-called my-*", "untrusted": True,
                     "topic": "deploy.web"}]  # fmt: skip
    assert "agent-code may not call my-listener" in caplog.text


async def test_every_is_bounded_and_refused_with_its_arg(context_manager, skills):
    # point 10: a refusal naming the arg (exit 2), nothing stored, not an OverflowError
    for every in (1e308, 1e10):
        with pytest.raises(ArgsInvalid, match="invalid args at every: must be at most 3162240000 seconds"):
            await context_manager.invoke("schedule-create", {"ref": "my-report", "every": every}, config=ALLOW)
    with pytest.raises(ArgsInvalid, match="invalid args at at: '9999-12-31T23:59:59-12:00' is after"):
        await context_manager.invoke("schedule-create", {"ref": "my-report", "at": "9999-12-31T23:59:59-12:00"},
                                     config=ALLOW)  # fmt: skip
    assert context_manager.state.schedules.list() == []
    # a schedule stored from Python with no due time left in any calendar: none is due
    info = context_manager.state.schedules.create(ref="my-report", args={}, when=When(every=1e308))
    assert info.next_at is None and info.to_json()["next"] is None
    # from Python (or a skill) any interval still goes; only agent code's are held to 1 s
    made = await context_manager.invoke("schedule-create", {"ref": "my-report", "every": 0.25}, config=ALLOW)
    assert made["every"] == 0.25 and made["authority"] is None


def test_every_out_of_range_on_the_command_line_is_exit_status_2(skills, skills_path, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent-apps.yaml").write_text("security:\n  policy:\n    allow: [schedule-create]\n")
    monkeypatch.setenv("AGENT_APPS_STATE", str(tmp_path / "cli.db"))
    assert cli_main(["invoke", "schedule-create", "--path", str(skills_path), "ref=my-report", "every:=1e308"]) == 2
    assert "error: schedule-create: invalid args at every: must be at most" in capsys.readouterr().err
    assert StateStore(str(tmp_path / "cli.db")).schedules.list() == []  # nothing half made


def test_schedules_made_before_authorities_were_recorded_may_call_their_ref_only(state_location, monkeypatch):
    with monkeypatch.context() as release_4:  # a store of the release before authorities
        for backend in (_sqlite, _postgres):
            release_4.setattr(backend, "MIGRATIONS", MIGRATIONS[:4])
        old = StateStore(state_location)
        rows = [("a", "agent", "agent code of helper"), ("b", "my-report", "my-setup"), ("c", "my-report", None)]
        with old.db.write() as conn:
            for ident, ref, by in rows:
                conn.execute(
                    "INSERT INTO schedules (id, ref, args, every, catch_up, created_at, created_by, next_at) "
                    "VALUES (?, ?, '{}', 60, 'one', 0, ?, 60)",
                    (ident, ref, by),
                )
            conn.execute("INSERT INTO subscriptions VALUES ('psub-1', 't', 'my-report', 0, 'agent code of helper')")
        old.close()
    store = StateStore(state_location)  # opened by this release: migrated
    authorities = {s.id: s.authority for s in store.schedules.list()}
    assert authorities["a"].to_json() == {"allowed_tools": "agent", "untrusted": True, "by": "agent code of helper"}
    assert authorities["b"].to_json() == {"allowed_tools": "my-report", "untrusted": False, "by": "my-setup"}
    assert authorities["c"] is None  # made from Python: the user's own
    (sub,) = store.subscriptions.list()
    assert sub.authority.untrusted and sub.authority.allowed_tools == "my-report"
    store.close()


async def test_a_scheduled_run_that_waits_for_approval_resumes_under_its_maker(context_manager, skills):
    # the policy here asks before my-report, unattended: the scheduled agent checkpoints;
    # approved and resumed, it is still its maker's agent (other-report stays refused)
    (context_manager.cwd / "agent-apps.yaml").write_text(
        "security:\n  policy:\n    unattended:\n      ask: [my-report]\n"
    )
    scheduled = agent_call([("mine", "my-report", {}), ("other", "other-report", {})], None)
    del scheduled["allowed_tools"]
    out = await probe(context_manager, [
        ("make", "schedule-create", {"ref": "agent", "args": scheduled, "every": 5}),
    ], allowed_tools="schedule-create agent my-report")  # fmt: skip
    assert out["make"][0] == "ALLOWED", out
    here = ContextManager(search_path=context_manager._explicit, cwd=context_manager.cwd, home=context_manager.home,
                          state=context_manager.state.path, env=False, user=False, entry_points=False)  # fmt: skip
    scheduler = Scheduler(here, clock=FakeClock(time.time() + 10))
    assert len(await scheduler.tick()) == 1
    await scheduler.wait_idle()
    (schedule,) = here.state.schedules.list()
    (ran,) = here.state.schedules.runs_of(schedule.id)
    point = here.state.journal.checkpoint(ran["run_id"])
    assert point.pending["skill"] == "my-report"
    assert point.invocation["skill"] == "agent" and point.invocation["authority"]["untrusted"] is True
    here.approve(ran["run_id"])
    result = await here.resume(ran["run_id"])
    assert result["mine"] == ["ALLOWED", "report"]
    assert result["other"][0] == "ToolNotAllowed", result
