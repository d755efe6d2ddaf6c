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
* **Hybrid ranking** (``search(..., embedder=...)``, docs/context.md): each chunk's
  text, under its heading, is also embedded (:mod:`.embeddings`) and stored once per
  text (``memory_vectors``); the query is embedded too. Two rankings, the full-text one
  and the chunks by cosine similarity (those at :data:`MIN_SIMILARITY` or above), each
  cut to its best :data:`POOL` (at least four times ``k``), are fused by reciprocal rank:
  a chunk scores ``1/(RRF_K + rank)`` in each ranking it is in, summed. A chunk that
  both rankings find comes before one that only one finds at the same place; a
  paraphrase that shares no word with the query is still found by meaning.
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
    import numpy as np

    from ._db import Connection, Database, Dialect
    from .embeddings import Embedder

__all__ = [
    "MAX_CHUNK",
    "MAX_MEMORY_BYTES",
    "Chunk",
    "Hit",
    "MemoryIndex",
    "chunk_markdown",
    "embedding_text",
    "query_terms",
]

#: Characters of one chunk at most.
MAX_CHUNK = 1200
#: The largest memory file indexed (about 100,000 one-line facts).
MAX_MEMORY_BYTES = 16 * 1024 * 1024
#: Query terms at most (the first ones of the message).
MAX_TERMS = 32
#: Chunks the kept query terms may match together (the cost of ranking grows with it).
MAX_POSTINGS = 2000
_FILE_SHIFT = 32  # rowid = file id << 32 | chunk number
#: Candidates each ranking contributes to hybrid ranking, at least (and four times ``k``).
POOL = 50
#: Reciprocal rank fusion's constant (the usual 60: ranks below the first few count about alike).
RRF_K = 60
#: Cosine similarity a chunk needs to be a semantic candidate: all-MiniLM-L6-v2 puts
#: unrelated sentences below it and paraphrases above it.
MIN_SIMILARITY = 0.2

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
    """``store.memory``: the chunks of workspace files, searched by full-text rank, or
    by full-text rank and meaning together (hybrid)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        #: Per indexed file: (its digest, the model, the chunks' rowids, their vectors),
        #: so a search reads a file's vectors again only after the file changed.
        self._vectors: dict[int, tuple[str, str, np.ndarray, np.ndarray]] = {}

    def search(
        self,
        files: Sequence[str | os.PathLike[str]],
        query: str,
        *,
        k: int = 5,
        denied: Sequence[str] = (),
        embedder: Embedder | None = None,
    ) -> list[Hit]:
        """The ``k`` chunks of ``files`` that best match ``query`` (best first); each
        file is (re-)indexed first when it changed. ``denied``: path-policy entries no
        file may resolve into, besides the built-in ones. With an ``embedder``, the ranking
        is hybrid (see the module docstring) and the chunks' vectors are made first
        where they are missing: this may take a while the first time."""
        indexed = [(str(path), found) for path in files if (found := self._synced(path, denied)) is not None]
        ranges = [(path, ident << _FILE_SHIFT, (ident + 1) << _FILE_SHIFT) for path, (ident, _) in indexed]
        if not ranges or k <= 0 or not query.strip():
            return []
        names = {low >> _FILE_SHIFT: path for path, low, _ in ranges}
        if embedder is None:
            ranked = self._full_text(ranges, query, k)
            return [_hit(names, rowid, text, heading, line, score) for rowid, text, heading, line, score in ranked]
        pool = max(POOL, 4 * k)
        lexical = self._full_text(ranges, query, pool)
        semantic = self._nearest(indexed, query, embedder, pool)
        fused: dict[int, float] = {}
        for ranking in ([row[0] for row in lexical], semantic):
            for rank, rowid in enumerate(ranking, 1):
                fused[rowid] = fused.get(rowid, 0.0) + 1.0 / (RRF_K + rank)
        order = {rowid: rank for rank, rowid in enumerate([row[0] for row in lexical] + semantic)}
        best = sorted(fused, key=lambda rowid: (-fused[rowid], order[rowid]))[:k]
        rows: dict[int, tuple[Any, ...]] = {row[0]: row[1:4] for row in lexical}
        missing = [rowid for rowid in best if rowid not in rows]
        if missing:
            with self.db.read() as conn:
                marks = ", ".join("?" for _ in missing)
                for rowid, text, heading, line in conn.execute(
                    f"SELECT rowid, text, heading, line FROM memory_chunks WHERE rowid IN ({marks})", missing
                ).fetchall():
                    rows[rowid] = (text, heading, line)
        return [
            _hit(names, rowid, rows[rowid][0], rows[rowid][1], rows[rowid][2], fused[rowid], 6)
            for rowid in best
            if rowid in rows
        ]

    def sync(self, path: str | os.PathLike[str], *, denied: Sequence[str] = ()) -> int | None:
        """Index ``path`` if it changed since it was indexed; its id, or None when it
        does not exist or is refused (then its chunks are dropped). It must stay inside
        its own folder once links are resolved."""
        found = self._synced(path, denied)
        return found[0] if found is not None else None

    def forget(self, path: str | os.PathLike[str]) -> None:
        """Drop a file's chunks (nothing happens for a file never indexed)."""
        key = str(Path(path).resolve())
        with self.db.write() as conn:
            row = conn.execute("SELECT id FROM memory_files WHERE path = ?", (key,)).fetchone()
            if row is not None:
                _drop(conn, int(row[0]), vectors=True)
                conn.execute("DELETE FROM memory_files WHERE id = ?", (row[0],))

    def files(self) -> list[dict[str, Any]]:
        """The indexed files: path, size, chunks, when indexed."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT path, size, chunks, indexed_at FROM memory_files ORDER BY path").fetchall()
        return [{"path": p, "size": s, "chunks": c, "indexed_at": t} for p, s, c, t in rows]

    # -- full text -------------------------------------------------------------------

    def _full_text(self, ranges: list[tuple[str, int, int]], query: str, limit: int) -> list[tuple[Any, ...]]:
        """The best ``limit`` chunks by full-text rank: (rowid, text, heading, line, score)."""
        terms = query_terms(query)
        if not terms:
            return []
        where = " OR ".join("rowid >= ? AND rowid < ?" for _ in ranges)
        bounds = [bound for _, low, high in ranges for bound in (low, high)]
        dialect = self.db.dialect
        with self.db.read() as conn:
            terms = _selective(conn, dialect, terms)
            if not terms:
                return []
            return list(
                conn.execute(
                    dialect.fts_search.format(ranges=where), (dialect.fts_query(terms), *bounds, limit)
                ).fetchall()
            )

    # -- meaning ---------------------------------------------------------------------

    def _nearest(
        self, indexed: list[tuple[str, tuple[int, str]]], query: str, embedder: Embedder, limit: int
    ) -> list[int]:
        """The rowids of the ``limit`` chunks most similar to ``query`` (at least
        :data:`MIN_SIMILARITY`), most similar first."""
        import numpy as np

        matrices = [self._file_vectors(ident, digest, embedder) for _, (ident, digest) in indexed]
        rowids = np.concatenate([rowids for rowids, _ in matrices])
        if not len(rowids):
            return []
        vectors = np.concatenate([vectors for _, vectors in matrices])
        similarity = vectors @ embedder.embed([query])[0]
        best = np.argsort(-similarity, kind="stable")[:limit]
        return [int(rowids[i]) for i in best if similarity[i] >= MIN_SIMILARITY]

    def _file_vectors(self, ident: int, digest: str, embedder: Embedder) -> tuple[np.ndarray, np.ndarray]:
        """The rowids and vectors of one indexed file's chunks, embedding those whose
        text has none stored yet (outside any transaction: it is the slow part)."""
        import numpy as np

        cached = self._vectors.get(ident)
        if cached is not None and cached[:2] == (digest, embedder.name):
            return cached[2], cached[3]
        low, high = ident << _FILE_SHIFT, (ident + 1) << _FILE_SHIFT
        with self.db.read() as conn:
            chunks = conn.execute(
                "SELECT rowid, text, heading FROM memory_chunks WHERE rowid >= ? AND rowid < ? ORDER BY rowid",
                (low, high),
            ).fetchall()
            stored = conn.execute(
                "SELECT rowid, digest, vector FROM memory_vectors WHERE model = ? AND rowid >= ? AND rowid < ?",
                (embedder.name, low, high),
            ).fetchall()
        by_digest = {text_digest: bytes(vector) for _, text_digest, vector in stored}
        in_place = {int(rowid): text_digest for rowid, text_digest, _ in stored}
        texts = [embedding_text(text, heading) for _, text, heading in chunks]
        digests = [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in texts]
        new = [i for i, text_digest in enumerate(digests) if text_digest not in by_digest]
        if new:
            made = embedder.embed([texts[i] for i in new])
            for i, vector in zip(new, made, strict=True):
                by_digest[digests[i]] = vector.astype("<f4").tobytes()
        rowids = np.array([int(row[0]) for row in chunks], dtype=np.int64)
        joined = b"".join(by_digest[d] for d in digests)
        vectors = np.frombuffer(joined, dtype="<f4").reshape(len(chunks), embedder.dimensions)
        if any(in_place.get(int(row[0])) != text_digest for row, text_digest in zip(chunks, digests, strict=True)):
            self._store_vectors(ident, digest, embedder.name, rowids, digests, by_digest)
        self._vectors[ident] = (digest, embedder.name, rowids, vectors)
        return rowids, vectors

    def _store_vectors(
        self, ident: int, digest: str, model: str, rowids: np.ndarray, digests: list[str], by_digest: dict[str, bytes]
    ) -> None:
        """Store a file's vectors, unless the file changed since its chunks were read
        (then the next search embeds the new ones)."""
        lock = self.db.dialect.for_update
        with self.db.write() as conn:
            row = conn.execute(f"SELECT digest FROM memory_files WHERE id = ?{lock}", (ident,)).fetchone()
            if row is None or row[0] != digest:
                return
            conn.execute(
                "DELETE FROM memory_vectors WHERE rowid >= ? AND rowid < ?",
                (ident << _FILE_SHIFT, (ident + 1) << _FILE_SHIFT),
            )
            conn.executemany(
                "INSERT INTO memory_vectors (rowid, model, digest, vector) VALUES (?, ?, ?, ?)",
                ((int(rowid), model, d, by_digest[d]) for rowid, d in zip(rowids, digests, strict=True)),
            )

    # -- indexing --------------------------------------------------------------------

    def _synced(self, path: str | os.PathLike[str], denied: Sequence[str]) -> tuple[int, str] | None:
        """:meth:`sync`, returning the file's id and digest."""
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
            return int(row[0]), str(row[3])
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
            return int(row[0]), digest
        chunks = chunk_markdown(data.decode("utf-8-sig", errors="replace"))
        with self.db.write() as conn:
            return self._index(conn, key, stat, digest, chunks), digest

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
        _drop(conn, ident, vectors=False)  # the vectors stay: unchanged texts keep theirs
        base = ident << _FILE_SHIFT
        conn.executemany(
            "INSERT INTO memory_chunks (rowid, text, heading, line) VALUES (?, ?, ?, ?)",
            ((base + n, c.text, c.heading, c.line) for n, c in enumerate(chunks)),
        )
        return ident


def embedding_text(text: str, heading: str) -> str:
    """What is embedded of a chunk: its text under its heading (the heading says what
    a short list item is about)."""
    return f"{heading}: {text}" if heading else text


def _hit(names: dict[int, str], rowid: int, text: str, heading: str, line: Any, score: float, places: int = 4) -> Hit:
    file = names[rowid >> _FILE_SHIFT]
    return Hit(text=text, file=file, line=int(line), heading=heading, score=round(score, places))


def _drop(conn: Connection, ident: int, *, vectors: bool) -> None:
    """Delete a file's chunks (and, when it is gone, their vectors)."""
    bounds = (ident << _FILE_SHIFT, (ident + 1) << _FILE_SHIFT)
    conn.execute("DELETE FROM memory_chunks WHERE rowid >= ? AND rowid < ?", bounds)
    if vectors:
        conn.execute("DELETE FROM memory_vectors WHERE rowid >= ? AND rowid < ?", bounds)
