"""The state store's schema: an append-only list of migrations, each in the SQL of both
backends.

A store records how many of :data:`MIGRATIONS` it has had (SQLite: ``PRAGMA
user_version``; PostgreSQL: the table ``schema_version`` of the store's schema). A new
feature appends migration N+1 (never edits an earlier one), written for both backends:
stores of every earlier release then upgrade on open, in one transaction, and a store
from a newer release is refused with a clear error instead of being misread. The
upgrade checks the store's catalog as well as its version (:mod:`.upgrade`), so a
migration's statements must name what they make plainly (``CREATE TABLE name``,
``CREATE INDEX name ON table``, ``ALTER TABLE t ADD COLUMN c``, ``CREATE SEQUENCE name``)
and its writes must be safe to run again (migration 8's ``ON CONFLICT DO NOTHING``).

The two forms of a migration make the same tables with the same columns, so the
concept modules' SQL runs on either. Where the types differ, PostgreSQL gets the exact
ones SQLite's dynamic typing stands for: ``DOUBLE PRECISION`` for times (its ``REAL`` is
4 bytes), ``BIGINT`` for counts and nanoseconds, text compared byte by byte (``COLLATE
"C"``, as SQLite does: run-id prefixes and listing order do not depend on the server's
locale). SQLite's implicit ``rowid``, by which the journal and a run's agents keep the
order they were written in, is a column of that name on PostgreSQL; the memory index is
an FTS5 table on SQLite and a table with a generated ``tsvector`` on PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["APPLICATION_ID", "MIGRATIONS", "Migration"]

#: ``PRAGMA application_id`` of an agent-apps state store ("aaps"): another program's
#: SQLite file is refused instead of being written into.
APPLICATION_ID = 0x61617073

_V1 = """
-- A session: a long-lived conversation. Its messages live in `messages`; the window a
-- model sees starts after `summary_through` (older messages stay stored, summarized by
-- `summary`). `anchor_*` is the last input-token count a provider reported for it.
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    seq INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    memory TEXT,
    summary TEXT,
    summary_through INTEGER NOT NULL DEFAULT 0,
    anchor_tokens INTEGER,
    anchor_seq INTEGER,
    meta TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX sessions_updated ON sessions (updated_at);

-- One message of a session, in the neutral format (JSON), numbered 1, 2, ... per session;
-- `stale`: how a long tool result is shown once it is old (made once, when stored).
CREATE TABLE messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    run_id TEXT,
    created_at REAL NOT NULL,
    role TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    body TEXT NOT NULL,
    stale TEXT,
    PRIMARY KEY (session_id, seq)
);

-- A run: one invocation tree. Its status follows its outermost agents.
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    session_id TEXT,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    pid INTEGER,
    host TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_started ON runs (started_at);

