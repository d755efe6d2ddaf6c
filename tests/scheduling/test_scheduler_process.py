"""Real ``agent-apps scheduler`` processes on short intervals: several on one store (an
SQLite file; a PostgreSQL server, as schedulers on several machines share it), a skill
that disappears while it runs, Ctrl-C with a run in flight. Every wait is bounded."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_apps.cli import main
from agent_apps.scheduling import When
from agent_apps.state import StateStore

from .conftest import COUNTER, lines

DEADLINE = 30.0


@pytest.fixture
def env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_APPS")}
    env.update(AGENT_APPS_HOME=str(tmp_path / "home"), AGENT_APPS_STATE=str(tmp_path / "state.db"), NO_COLOR="1")
    return env


@pytest.fixture
def skills(tmp_path):
    folder = tmp_path / "skills"
    folder.mkdir()
    (folder / "counter.skill.py").write_text(COUNTER)
    return folder


def start(skills: Path, env: dict, tmp_path: Path, *extra: str) -> subprocess.Popen:
    """Start a scheduler and wait until it says Ctrl-C stops it (a SIGINT before that is
    Python's own: exit 130, not a graceful stop)."""
    cmd = [sys.executable, "-m", "agent_apps", "scheduler", "--path", str(skills), "--poll", "0.1", *extra]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.first_lines = ""
    while "Ctrl-C stops" not in proc.first_lines:  # warnings may come before the ready line
        line = proc.stderr.readline()
        if not line:  # it ended first: stop() and wait_for() say why
            break
        proc.first_lines += line
    return proc


def wait_for(check, what: str, procs=()) -> None:
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        if check():
            return
        for proc in procs:
            assert proc.poll() is None, f"scheduler exited early: {proc.first_lines}{proc.communicate()[1]}"
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the scheduler did not stop on SIGINT: {err}") from None
    err = proc.first_lines + err
    assert proc.returncode == 0, err
    assert "agent-apps scheduler: stopped" in err
    return err


def statuses(store: StateStore, schedule) -> list[str]:
    return [run["status"] for run in store.schedules.runs_of(schedule.id)]


def test_schedulers_on_one_store_run_each_due_time_once(env, skills, tmp_path, monkeypatch, capsys, state_location):
    env["AGENT_APPS_STATE"] = state_location
    store = StateStore(env["AGENT_APPS_STATE"])
    log = tmp_path / "runs.log"
    schedule = store.schedules.create(ref="counter", args={"log": str(log)}, when=When(every=0.25), catch_up="all")
    # three schedulers, each with a home of its own (as on three machines)
    procs = [start(skills, {**env, "AGENT_APPS_HOME": str(tmp_path / f"home{i}")}, tmp_path) for i in range(3)]
    try:
        wait_for(lambda: statuses(store, schedule).count("done") >= 8, "8 runs", procs)
    finally:
        errs = [stop(proc) for proc in procs]
    runs = store.schedules.runs_of(schedule.id)
    due = [run["due_at"] for run in runs]
    assert due == pytest.approx([schedule.created_at + 0.25 * k for k in range(1, len(due) + 1)])
    done = [run for run in runs if run["status"] == "done"]
    assert all(run["status"] in ("done", "cancelled") for run in runs)
    ran = lines(log)
    assert sorted(line["run"] for line in ran) == sorted(run["run_id"] for run in done)  # none ran twice
    recorded = {run.id: run for run in store.runs.list(limit=None)}
    assert all(recorded[run["run_id"]].status == "done" and recorded[run["run_id"]].name == "counter" for run in done)
    logged = re.findall(r"run (\w{12}) done in", "\n".join(errs))  # one line per run, by whichever ran it
    assert sorted(logged) == sorted(run["run_id"][:12] for run in done)
    monkeypatch.setenv("AGENT_APPS_STATE", env["AGENT_APPS_STATE"])
    assert main(["runs", "list", "--limit", "0", "--json"]) == 0
    listed = {run["id"]: run for run in json.loads(capsys.readouterr().out)}
    assert all(listed[run["run_id"]]["name"] == "counter" for run in done)


def test_a_skill_that_disappears_is_logged_and_the_scheduler_goes_on(env, skills, tmp_path):
    store = StateStore(env["AGENT_APPS_STATE"])
    log = tmp_path / "runs.log"
    schedule = store.schedules.create(ref="counter", args={"log": str(log)}, when=When(every=0.2))
    proc = start(skills, env, tmp_path)
    try:
        wait_for(lambda: statuses(store, schedule).count("done") >= 2, "2 runs", [proc])
        (skills / "counter.skill.py").unlink()
        wait_for(lambda: "error" in statuses(store, schedule), "a failed run", [proc])
        (skills / "counter.skill.py").write_text(COUNTER)
        wait_for(lambda: statuses(store, schedule)[-1] == "done" and "error" in statuses(store, schedule),
                 "a run after the skill came back", [proc])
    finally:
        err = stop(proc)
    assert "no skill named 'counter'" in err and "the schedule stays" in err
    failed = [run for run in store.schedules.runs_of(schedule.id) if run["status"] == "error"]
    assert failed and all("SkillNotFound" in run["error"] for run in failed)
    assert store.runs.get(failed[0]["run_id"]).status == "error"


def test_ctrl_c_cancels_the_run_in_flight_and_records_it(env, skills, tmp_path):
    (skills / "slow.skill.py").write_text(
        "import asyncio\nfrontmatter = {'description': 'Slow.'}\n"
        "async def main(ctx, args):\n    await asyncio.sleep(60)\n"
    )
    store = StateStore(env["AGENT_APPS_STATE"])
    schedule = store.schedules.create(ref="slow", args={}, when=When(every=0.2))
    proc = start(skills, env, tmp_path, "--concurrency", "1")
    try:
        wait_for(lambda: statuses(store, schedule) == ["running"], "a run in flight", [proc])
    finally:
        err = stop(proc)
    assert "(1 run(s) in flight cancelled)" in err
    (run,) = store.schedules.runs_of(schedule.id)
    assert run["status"] == "cancelled" and store.runs.get(run["run_id"]).status == "cancelled"


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["--poll", "0"], "--poll: must be greater than 0"),
        (["--concurrency", "0"], "--concurrency: must be at least 1"),
        (["--grace", "soon"], "--grace: not a number of seconds"),
    ],
)
def test_bad_options_are_usage_errors(capsys, argv, text):
    with pytest.raises(SystemExit) as info:
        main(["scheduler", *argv])
    assert info.value.code == 2 and text in capsys.readouterr().err
