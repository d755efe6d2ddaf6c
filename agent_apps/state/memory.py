"""Memory retrieval: workspace files chunked and full-text indexed in the state store.

``store.memory.search([".../MEMORY.md", ".../AGENTS.md"], "what units does she use?")``
returns the chunks that best match the message, ranked by BM25 (SQLite FTS5, Porter
stemming) or, on PostgreSQL, by ``ts_rank`` over an English ``tsvector`` (its own
full-text search: no extension needed), so a memory of ten thousand entries costs a
turn about what ten do.

* **Chunks** follow the Markdown: each paragraph and each list item (with what is
  indented under it) is one chunk, under the heading it sits below (``## Auto-captured
  -- 2026-04-03``); a unit longer than :data:`MAX_CHUNK` characters is cut at line ends.
* **Freshness**: every search compares each file's size and mtime with what was
  indexed; a changed file is read again and, when its content changed (SHA-256),
  re-indexed in one transaction. A file that is gone loses its chunks.
* **Files are read as the host reads for an agent** (:mod:`agent_apps.host_files`):
  inside their folder once links are resolved, outside the denied paths, regular, at
  most :data:`MAX_MEMORY_BYTES`. A file refused is not indexed, and loses the chunks
  an earlier version left (the agent's workspace check warns about it).
* **Queries** are the message's words (minus common English words), any of which may
  match: no query syntax from the message reaches the engine. The rarest words are kept
  until together they match :data:`MAX_POSTINGS` chunks; the more common rest is left
  out: BM25 would weigh them least (a word in half the chunks says little about which
  one fits), and ranking every chunk that has them is what costs time. The rarest word
  that occurs at all is kept, unless it too is in more than :data:`MAX_POSTINGS` chunks
  and a quarter of all: then any chunk fits as well as another, and none is returned.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from .._markdown import strip_markdown
from ..host_files import check_host_file, read_host_file

if TYPE_CHECKING:
    from ._db import Connection, Database, Dialect

__all__ = ["MAX_CHUNK", "MAX_MEMORY_BYTES", "Chunk", "Hit", "MemoryIndex", "chunk_markdown", "query_terms"]

#: Characters of one chunk at most.
MAX_CHUNK = 1200
#: The largest memory file indexed (about 100,000 one-line facts).
MAX_MEMORY_BYTES = 16 * 1024 * 1024
#: Query terms at most (the first ones of the message).
MAX_TERMS = 32
#: Chunks the kept query terms may match together (the cost of ranking grows with it).
MAX_POSTINGS = 2000
_FILE_SHIFT = 32  # rowid = file id << 32 | chunk number

_WORD = re.compile(r"\w+")
_ITEM = re.compile(r"^(\s{0,3})([-*+]|\d{1,9}[.)])\s+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_MARKER = re.compile(r"^[-*+]\s+")
_STOP = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves please tell know remember""".split()
)


@dataclass(frozen=True)
class Chunk:
    """One indexed piece of a file: its text, the heading above it, its first line."""

    text: str
    heading: str
    line: int


class Hit(TypedDict):
    """One retrieved chunk (the retriever skills' result items)."""

    text: str
    file: str
    line: int
    heading: str
    score: float


def chunk_markdown(text: str) -> list[Chunk]:
    """Split Markdown into chunks: paragraphs and list items under their heading."""
    chunks: list[Chunk] = []
    heading = ""
    unit: list[str] = []
    start = 0
    fenced = False

    def flush() -> None:
        nonlocal unit
        if unit:
            for offset, piece in _cut("\n".join(unit)):
                body = _MARKER.sub("", strip_markdown(piece), count=1)
                if body:
                    chunks.append(Chunk(body, heading, start + offset))
        unit = []

    for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            match = _HEADING.match(line)
            if match:
                flush()
                heading = strip_markdown(match[1])
                continue
            if not line.strip():
                flush()
                continue
            item = _ITEM.match(line)
            if item and len(item[1]) <= 1:  # a top-level list item starts a chunk
                flush()
        if not unit:
            start = number
        unit.append(line)
    flush()
    return chunks


def _cut(text: str) -> Iterator[tuple[int, str]]:
    """``(line offset, piece)``: ``text`` in pieces of at most MAX_CHUNK characters."""
    if len(text) <= MAX_CHUNK:
        yield 0, text
        return
    piece: list[str] = []
    size = first = 0
    for offset, line in enumerate(text.split("\n")):
        while len(line) > MAX_CHUNK:  # one huge line: cut it where a word ends
            cut = line.rfind(" ", 0, MAX_CHUNK)
            cut = cut if cut > 0 else MAX_CHUNK
            if piece:
                yield first, "\n".join(piece)
                piece, size = [], 0
            yield offset, line[:cut]
            line = line[cut:].lstrip()
        if piece and size + len(line) + 1 > MAX_CHUNK:
            yield first, "\n".join(piece)
            piece, size = [], 0
        if not piece:
            first = offset
        piece.append(line)
        size += len(line) + 1
    if piece:
        yield first, "\n".join(piece)


def query_terms(message: str) -> list[str]:
    """The message's words worth searching for: lowercase, no common English words, no
    repeats, at most :data:`MAX_TERMS` (only letters, digits and ``_``: no FTS5 syntax)."""
    terms: list[str] = []
    for word in _WORD.findall(message.lower()):
        if word in _STOP or (len(word) < 2 and not word.isdigit()) or word in terms:
            continue
        terms.append(word)
        if len(terms) == MAX_TERMS:
            break
    return terms


