"""``agent-apps state copy FROM TO``: a whole store, SQLite to PostgreSQL and back, every
table row for row; a target that is not empty, the same store twice, a copy that fails."""

from __future__ import annotations

import sqlite3
import time

from agent_apps import ContextManager
from agent_apps.cli import main
from agent_apps.scheduling import When
from agent_apps.state import StateStore
from agent_apps.state.copy import TABLES
from agent_apps.testing.postgres import PASSWORD

from .conftest import sibling

MEMORY = "# Notes\n\n- The user's cat is called Miso.\n- The spare key is under the blue flowerpot.\n"


class Letters:
    """A stand-in embedding model: letter counts (the copy moves the vectors' bytes, whatever made them)."""

    name, dimensions = "letters", 26

    def embed(self, texts):
        import numpy as np

        counts = np.array([[t.lower().count(chr(97 + i)) for i in range(26)] for t in texts], dtype=np.float32)
        return counts / np.maximum(np.linalg.norm(counts, axis=1, keepdims=True), 1)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def fill(location: str, tmp_path) -> StateStore:
    """A store with something in every table: two agent runs in a session (one serves a tenant; runs, agents,
    journal, checkpoints, messages, memory), a compaction, a schedule that ran, a
    persisted subscription, an indexed memory file."""
    cm = ContextManager(cwd=tmp_path, home=tmp_path / "home", env=False, project=False, user=False, state=location)
    script = [{"text": "Counting.", "code": "memory['n'] = memory.get('n', 0) + 1\nprint(memory['n'])"}, {"text": "ok"}]
    call = {"prompt": "Count.", "user_message": "Count once.", "config": {"agent": "agent-scripted", "script": script}}
    for tenant in (None, "acme"):
        assert cm.invoke_sync("agent", call, session="s1", tenant=tenant) == "ok"
    store = cm.state
    store.sessions.compact("s1", through=2, summary="They counted once.")
    store.sessions.update_meta("s1", {"tag": "ünïcode ✓"})
    schedule = store.schedules.create(ref="nothing", args={"x": [1, 2.5]}, when=When(every=60), name="minutely")
    claimed = store.schedules.claim(schedule.next_at, limit=1, grace=60)
    store.schedules.finish_run(claimed.claims[0], status="error", error="it failed")
    store.subscriptions.add("deploy.*", "notify", created_by='{"agent": true}')
    (tmp_path / "MEMORY.md").write_text(MEMORY)
    assert store.memory.search([tmp_path / "MEMORY.md"], "cat", embedder=Letters())
    store.batch_runs.start(str(tmp_path / "results.jsonl"), 0, "c0ffee", "run-of-input-0")
    return store


def dump(store: StateStore) -> dict[str, list[tuple]]:
    """Every row of every table, in key order (the journal and agents: in written order)."""
    with store.db.read() as conn:
        return {table: conn.execute(f"SELECT {columns} FROM {table} ORDER BY {key}").fetchall()
                for table, columns, key in TABLES}  # fmt: skip


def test_a_store_copied_to_postgresql_and_back_is_the_same_row_for_row(tmp_path, capsys, postgres_url):
    source = fill(str(tmp_path / "source.db"), tmp_path)
    original = dump(source)
    assert all(original.values()), {table: len(rows) for table, rows in original.items()}
    code, out, err = run(capsys, "state", "copy", source.path, postgres_url)
    assert code == 0, err
    assert out.startswith(
        "copied 1 session, 8 messages, 3 runs, 2 agents, 12 journal entries, 2 checkpoints, 1 schedule, "
        "1 schedule run, 1 subscription, 1 indexed file, 2 memory chunks, 2 memory vectors, 1 batch input run from "
    )
    assert out.rstrip().endswith(f"from {source.path} to {postgres_url.replace(PASSWORD, '***')}")
    pg = StateStore(postgres_url)
    assert dump(pg) == original
    back = tmp_path / "back.db"
    assert run(capsys, "state", "copy", postgres_url, back)[0] == 0
    assert dump(StateStore(back)) == original

    # what was copied works there: history, runs, search, and new rows after the copied ones
    assert pg.sessions.history("s1").messages() == source.sessions.history("s1").messages()
    assert [r.tenant_id for r in pg.runs.list(tenant="acme")] == ["acme"]
    (run_id, *_) = [r.id for r in source.runs.list()]
    assert pg.journal.entries(run_id) == source.journal.entries(run_id)
    assert pg.memory.search([tmp_path / "MEMORY.md"], "where is the key")[0]["line"] == 4
    assert pg.memory.search([tmp_path / "MEMORY.md"], "spare key", embedder=Letters())[0]["line"] == 4
    (tmp_path / "OTHER.md").write_text("- apples\n")
    assert pg.memory.search([tmp_path / "OTHER.md"], "apples")  # a new file gets a new id
    assert pg.sessions.append("s1", [{"role": "user", "text": "more"}]) == 9


