"""How an upgrade is planned from the migrations and what a store has (the statements
are run by both backends' tests in test_store.py)."""

from __future__ import annotations

from agent_apps.state.schema import MIGRATIONS
from agent_apps.state.upgrade import missing, statements, upgrade

SCRIPTS = (
    "CREATE TABLE a (x INTEGER);\nCREATE TABLE counter (n INTEGER);\nINSERT INTO counter VALUES (0);\n",
    "-- a column; the counter moves\nALTER TABLE a ADD COLUMN y INTEGER;\nCREATE INDEX a_y ON a (y);\n",
    "CREATE SEQUENCE numbers;\nSELECT setval('numbers', n) FROM counter;\nDROP TABLE counter;\n",
)


def test_a_new_store_gets_every_statement_in_order():
    assert list(upgrade(SCRIPTS, 0, set())) == [s for script in SCRIPTS for s in statements(script)]


def test_what_a_store_has_is_not_made_again():
    present = {("table", "a"), ("table", "counter"), ("column", "a", "y")}
    assert list(upgrade(SCRIPTS, 1, present)) == [
        "CREATE INDEX a_y ON a (y);",
        "CREATE SEQUENCE numbers;",
        "SELECT setval('numbers', n) FROM counter;",
        "DROP TABLE counter;",
    ]


def test_a_claimed_migration_that_lacks_something_is_made_good_but_never_what_was_dropped():
    # version 3 claimed, but the column of migration 2 is missing: it and its index are
    # made; migration 1's counter, which migration 3 dropped, is neither made nor written
    present = {("table", "a"), ("sequence", "numbers")}
    assert missing(SCRIPTS, present) == {("column", "a", "y"), ("index", "a_y", "a")}
    assert list(upgrade(SCRIPTS, 3, present)) == ["ALTER TABLE a ADD COLUMN y INTEGER;", "CREATE INDEX a_y ON a (y);"]
    assert missing(SCRIPTS, present) == set()  # present followed what was yielded


def test_a_whole_store_needs_nothing():
    for backend in ("sqlite", "postgresql"):
        scripts = [getattr(m, backend) for m in MIGRATIONS]
        made: set = set()
        for _ in upgrade(scripts, 0, made):
            pass
        assert list(upgrade(scripts, len(scripts), made)) == []
        assert ("column", "runs", "tenant_id") in made
    assert ("table", "run_changes") not in made  # PostgreSQL's migration 11 dropped it


def test_a_migration_whose_tables_a_store_has_is_done_whatever_the_version_says():
    # a store of version 1 that has migration 3's sequence (the counter dropped): the
    # setval that reads the counter is not run, nor is migration 2 skipped
    present = {("table", "a"), ("sequence", "numbers")}
    assert list(upgrade(SCRIPTS, 1, present)) == ["ALTER TABLE a ADD COLUMN y INTEGER;", "CREATE INDEX a_y ON a (y);"]
