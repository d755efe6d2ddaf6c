"""The state store on a real PostgreSQL server: its schema, its URL, and what a user sees
when the URL is wrong, the server is down, or it goes away in the middle of a run.

(The behaviour both backends share is tested on both by the other files here.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from agent_apps import ContextManager
from agent_apps.cli import main
from agent_apps.state import StateError, StateStore, _postgres, state_path
from agent_apps.state.schema import MIGRATIONS
from agent_apps.testing.postgres import PASSWORD

from .conftest import pg_connect, schema_version

PYTHON = sys.executable


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_created_on_first_use_in_a_schema_of_its_own(postgres_url, postgres_server):
    store = StateStore(postgres_url)
    schema = postgres_url.rsplit("schema=", 1)[1]
    exists = "SELECT count(*) FROM pg_namespace WHERE nspname = %s"
    with pg_connect(postgres_url) as conn:
        assert conn.execute(exists, (schema,)).fetchone() == (0,)  # constructing opens nothing
        assert store.sessions.list() == [] and store.db.opened
        assert conn.execute(exists, (schema,)).fetchone() == (1,)
        tables = {row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))}
    assert {"schema_version", "sessions", "messages", "runs", "agents", "journal", "memory_chunks"} <= tables
    assert schema_version(postgres_url) == len(MIGRATIONS)
    assert PASSWORD not in store.path and store.path.startswith("postgresql://postgres:***@127.0.0.1:")
    assert PASSWORD in store.db.location  # what a worker elsewhere opens
    # the default schema is agent_apps, beside whatever else the database holds
    plain = StateStore(postgres_server.url("plain"))
    plain.sessions.list()
    assert postgres_server.psql("SELECT count(*) FROM agent_apps.sessions", "plain") == "0"


def test_where_the_store_lives_a_url_is_taken_as_it_is(tmp_path, postgres_url, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    (project / "agent-apps.yaml").write_text(f"state:\n  path: {postgres_url}\n")
    cm = ContextManager(cwd=project, home=tmp_path / "home", env=False, user=False)
    assert state_path(cm.cascade, cm.home) == postgres_url  # not made relative to the config file
    assert cm.state.db.location == postgres_url and PASSWORD not in cm.state.path
    monkeypatch.setenv("AGENT_APPS_STATE", postgres_url.replace("postgresql://", "postgres://"))
    assert StateStore(state_path(cm.cascade, cm.home)).sessions.list() == []  # the short scheme too


def test_the_urls_own_options_reach_the_server_beside_the_stores(postgres_url):
    url = postgres_url + "&options=-c%20synchronous_commit%3Doff%20-c%20search_path%3Dpublic&application_name=mine"
    store = StateStore(url)
    store.sessions.append("s", [{"role": "user", "text": "hi"}])
    with store.db.read() as conn:
        settings = conn.execute(
            "SELECT current_setting('synchronous_commit'), current_schema(), current_setting('application_name')"
        ).fetchone()
    schema = postgres_url.rsplit("schema=", 1)[1]
    assert settings == ("off", schema, "mine")  # the store's schema wins over the URL's search_path


def test_another_programs_schema_is_refused_and_left_alone(postgres_url):
    with pg_connect(postgres_url) as conn:
        schema = postgres_url.rsplit("schema=", 1)[1]
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(StateError, match="holds tables of another program") as info:
        StateStore(postgres_url).sessions.list()
    assert PASSWORD not in str(info.value)
    with pg_connect(postgres_url) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()
    assert tables == [("invoices",)]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda url: url + "&sslmod=require", 'bad URL: invalid URI query parameter: "sslmod"'),
        (lambda url: url.replace("schema=", "schema=1"), "bad URL: schema='1t_"),
        (lambda url: url + "&pool_size=0", "bad URL: pool_size='0': a number from 1 to 100"),
        (lambda url: url.replace("@127.0.0.1:", "@127.0.0.1:x"), "bad URL: the port must be a number"),
        (lambda url: url.replace(PASSWORD, "wrong"), 'password authentication failed for user "postgres"'),
        (lambda url: url.replace("/tests?", "/nosuchdb?"), 'database "nosuchdb" does not exist'),
    ],
    ids=["unknown-parameter", "bad-schema", "bad-pool-size", "bad-port", "wrong-password", "unknown-database"],
)
def test_a_bad_url_is_one_clear_line_naming_the_store(capsys, monkeypatch, postgres_url, change, problem):
    url = change(postgres_url)
    monkeypatch.setenv("AGENT_APPS_STATE", url)
    attempts = count_connections(monkeypatch)
    code, out, err = run(capsys, "sessions", "list")
    assert code == 1 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("error: state store postgresql://postgres:***@127.0.0.1:") and problem in err
    assert PASSWORD not in err and "wrong" not in err.split(": ", 2)[1]
    assert len(attempts) <= 1  # not tried again: it would not get better


def count_connections(monkeypatch) -> list[str]:
    """Every connection the store tries to make (a list that grows)."""
    import psycopg

    made: list[str] = []
    connect = psycopg.connect

    def counted(*args, **kwargs):
        made.append(args[0] if args else "")
        return connect(*args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", counted)
    return made


def test_a_server_that_is_down_is_one_clear_line(capsys, monkeypatch, postgres_server):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setattr(_postgres, "CONNECT_TIMEOUT", 1.0)
    monkeypatch.setenv("AGENT_APPS_STATE", f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/tests")
    code, _, err = run(capsys, "runs", "list")
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: state store postgresql://postgres:***@127.0.0.1:{port}/tests: cannot connect")
    assert "Connection refused" in err and PASSWORD not in err


def test_a_server_restart_between_calls_is_not_noticed(postgres_url, postgres_server):
    store = StateStore(postgres_url)
    store.sessions.append("s", [{"role": "user", "text": "before"}])
    postgres_server.pg_ctl("restart", "-m", "immediate")  # every pooled connection is now dead
    assert store.sessions.append("s", [{"role": "user", "text": "after"}]) == 2
    assert [e.message["text"] for e in store.sessions.messages("s")] == ["before", "after"]


def test_a_server_that_is_down_fails_calls_and_they_work_again_once_it_is_back(
    monkeypatch, postgres_url, postgres_server
):
    monkeypatch.setattr(_postgres, "CONNECT_TIMEOUT", 1.0)
    # a small pool (the default on 2 CPUs): none of its connections is in use, so a pool
    # that gives none is a server that is down, not a pool too small for its threads
    store = StateStore(postgres_url + "&pool_size=2")
    store.sessions.append("s", [{"role": "user", "text": "kept"}])
    postgres_server.pg_ctl("stop", "-m", "fast")
    try:
        with pytest.raises(StateError, match="cannot connect to the server"):
            store.sessions.append("s", [{"role": "user", "text": "lost"}])
        attempts = count_connections(monkeypatch)
        with pytest.raises(StateError, match="cannot connect to the server"):
            store.sessions.append("s", [{"role": "user", "text": "lost"}])
        assert len(attempts) == 1  # the server was found down just now: asked once, not for as long again
    finally:
        postgres_server.pg_ctl("start")
    assert [e.message["text"] for e in store.sessions.messages("s")] == ["kept"]


GATED = """
---
description: Three turns of code; the third calls a skill that waits for a file.
metadata:
  model:
    agent: agent-scripted
    script:
      - text: "one"
        code: "memory['turn'] = 1\\nprint('first')"
      - text: "two"
        code: "memory['turn'] = 2\\nprint('second')"
      - text: "three"
        code: "print(await ctx.manager.invoke('gate', {}))"
      - text: "done"
