"""``agent-apps batch --resume`` after a crash takes each interrupted run up from its
journal, as ``agent-apps resume`` does: a call the journal holds is not made again, the
run keeps its id and ends ``done`` (not ``interrupted`` for good). Real processes, a
real ``kill -9`` in the middle of a side-effecting call, side effects counted in a file."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_apps.state import StateStore

from .conftest import read_lines, write_lines

pytestmark = pytest.mark.timeout(240)

#: A side effect: one line in effects.log per call; with ``wait``, then waits for ``go``.
EFFECT = """
import asyncio
from pathlib import Path
frontmatter = {"params": {"type": "object", "properties": {"tag": {"type": "string"}, "wait": {"type": "boolean"}},
                          "required": ["tag"]}}
async def main(ctx, args):
    folder = Path(ctx.manager.context_manager.cwd)
    with (folder / "effects.log").open("a") as fh:
        fh.write(args["tag"] + "\\n")
    while args.get("wait") and not (folder / "go").exists():
        await asyncio.sleep(0.01)
    return args["tag"]
"""

#: Three turns: an effect, an effect that waits (the batch is killed there), the result.
WORKER = """---
description: Does two things to the world.
metadata:
  model:
    agent: agent-scripted
    journal: {journal}
    script:
      - code: "await ctx.manager.invoke('effect', {{'tag': memory['args']['task'] + ':one'}})"
      - code: "await ctx.manager.invoke('effect', {{'tag': memory['args']['task'] + ':two', 'wait': True}})"
      - code: "ctx.manager.finish(memory['args']['task'])"
---
Work.
"""

#: The same two effects from a code skill: no agent, so no journal and no run recorded.
PLAIN = """
frontmatter = {"params": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}}
async def main(ctx, args):
    await ctx.manager.invoke("effect", {"tag": args["task"] + ":one"})
    await ctx.manager.invoke("effect", {"tag": args["task"] + ":two", "wait": True})
    return args["task"]