def test_a_store_that_is_not_empty_is_refused_unless_replaced(tmp_path, capsys, state_location):
    source = StateStore(tmp_path / "source.db")
    source.sessions.append("new", [{"role": "user", "text": "copied"}])
    target = StateStore(state_location)
    target.sessions.append("old", [{"role": "user", "text": "a"}, {"role": "user", "text": "b"}])
    code, out, err = run(capsys, "state", "copy", source.path, state_location)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert f"state store {target.path}: it is not empty (1 session, 2 messages): " in err and "--replace" in err
    assert [s.id for s in target.sessions.list()] == ["old"]  # nothing changed
    code, out, err = run(capsys, "state", "copy", source.path, state_location, "--replace")
    assert code == 0, err
    assert [s.id for s in target.sessions.list()] == ["new"] and dump(target) == dump(source)


def test_copying_a_store_onto_itself_is_refused(tmp_path, capsys, state_location):
    StateStore(state_location).sessions.append("s", [{"role": "user", "text": "kept"}])
    same = state_location if "://" in state_location else str(tmp_path / "." / "state.db")
    code, _, err = run(capsys, "state", "copy", state_location, same, "--replace")
    assert code == 2 and "it is the store being copied" in err
    assert StateStore(state_location).sessions.get("s").messages == 1


def test_a_copy_that_fails_leaves_the_target_as_it_was(tmp_path, capsys, postgres_url):
    source = tmp_path / "damaged.db"
    StateStore(source).sessions.append("s", [{"role": "user", "text": "hi"}])
    conn = sqlite3.connect(source)  # a message whose session is gone: PostgreSQL's foreign key refuses it
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("INSERT INTO messages VALUES ('gone', 1, NULL, ?, 'user', 1, '{}', NULL)", (time.time(),))
    conn.commit()
    conn.close()
    code, out, err = run(capsys, "state", "copy", source, postgres_url)
    assert code == 1 and out == "" and "ForeignKeyViolation" in err and PASSWORD not in err
    assert StateStore(postgres_url).sessions.list() == []  # all or nothing


def test_between_two_stores_of_one_backend(tmp_path, capsys, state_location):
    source = fill(state_location, tmp_path)
    target = sibling(state_location, "copy")
    assert run(capsys, "state", "copy", state_location, target)[0] == 0
    assert dump(StateStore(target)) == dump(source)


def test_every_column_of_every_table_is_copied(state_location):
    store = StateStore(state_location)
    with store.db.read() as conn:
        if store.db.dialect.name == "sqlite":  # less FTS5's own tables, which it keeps itself
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            names = [name for (name,) in rows if not name.startswith("memory_chunks_") and name != "sqlite_sequence"]
            schema = {name: {row[1] for row in conn.execute(f"PRAGMA table_info({name})")} for name in names}
            schema["memory_chunks"].add("rowid")
        else:
            rows = conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            ).fetchall()
            schema = {}
            for table, column in rows:
                schema.setdefault(table, set()).add(column)
            del schema["schema_version"]
            schema["memory_chunks"].discard("tsv")  # generated from the text
    del schema["session_queue"]  # tickets of the processes running now, not the store's content
    copied = {table: set(columns.split(", ")) for table, columns, _ in TABLES}
    for table in ("agents", "journal"):  # their order, not copied: the target numbers them again
        schema[table].discard("rowid")
    if store.db.dialect.name == "sqlite":  # PostgreSQL's change numbers are a sequence
        assert schema.pop("run_changes") == {"id", "n"}  # a counter, set from the runs copied
    assert schema == copied


def test_changes_in_the_copy_are_numbered_after_the_runs_it_got(tmp_path, capsys, state_location):
    source = fill(state_location, tmp_path)
    target = sibling(state_location, "numbered")
    assert run(capsys, "state", "copy", state_location, target)[0] == 0
    copied = StateStore(target)
    assert copied.runs.latest() == source.runs.latest() > 0
    (run_id,) = {r.id for r in copied.runs.list(limit=1)}
    copied.journal.begin(run_id, {"skill": "x"})
    copied.journal.pend(run_id, {"skill": "file-write", "args": {}})
    assert copied.runs.get(run_id).seq == copied.runs.latest() == source.runs.latest() + 1