---
Wait at the gate.
"""

GATE = """
import asyncio, os
frontmatter = {"description": "Wait until the file GATE exists.", "params": {"type": "object"}}
async def main(ctx, args):
    while not os.path.exists(os.environ["GATE"]):
        await asyncio.sleep(0.02)
    return "through"
"""


@pytest.mark.timeout(180)
def test_a_server_that_goes_away_mid_run_loses_nothing_committed_and_the_run_resumes(
    tmp_path, postgres_url, postgres_server
):
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "gated.skill.md").write_text(textwrap.dedent(GATED).lstrip())
    (skills / "gate.skill.py").write_text(textwrap.dedent(GATE).lstrip())
    gate = tmp_path / "open"
    env = {**os.environ, "AGENT_APPS_STATE": postgres_url, "AGENT_APPS_HOME": str(tmp_path / "home"), "GATE": str(gate)}
    cli = [PYTHON, "-m", "agent_apps", "invoke", "gated", "--path", str(skills), "--session", "k", "task=go"]
    proc = subprocess.Popen(cli, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watcher = StateStore(postgres_url)
    try:
        deadline = time.monotonic() + 120
        while len(watcher.sessions.messages("k")) < 5:  # two turns stored; the third waits at the gate
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        watcher.close()
        postgres_server.pg_ctl("stop", "-m", "fast")
        gate.touch()  # the third turn goes on, and its next write finds no server
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        if not (postgres_server.folder / "data" / "postmaster.pid").exists():
            postgres_server.pg_ctl("start")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1 and len(errors) == 1, err
    assert errors[0].startswith("error: state store postgresql://postgres:***@") and "cannot connect" in errors[0]
    assert PASSWORD not in err
    store = StateStore(postgres_url)
    texts = [e.message.get("text") for e in store.sessions.messages("k")]
    assert texts == ["go", "one", "first", "two", "second"]  # every committed turn is there
    (listed,) = store.runs.list(session="k")
    assert listed.status == "interrupted"
    resumed = subprocess.run(
        [PYTHON, "-m", "agent_apps", "resume", listed.id], env=env, cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "done"
    texts = [e.message.get("text") for e in store.sessions.messages("k")]
    assert texts[:5] == ["go", "one", "first", "two", "second"] and texts[-1] == "done"
    assert store.runs.get(listed.id).status == "done"
    assert store.sessions.get("k").memory["turn"] == 2


def test_a_pool_with_every_connection_in_use_says_so(monkeypatch, postgres_url):
    monkeypatch.setattr(_postgres, "CONNECT_TIMEOUT", 0.5)
    store = StateStore(postgres_url + "&pool_size=1")
    with store.db.read():  # the one connection, held
        with pytest.raises(StateError, match=r"no connection of its pool came free .* \(all 1 in use\): .*pool_size"):
            store.sessions.list()
    assert store.sessions.list() == []  # and the store goes on


def test_a_statement_that_fails_on_a_live_connection_is_not_called_a_lost_connection(postgres_url):
    store = StateStore(postgres_url)
    store.sessions.append("s", [{"role": "user", "text": "kept"}])
    with pytest.raises(StateError) as failed:
        with store.db.write() as conn:
            conn.execute("SET LOCAL statement_timeout = 20")
            conn.execute("SELECT pg_sleep(2)")  # cancelled by the server: an OperationalError, the connection lives
    assert "QueryCanceled" in str(failed.value) and "connection" not in str(failed.value)
    assert store.sessions.append("s", [{"role": "user", "text": "after"}]) == 2  # the store goes on


@pytest.mark.parametrize(("cpus", "size"), [(1, 2), (2, 2), (4, 4), (8, 8), (64, 8)])
def test_the_default_pool_has_a_connection_per_cpu_from_2_to_8(monkeypatch, cpus, size):
    monkeypatch.setattr(_postgres.machine, "usable_cpus", lambda: cpus)
    assert _postgres.PostgresDatabase("postgresql://u@h/db").workers == size
    assert _postgres.PostgresDatabase("postgresql://u@h/db?pool_size=5").workers == 5  # the URL says
