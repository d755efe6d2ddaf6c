"""The state store's schema: an append-only list of migrations.

``PRAGMA user_version`` holds how many of :data:`MIGRATIONS` a database has had. A new
feature appends migration N+1 (never edits an earlier one): databases of every earlier
release then upgrade on open, in one transaction, and a database from a newer release
is refused with a clear error instead of being misread.
"""

from __future__ import annotations

__all__ = ["APPLICATION_ID", "MIGRATIONS"]

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

_V5 = """
-- What watchers (the console, docs/console.md) read. Every change to a run or to one of
-- its agents gives the run, and that agent, the next number of `runs.seq`: a watcher
-- asks for what changed after the number it saw. `agents.live` is the turn an agent has
-- in flight (JSON, as a report's step); the token and cost columns hold each agent's
-- totals so far, and the run's hold the sum of its agents'.
ALTER TABLE runs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
CREATE INDEX runs_seq ON runs (seq);
ALTER TABLE agents ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN live TEXT;
ALTER TABLE agents ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
"""

#: Migration N (1-based) brings a database from version N-1 to N. Append only.
MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5)
