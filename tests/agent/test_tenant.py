"""Seed 001's ``RunMeta.tenant_id``: ``invoke(..., tenant=ID)`` and ``--tenant`` set
``RunRecord.tenant_id`` at a run's top; every invocation and agent below serves it and
none can change it; the store keeps it with the run (``runs list --tenant``, ``runs
show``), a resumed run and deferred work keep it; on both backends."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from agent_apps import ApprovalPending, SkillFailed
from agent_apps.authority import Authority, invoke_as
from agent_apps.cli import main as cli_main
from agent_apps.scheduling import Scheduler
from agent_apps.state import StateStore
from agent_apps.state.errors import SnapshotInvalid
from agent_apps.state.run_snapshot import export_run, import_run
from agent_apps.testing.plugin import hermetic_manager

pytestmark = pytest.mark.anyio

#: What the invocation sees of its run's tenant.
PROBE = """
frontmatter = {"description": "The run's tenant."}
async def main(ctx, args):
    return ctx.run.tenant_id
"""

#: A code skill that asks for a tenant on a nested call.
SWITCH = """
frontmatter = {
    "description": "Switches tenant.", "allowed-tools": "probe",
    "params": {"type": "object", "properties": {"tenant": {"type": "string"}}},
}
async def main(ctx, args):
    return await ctx.manager.invoke("probe", tenant=args["tenant"])
"""

#: A code skill whose callee records the authority it was called with (deferred work keeps it).
MAKER = """
frontmatter = {"description": "Makes deferred work.", "allowed-tools": "authority-of"}
async def main(ctx, args):
    return await ctx.manager.invoke("authority-of")
"""
AUTHORITY_OF = """
from agent_apps.authority import Authority
frontmatter = {"description": "Its caller's authority."}
async def main(ctx, args):
    return Authority.of(ctx).to_json()
