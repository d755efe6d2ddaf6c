"""The memory index: Markdown chunks, full-text indexed (SQLite FTS5 ranked by BM25;
PostgreSQL's tsvector ranked by ts_rank), kept fresh."""

from __future__ import annotations

import os

from agent_apps.state import StateStore
from agent_apps.state.memory import MAX_CHUNK, MAX_POSTINGS, chunk_markdown, query_terms

DOC = """\
# Memory

A paragraph about the garden,
on two lines.

## Auto-captured -- 2026-04-03

- The user's cat is called Miso.
- A fact with a sub-list:
  - nested one
  - nested two
1. A numbered item.

```
code with a # heading-looking line

and a blank line
```

## Notes ##
Last words.
"""


def test_chunks_follow_the_markdown():
    chunks = chunk_markdown(DOC)
    assert [(c.line, c.heading, c.text) for c in chunks] == [
        (3, "Memory", "A paragraph about the garden,\non two lines."),
        (8, "Auto-captured -- 2026-04-03", "The user's cat is called Miso."),
        (9, "Auto-captured -- 2026-04-03", "A fact with a sub-list:\n  - nested one\n  - nested two"),
        (12, "Auto-captured -- 2026-04-03", "1. A numbered item."),
        (14, "Auto-captured -- 2026-04-03", "code with a # heading-looking line\n\nand a blank line"),
        (21, "Notes", "Last words."),
    ]
    assert chunk_markdown("") == [] and chunk_markdown("\n\n# Only a heading\n") == []


def test_a_long_unit_is_cut_at_line_ends_and_words():
    lines = [f"line {n} " + "x" * 90 for n in range(40)]
    chunks = chunk_markdown("\n".join(lines))
    assert len(chunks) > 2 and all(len(c.text) <= MAX_CHUNK for c in chunks)
    assert chunks[1].line == 1 + chunks[0].text.count("\n") + 1
    one = chunk_markdown("word " * 1000)
    assert all(len(c.text) <= MAX_CHUNK for c in one) and sum(c.text.count("word") for c in one) == 1000


def test_the_message_is_data_not_query_syntax(tmp_path, state_location):
    assert query_terms('What is "my" cat* NEAR(dog) AND -car OR (x)?') == ["cat", "near", "dog", "car"]
    assert query_terms("the a of ?!") == [] and query_terms("cat cat CAT") == ["cat"]
    memory = tmp_path / "MEMORY.md"
    memory.write_text('- a "quoted" NEAR(x) fact with a * in it\n')
    store = StateStore(state_location)
    assert store.memory.search([memory], 'quoted" OR * NEAR(') and store.memory.search([memory], "?!") == []


def test_search_ranks_indexes_once_and_follows_changes(tmp_path, state_location):
    store = StateStore(state_location)
    memory = tmp_path / "MEMORY.md"
    memory.write_text(DOC)
    hits = store.memory.search([memory], "What is my cat called?")
    assert hits[0]["text"] == "The user's cat is called Miso." and hits[0]["line"] == 8
    assert hits[0]["file"] == str(memory) and hits[0]["score"] > 0
    assert store.memory.search([memory], "cats")[0]["line"] == 8  # stemmed: cats ~ cat
    (info,) = store.memory.files()
    assert info["chunks"] == 6
    # touched, not changed: not indexed again
    os.utime(memory, ns=(1, 1))
    store.memory.search([memory], "cat")
    assert store.memory.files()[0]["indexed_at"] == info["indexed_at"]
    # changed: indexed again, in one transaction
    memory.write_text("- The user's dog is called Pepper.\n")
    assert store.memory.search([memory], "cat") == []
    assert store.memory.search([memory], "dog")[0]["text"] == "The user's dog is called Pepper."
    # gone: its chunks go too
    memory.unlink()
    assert store.memory.search([memory], "dog") == [] and store.memory.files() == []
    # only the files asked for are searched
    (tmp_path / "a.md").write_text("- apples\n")
    (tmp_path / "b.md").write_text("- apples and pears\n")
    assert [h["file"] for h in store.memory.search([tmp_path / "a.md"], "apples")] == [str(tmp_path / "a.md")]
    assert len(store.memory.search([tmp_path / "a.md", tmp_path / "b.md"], "apples", k=5)) == 2
    assert len(store.memory.search([tmp_path / "a.md", tmp_path / "b.md"], "apples", k=1)) == 1


def test_rare_words_count_and_words_in_most_chunks_do_not(tmp_path, state_location):
    memory = tmp_path / "MEMORY.md"
    facts = [f"- The user noted item {n} of the garden list." for n in range(MAX_POSTINGS + 100)]
    facts.insert(77, "- The user keeps the spare key under the blue flowerpot.")
    memory.write_text("\n".join(facts) + "\n")
    store = StateStore(state_location)
    (hit,) = store.memory.search([memory], "where is the spare key, user?", k=3)  # "user" is in every chunk
    assert hit["text"] == "The user keeps the spare key under the blue flowerpot."
    assert store.memory.search([memory], "user garden list", k=3) == []  # only words every chunk has
    memory.write_text("\n".join(facts[:100]) + "\n")
    assert len(store.memory.search([memory], "user garden list", k=3)) == 3  # a small file: they do count


