"""A run killed with ``kill -9`` right after any one of its commits, then resumed: no
journaled host call is made again, and the session holds each message exactly once.

The run is a real ``agent-apps invoke`` process, on SQLite and on a real PostgreSQL
server. A wrapper around the store's write
transaction (in the child only) counts the outermost commits and sends the process
``SIGKILL`` right after the Nth, for every N the run makes: so the store a resume reads
is each state the run's writes can leave on disk.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_apps import ContextManager

from .test_durable import _cli, _env, counted

#: Logs each call (``counter.log``, which ``counted`` reads) and answers with its tag: a
#: call made again answers the same, so the session's messages do not depend on it.
COUNTER = """
from pathlib import Path
frontmatter = {"params": {"type": "object", "properties": {"tag": {"type": "string"}}}}
async def main(ctx, args):
    with (Path(ctx.manager.context_manager.cwd) / "counter.log").open("a") as fh:
        fh.write(args["tag"] + "\\n")
    return args["tag"]
"""

#: The child: the CLI, with every outermost store write counted (the count goes to
#: ``commits``) and the process killed right after commit number ``KILL_AT`` (0: never).
CHILD = """
import contextlib, os, signal, sys
from pathlib import Path
from agent_apps.state._postgres import PostgresDatabase
from agent_apps.state._sqlite import SQLiteDatabase
from agent_apps.cli import main

kill_at, commits = int(os.environ["KILL_AT"]), [0]

def counting(write):
    @contextlib.contextmanager
    def counted(self):
        outermost = getattr(self, "_joined", lambda: None)() is None
        with write(self) as conn:
            yield conn
        if outermost:
            commits[0] += 1
            Path("commits").write_text(str(commits[0]))
            if commits[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
    return counted

SQLiteDatabase.write = counting(SQLiteDatabase.write)
PostgresDatabase.write = counting(PostgresDatabase.write)
sys.exit(main(sys.argv[1:]))
"""

TURNS = [
    {"text": "Counting.", "code": "print(await ctx.manager.invoke('counter', {'tag': 'one'}))"},
    {"text": "Twice.", "code": "await ctx.manager.invoke('counter', {'tag': 'two'})\n"
     "print(await ctx.manager.invoke('counter', {'tag': 'three'}))"},
    {"text": "Done.", "code": "ctx.manager.finish('Done.')"},
]  # fmt: skip

AGENT = """---
description: Counts.
metadata:
  model: {model}
---
Count.
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def store_at(request: pytest.FixtureRequest) -> Callable[[Path], str]:
    """Where the store of a run in folder ``root`` is: an SQLite file in it, or a schema
    of its own on the test PostgreSQL server."""
    if request.param == "sqlite":
        return lambda root: str(root / "home" / "state.db")
    server = request.getfixturevalue("postgres_server")
    return lambda root: server.url("tests", schema=f"k_{uuid.uuid4().hex[:12]}")


def _invoke(root: Path, kill_at: int, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    skills = root / "skills"
    skills.mkdir(parents=True)
    (skills / "counter.skill.py").write_text(COUNTER)
    model = json.dumps({"agent": "agent-scripted", "script": TURNS})
    (skills / "counts.skill.md").write_text(AGENT.format(model=model))
    argv = ["invoke", "counts", "--path", "skills", "--session", "s1"]
    return subprocess.run(
        [sys.executable, "-c", CHILD, *argv], cwd=root, env={**env, "KILL_AT": str(kill_at)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _store(env: dict[str, str]) -> ContextManager:
    return ContextManager(state=env["AGENT_APPS_STATE"], env=False, project=False, user=False)


def _messages(env: dict[str, str]) -> list[tuple[str, str]]:
    cm = _store(env)
    try:
        return [(e.message["role"], e.message.get("text", "")) for e in cm.state.sessions.messages("s1")]
    finally:
        cm.state.close()


def _journaled_tags(env: dict[str, str]) -> list[str]:
    """The tags of the host calls the journal holds (what a resume answers from it)."""
    cm = _store(env)
    try:
        (run,) = cm.state.runs.list()
        return [e.body["args"]["tag"] for e in cm.state.journal.entries(run.id) if e.kind == "call"]
    finally:
        cm.state.close()


def test_killed_after_any_commit_a_resume_repeats_no_journaled_call_and_stores_no_message_twice(tmp_path, store_at):
    reference = tmp_path / "whole"
    whole = _invoke(reference, 0, env := _env(reference, AGENT_APPS_STATE=store_at(reference)))
    assert whole.returncode == 0 and whole.stdout.strip() == "Done.", whole.stderr
    expected = _messages(env)
    assert [role for role, _ in expected].count("user") == 1 and ("assistant", "Done.") in expected
    assert counted(reference) == ["one", "two", "three"]

    # the number of commits varies a little (the turn in flight is written as time
    # passes): kill after the 1st, the 2nd, ... until a run ends before its Nth
    resumed_points = 0
    for kill_at in range(1, 60):
        root = tmp_path / f"kill-{kill_at}"
        killed = _invoke(root, kill_at, env := _env(root, AGENT_APPS_STATE=store_at(root)))
        if killed.returncode == 0:  # fewer commits than kill_at: every point was taken
            assert killed.stdout.strip() == "Done." and _messages(env) == expected, killed.stderr
            break
        assert killed.returncode == -signal.SIGKILL, (kill_at, killed.stderr)
        journaled, before = _journaled_tags(env), counted(root)
        assert set(journaled) <= set(before), kill_at  # an entry is written after its call
        run_id = json.loads(_cli(root, env, "runs", "list", "--json").stdout)[0]["id"]
        resumed = _cli(root, env, "resume", run_id)
        if resumed.returncode == 2:  # killed after the run's end, or before its checkpoint
            assert "cannot be resumed" in resumed.stderr and counted(root) == before, (kill_at, resumed.stderr)
            ended = "already ended" in resumed.stderr
            assert (before, _messages(env)) == ((["one", "two", "three"], expected) if ended else ([], [])), kill_at
            continue
        assert resumed.returncode == 0 and resumed.stdout.strip() == "Done.", (kill_at, resumed.stderr)
        resumed_points += 1
        again = counted(root)[len(before) :]
        assert not set(again) & set(journaled), (kill_at, journaled, again)  # no journaled call made again
        assert sorted(set(counted(root))) == ["one", "three", "two"], kill_at
        assert _messages(env) == expected, kill_at  # each message once, none lost
    else:
        raise AssertionError("the run never ended before its 59th commit")
    assert resumed_points >= 5  # every commit from the checkpoint to the run's end leaves a run to resume