"""

#: Agent code that finishes with the probe's answer.
FINISH_PROBE = "ctx.manager.finish(await ctx.manager.invoke('probe'))"

#: The agent's code starts a sub-agent whose code asks the probe.
NESTED = (
    "r = await ctx.manager.invoke('agent', {'prompt': 'Q', 'allowed_tools': 'probe', 'config': "
    f"{{'agent': 'agent-scripted', 'script': [{{'code': {FINISH_PROBE!r}}}]}}}})\n"
    "ctx.manager.finish([r, await ctx.manager.invoke('probe')])"
)


@pytest.fixture
def cm(tmp_path, state_location):
    folder = tmp_path / "skills"
    folder.mkdir()
    for name, source in {"probe": PROBE, "switch": SWITCH, "maker": MAKER, "authority-of": AUTHORITY_OF}.items():
        (folder / f"{name}.skill.py").write_text(source)
    return hermetic_manager([folder], tmp_path, state=state_location)  # SQLite, then PostgreSQL


def nested_agent() -> dict:
    script = [{"code": NESTED}]
    return {"prompt": "P", "allowed_tools": "agent probe", "config": {"agent": "agent-scripted", "script": script}}


async def test_every_invocation_and_agent_of_a_run_serves_its_tenant_and_the_store_keeps_it(cm):
    assert await cm.invoke("probe", tenant="acme") == "acme"
    assert await cm.invoke("probe") is None
    assert await cm.invoke("agent", nested_agent(), tenant="acme") == ["acme", "acme"]
    await cm.invoke("agent", nested_agent())  # a run that serves no tenant
    (run,) = cm.state.runs.list(tenant="acme")
    assert run.tenant_id == "acme" and run.to_json()["tenant_id"] == "acme"
    assert cm.state.runs.count(tenant="acme") == 1 and cm.state.runs.count() == 2
    assert cm.state.runs.list(tenant="acme2") == [] and cm.state.runs.list(tenant="acm") == []
    agents = cm.state.runs.agents(run.id)
    assert [(a.depth, a.report["tenant_id"]) for a in agents] == [(0, "acme"), (1, "acme")]
    (other,) = [r for r in cm.state.runs.list() if r.id != run.id]
    assert other.tenant_id is None and all("tenant_id" not in a.report for a in cm.state.runs.agents(other.id))


async def test_a_nested_invocation_cannot_change_its_runs_tenant(cm):
    assert await cm.invoke("switch", {"tenant": "acme"}, tenant="acme") == "acme"  # the same: allowed
    with pytest.raises(SkillFailed, match=r"tenant='other': a nested invocation serves its run's tenant \('acme'\)"):
        await cm.invoke("switch", {"tenant": "other"}, tenant="acme")
    with pytest.raises(SkillFailed, match=r"tenant='acme': a nested invocation serves its run's tenant \(None\)"):
        await cm.invoke("switch", {"tenant": "acme"})  # a run without one cannot gain one either


@pytest.mark.parametrize(
    ("tenant", "problem"),
    [
        ("a b", "tenant: bad tenant id 'a b': use 1-200 letters"),
        ("", "tenant: bad tenant id ''"),
        ("-x", "tenant: bad tenant id '-x'"),
        ("x" * 201, "tenant: bad tenant id"),
        (5, "tenant: a tenant id is a string, not int"),
    ],
)
async def test_a_tenant_that_is_not_an_id_is_refused_before_anything_runs(cm, tenant, problem):
    with pytest.raises(ValueError, match=problem):
        await cm.invoke("probe", tenant=tenant)
    assert cm.state.runs.count() == 0
    assert await cm.invoke("probe", tenant="acme-1.eu:prod@x+y=z") == "acme-1.eu:prod@x+y=z"  # the manager goes on


async def test_deferred_work_serves_its_makers_tenant(cm):
    made = await cm.invoke("maker", tenant="acme")
    assert made == {"allowed_tools": "authority-of", "untrusted": False, "by": "maker", "tenant": "acme"}
    authority = Authority.from_json(made)
    assert authority is not None and authority.tenant == "acme"
    assert await invoke_as(cm, Authority("probe", False, "maker", "acme"), "probe", {}) == "acme"
    assert await invoke_as(cm, Authority("probe", False, "maker"), "probe", {}) is None
    assert "tenant" not in (await cm.invoke("maker"))  # no tenant: the stored authority is as before


async def test_a_resumed_run_serves_its_tenant_again(cm):
    write = "await ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'x'})"
    call = {"prompt": "P", "config": {"agent": "agent-scripted", "script": [{"code": write}, {"code": NESTED}]},
            "allowed_tools": "agent probe file-write"}
    asks = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}
    with pytest.raises(ApprovalPending) as info:
        await cm.invoke("agent", call, config=asks, tenant="acme")
    run_id = info.value.run_id
    cm.approve(run_id)
    with pytest.raises(ValueError, match=f"tenant='other': run {run_id} serves tenant 'acme'"):
        await cm.resume(run_id, tenant="other")
    assert await cm.resume(run_id) == ["acme", "acme"]
    assert cm.state.runs.get(run_id).tenant_id == "acme"
    assert {a.report["tenant_id"] for a in cm.state.runs.agents(run_id)} == {"acme"}


def cli(capsys, *argv):
    code = cli_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_line_sets_lists_and_shows_a_runs_tenant(capsys, tmp_path, state_location, monkeypatch):
    monkeypatch.setenv("AGENT_APPS_STATE", state_location)
    folder = tmp_path / "skills"
    folder.mkdir()
    (folder / "probe.skill.py").write_text(PROBE)
    (folder / "hello.skill.md").write_text(
        "---\ndescription: Says hello.\nallowed-tools: probe\nmetadata:\n  model:\n    agent: agent-scripted\n"
        "    script:\n      - code: \"ctx.manager.finish(await ctx.manager.invoke('probe'))\"\n---\nHello.\n"
    )
    code, out, err = cli(capsys, "invoke", "hello", "--path", folder, "--tenant", "acme", "--json")
    assert code == 0 and json.loads(out) == "acme", err
    assert cli(capsys, "invoke", "hello", "--path", folder)[0] == 0
    code, out, err = cli(capsys, "invoke", "hello", "--path", folder, "--tenant", "no way")
    assert code == 2 and "--tenant: bad tenant id 'no way'" in err and out == ""
    for argv in (("run", "hi"), ("chat",)):  # the same check on every command that makes a call
        code, out, err = cli(capsys, *argv, "--tenant", "no way")
        assert code == 2 and "--tenant: bad tenant id 'no way'" in err, (argv, err)
    code, out, _ = cli(capsys, "runs", "list")
    head, *rows = out.splitlines()
    assert code == 0 and head.split()[:6] == ["RUN", "STARTED", "STATUS", "NAME", "SESSION", "TENANT"]
    assert len(rows) == 2 and sorted(row.split()[6] for row in rows) == ["-", "acme"]
    code, out, _ = cli(capsys, "runs", "list", "--tenant", "acme", "--json")
    (listed,) = json.loads(out)
    assert code == 0 and listed["tenant_id"] == "acme"
    code, out, _ = cli(capsys, "runs", "show", listed["id"])
    assert code == 0 and "tenant acme" in out.splitlines()[1]
    code, out, err = cli(capsys, "runs", "list", "--tenant", "nobody")
    assert code == 0 and out == "" and "no runs recorded for tenant nobody" in err


class Clock:
    """Time that moves only when told to (the scheduler's)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)


async def test_a_schedule_made_inside_a_run_runs_for_that_runs_tenant(cm):
    scheduled = {"prompt": "p", "allowed_tools": "probe",
                 "config": {"agent": "agent-scripted", "script": [{"code": FINISH_PROBE}]}}
    make = f"await ctx.manager.invoke('schedule-create', {{'ref': 'agent', 'args': {scheduled!r}, 'every': 5}})"
    call = {"prompt": "P", "allowed_tools": "schedule-create agent probe",
            "config": {"agent": "agent-scripted", "script": [{"code": make}, {"text": "made"}]}}
    allow = {"security": {"policy": {"allow": ["schedule-*"]}}}
    assert await cm.invoke("agent", call, config=allow, tenant="acme") == "made"
    (schedule,) = cm.state.schedules.list()
    assert schedule.authority.tenant == "acme"
    scheduler = Scheduler(cm, clock=Clock(time.time() + 10))
    assert len(await scheduler.tick()) == 1
    await scheduler.wait_idle()
    (ran,) = cm.state.schedules.runs_of(schedule.id)
    assert ran["status"] == "done", ran
    run = cm.state.runs.get(ran["run_id"])
    assert run.tenant_id == "acme"  # the row the scheduler's claim made gets it when the run starts
    assert [a.report["result"] for a in cm.state.runs.agents(run.id)] == ["acme"]


async def test_an_exported_run_keeps_its_tenant_where_it_is_imported(cm, tmp_path):
    await cm.invoke("agent", nested_agent(), tenant="acme")
    (run,) = cm.state.runs.list()
    snapshot = export_run(cm.state, run.id)
    assert snapshot["run"]["tenant_id"] == "acme"
    other = StateStore(str(tmp_path / "other.db"))
    import_run(other, snapshot)
    assert other.runs.get(run.id).tenant_id == "acme" and other.runs.count(tenant="acme") == 1
    snapshot["run"] = {**snapshot["run"], "id": "r2", "tenant_id": "not ok"}
    with pytest.raises(SnapshotInvalid, match="run.tenant_id: bad tenant id 'not ok'"):
        import_run(other, snapshot)
    assert other.runs.count() == 1