def test_the_index_is_a_migration_of_the_store(tmp_path, state_location):
    store = StateStore(state_location)
    memory = tmp_path / "MEMORY.md"
    memory.write_text(DOC)
    store.memory.search([memory], "cat")  # opens, migrates, indexes
    with store.db.read() as conn:
        assert conn.execute("SELECT count(*) FROM memory_chunks").fetchone() == (6,)
        assert conn.execute("SELECT count(*) FROM memory_files").fetchone() == (1,)


# -- hybrid: words and meaning ------------------------------------------------------------------

FACTS = """\
# Memory

- Sam's cat is called Miso.
- Sam wants to visit Porto in October, for about a week.
- The quarterly budget review happens every Friday afternoon.
- Sam prefers metric units.
- The deploy script lives in scripts/deploy.sh.
- Sam is allergic to peanuts.
- The database backups run nightly at 2am.
- Sam's sister Ana lives in Lisbon.
"""


class Counting:
    """The real embedder, counting the texts it embeds."""

    def __init__(self, embedder):
        self.inner, self.name, self.dimensions, self.texts = embedder, embedder.name, embedder.dimensions, []

    def embed(self, texts):
        self.texts += texts
        return self.inner.embed(texts)


def test_hybrid_finds_a_paraphrase_by_meaning_and_exact_matches_still_rank_first(tmp_path, state_location, embedder):
    memory = tmp_path / "MEMORY.md"
    memory.write_text(FACTS)
    store = StateStore(state_location)
    # no word in common: full-text search finds nothing, meaning finds the cat
    assert store.memory.search([memory], "What is the name of the pet?") == []
    hits = store.memory.search([memory], "What is the name of the pet?", embedder=embedder)
    assert hits[0]["text"] == "Sam's cat is called Miso." and hits[0]["line"] == 3 and hits[0]["heading"] == "Memory"
    # by meaning alone, the allergy comes first; the chunk that has the word still ranks first
    assert [h["text"] for h in store.memory.search([memory], "metric allergy")] == ["Sam prefers metric units."]
    hits = store.memory.search([memory], "metric allergy", embedder=embedder)
    assert [h["text"] for h in hits[:2]] == ["Sam prefers metric units.", "Sam is allergic to peanuts."]
    assert hits[0]["score"] > hits[1]["score"] > 0
    exact = [("Porto", "Sam wants to visit"), ("deploy script", "The deploy script"), ("Lisbon", "Sam's sister")]
    for query, first in exact:
        assert store.memory.search([memory], query, embedder=embedder)[0]["text"].startswith(first), query
    # what bears on nothing is not returned (every chunk is far from it)
    assert store.memory.search([memory], "how tall is mount everest", embedder=embedder) == []
    assert store.memory.search([memory], "   ", embedder=embedder) == []
    assert len(store.memory.search([memory], "Sam", k=2, embedder=embedder)) == 2


def test_vectors_are_made_once_per_text_and_follow_the_file(tmp_path, state_location, embedder):
    memory = tmp_path / "MEMORY.md"
    memory.write_text(FACTS)
    counting = Counting(embedder)
    store = StateStore(state_location)
    store.memory.search([memory], "pet", embedder=counting)
    assert len(counting.texts) == 8 + 1  # every chunk, then the query
    assert counting.texts[0] == "Memory: Sam's cat is called Miso."  # the text under its heading
    store.memory.search([memory], "pet", embedder=counting)
    assert len(counting.texts) == 8 + 2  # only the query: the vectors are kept
    # another process (another index on the same store) reads them, it does not make them again
    other, fresh = StateStore(state_location), Counting(embedder)
    assert other.memory.search([memory], "pet", embedder=fresh)[0]["line"] == 3 and len(fresh.texts) == 1
    # a fact appended (as compaction does): only it is embedded; the others keep their vectors
    memory.write_text(FACTS + "\n## Auto-captured -- 2026-05-09\n\n- Sam adopted a puppy named Bolt.\n")
    hits = store.memory.search([memory], "a young dog", embedder=counting)
    assert counting.texts[-2:] == ["Auto-captured -- 2026-05-09: Sam adopted a puppy named Bolt.", "a young dog"]
    assert hits[0]["text"] == "Sam adopted a puppy named Bolt." and hits[0]["line"] == 14
    with store.db.read() as conn:
        assert conn.execute("SELECT count(*) FROM memory_vectors").fetchone() == (9,)
    # an empty file has no chunks and no vectors; a file that is gone loses both
    memory.write_text("")
    assert store.memory.search([memory], "pet", embedder=counting) == []
    memory.unlink()
    assert store.memory.search([memory], "pet", embedder=counting) == []
    with store.db.read() as conn:
        assert conn.execute("SELECT count(*) FROM memory_vectors").fetchone() == (0,)
