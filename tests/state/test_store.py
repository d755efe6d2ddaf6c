"""The state store's database: created on first use, migrations, refusals, processes.

Real SQLite files and a real PostgreSQL server (the tests that take ``state_location``
run on both), real processes: two writers at once, and a process killed mid-run.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from agent_apps import ContextManager
from agent_apps.state import MEMORY, StateError, StateStore, _postgres, _sqlite, is_postgres_url, state_path
from agent_apps.state.schema import APPLICATION_ID, MIGRATIONS, Migration

from .conftest import pg_connect, schema_version, set_schema_version, sibling

PYTHON = sys.executable


def test_created_on_first_use_with_a_schema_version_in_wal_mode(tmp_path):
    path = tmp_path / "deep" / "state.db"
    store = StateStore(path)
    assert not path.exists()  # constructing opens nothing
    assert store.sessions.list() == []
    assert path.exists()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"sessions", "messages", "runs", "agents"} <= tables


def test_a_manager_that_runs_no_agent_never_opens_the_store(tmp_path, write_skill, context_manager):
    write_skill("plain", "frontmatter = {}\nasync def main(ctx, args):\n    return 1\n")
    assert context_manager.invoke_sync("plain") == 1
    assert not (tmp_path / "agent-apps-home" / "state.db").exists()
    assert not context_manager.state.db.opened


def test_in_memory_store(tmp_path):
    cm = ContextManager(cwd=tmp_path, home=tmp_path, state=MEMORY, env=False, project=False, user=False)
    cm.state.sessions.append("s", [{"role": "user", "text": "hi"}])
    assert cm.state.sessions.get("s").messages == 1
    assert not (tmp_path / "state.db").exists()


def test_a_newer_migration_upgrades_an_older_store_in_place(state_location, monkeypatch):
    first = StateStore(state_location)
    first.sessions.append("s", [{"role": "user", "text": "kept"}])
    first.close()
    extra = Migration(
        sqlite="CREATE TABLE widgets (id TEXT PRIMARY KEY, every REAL);\nINSERT INTO widgets VALUES ('x', 60);\n",
        postgresql="CREATE TABLE widgets (id TEXT PRIMARY KEY, every DOUBLE PRECISION);\n"
        "INSERT INTO widgets VALUES ('x', 60);\n",
    )
    for backend in (_sqlite, _postgres):
        monkeypatch.setattr(backend, "MIGRATIONS", (*MIGRATIONS, extra))
    store = StateStore(state_location)
    assert [e.message["text"] for e in store.sessions.messages("s")] == ["kept"]
    assert schema_version(state_location) == len(MIGRATIONS) + 1
    with store.db.read() as conn:
        assert conn.execute("SELECT every FROM widgets").fetchone() == (60,)


def _raw(location: str, *statements: str) -> None:
    """Run SQL on a store behind its back, as another build of agent-apps would have."""
    if not is_postgres_url(location):
        conn = sqlite3.connect(location)
        for statement in statements:
            conn.execute(statement)
        conn.commit()
        conn.close()
        return
    with pg_connect(location) as conn:
        for statement in statements:
            conn.execute(statement)


def test_a_store_whose_tables_are_ahead_of_its_version_is_upgraded(state_location):
    # a development build numbered its migrations otherwise: the store has the tables of
    # migrations its version does not count (the CI machine's home store had memory_vectors
    # at version 8); upgrading must not fail on a table that is already there
    first = StateStore(state_location)
    first.sessions.append("s", [{"role": "user", "text": "kept"}])
    first.close()
    set_schema_version(state_location, len(MIGRATIONS) - 3)
    store = StateStore(state_location)
    assert [e.message["text"] for e in store.sessions.messages("s")] == ["kept"]
    assert schema_version(state_location) == len(MIGRATIONS)


def test_a_store_that_lacks_tables_and_columns_its_version_claims_is_made_good(state_location):
    first = StateStore(state_location)
    first.sessions.append("s", [{"role": "user", "text": "kept"}])
    first.close()
    # the home store of the CI machine: version 8 of another numbering, without the
    # session queue (6) nor the stop request columns (9)
    _raw(state_location, "DROP TABLE session_queue", "ALTER TABLE runs DROP COLUMN stop_reason")
    set_schema_version(state_location, len(MIGRATIONS) - 4)
    store = StateStore(state_location)
    assert [e.message["text"] for e in store.sessions.messages("s")] == ["kept"]
    assert schema_version(state_location) == len(MIGRATIONS)
    with store.db.read() as conn:
        assert conn.execute("SELECT count(*) FROM session_queue").fetchone() == (0,)
        assert conn.execute("SELECT count(stop_reason) FROM runs").fetchone() == (0,)
    store.close()
    # at the newest version too: what is missing is found when the store is opened
    _raw(state_location, "ALTER TABLE runs DROP COLUMN stop_reason")
    with StateStore(state_location).db.read() as conn:
        assert conn.execute("SELECT count(stop_reason) FROM runs").fetchone() == (0,)


def test_a_store_that_cannot_be_brought_up_to_date_is_refused_and_left_unchanged(state_location):
    first = StateStore(state_location)
    first.sessions.append("s", [{"role": "user", "text": "kept"}])
    first.close()
    # where migration 10 makes a table, another build made a view of that name
    _raw(state_location, "DROP TABLE memory_vectors", "CREATE VIEW memory_vectors AS SELECT 1 AS one")
    set_schema_version(state_location, 9)
    with pytest.raises(StateError) as info:
        StateStore(state_location).sessions.list()
    text = str(info.value)
    assert "do not match schema version 9" in text and "memory_vectors" in text and "nothing was changed" in text
    assert schema_version(state_location) == 9
    _raw(state_location, "DROP VIEW memory_vectors")
    store = StateStore(state_location)  # once the view is gone, the same store upgrades
    assert [e.message["text"] for e in store.sessions.messages("s")] == ["kept"]
    assert schema_version(state_location) == len(MIGRATIONS)


def test_a_store_of_a_newer_version_is_refused_and_left_alone(state_location):
    first = StateStore(state_location)
    first.sessions.append("s", [{"role": "user", "text": "hi"}])
    first.close()
    set_schema_version(state_location, len(MIGRATIONS) + 5)
    store = StateStore(state_location)
    with pytest.raises(StateError) as info:
        store.sessions.list()
    assert store.path in str(info.value) and "newer agent-apps" in str(info.value)
    assert "agent-apps-test" not in str(info.value)  # a URL's password is never shown
    set_schema_version(state_location, len(MIGRATIONS))
    assert StateStore(state_location).sessions.get("s").messages == 1  # nothing reset


def test_a_corrupt_file_is_refused_naming_it_and_left_unchanged(tmp_path):
    path = tmp_path / "state.db"
    garbage = b"this is not a database, it was overwritten by something else\n" * 200
    path.write_bytes(garbage)
    with pytest.raises(StateError) as info:
        StateStore(path).sessions.list()
    assert str(path) in str(info.value) and "damaged or not a database" in str(info.value)
    assert path.read_bytes() == garbage


def test_another_programs_sqlite_database_is_refused(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StateError, match="another program"):
        StateStore(path).sessions.list()
    assert sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall() == [("invoices",)]


def test_where_the_store_lives(tmp_path, monkeypatch):
    home = tmp_path / "home"
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    cm = ContextManager(cwd=project / "sub", home=home, env=False, user=False)
    assert cm.state.path == str(home / "state.db")
    (project / "agent-apps.yaml").write_text("state:\n  path: .agent-apps/state.db\n")
    cm = ContextManager(cwd=project / "sub", home=home, env=False, user=False)
    assert cm.state.path == str(project / ".agent-apps" / "state.db")  # relative to the config file
    monkeypatch.setenv("AGENT_APPS_STATE", str(tmp_path / "env.db"))
    assert state_path(cm.cascade, home) == str(tmp_path / "env.db")
    cm = ContextManager(cwd=project, home=home, state=tmp_path / "explicit.db")
    assert cm.state.path == str(tmp_path / "explicit.db")


async def _loop_turns(ticks: int) -> None:
    """Until the event loop has woken a 10 ms timer ``ticks`` times: it was not blocked."""
    for _ in range(ticks):
        await asyncio.sleep(0.01)


def test_a_busy_database_stalls_the_store_thread_not_the_event_loop(tmp_path):
    path = tmp_path / "state.db"
    store = StateStore(path)
    store.sessions.list()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock

    async def main():
        write = asyncio.create_task(store.call(store.sessions.append, "s", [{"role": "user", "text": "x"}]))
        await _loop_turns(5)
        assert not write.done()  # still waiting for the lock, while the loop runs on
        blocker.execute("COMMIT")
        return await asyncio.wait_for(write, 30)

    assert asyncio.run(main()) == 1


def _texts(store):
    return [entry.message["text"] for entry in store.sessions.messages("s")]


def _thread_of(store, fn):
    """``fn`` wrapped to record the thread each call runs on."""
    threads = []

    def run(*args):
        threads.append(threading.get_ident())
        return fn(*args)

    return run, threads


def test_a_short_write_runs_on_the_event_loop_when_the_store_is_free(tmp_path):
    store = StateStore(tmp_path / "state.db")
    store.sessions.list()  # open it
    append, threads = _thread_of(store, store.sessions.append)

    async def main():
        return await store.db.write_short(append, "s", [{"role": "user", "text": "x"}]), threading.get_ident()

    count, loop_thread = asyncio.run(main())
    assert count == 1 and threads == [loop_thread]
    assert _texts(store) == ["x"]


def test_a_short_write_that_fails_on_the_event_loop_writes_nothing_and_the_store_goes_on(tmp_path):
    store = StateStore(tmp_path / "state.db")
    store.sessions.list()

    def half(*_):
        store.sessions.append("s", [{"role": "user", "text": "lost"}])
        raise ValueError("half-way")

    async def main():
        with pytest.raises(ValueError, match="half-way"):
            await store.db.write_short(half)
        return await store.db.write_short(store.sessions.append, "s", [{"role": "user", "text": "kept"}])

    assert asyncio.run(main()) == 1
    assert _texts(store) == ["kept"]


def test_a_short_write_waits_for_another_process_on_the_store_thread_not_the_event_loop(tmp_path):
    path = tmp_path / "state.db"
    store = StateStore(path)
    store.sessions.list()
    append, threads = _thread_of(store, store.sessions.append)
    blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    held = threading.Lock()

    def let_go():
        with held:
            if blocker.in_transaction:
                blocker.execute("COMMIT")

    # had the write blocked the loop in SQLite's busy wait, this would end the wait and
    # the write would run on the loop's thread
    safety = threading.Timer(1.0, let_go)
    safety.start()

    async def main():
        write = asyncio.create_task(store.db.write_short(append, "s", [{"role": "user", "text": "x"}]))
        await _loop_turns(5)
        assert not write.done()  # waiting for the lock on the store's thread, while the loop runs on
        let_go()
        count = await asyncio.wait_for(write, 30)
        return count, threading.get_ident()

    count, loop_thread = asyncio.run(main())
    safety.cancel()
    assert count == 1 and len(threads) == 1 and threads[0] != loop_thread
    store.sessions.append("s", [{"role": "user", "text": "y"}])
    assert _texts(store) == ["x", "y"]
    assert store.db._conn.execute("PRAGMA busy_timeout").fetchone()[0] == _sqlite.BUSY_TIMEOUT * 1000


def test_a_short_write_goes_after_store_work_queued_before_it(tmp_path):
    store = StateStore(tmp_path / "state.db")
    store.sessions.list()
    release, order = threading.Event(), []
    append, threads = _thread_of(store, store.sessions.append)

    def slow():
        release.wait(30)
        order.append("queued first")

    def short(*args):
        order.append("short")
        return append(*args)

    async def main():
        first = asyncio.ensure_future(store.call(slow))
        await asyncio.sleep(0)
        write = asyncio.ensure_future(store.db.write_short(short, "s", [{"role": "user", "text": "x"}]))
        await asyncio.sleep(0.05)
        assert not write.done()
        release.set()
        await first
        return await write, threading.get_ident()

    count, loop_thread = asyncio.run(main())
    assert count == 1 and order == ["queued first", "short"] and threads[0] != loop_thread
    assert store.db._queued == 0


def test_work_the_store_thread_refused_does_not_count_as_queued(tmp_path):
    # an executor shut down under a caller (a close racing it): the next short write still runs at once
    store = StateStore(tmp_path / "state.db")
    store.sessions.list()
    append, threads = _thread_of(store, store.sessions.append)

    async def main():
        await store.call(lambda: None)
        store.db._executor.shutdown()
        with pytest.raises(RuntimeError):
            await store.call(lambda: None)
        return await store.db.write_short(append, "s", [{"role": "user", "text": "x"}]), threading.get_ident()

    count, loop_thread = asyncio.run(main())
    assert count == 1 and threads == [loop_thread]


def test_short_writes_on_the_event_loop_never_checkpoint_the_wal_there(tmp_path, monkeypatch):
    # SQLite would checkpoint at every commit (1 page): the WAL would never grow
    path = tmp_path / "state.db"
    store = StateStore(path)
    store.sessions.list()
    store.db._conn.execute("PRAGMA wal_autocheckpoint = 1")
    monkeypatch.setattr(_sqlite, "WAL_AUTOCHECKPOINT", 1)
    monkeypatch.setattr(_sqlite, "WAL_CHECKPOINT_EVERY", 1 << 40)
    text = "x" * 20_000

    async def main():
        for _ in range(20):
            await store.db.write_short(store.sessions.append, "s", [{"role": "user", "text": text}])

    asyncio.run(main())
    assert os.path.getsize(f"{path}-wal") > 20 * 20_000
    assert store.db._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1  # the thread's, kept


def test_short_writes_have_the_store_thread_checkpoint_the_wal_now_and_then(tmp_path, monkeypatch):
    path = tmp_path / "state.db"
    store = StateStore(path)
    store.sessions.list()
    checkpoints = []
    conn = store.db._conn

    class Traced:  # the connection, recording the threads that checkpoint
        def __getattr__(self, name):
            return getattr(conn, name)

        def execute(self, sql, *args):
            if "wal_checkpoint" in sql:
                checkpoints.append(threading.get_ident())
            return conn.execute(sql, *args)

    monkeypatch.setattr(store.db, "_conn", Traced())
    monkeypatch.setattr(_sqlite, "WAL_CHECKPOINT_EVERY", 10)
    text = "x" * 20_000

    async def main():
        for _ in range(100):  # 2 MB
            await store.db.write_short(store.sessions.append, "s", [{"role": "user", "text": text}])
            await asyncio.sleep(0)
        await store.call(lambda: None)  # the last checkpoint queued is done
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    # one per 10 writes on the loop (while one is queued, writes go to the store's thread)
    assert 3 <= len(checkpoints) <= 10 and loop_thread not in checkpoints
    assert os.path.getsize(f"{path}-wal") < 1024 * 1024  # reset after each: never all 2 MB


def test_a_short_write_on_postgresql_goes_to_the_store_thread(state_location):
    if not is_postgres_url(state_location):
        pytest.skip("PostgreSQL only: SQLite's is above")
    store = StateStore(state_location)
    store.sessions.list()
    append, threads = _thread_of(store, store.sessions.append)

    async def main():
        return await store.db.write_short(append, "s", [{"role": "user", "text": "x"}]), threading.get_ident()

    count, loop_thread = asyncio.run(main())
    assert count == 1 and threads[0] != loop_thread
    store.close()


# -- processes ---------------------------------------------------------------------------------


WRITER = """
import sys
from agent_apps.state import StateStore
store = StateStore(sys.argv[1])
name, count = sys.argv[2], int(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()
for i in range(count):
    store.sessions.append("shared", [{"role": "user", "text": f"{name}-{i}"}], run_id=name)
"""


def test_two_processes_appending_to_one_session_lose_nothing(state_location):
    path = state_location
    StateStore(path).sessions.list()  # created up front: both writers race on appends only
    count = 150
    procs = [
        subprocess.Popen(
            [PYTHON, "-c", WRITER, str(path), name, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready"
        for proc in procs:  # start both at once
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            assert proc.wait(timeout=120) == 0
    finally:
        for proc in procs:
            proc.kill()
    entries = StateStore(path).sessions.messages("shared")
    assert [e.seq for e in entries] == list(range(1, 2 * count + 1))
    for name in ("a", "b"):
        mine = [e.message["text"] for e in entries if e.message["text"].startswith(name + "-")]
        assert mine == [f"{name}-{i}" for i in range(count)]  # all there, in each writer's order
    assert StateStore(path).sessions.get("shared").messages == 2 * count


SKILL = """
---
description: Talks for three turns; the third never comes.
metadata:
  model:
    agent: agent-scripted
    script:
      - text: "one"
        code: "memory['turn'] = 1\\nprint('first')"
      - text: "two"
        code: "memory['turn'] = 2\\nprint('second')"
      - text: "three"
        delay: 600
---
Be slow.
"""


def test_kill_9_mid_run_loses_at_most_the_turn_in_flight(tmp_path, state_location):
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "slow.skill.md").write_text(textwrap.dedent(SKILL).lstrip())
    path = state_location
    env = {**os.environ, "AGENT_APPS_STATE": path, "AGENT_APPS_HOME": str(tmp_path / "home")}
    cli = [PYTHON, "-m", "agent_apps", "invoke", "slow", "--path", str(skills), "--session", "k", "task=go"]
    proc = subprocess.Popen(cli, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watcher = StateStore(path)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until the second turn is stored
            try:
                found = len(watcher.sessions.messages("k"))
            except StateError:  # not created yet (SQLite: the file is being made)
                found = 0
            if found >= 5:
                break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("the run never stored its second turn")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        watcher.close()
    if not path.startswith("postgresql:"):
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.close()
    store = StateStore(path)
    texts = [(e.message["role"], e.message.get("text")) for e in store.sessions.messages("k")]
    assert texts == [
        ("user", "go"),
        ("assistant", "one"),
        ("tool", "first"),
        ("assistant", "two"),
        ("tool", "second"),
    ]
    assert store.sessions.get("k").memory["turn"] == 2
    (run,) = store.runs.list(session="k")
    assert run.status == "interrupted"  # its process is gone: it will never finish
    (agent,) = store.runs.agents(run.id)
    assert agent.status == "interrupted"
    assert [step["turn"] for step in agent.report["steps"]] == [1, 2]
    # the store stays usable: a new run continues the session
    store.sessions.append("k", [{"role": "user", "text": "after"}])
    assert json.loads(json.dumps(store.sessions.export("k")))["messages"][-1]["text"] == "after"


def _open_and_list(path: str, barrier, results) -> None:
    from agent_apps.state import StateStore

    barrier.wait(timeout=30)
    try:
        StateStore(path).sessions.list()
        results.put("ok")
    except Exception as exc:
        results.put(f"{type(exc).__name__}: {exc}")


def test_processes_opening_a_new_store_at_once_all_get_it(state_location):
    """The first open creates the store (SQLite: the file, in WAL mode; PostgreSQL: the
    schema) and migrates it; several processes doing that at once (a batch's workers on
    a shared store) all succeed."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for round_ in range(4):
        path = sibling(state_location, f"new{round_}")
        barrier, results = context.Barrier(6), context.Queue()
        procs = [context.Process(target=_open_and_list, args=(path, barrier, results)) for _ in range(6)]
        for proc in procs:
            proc.start()
        outcomes = [results.get(timeout=60) for _ in procs]
        for proc in procs:
            proc.join(timeout=60)
        assert outcomes == ["ok"] * 6, outcomes


def _append_in_child(store, results) -> None:
    try:
        store.sessions.append("s", [{"role": "user", "text": "child"}])
        asyncio.run(store.call(store.sessions.append, "s", [{"role": "user", "text": "child, through a thread"}]))
        results.put("ok")
    except Exception as exc:
        results.put(f"{type(exc).__name__}: {exc}")


def test_a_forked_process_uses_connections_of_its_own_and_the_parent_keeps_its(state_location):
    import multiprocessing

    store = StateStore(state_location)
    store.sessions.append("s", [{"role": "user", "text": "parent"}])
    asyncio.run(store.call(store.sessions.exists, "s"))  # the store's threads started too
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_append_in_child, args=(store, results))
    child.start()
    assert results.get(timeout=60) == "ok"
    child.join(timeout=60)
    store.sessions.append("s", [{"role": "user", "text": "parent again"}])
    texts = [e.message["text"] for e in StateStore(state_location).sessions.messages("s")]
    assert texts == ["parent", "child", "child, through a thread", "parent again"]


