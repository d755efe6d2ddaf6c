"""Durable runs: the journal, the approval gate on host calls from agent code, checkpoints
for approval, resume in another process (replaying model turns and host calls), deny and
skip, divergence, resuming after ``kill -9``, and run export/import."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agent_apps import ApprovalPending, ContextManager, ReplayDiverged
from agent_apps.cli import main as cli_main
from agent_apps.testing.bedrock import FakeBedrock, dummy_aws_env
from agent_apps.testing.conformance import FAKE_MODEL_ID
from agent_apps.testing.conformance import fake_bedrock_turn as fake_turn
from agent_apps.tools import approval

from .conftest import COUNTER, HARNESSES

pytestmark = pytest.mark.anyio

#: The model: counts (with the sandbox's clock and randomness in the args, so a resume
#: that did not replay them would diverge), counts again and writes (behind the gate),
#: then is done.
TURNS = [
    {
        "text": "Counting first.",
        "code": "import random, time, datetime\n"
        "tag = f'{random.random()}|{time.time()}|{datetime.datetime.now().isoformat()}'\n"
        "n = await ctx.manager.invoke('counter', {'tag': tag})\nprint('count', n)",
    },
    {
        "text": "Writing.",
        "code": "m = await ctx.manager.invoke('counter', {'tag': 'before-write'})\n"
        "r = await ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'hello\\n', 'append': True})\n"
        "print('wrote', r)",
    },
    {"text": "Done."},
]

#: Unattended, file-write asks (the default would deny it).
ASK_WRITE = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}


def counted(root: Path) -> list[str]:
    log = root / "counter.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def durable(context_manager, write_skill):
    write_skill("counter", COUNTER)
    return context_manager


async def run_agent(cm: ContextManager, turns: list[dict[str, Any]], *, config=ASK_WRITE, **options: Any) -> Any:
    model = {"agent": "agent-scripted", "script": turns}
    call = {"prompt": "Test.", "user_message": "Write the note.", "config": model}
    return await cm.invoke("agent", call, config=config, **options)


def fresh(cm: ContextManager) -> ContextManager:
    """Another manager on the same store and skills, as a new process would have."""
    return ContextManager(
        search_path=[r.path for r in cm.roots() if r.origin == "path"],
        cwd=cm.cwd,
        home=cm.home,
        env=False,
        project=False,
        user=False,
        entry_points=False,
        state=cm.state.path,
    )


def live_turns(cm: ContextManager, run_id: str) -> list[int]:
    """The model turns the provider really asked for, over every attempt of a run."""
    return sorted(
        event["turn"]
        for agent in cm.state.runs.agents(run_id)
        for event in agent.trace or ()
        if event["type"] == "model-response" and not event["replayed"]
    )


# -- the journal ----------------------------------------------------------------------------


async def test_every_model_turn_and_host_call_is_journaled_in_order(durable):
    turns = [
        {"text": "Two calls.", "code": "a = await ctx.manager.invoke('counter', {'tag': 'a'})\n"
         "try:\n    await ctx.manager.invoke('counter', {'tag': 7})\n"
         "except Exception as e:\n    print(type(e).__name__)"},
        {"text": "Done."},
    ]  # fmt: skip
    assert await run_agent(durable, turns) == "Done."
    (run,) = durable.state.runs.list()
    entries = durable.state.journal.entries(run.id)
    assert [(e.agent, e.key) for e in entries] == [
        ("a1", "start"),
        ("a1", "m.1"),
        ("a1", "c.1"),
        ("a1", "h.1.1"),
        ("a1", "h.1.2"),
        ("a1", "t.1"),
        ("a1", "m.2"),
        ("a1", "t.2"),
    ]
    by_key = {e.key: e.body for e in entries}
    assert by_key["m.1"]["response"]["text"] == "Two calls."
    assert by_key["h.1.1"] == {"skill": "counter", "args": {"tag": "a"}, "ok": True, "result": 1}
    assert by_key["h.1.2"]["ok"] is False and by_key["h.1.2"]["error"]["type"] == "ArgsInvalid"
    assert set(by_key["c.1"]) == {"time", "seed"}
    assert by_key["start"]["user_message"] == "Write the note." and "counter" in by_key["start"]["tools"]
    assert [m["role"] for m in by_key["t.1"]["messages"]] == ["user", "assistant", "tool"]
    point = durable.state.journal.checkpoint(run.id)
    assert point.invocation["skill"] == "agent" and point.invocation["config"] == ASK_WRITE


async def test_no_journal_without_a_provider_that_reports_model_calls_or_with_journal_off(durable):
    assert await run_agent(durable, [{"text": "hi"}], config={"model": {"journal": False}}) == "hi"
    (run,) = durable.state.runs.list()
    assert durable.state.journal.entries(run.id) == [] and durable.state.journal.checkpoint(run.id) is None


# -- the gate, the checkpoint and resume --------------------------------------------------


async def test_unattended_ask_checkpoints_and_a_resume_finishes_without_doing_anything_twice(durable):
    root = durable.cwd
    with pytest.raises(ApprovalPending) as info:
        await run_agent(durable, TURNS)
    pending = info.value
    assert pending.pending["skill"] == "file-write" and pending.pending["args"]["path"] == "out.txt"
    assert not (root / "out.txt").exists() and len(counted(root)) == 2
    assert durable.state.runs.get(pending.run_id).status == "waiting-approval"

    other = fresh(durable)
    other.approve(pending.run_id)
    assert await other.resume(pending.run_id) == "Done."
    assert (root / "out.txt").read_text() == "hello\n"  # written once
    assert len(counted(root)) == 2  # the calls before the checkpoint were not made again
    assert live_turns(other, pending.run_id) == [1, 2, 3]  # the model was asked each turn once
    run = other.state.runs.get(pending.run_id)
    assert run.status == "done"
    statuses = [a.status for a in other.state.runs.agents(run.id)]
    assert statuses == ["waiting-approval", "done"]
    steps = other.state.runs.agents(run.id)[1].report["steps"]
    assert [s.get("replayed", False) for s in steps] == [True, False, False]
    assert other.state.journal.checkpoint(run.id).pending is None


async def test_a_run_off_the_record_is_resumed_off_the_record(durable):
    await run_agent(durable, [{"text": "Hello."}], session="s")
    before = durable.state.sessions.export("s")
    with pytest.raises(ApprovalPending) as info:
        await run_agent(durable, TURNS, session="s", read_only=True)
    run_id = info.value.run_id
    assert durable.state.journal.checkpoint(run_id).invocation["read_only"] is True
    other = fresh(durable)
    other.approve(run_id)
    assert await other.resume(run_id) == "Done."
    assert other.state.sessions.export("s") == before  # neither attempt wrote to the session
    assert [a.report.get("read_only") for a in other.state.runs.agents(run_id)] == [True, True]


@pytest.mark.parametrize("decision", ["deny", "skip"])
async def test_a_denied_or_skipped_call_reaches_the_code_and_the_run_goes_on(durable, decision):
    turns = [
        {"text": "Writing.", "code": "try:\n    r = await ctx.manager.invoke('file-write', {'path': 'out.txt', "
         "'content': 'x'})\n    print('got', r)\nexcept Exception as e:\n    print('refused:', e)"},
        {"text": "Done."},
    ]  # fmt: skip
    with pytest.raises(ApprovalPending) as info:
        await run_agent(durable, turns)
    run_id = info.value.run_id
    other = fresh(durable)
    if decision == "deny":
        other.approve(run_id, deny="use the staging folder")
    else:
        other.approve(run_id, skip=True)
    events: list[dict[str, Any]] = []
    other.events.subscribe("t", lambda topic, e: events.append(e))
    assert await other.resume(run_id, nonlocals={"agent": {"events": "t"}}) == "Done."
    assert not (durable.cwd / "out.txt").exists()
    (result,) = [e["result"] for e in events if e["type"] == "tool-result"]
    if decision == "deny":
        assert "refused: file-write: permission denied: refused by the approver: use the staging folder" in result
    else:
        assert result.startswith("got None") and "file-write was skipped" in result
    (entry,) = [e for e in other.state.journal.entries(run_id) if e.key == "h.1.1"]
    assert entry.body["ok"] is (decision == "skip")


async def test_an_approver_can_skip_a_host_call_from_agent_code(durable):
    asked: list[approval.ApprovalRequest] = []

    def approver(request):
        asked.append(request)
        return approval.SKIP

    turns = [{"code": "print(await ctx.manager.invoke('file-write', {'path': 'o.txt', 'content': 'x'}))"}, {}]
    with approval.session(approver):
        await run_agent(durable, turns)
    (request,) = asked
    assert request.can_skip and request.skill == "file-write"
    assert not (durable.cwd / "o.txt").exists()
    (run,) = durable.state.runs.list()
    assert run.status == "done"


async def test_the_approved_call_cannot_be_swapped_and_divergence_executes_nothing(durable):
    # randomness outside the journal (os.urandom) makes the replayed code ask for another call
    turns = [
        {"code": "import os\nawait ctx.manager.invoke('counter', {'tag': 'first'})\n"
         "await ctx.manager.invoke('counter', {'tag': os.urandom(4).hex()})\n"
         "await ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'x'})"},
        {"text": "Done."},
    ]  # fmt: skip
    with pytest.raises(ApprovalPending) as info:
        await run_agent(durable, turns)
    run_id = info.value.run_id
    assert len(counted(durable.cwd)) == 2
    other = fresh(durable)
    other.approve(run_id)
    with pytest.raises(ReplayDiverged, match=r"the code now calls counter \{\"tag\": \"[0-9a-f]{8}\"\} where the "
                       r"journal holds counter \{\"tag\": \"[0-9a-f]{8}\"\} \(call 2 of that run\); nothing was "
                       r"executed") as diverged:  # fmt: skip
        await other.resume(run_id)
    assert diverged.value.run_id == run_id
    assert len(counted(durable.cwd)) == 2 and not (durable.cwd / "out.txt").exists()
    assert other.state.runs.get(run_id).status == "error"

    path = "'w-' + os.urandom(3).hex()"
    turns = [{"code": f"import os\nawait ctx.manager.invoke('file-write', {{'path': {path}, 'content': ''}})"}]
    with pytest.raises(ApprovalPending) as info:
        await run_agent(durable, turns)
    durable.approve(info.value.run_id)
    with pytest.raises(ReplayDiverged, match=r"where the journal holds file-write .* \(approved\)"):
        await fresh(durable).resume(info.value.run_id)
    assert [p.name for p in durable.cwd.iterdir() if p.name.startswith("w-")] == []


async def test_calls_running_beside_the_checkpointed_one_finish_and_are_journaled(durable, write_skill):
    write_skill(
        "slow-count",
        """
        import asyncio
        frontmatter = {"params": {"type": "object"}}
        async def main(ctx, args):
            await asyncio.sleep(0.3)
            return await ctx.manager.invoke("counter", {"tag": "slow"})
        """,
    )
    turns = [
        {"code": "import asyncio\nprint(await asyncio.gather(ctx.manager.invoke('slow-count', {}), "
         "ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'x'})))"},
        {"text": "Done."},
    ]  # fmt: skip
    with pytest.raises(ApprovalPending) as info:
        await run_agent(durable, turns)
    assert counted(durable.cwd) == ["slow"]
    other = fresh(durable)
    other.approve(info.value.run_id)
    assert await other.resume(info.value.run_id) == "Done."
    assert counted(durable.cwd) == ["slow"] and (durable.cwd / "out.txt").read_text() == "x"


async def test_a_sub_agent_started_by_agent_code_is_checkpointed_and_resumed_in_place(durable):
    inner = [
        {"code": "await ctx.manager.invoke('counter', {'tag': 'inner'})\n"
         "await ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'inner'})"},
        {"text": "Inner done."},
    ]  # fmt: skip
    outer = [
        {"code": "await ctx.manager.invoke('counter', {'tag': 'outer'})\n"
         f"print(await ctx.manager.invoke('agent', {{'prompt': 'Inner.', 'config': {{'agent': 'agent-scripted', "
         f"'script': {inner!r}}}}}))"},
        {"text": "Outer done."},
    ]  # fmt: skip
    with pytest.raises(ApprovalPending) as info:
        await run_agent(durable, outer)
    assert info.value.pending["agent"] == "a1/1.2/a1"
    other = fresh(durable)
    other.approve(info.value.run_id)
    assert await other.resume(info.value.run_id) == "Outer done."
    assert counted(durable.cwd) == ["outer", "inner"] and (durable.cwd / "out.txt").read_text() == "inner"


#: Guardrails and a model-level middleware that log each time they run (in a file, so
#: every process's runs are counted); the middleware marks the model's text.
AROUND_MODEL_CALLS = {
    "log-input": """
        from pathlib import Path
        frontmatter = {"metadata": {"role": "guardrail", "kind": "input"}}
        async def main(ctx, args):
            with (Path(ctx.manager.context_manager.cwd) / "around.log").open("a") as fh:
                fh.write(f"input {ctx.target.args['turn']}\\n")
            return {"pass": True}
    """,
    "log-output": """
        from pathlib import Path
        frontmatter = {"metadata": {"role": "guardrail", "kind": "output"}}
        async def main(ctx, args):
            text = ctx.target.args["response"].get("text", "")
            with (Path(ctx.manager.context_manager.cwd) / "around.log").open("a") as fh:
                fh.write(f"output {ctx.target.args['turn']} {text}\\n")
            return {"pass": True}
    """,
    "mark": """
        from pathlib import Path
        frontmatter = {"metadata": {"role": "middleware", "level": "model"}}
        async def main(ctx, args):
            response = await ctx.manager.next()
            with (Path(ctx.manager.context_manager.cwd) / "around.log").open("a") as fh:
                fh.write(f"mark {ctx.target.args['turn']}\\n")
            return {**response, "text": response.get("text", "") + " [marked]"}
    """,
}


async def test_a_resume_sends_replayed_turns_through_no_guardrail_or_model_middleware(durable, write_skill):
    for name, source in AROUND_MODEL_CALLS.items():
        write_skill(name, source)
    config = {**ASK_WRITE, "model": {"guardrails": ["log-input", "log-output"], "middleware": ["mark"]}}
    with pytest.raises(ApprovalPending) as info:
        await run_agent(durable, TURNS, config=config)
    run_id = info.value.run_id
    log = durable.cwd / "around.log"
    first = log.read_text().splitlines()
    # the output guardrail judges the answer as the middleware left it
    assert first == [
        "input 1", "mark 1", "output 1 Counting first. [marked]", "input 2", "mark 2", "output 2 Writing. [marked]"
    ]  # fmt: skip
    journaled = {e.key: e.body for e in durable.state.journal.entries(run_id)}
    assert journaled["m.1"]["response"]["text"] == "Counting first. [marked]"  # as the middleware left it

    other = fresh(durable)
    other.approve(run_id)
    assert await other.resume(run_id, config=config) == "Done. [marked]"  # marked once, not twice
    # turns 1 and 2 came from the journal: no guardrail decided, no middleware ran again
    assert log.read_text().splitlines() == [*first, "input 3", "mark 3", "output 3 Done. [marked]"]
    assert live_turns(other, run_id) == [1, 2, 3]
    decisions = [
        (event["kind"], event["turn"])
        for agent in other.state.runs.agents(run_id)
        for event in agent.trace or ()
        if event["type"] == "guardrail"
    ]
    assert decisions == [("input", 1), ("output", 1), ("input", 2), ("output", 2), ("input", 3), ("output", 3)]
    assert (durable.cwd / "out.txt").read_text() == "hello\n" and len(counted(durable.cwd)) == 2


async def test_a_model_middleware_that_answers_itself_is_journaled_and_judged(durable, write_skill):
    write_skill("log-output", AROUND_MODEL_CALLS["log-output"])
    write_skill(
        "canned",
        """
        frontmatter = {"metadata": {"role": "middleware", "level": "model"}}
        async def main(ctx, args):
            if ctx.target.args["turn"] == 1:  # answers the first call itself, the model is not asked
                return {"text": "Canned.", "tool_calls": [], "usage": {}, "stop_reason": "end_turn"}
            return await ctx.manager.next()
        """,
    )
    config = {"model": {"guardrails": ["log-output"], "middleware": ["canned"]}}
    assert await run_agent(durable, [{"text": "never asked"}], config=config) == "Canned."
    (run,) = durable.state.runs.list()
    journaled = {e.key: e.body for e in durable.state.journal.entries(run.id)}
    assert journaled["m.1"]["response"]["text"] == "Canned."
    assert (durable.cwd / "around.log").read_text().splitlines() == ["output 1 Canned."]


async def test_parallel_calls_replay_with_their_journaled_clock(durable):
    # two calls in one answer run as one batch; their tags read the sandbox's clock and
    # randomness, so a batch resumed without the journaled clock and seed would diverge
    tag = "f'{random.random()}|{time.time()}'"
    turns = [
        {"text": "Two at once.", "code": [
            f"import random, time\nprint(await ctx.manager.invoke('counter', {{'tag': 'a' + {tag}}}))",
            f"import random, time\nprint(await ctx.manager.invoke('counter', {{'tag': 'b' + {tag}}}))",
        ]},
        {"text": "Writing.", "code": "await ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'x'})"},
        {"text": "Done."},
    ]  # fmt: skip
    with pytest.raises(ApprovalPending) as info:
        await run_agent(durable, turns)
    before = counted(durable.cwd)
    assert sorted(tag[0] for tag in before) == ["a", "b"]
    journaled = [e.key for e in durable.state.journal.entries(info.value.run_id)]
    assert journaled.count("c.2") == 1 and "c.1" not in journaled  # one code run for the batch
    other = fresh(durable)
    other.approve(info.value.run_id)
    assert await other.resume(info.value.run_id) == "Done."
    assert counted(durable.cwd) == before and (durable.cwd / "out.txt").read_text() == "x"


async def test_guidance_loaded_before_the_checkpoint_stays_loaded_after_resume(durable, tmp_path_factory):
    # a guidance skill whose folder is outside the workspace: readable once loaded
    elsewhere = tmp_path_factory.mktemp("guidance")
    (elsewhere / "tips").mkdir()
    (elsewhere / "tips" / "SKILL.md").write_text("---\nname: tips\ndescription: Tips.\n---\nRead notes.txt.\n")
    (elsewhere / "tips" / "notes.txt").write_text("keep it short\n")
    notes = str(elsewhere / "tips" / "notes.txt")
    paths = [elsewhere, *(r.path for r in durable.roots() if r.origin == "path")]
    durable = ContextManager(search_path=paths, cwd=durable.cwd, home=durable.home, env=False, project=False,
                             user=False, entry_points=False, state=durable.state.path)  # fmt: skip
    turns = [
        {"code": "print(await ctx.manager.invoke('load-skills', {'skills': ['tips']}))"},
        {"code": "await ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'x'})"},
        {"code": f"print(await ctx.manager.invoke('file-read', {{'path': {notes!r}}}))"},
        {"text": "Done."},
    ]
    with pytest.raises(ApprovalPending) as info:
        await run_agent(durable, turns)
    other = fresh(durable)
    other.approve(info.value.run_id)
    events: list[dict[str, Any]] = []
    other.events.subscribe("t", lambda topic, e: events.append(e))
    assert await other.resume(info.value.run_id, nonlocals={"agent": {"events": "t"}}) == "Done."
    # load-skills was answered from the journal, and still opened the skill's folder
    results = [e["result"] for e in events if e["type"] in ("tool-result", "tool-error")]
    assert "# Guidance: tips" in results[0] and "keep it short" in results[-1], results


@pytest.mark.skipif("agent-strands" not in HARNESSES, reason="needs the strands extra")
async def test_a_run_that_failed_at_the_model_is_retried_from_its_journal(durable):
    from agent_apps.testing.conformance import strands_bedrock

    turns = [
        {"text": "Counting.", "code": "print(await ctx.manager.invoke('counter', {'tag': 'once'}))"},
        {"error": {"type": "ModelNotReadyException", "message": "the model is down"}},
        {"text": "Done."},
    ]
    with strands_bedrock() as harness:
        call = {"prompt": "Test.", "user_message": "Count.", "config": {**harness.config(turns), "max_retries": 0}}
        with pytest.raises(Exception, match="the model is down"):
            await durable.invoke("agent", call)
        (run,) = durable.state.runs.list()
        assert run.status == "error" and len(harness.fake.requests) == 2
        assert await fresh(durable).resume(run.id) == "Done."
        assert len(harness.fake.requests) == 3  # the first turn came from the journal
    assert counted(durable.cwd) == ["once"]


def test_resume_refuses_unknown_finished_and_undecided_runs(durable, capsys, monkeypatch):
    monkeypatch.setenv("AGENT_APPS_STATE", durable.state.path)
    assert cli_main(["resume", "nope"]) == 2
    assert "error: no run 'nope' (agent-apps runs list shows the runs)" in capsys.readouterr().err
    call = {"prompt": "Test.", "config": {"agent": "agent-scripted", "script": [{"text": "hi"}]}}
    assert durable.invoke_sync("agent", call) == "hi"
    (done,) = durable.state.runs.list()
    assert cli_main(["resume", done.id[:10]]) == 2
    assert f"error: run {done.id} cannot be resumed: it already ended (status done)" in capsys.readouterr().err
    assert cli_main(["approve", done.id]) == 2
    assert "is not waiting for approval (status done)" in capsys.readouterr().err
    call["config"]["script"] = TURNS
    with pytest.raises(ApprovalPending) as info:
        durable.invoke_sync("agent", call, config=ASK_WRITE)
    assert cli_main(["resume", info.value.run_id]) == 2
    err = capsys.readouterr().err
    assert "waits for approval of file-write" in err and f"agent-apps approve {info.value.run_id}" in err


# -- export and import --------------------------------------------------------------------


async def test_a_run_exported_while_it_waits_is_imported_and_resumed_elsewhere(
    durable, write_skill, capsys, monkeypatch, tmp_path
):
    with pytest.raises(ApprovalPending) as info:
        await run_agent(durable, TURNS)
    run_id = info.value.run_id
    monkeypatch.setenv("AGENT_APPS_STATE", durable.state.path)
    assert cli_main(["runs", "export", run_id]) == 0
    snapshot = json.loads(capsys.readouterr().out)
    assert snapshot["format"] == "agent-apps/run" and snapshot["version"] == 1
    assert snapshot["pending_calls"][0]["skill"] == "file-write"
    (state,) = snapshot["agents_state"]
    assert state["system"][0]["text"].startswith("Test.") and "counter" in state["tools"]
    assert [m["role"] for m in state["history"]] == ["user", "assistant", "tool"]
    assert snapshot["agents"][0]["report"]["steps"] and snapshot["metadata"]["agent_apps"]

    invocation = snapshot["checkpoint"]["invocation"]
    assert "path" not in invocation and "cwd" not in invocation  # where it ran means nothing elsewhere
    # another store, where a tool is gone and another one is new
    export = tmp_path / "run.json"
    export.write_text(json.dumps(snapshot, indent=2))
    other_skills = tmp_path / "other-skills"
    other_skills.mkdir()
    (other_skills / "tally.skill.py").write_text("frontmatter = {}\nasync def main(ctx, args):\n    return 1\n")
    monkeypatch.setenv("AGENT_APPS_STATE", str(tmp_path / "other.db"))
    # its call config set a permission policy, which a file may not bring: the import says
    # so, and the run comes in once it is taken out (it resumes under the config here)
    assert cli_main(["runs", "import", str(export), "--path", str(other_skills)]) == 2
    assert "checkpoint.invocation.config.security: an imported run may set only model config" in capsys.readouterr().err
    del invocation["config"]
    export.write_text(json.dumps(snapshot, indent=2))
    assert cli_main(["runs", "import", str(export), "--path", str(other_skills)]) == 0
    out = capsys.readouterr()
    assert f"imported run {run_id} (waiting-approval); agent-apps resume {run_id} continues it" in out.out
    assert "tools removed since: counter" in out.err and "tools added since: tally" in out.err
    assert cli_main(["runs", "import", str(export)]) == 2
    assert "already exists" in capsys.readouterr().err

    moved = ContextManager(search_path=[durable.roots()[0].path], cwd=durable.cwd, env=False, project=False,
                           user=False, entry_points=False, state=str(tmp_path / "other.db"))  # fmt: skip
    moved.approve(run_id)
    assert await moved.resume(run_id, config=ASK_WRITE) == "Done."  # the policy here asks for writes
    assert (durable.cwd / "out.txt").read_text() == "hello\n" and len(counted(durable.cwd)) == 2


def test_a_bad_run_export_names_the_line_and_field(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AGENT_APPS_STATE", str(tmp_path / "s.db"))
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "format": "agent-apps/run",\n  "version": 1,\n  "run": {"id": "r1", "name": "x"},\n'
                   '  "agents": [], "journal": []\n}\n')  # fmt: skip
    assert cli_main(["runs", "import", str(bad)]) == 2
    assert f"error: {bad}:4: run: 'status' is a required property" in capsys.readouterr().err


# -- other processes: the command line, kill -9 and agent-strands ---------------------------

SCRIBE = """
---
description: Writes a note.
metadata:
  model:
{model}
---
Write the note.
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {"AGENT_APPS_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}
    for name in ("AGENT_APPS_CACHE_DIR", "XDG_CACHE_HOME"):  # the compiled sandbox, where this process has it
        if os.environ.get(name):
            env[name] = os.environ[name]
    return {**env, **extra}


def _cli(tmp_path: Path, env: dict[str, str], *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_apps", *argv],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def _project(tmp_path: Path, model: dict[str, Any]) -> Path:
    skills = tmp_path / "skills"
    skills.mkdir(exist_ok=True)
    (skills / "counter.skill.py").write_text(textwrap.dedent(COUNTER))
    body = textwrap.indent(json.dumps(model, indent=2), "    ")
    (skills / "scribe.skill.md").write_text(SCRIBE.format(model=body).lstrip())
    (tmp_path / "agent-apps.yaml").write_text(json.dumps(ASK_WRITE))
    return skills


@pytest.fixture(params=sorted(HARNESSES))
def provider(request, tmp_path):
    """``(model config, asked)``: the provider config for TURNS, and how many model
    requests were made so far (None: the scripted provider, counted from traces)."""
    if request.param == "agent-scripted":
        yield {"agent": "agent-scripted", "script": TURNS}, None, {}
        return
    with FakeBedrock(model_ids=[FAKE_MODEL_ID]) as fake:
        fake.add_turns(*(fake_turn(turn, i) for i, turn in enumerate(TURNS)))
        model = {"agent": "agent-strands", "model_id": FAKE_MODEL_ID, "endpoint_url": fake.endpoint_url,
                 "region": "us-east-1", "retry_delay": 0}  # fmt: skip
        yield model, lambda: len(fake.requests), dummy_aws_env()


def test_the_command_line_checkpoints_then_other_processes_approve_and_resume(tmp_path, provider):
    model, asked, aws = provider
    _project(tmp_path, model)
    env = _env(tmp_path, **aws)
    first = _cli(tmp_path, env, "invoke", "scribe", "--path", "skills")
    assert first.returncode == 3, first.stderr
    (line,) = [ln for ln in first.stderr.splitlines() if ln.startswith("agent-apps: run ")]
    run_id = line.split("run ", 1)[1].split()[0]
    assert 'of file-write {"path": "out.txt", "content": "hello\\n", "append": true}' in line
    assert f"agent-apps approve {run_id} [--deny REASON | --skip], then: agent-apps resume {run_id}" in line
    assert not (tmp_path / "out.txt").exists() and len(counted(tmp_path)) == 2
    if asked:
        assert asked() == 2

    listed = _cli(tmp_path, env, "runs", "show", run_id)
    assert "waiting for approval of file-write" in listed.stdout and f"agent-apps approve {run_id}" in listed.stdout
    approved = _cli(tmp_path, env, "approve", run_id)
    assert approved.returncode == 0 and f"continue it with: agent-apps resume {run_id}" in approved.stdout
    resumed = _cli(tmp_path, env, "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "Done."
    assert (tmp_path / "out.txt").read_text() == "hello\n"
    assert len(counted(tmp_path)) == 2
    if asked:
        assert asked() == 3  # the fake Bedrock was asked each turn exactly once
    else:
        cm = ContextManager(state=str(tmp_path / "home" / "state.db"), env=False, project=False, user=False)
        assert live_turns(cm, run_id) == [1, 2, 3]
    again = _cli(tmp_path, env, "resume", run_id)
    assert again.returncode == 2 and "it already ended (status done)" in again.stderr


def test_on_a_shared_postgresql_store_approve_and_resume_happen_on_other_machines(tmp_path, postgres_url):
    """Three processes, each with a home of its own (as on three machines), one store."""
    _project(tmp_path, {"agent": "agent-scripted", "script": TURNS})
    machines = [_env(tmp_path, AGENT_APPS_HOME=str(tmp_path / f"machine{i}"), AGENT_APPS_STATE=postgres_url)
                for i in range(3)]  # fmt: skip
    first = _cli(tmp_path, machines[0], "invoke", "scribe", "--path", "skills")
    assert first.returncode == 3, first.stderr
    (line,) = [ln for ln in first.stderr.splitlines() if ln.startswith("agent-apps: run ")]
    run_id = line.split("run ", 1)[1].split()[0]
    shown = _cli(tmp_path, machines[1], "runs", "show", run_id[:10])
    assert "waiting for approval of file-write" in shown.stdout, shown.stderr
    approved = _cli(tmp_path, machines[1], "approve", run_id[:10])
    assert approved.returncode == 0, approved.stderr
    resumed = _cli(tmp_path, machines[2], "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "Done."
    assert (tmp_path / "out.txt").read_text() == "hello\n" and len(counted(tmp_path)) == 2  # nothing done twice
    listed = json.loads(_cli(tmp_path, machines[0], "runs", "list", "--json").stdout)
    assert [(run["id"], run["status"]) for run in listed] == [(run_id, "done")]
    assert not any((tmp_path / f"machine{i}" / "state.db").exists() for i in range(3))


def test_a_persistent_run_killed_mid_way_is_resumed(tmp_path):
    hang = """
import asyncio
from pathlib import Path
frontmatter = {"params": {"type": "object"}}
async def main(ctx, args):
    root = Path(ctx.manager.context_manager.cwd)
    if not (root / "killed").exists():
        await asyncio.sleep(0.1)  # the journal writes what happened within milliseconds
        (root / "ready").write_text("x")
        await asyncio.sleep(60)
    return "awake"
"""
    turns = [
        {"text": "Counting.", "code": "print(await ctx.manager.invoke('counter', {'tag': 'one'}))"},
        {"text": "Waiting.", "code": "await ctx.manager.invoke('counter', {'tag': 'two'})\n"
         "print(await ctx.manager.invoke('hang', {}))"},
        {"text": "Done.", "code": "ctx.manager.finish('Done.')"},
    ]  # fmt: skip
    skills = _project(tmp_path, {"agent": "agent-scripted", "script": turns, "persistent": True})
    (skills / "hang.skill.py").write_text(hang)
    env = _env(tmp_path)
    cmd = [sys.executable, "-m", "agent_apps", "invoke", "scribe", "--path", "skills"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "ready").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the run never reached the hanging call"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    (tmp_path / "killed").write_text("x")
    listed = _cli(tmp_path, env, "runs", "list")
    assert " interrupted " in listed.stdout, listed.stdout
    run_id = json.loads(_cli(tmp_path, env, "runs", "list", "--json").stdout)[0]["id"]
    resumed = _cli(tmp_path, env, "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "Done."
    assert counted(tmp_path) == ["one", "two"]  # made before the kill: not made again
    cm = ContextManager(state=str(tmp_path / "home" / "state.db"), env=False, project=False, user=False)
    statuses = sorted(a.status for a in cm.state.runs.agents(run_id))
    assert statuses == ["done", "interrupted"] and cm.state.runs.get(run_id).status == "done"
    assert live_turns(cm, run_id) == [3]  # turns 1 and 2 were replayed, not asked again