-- Each agent run inside a run (the tree: parent_id, depth), its report and its trace.
CREATE TABLE agents (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    parent_id TEXT,
    depth INTEGER NOT NULL,
    name TEXT NOT NULL,
    session_id TEXT,
    status TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    report TEXT,
    trace TEXT,
    PRIMARY KEY (run_id, id)
);
CREATE INDEX agents_session ON agents (session_id, started_at) WHERE session_id IS NOT NULL;
"""
_V1 += f"PRAGMA application_id = {APPLICATION_ID};\n"

_V2 = """
-- A schedule: run the skill `ref` with `args` (JSON) at the due times of exactly one of
-- `every` (seconds), `cron` (5 fields, in `tz` or the scheduler's local time) or `at`
-- (one time). `next_at` is the next due time not yet claimed (NULL: none is left).
CREATE TABLE schedules (
    id TEXT PRIMARY KEY,
    name TEXT UNIQUE,
    ref TEXT NOT NULL,
    args TEXT NOT NULL,
    every REAL,
    cron TEXT,
    tz TEXT,
    at REAL,
    catch_up TEXT NOT NULL,
    created_at REAL NOT NULL,
    created_by TEXT,
    next_at REAL,
    missed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX schedules_next ON schedules (next_at) WHERE next_at IS NOT NULL;

-- One claimed due time of a schedule and the run made for it. The key makes a due time
-- impossible to run twice, whichever scheduler claimed it.
CREATE TABLE schedule_runs (
    schedule_id TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    due_at REAL NOT NULL,
    run_id TEXT NOT NULL,
    status TEXT NOT NULL,
    claimed_at REAL NOT NULL,
    ended_at REAL,
    pid INTEGER,
    host TEXT,
    error TEXT,
    PRIMARY KEY (schedule_id, due_at)
);

-- An event subscription that outlives its ContextManager (event-subscribe, persist: true).
CREATE TABLE subscriptions (
    id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    ref TEXT NOT NULL,
    created_at REAL NOT NULL,
    created_by TEXT
);
"""

_V3 = """
-- Durable runs (docs/durability.md). The journal: what an agent run's model said and
-- what its code's host calls returned, so a resumed run replays them instead of asking
-- or doing again. `agent` is the agent's path in the run tree (a1, a1/3.2/a1, ...: it
-- does not depend on the random agent ids of one process); `key` names the entry within
-- it: start, m.TURN (a model response), c.STEP (a code run's clock and seed),
-- h.STEP.N (the Nth host call of that code run), t.TURN (the turn's messages, stored).
-- The rowid keeps the order in which things happened.
CREATE TABLE journal (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    agent TEXT NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (run_id, agent, key)
);

-- A run that can be resumed: how to invoke it again (skill, args, config, session,
-- search path), the call waiting for approval and the decision taken on it.
CREATE TABLE checkpoints (
    run_id TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    invocation TEXT NOT NULL,
    pending TEXT,
    decision TEXT,
    attempts INTEGER NOT NULL DEFAULT 1,
    updated_at REAL NOT NULL
);
"""

_V4 = """
-- Workspace files indexed for memory retrieval (MEMORY.md, AGENTS.md; docs/context.md), one
-- row per file with what it was when indexed: a file whose size or mtime differ is read
-- again, and re-indexed when its digest changed.
CREATE TABLE memory_files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    digest TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    indexed_at REAL NOT NULL
);

-- Their chunks, full-text indexed and ranked by BM25. The rowid is the file's id times
-- 2^32 plus the chunk's number, so one file's chunks are one rowid range.
CREATE VIRTUAL TABLE memory_chunks USING fts5 (text, heading, line UNINDEXED, tokenize = 'porter unicode61');
"""

_T = 'TEXT COLLATE "C"'
_PG_V1 = f"""
CREATE TABLE sessions (
    id {_T} PRIMARY KEY,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    seq BIGINT NOT NULL DEFAULT 0,
    tokens BIGINT NOT NULL DEFAULT 0,
    memory {_T},
    summary {_T},
    summary_through BIGINT NOT NULL DEFAULT 0,
    anchor_tokens BIGINT,
    anchor_seq BIGINT,
    meta {_T} NOT NULL DEFAULT '{{}}'
);
CREATE INDEX sessions_updated ON sessions (updated_at);

CREATE TABLE messages (
    session_id {_T} NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    run_id {_T},
    created_at DOUBLE PRECISION NOT NULL,
    role {_T} NOT NULL,
    tokens BIGINT NOT NULL,
    body {_T} NOT NULL,
    stale {_T},
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE runs (
    id {_T} PRIMARY KEY,
    session_id {_T},
    name {_T} NOT NULL,
    status {_T} NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    pid BIGINT,
    host {_T},
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX runs_started ON runs (started_at);

CREATE TABLE agents (
    run_id {_T} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id {_T} NOT NULL,
    parent_id {_T},
    depth BIGINT NOT NULL,
    name {_T} NOT NULL,
    session_id {_T},
    status {_T} NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    report {_T},
    trace {_T},
    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (run_id, id)
);
CREATE INDEX agents_session ON agents (session_id, started_at) WHERE session_id IS NOT NULL;
"""

_PG_V2 = f"""
CREATE TABLE schedules (
    id {_T} PRIMARY KEY,
    name {_T} UNIQUE,
    ref {_T} NOT NULL,
    args {_T} NOT NULL,
    every DOUBLE PRECISION,
    cron {_T},
    tz {_T},
    at DOUBLE PRECISION,
    catch_up {_T} NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    created_by {_T},
    next_at DOUBLE PRECISION,
    missed BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX schedules_next ON schedules (next_at) WHERE next_at IS NOT NULL;

CREATE TABLE schedule_runs (
    schedule_id {_T} NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    due_at DOUBLE PRECISION NOT NULL,
    run_id {_T} NOT NULL,
    status {_T} NOT NULL,
    claimed_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    pid BIGINT,
    host {_T},
    error {_T},
    PRIMARY KEY (schedule_id, due_at)
);

CREATE TABLE subscriptions (
    id {_T} PRIMARY KEY,
    topic {_T} NOT NULL,
    ref {_T} NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    created_by {_T}
);
"""

_PG_V3 = f"""
CREATE TABLE journal (
    run_id {_T} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    agent {_T} NOT NULL,
    key {_T} NOT NULL,
    kind {_T} NOT NULL,
    body {_T} NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    rowid BIGINT GENERATED ALWAYS AS IDENTITY,
    UNIQUE (run_id, agent, key)
);

CREATE TABLE checkpoints (
    run_id {_T} PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    invocation {_T} NOT NULL,
    pending {_T},
    decision {_T},
    attempts BIGINT NOT NULL DEFAULT 1,
    updated_at DOUBLE PRECISION NOT NULL
);
"""

_PG_V4 = f"""
CREATE TABLE memory_files (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    path {_T} NOT NULL UNIQUE,
    size BIGINT NOT NULL,
    mtime_ns BIGINT NOT NULL,
    digest {_T} NOT NULL,
    chunks BIGINT NOT NULL,
    indexed_at DOUBLE PRECISION NOT NULL
);

-- The text weighs most (A), the heading above it less (B), as BM25's weights on SQLite.
CREATE TABLE memory_chunks (
    rowid BIGINT PRIMARY KEY,
    text {_T} NOT NULL,
    heading {_T} NOT NULL,
    line BIGINT NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', text), 'A') || setweight(to_tsvector('english', heading), 'B')
    ) STORED
);
CREATE INDEX memory_chunks_tsv ON memory_chunks USING gin (tsv);
"""


_V5 = """
-- The authority of whoever made a schedule or a persisted subscription (JSON: the
-- allowed-tools of the invocation that made it, whether that was agent code, who it was;
-- NULL: made from Python or the command line). Its runs run under it (docs/security.md).
ALTER TABLE schedules ADD COLUMN authority TEXT;
ALTER TABLE subscriptions ADD COLUMN authority TEXT;
-- Rows made by a skill before this version did not record the maker's allowed-tools:
-- they may call their own ref and nothing else, as agent code if agent code made them.
UPDATE schedules SET authority = json_object('allowed_tools', ref, 'untrusted',
    json(CASE WHEN created_by LIKE 'agent code of %' THEN 'true' ELSE 'false' END), 'by', created_by)
    WHERE created_by IS NOT NULL;
UPDATE subscriptions SET authority = json_object('allowed_tools', ref, 'untrusted',
    json(CASE WHEN created_by LIKE 'agent code of %' THEN 'true' ELSE 'false' END), 'by', created_by)
    WHERE created_by IS NOT NULL;
"""

_PG_V5 = """
ALTER TABLE schedules ADD COLUMN authority TEXT COLLATE "C";
ALTER TABLE subscriptions ADD COLUMN authority TEXT COLLATE "C";
UPDATE schedules SET authority = json_build_object('allowed_tools', ref, 'untrusted',
    created_by LIKE 'agent code of %', 'by', created_by)::text
    WHERE created_by IS NOT NULL;
UPDATE subscriptions SET authority = json_build_object('allowed_tools', ref, 'untrusted',
    created_by LIKE 'agent code of %', 'by', created_by)::text
    WHERE created_by IS NOT NULL;
"""

_V6 = """
-- The runs of a session, one at a time (agent_apps/state/session_queue.py): a ticket per
-- run that waits for or holds its session, in arrival order. `host`, `namespace`, `pid`
-- and `started` name the process, so a ticket of a process that died is known dead on
-- its machine; elsewhere it is dead once `alive_at` is older than the lease.
CREATE TABLE session_queue (
    ticket INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    host TEXT NOT NULL,
    namespace TEXT,
    pid INTEGER NOT NULL,
    started TEXT,
    alive_at REAL NOT NULL
);
CREATE INDEX session_queue_session ON session_queue (session_id, ticket);
"""

_V7 = """
-- The run each input of `agent-apps batch` started, by results file (absolute path) and
-- input index, recorded before the run starts: `--resume` takes an interrupted one up
-- from its journal instead of running the input again (agent_apps/state/batch_runs.py).
CREATE TABLE batch_runs (
    output TEXT NOT NULL,
    idx INTEGER NOT NULL,
    input_hash TEXT,
    run_id TEXT NOT NULL,
    started_at REAL NOT NULL,
    PRIMARY KEY (output, idx)
);
"""

_PG_V6 = """
CREATE TABLE session_queue (
    ticket BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL,
    run_id TEXT COLLATE "C" NOT NULL,
    host TEXT COLLATE "C" NOT NULL,
    namespace TEXT COLLATE "C",
    pid BIGINT NOT NULL,
    started TEXT COLLATE "C",
    alive_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX session_queue_session ON session_queue (session_id, ticket);
"""

_PG_V7 = """
CREATE TABLE batch_runs (
    output TEXT COLLATE "C" NOT NULL,
    idx BIGINT NOT NULL,
    input_hash TEXT COLLATE "C",
    run_id TEXT COLLATE "C" NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (output, idx)
);
"""

_V8 = """
-- What watchers (the console, docs/console.md) read. Every change to a run or to one of
-- its agents gives the run, and that agent, the next number of the one row of
-- `run_changes` (taken by an update, so numbers follow the order changes commit): a
-- watcher asks for what changed after the number it saw. `agents.live` is the turn an
-- agent has in flight (JSON, as a report's step); the token and cost columns hold each
-- agent's totals so far, and the run's the sum of its agents'.
ALTER TABLE runs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
CREATE INDEX runs_seq ON runs (seq);
ALTER TABLE agents ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN live TEXT;
ALTER TABLE agents ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
CREATE TABLE run_changes (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);
INSERT INTO run_changes (id, n) VALUES (1, 0) ON CONFLICT DO NOTHING;
"""

_PG_V8 = f"""
ALTER TABLE runs ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0;
CREATE INDEX runs_seq ON runs (seq);
ALTER TABLE agents ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN live {_T};
ALTER TABLE agents ADD COLUMN input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN output_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0;
CREATE TABLE run_changes (id INTEGER PRIMARY KEY CHECK (id = 1), n BIGINT NOT NULL);
INSERT INTO run_changes (id, n) VALUES (1, 0) ON CONFLICT DO NOTHING;
"""

_V9 = """
-- A graceful stop asked of a run from another process (agent-apps runs stop, cm.stop):
-- when (NULL: none is pending) and why. The process that runs the run polls for it and
-- stops the run; it clears `stop_requested` when the run ends. `stop_reason` stays.
ALTER TABLE runs ADD COLUMN stop_requested REAL;
ALTER TABLE runs ADD COLUMN stop_reason TEXT;
"""

_PG_V9 = """
ALTER TABLE runs ADD COLUMN stop_requested DOUBLE PRECISION;
ALTER TABLE runs ADD COLUMN stop_reason TEXT COLLATE "C";
"""

_V10 = """
-- The embeddings of memory chunks, for semantic retrieval (docs/context.md): one per chunk
-- (its rowid in memory_chunks), the model that made it, the SHA-256 of the text embedded
-- (a chunk whose text is unchanged keeps its vector when its file is indexed again), and
-- the vector: float32, little-endian. Ranked by cosine in the process (no extension).
CREATE TABLE memory_vectors (
    rowid INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    digest TEXT NOT NULL,
    vector BLOB NOT NULL
);
"""

_PG_V10 = f"""
CREATE TABLE memory_vectors (
    rowid BIGINT PRIMARY KEY,
    model {_T} NOT NULL,
    digest {_T} NOT NULL,
    vector BYTEA NOT NULL
);
"""

# Migration 11: the change feed of runs on PostgreSQL takes its numbers from a
# sequence, which locks nothing, instead of the one row of `run_changes`, whose lock every
# write to a run held until it committed (so the writes of all runs, their commits'
# waits for the disk included, went one at a time). A watcher then reads only numbers
# whose transactions have all ended (`Runs.latest`). SQLite keeps the row: its writes go
# one at a time anyway, so the row costs nothing there and its numbers follow the commits.
_V11 = ""

_PG_V11 = """
CREATE SEQUENCE run_change_numbers MINVALUE 0;
SELECT setval('run_change_numbers', n) FROM run_changes;
DROP TABLE run_changes;
"""

_V12 = """
-- The tenant a run serves (invoke(..., tenant=ID), --tenant): set when its first agent
-- starts, never changed; `runs list --tenant ID` filters by it.
ALTER TABLE runs ADD COLUMN tenant_id TEXT;
CREATE INDEX runs_tenant ON runs (tenant_id, started_at);
"""

_PG_V12 = """
ALTER TABLE runs ADD COLUMN tenant_id TEXT COLLATE "C";
CREATE INDEX runs_tenant ON runs (tenant_id, started_at);
"""


@dataclass(frozen=True)
class Migration:
    """One step of the schema, in each backend's SQL (a script of statements)."""

    sqlite: str
    postgresql: str


#: Migration N (1-based) brings a store from version N-1 to N. Append only.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(_V1, _PG_V1),
    Migration(_V2, _PG_V2),
    Migration(_V3, _PG_V3),
    Migration(_V4, _PG_V4),
    Migration(_V5, _PG_V5),
    Migration(_V6, _PG_V6),
    Migration(_V7, _PG_V7),
    Migration(_V8, _PG_V8),
    Migration(_V9, _PG_V9),
    Migration(_V10, _PG_V10),
    Migration(_V11, _PG_V11),
    Migration(_V12, _PG_V12),
)