"""

TASKS = [f"t{n}" for n in range(4)]


@pytest.fixture
def project(tmp_path):
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "effect.skill.py").write_text(EFFECT)
    (skills / "worker.skill.md").write_text(WORKER.format(journal="true"))
    (skills / "unjournaled.skill.md").write_text(WORKER.format(journal="false"))
    (skills / "plain.skill.py").write_text(PLAIN)
    write_lines(tmp_path / "tasks.jsonl", [{"task": t} for t in TASKS])
    return tmp_path


def effects(folder: Path) -> collections.Counter[str]:
    log = folder / "effects.log"
    return collections.Counter(log.read_text().split()) if log.exists() else collections.Counter()


def batch(folder: Path, name: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "agent_apps", "batch", name, "--input", "tasks.jsonl", "--output", "results.jsonl",
            "--path", "skills", "--concurrency", str(len(TASKS)), *extra]


def kill_mid_call(folder: Path, name: str, sig: int = signal.SIGKILL) -> int:
    """Start the batch; once every input is inside its second (waiting) effect, ``sig``."""
    proc = subprocess.Popen(batch(folder, name), cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 120
        while sum(n for tag, n in effects(folder).items() if tag.endswith(":two")) < len(TASKS):
            assert proc.poll() is None, proc.stderr.read()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the runs never reached their second effect"
            time.sleep(0.02)
        proc.send_signal(sig)
        proc.wait(60)
    finally:
        proc.kill()
    return proc.returncode


def resume(folder: Path, name: str) -> subprocess.CompletedProcess[str]:
    (folder / "go").write_text("")
    return subprocess.run(batch(folder, name, "--resume"), cwd=folder, capture_output=True, text=True, timeout=180)


def store() -> StateStore:
    return StateStore(Path(os.environ["AGENT_APPS_HOME"]) / "state.db")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_resume_after_a_crash_repeats_no_journaled_call(project, sig):
    status = kill_mid_call(project, "worker", sig)
    assert status == (-signal.SIGKILL if sig == signal.SIGKILL else 130)
    assert not (project / "results.jsonl").exists() or read_lines(project / "results.jsonl") == []

    done = resume(project, "worker")
    assert done.returncode == 0, done.stderr
    counted = effects(project)
    for task in TASKS:
        assert counted[f"{task}:one"] == 1, counted  # journaled before the crash: not made again
        assert counted[f"{task}:two"] <= 2  # in flight at the crash: made again at most once
    lines = {line["index"]: line for line in read_lines(project / "results.jsonl")}
    assert {i: line["result"] for i, line in lines.items()} == dict(enumerate(TASKS))
    started = {i: run for i, (_, run) in store().batch_runs.runs(str(project / "results.jsonl")).items()}
    assert {i: line["run_id"] for i, line in lines.items()} == started  # the runs it started, taken up
    runs = store().runs
    assert {runs.get(run_id).status for run_id in started.values()} == {"done"}  # none stays interrupted


def test_a_run_without_a_journal_runs_again_under_its_own_id_and_ends(project):
    assert kill_mid_call(project, "unjournaled") == -signal.SIGKILL
    started = {i: run for i, (_, run) in store().batch_runs.runs(str(project / "results.jsonl")).items()}
    done = resume(project, "unjournaled")
    assert done.returncode == 0, done.stderr
    lines = read_lines(project / "results.jsonl")
    assert sorted(line["index"] for line in lines) == list(range(len(TASKS)))
    assert {line["index"]: line["run_id"] for line in lines} == started
    runs = store().runs
    for run_id in started.values():  # nothing stays interrupted: the old attempt's agent says it was
        assert runs.get(run_id).status == "done"
        assert [a.status for a in runs.agents(run_id)] == ["interrupted", "done"]
    assert all(effects(project)[f"{t}:one"] == 2 for t in TASKS)  # no journal: the whole run again


def test_a_plain_skill_killed_mid_way_runs_again(project):
    assert kill_mid_call(project, "plain") == -signal.SIGKILL
    done = resume(project, "plain")
    assert done.returncode == 0, done.stderr
    assert sorted(line["result"] for line in read_lines(project / "results.jsonl")) == TASKS


def test_a_new_results_file_does_not_take_up_the_runs_of_an_old_one(project):
    assert kill_mid_call(project, "worker") == -signal.SIGKILL
    old = {run for _, run in store().batch_runs.runs(str(project / "results.jsonl")).values()}
    (project / "results.jsonl").unlink(missing_ok=True)
    (project / "go").write_text("")
    fresh = subprocess.run(batch(project, "worker"), cwd=project, capture_output=True, text=True, timeout=180)
    assert fresh.returncode == 0, fresh.stderr
    assert not old & {line["run_id"] for line in read_lines(project / "results.jsonl")}


def test_rerun_failed_starts_the_failed_inputs_afresh(project):
    import json

    from agent_apps.batch.files import input_hash

    assert kill_mid_call(project, "worker") == -signal.SIGKILL
    started = {i: run for i, (_, run) in store().batch_runs.runs(str(project / "results.jsonl")).items()}
    line = (project / "tasks.jsonl").read_bytes().splitlines()[0]
    failed = {"index": 0, "ok": False, "error": {"type": "SkillFailed", "message": "x"}, "run_id": started[0],
              "input_hash": input_hash("worker", line)}
    (project / "results.jsonl").write_text(json.dumps(failed) + "\n")
    (project / "go").write_text("")
    again = subprocess.run(batch(project, "worker", "--resume", "--rerun-failed"), cwd=project, capture_output=True,
                           text=True, timeout=180)
    assert again.returncode == 0, again.stderr
    lines = {line["index"]: line for line in read_lines(project / "results.jsonl")}
    assert lines[0]["run_id"] != started[0]  # run again on purpose: a new run, from the start
    assert all(lines[i]["run_id"] == started[i] for i in range(1, len(TASKS)))  # interrupted: taken up
    counted = effects(project)
    assert counted["t0:one"] == 2 and all(counted[f"{t}:one"] == 1 for t in TASKS[1:])