def test_postgresql_without_its_extra_is_one_line_naming_it(monkeypatch, capsys):
    from agent_apps.cli import main

    monkeypatch.setattr(_postgres, "psycopg", None)  # as in an install without agent-apps[postgres]
    monkeypatch.setenv("AGENT_APPS_STATE", "postgresql://me:secret@db.example/agents")
    assert main(["sessions", "list"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "error: state store postgresql://me:***@db.example/agents: a postgresql:// store needs psycopg, which is "
        "not installed: pip install 'agent-apps[postgres]'\n"
    )


def test_an_sqlite_store_never_imports_psycopg(tmp_path):
    code = (
        "import sys\nfrom agent_apps.cli import main\n"
        "main(['sessions', 'list'])\nprint('psycopg' in sys.modules, 'agent_apps.state._postgres' in sys.modules)"
    )
    env = {**os.environ, "AGENT_APPS_STATE": str(tmp_path / "state.db")}
    done = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False False"


def test_writes_inside_a_write_join_it_and_commit_or_roll_back_with_it(state_location):
    """``Database.together``: the writes of several concept methods are one transaction
    (an agent's turn): a reader elsewhere sees all of them or none, and a failure in the
    last one takes the first ones back too."""
    store, watcher = StateStore(state_location), StateStore(state_location)
    try:
        store.sessions.begin("s")

        def turn(fail: bool) -> None:
            store.sessions.append("s", [{"role": "user", "text": "hi"}])
            with store.db.read() as conn:  # a read inside sees what the write wrote so far
                assert conn.execute("SELECT count(*) FROM messages WHERE session_id = 's'").fetchone()[0] == 1
            assert watcher.sessions.messages("s") == []  # elsewhere: nothing until the commit
            if fail:
                raise RuntimeError("the turn's last write failed")
            store.sessions.append("s", [{"role": "assistant", "text": "hello"}])

        with pytest.raises(RuntimeError, match="last write failed"):
            store.db.together(turn, True)
        assert watcher.sessions.messages("s") == []  # the first append went back with it
        store.db.together(turn, False)
        assert [e.message["text"] for e in watcher.sessions.messages("s")] == ["hi", "hello"]
    finally:
        store.close()
        watcher.close()


def test_a_write_is_one_transaction_whatever_it_reads_or_wherever_it_fails(state_location):
    """A write's row count read before its end (a create-if-absent) does not end it: a
    failure after that takes back the statements before it, and so does a statement the
    server refuses. Nothing of either write is seen, and the store goes on working."""
    store, watcher = StateStore(state_location), StateStore(state_location)
    try:
        store.sessions.begin("s")
        with pytest.raises(RuntimeError, match="after the count"):
            with store.db.write() as conn:
                assert conn.execute("UPDATE sessions SET summary = 'x' WHERE id = 's'").rowcount == 1
                conn.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('t', 0, 0)")
                raise RuntimeError("failed after the count")
        with pytest.raises(StateError):
            with store.db.write() as conn:
                conn.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('u', 0, 0)")
                conn.execute("INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', 0, 0)")  # there already
        assert [info.id for info in watcher.sessions.list()] == ["s"]
        assert watcher.sessions.get("s").summary is None
        store.sessions.append("s", [{"role": "user", "text": "still working"}])
        assert [e.message["text"] for e in watcher.sessions.messages("s")] == ["still working"]
    finally:
        store.close()
        watcher.close()


def test_many_rows_are_written_together_in_order_and_a_row_already_there_stays(state_location):
    """A journal batch (``insert_rows``: one multi-row INSERT per ROWS_PER_INSERT rows)
    of more rows than one INSERT takes stores every row, in order, on both backends; an
    entry already under a key keeps its body."""
    from agent_apps.run_record import RunRecord
    from agent_apps.state._db import ROWS_PER_INSERT

    store = StateStore(state_location)
    try:
        record = RunRecord("run1").child()
        store.runs.start_agent(record, name="worker")
        store.journal.add("run1", "a1", "k.0", "host", {"first": True})
        count = 2 * ROWS_PER_INSERT + 3
        rows = [("a1", f"k.{n}", "host", json.dumps({"n": n, "text": "x\x00y"}), float(n)) for n in range(count)]
        store.journal.add_rows("run1", rows)
        entries = store.journal.entries("run1")
        assert [e.key for e in entries] == [f"k.{n}" for n in range(count)]
        assert entries[0].body == {"first": True}
        assert [e.body["n"] for e in entries[1:]] == list(range(1, count))
    finally:
        store.close()