def _selective(conn: Connection, dialect: Dialect, terms: list[str]) -> list[str]:
    """The terms worth ranking by (see the module docstring), rarest first."""
    (total,) = conn.execute("SELECT coalesce(sum(chunks), 0) FROM memory_files").fetchone()
    counted = []
    for term in terms:
        (count,) = conn.execute(dialect.fts_count, (dialect.fts_query([term]),)).fetchone()
        if count:
            counted.append((count, term))
    counted.sort()
    kept: list[str] = []
    postings = 0
    for count, term in counted:
        if postings + count > MAX_POSTINGS and (kept or count > total / 4):
            break
        kept.append(term)
        postings += count
    return kept


class MemoryIndex:
    """``store.memory``: the chunks of workspace files, searched by full-text rank."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def search(
        self, files: Sequence[str | os.PathLike[str]], query: str, *, k: int = 5, denied: Sequence[str] = ()
    ) -> list[Hit]:
        """The ``k`` chunks of ``files`` that best match ``query`` (best first); each
        file is (re-)indexed first when it changed. ``denied``: path-policy entries no
        file may resolve into, besides the built-in ones."""
        ranges = []
        for path in files:
            ident = self.sync(path, denied=denied)
            if ident is not None:
                ranges.append((str(path), ident << _FILE_SHIFT, (ident + 1) << _FILE_SHIFT))
        terms = query_terms(query)
        if not ranges or not terms or k <= 0:
            return []
        where = " OR ".join("rowid >= ? AND rowid < ?" for _ in ranges)
        bounds = [bound for _, low, high in ranges for bound in (low, high)]
        dialect = self.db.dialect
        with self.db.read() as conn:
            terms = _selective(conn, dialect, terms)
            if not terms:
                return []
            rows = conn.execute(
                dialect.fts_search.format(ranges=where), (dialect.fts_query(terms), *bounds, k)
            ).fetchall()
        names = {low >> _FILE_SHIFT: path for path, low, _ in ranges}
        return [
            Hit(text=text, file=names[rowid >> _FILE_SHIFT], line=int(line), heading=heading, score=round(score, 4))
            for rowid, text, heading, line, score in rows
        ]

    def sync(self, path: str | os.PathLike[str], *, denied: Sequence[str] = ()) -> int | None:
        """Index ``path`` if it changed since it was indexed; its id, or None when it
        does not exist or is refused (then its chunks are dropped). It must stay inside
        its own folder once links are resolved."""
        folder = Path(path).parent
        key = str(Path(path).resolve())
        try:
            check_host_file(path, folder=folder, denied=denied, limit=MAX_MEMORY_BYTES)
            stat = os.stat(key)
        except OSError:  # gone, or refused (a link out, a FIFO, too large...)
            self.forget(key)
            return None
        with self.db.read() as conn:
            row = conn.execute("SELECT id, size, mtime_ns, digest FROM memory_files WHERE path = ?", (key,)).fetchone()
        if row is not None and (row[1], row[2]) == (stat.st_size, stat.st_mtime_ns):
            return int(row[0])
        try:
            data = read_host_file(path, limit=MAX_MEMORY_BYTES, folder=folder, denied=denied)
        except OSError:
            self.forget(key)
            return None
        digest = hashlib.sha256(data).hexdigest()
        if row is not None and row[3] == digest:  # touched, not changed
            with self.db.write() as conn:
                conn.execute(
                    "UPDATE memory_files SET size = ?, mtime_ns = ? WHERE id = ?",
                    (stat.st_size, stat.st_mtime_ns, row[0]),
                )
            return int(row[0])
        chunks = chunk_markdown(data.decode("utf-8-sig", errors="replace"))
        with self.db.write() as conn:
            return self._index(conn, key, stat, digest, chunks)

    def forget(self, path: str | os.PathLike[str]) -> None:
        """Drop a file's chunks (nothing happens for a file never indexed)."""
        key = str(Path(path).resolve())
        with self.db.write() as conn:
            row = conn.execute("SELECT id FROM memory_files WHERE path = ?", (key,)).fetchone()
            if row is not None:
                _drop(conn, int(row[0]))
                conn.execute("DELETE FROM memory_files WHERE id = ?", (row[0],))

    def files(self) -> list[dict[str, Any]]:
        """The indexed files: path, size, chunks, when indexed."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT path, size, chunks, indexed_at FROM memory_files ORDER BY path").fetchall()
        return [{"path": p, "size": s, "chunks": c, "indexed_at": t} for p, s, c, t in rows]

    @staticmethod
    def _index(conn: Connection, key: str, stat: os.stat_result, digest: str, chunks: list[Chunk]) -> int:
        # one statement makes the row or takes it over (locked: another process indexing
        # the same file at once waits, then replaces these chunks with its own)
        (ident,) = conn.execute(
            "INSERT INTO memory_files (path, size, mtime_ns, digest, chunks, indexed_at) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
            "digest = excluded.digest, chunks = excluded.chunks, indexed_at = excluded.indexed_at RETURNING id",
            (key, stat.st_size, stat.st_mtime_ns, digest, len(chunks), time.time()),
        ).fetchone()
        ident = int(ident)
        _drop(conn, ident)
        base = ident << _FILE_SHIFT
        conn.executemany(
            "INSERT INTO memory_chunks (rowid, text, heading, line) VALUES (?, ?, ?, ?)",
            ((base + n, c.text, c.heading, c.line) for n, c in enumerate(chunks)),
        )
        return ident


def _drop(conn: Connection, ident: int) -> None:
    conn.execute(
        "DELETE FROM memory_chunks WHERE rowid >= ? AND rowid < ?",
        (ident << _FILE_SHIFT, (ident + 1) << _FILE_SHIFT),
    )
