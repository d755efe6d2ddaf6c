"""The agent's context: memory retrieval and indexing, prompt assembly, stubs vs JSON.

    python benchmarks/bench_context.py

Prints three tables. Targets: retrieval over a 10,000-chunk MEMORY.md <= 5 ms per turn;
indexing it <= 2 s. Also printed: the same retrieval through the memory-search skill
(the pipeline included, as an agent run pays it), composing the built-in layers, and
the prompt size (tokens, four characters a token) of the bundled skills as typed stubs
against their JSON Schemas. With the embedding model installed (docs/context.md,
"Semantic memory"), the cost of hybrid retrieval over a 2,000-chunk MEMORY.md: embedding
it the first time, a search, a search in a new process, and a fact appended.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from pathlib import Path

from agent_apps import ContextManager
from agent_apps.agent.prompt import prompt_layers
from agent_apps.agent.workspace import read_whole_files
from agent_apps.state import StateStore
from agent_apps.state.messages import estimate_text
from agent_apps.stubs import json_doc, skill_stub

COMMON = (
    "user prefers likes uses works lives project team meeting report deploy server database file folder "
    "email phone morning evening weekly monthly tea coffee python rust docs review release budget client "
    "invoice password account backup calendar travel train flight hotel doctor school garden cat dog car"
).split()
TEMPLATES = (
    "The user {v} {a} {b} on {c}.",
    "{A} is where the {a} {b} lives; ask about {c} first.",
    "Decided with the {a} team: {b} goes before {c}, never after {d}.",
    "Remember that {a} {b} needs {c} and {d} every {e}.",
)


def vocabulary(rng: random.Random, size: int = 6000) -> tuple[list[str], list[float]]:
    """Common words and rare made-up ones, with Zipf weights (as real text has)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    rare = {"".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(size)}
    words = COMMON + sorted(rare)
    return words, [1 / (rank + 1) for rank in range(len(words))]


def memory_file(path: Path, chunks: int, rng: random.Random) -> None:
    words, weights = vocabulary(rng)
    lines = []
    for n in range(chunks):
        if n % 25 == 0:
            lines.append(f"\n## Auto-captured -- 2026-{1 + n // 900 % 12:02d}-{1 + n % 28:02d}\n")
        picked = rng.choices(words, weights, k=5)
        keys = dict(zip("abcde", picked, strict=True))
        text = rng.choice(TEMPLATES).format(v=rng.choice(COMMON), A=picked[0].title(), **keys)
        lines.append(f"- {text}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def messages(rng: random.Random, count: int) -> list[str]:
    words, weights = vocabulary(rng)
    return [
        "Can you tell me what we said about " + " and ".join(rng.choices(words, weights, k=rng.randint(3, 8))) + "?"
        for _ in range(count)
    ]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] * 1e3


def bench_memory(root: Path) -> dict[str, float]:
    rng = random.Random(16)
    workspace = root / "workspace"
    workspace.mkdir()
    memory = workspace / "MEMORY.md"
    memory_file(memory, 10_000, rng)
    (workspace / "USER.md").write_text("# Preferences\n\n- Metric units\n- Short answers\n")
    files = [memory, workspace / "AGENTS.md"]
    store = StateStore(root / "state.db")
    start = time.perf_counter()
    store.memory.sync(memory)
    index = time.perf_counter() - start
    chunks = store.memory.files()[0]["chunks"]
    queries = messages(rng, 300)
    direct, found = [], 0
    for query in queries:
        start = time.perf_counter()
        hits = store.memory.search(files, query)
        direct.append(time.perf_counter() - start)
        found += len(hits)

    # a changed file: the next turn re-indexes it
    with memory.open("a", encoding="utf-8") as fh:
        fh.write("- The user's boat is called Kestrel.\n")
    start = time.perf_counter()
    hits = store.memory.search(files, "what is my boat called")
    reindex = time.perf_counter() - start
    assert hits and "Kestrel" in hits[0]["text"], hits
    store.close()

    cm = ContextManager(cwd=root, home=root / "home", env=False, project=False, user=False, entry_points=False,
                        state=root / "state.db")

    async def through_the_skill() -> list[float]:
        out = []
        for query in queries:
            start = time.perf_counter()
            await cm.invoke("memory-search", {"query": query, "workspace": str(workspace), "search": "fts"})
            out.append(time.perf_counter() - start)
        return out

    skill = asyncio.run(through_the_skill())
    whole = []
    for _ in range(200):
        start = time.perf_counter()
        read_whole_files(workspace)
        whole.append(time.perf_counter() - start)
    visible = cm.visible_tools(None)
    compose = []
    for _ in range(200):
        start = time.perf_counter()
        prompt_layers("You are a careful assistant.", visible, workspace=str(workspace)).compose()
        compose.append(time.perf_counter() - start)
    return {
        "chunks": chunks,
        "size_kb": memory.stat().st_size / 1024,
        "index": index,
        "reindex": reindex * 1e3,
        "p50": percentile(direct, 0.5),
        "p95": percentile(direct, 0.95),
        "hits": found / len(queries),
        "skill_p50": percentile(skill, 0.5),
        "skill_p95": percentile(skill, 0.95),
        "whole": percentile(whole, 0.5),
        "compose": percentile(compose, 0.5),
    }


def bench_semantic(root: Path, chunks: int = 2_000) -> dict[str, float] | None:
    """Hybrid retrieval with the real model, or None when it is not installed."""
    from agent_apps.state.embeddings import EmbeddingsUnavailable, load_embedder

    try:
        embedder = load_embedder()
    except EmbeddingsUnavailable as exc:
        print(f"(hybrid retrieval not measured: {exc})")
        return None
    rng = random.Random(30)
    memory = root / "semantic" / "MEMORY.md"
    memory.parent.mkdir()
    memory_file(memory, chunks, rng)
    store = StateStore(root / "semantic.db")
    start = time.perf_counter()
    store.memory.search([memory], "warm up", embedder=embedder)  # embeds every chunk
    cold = time.perf_counter() - start
    queries = messages(rng, 100)
    timings = []
    for query in queries:
        start = time.perf_counter()
        store.memory.search([memory], query, embedder=embedder)
        timings.append(time.perf_counter() - start)
    embed = []
    for query in queries[:50]:
        start = time.perf_counter()
        embedder.embed([query])
        embed.append(time.perf_counter() - start)
    start = time.perf_counter()
    StateStore(root / "semantic.db").memory.search([memory], queries[0], embedder=embedder)  # another process's
    fresh = time.perf_counter() - start
    with memory.open("a", encoding="utf-8") as fh:
        fh.write("- The user's boat is called Kestrel.\n")
    start = time.perf_counter()
    hits = store.memory.search([memory], "what is the name of my sailing vessel", embedder=embedder)
    appended = time.perf_counter() - start
    assert hits and "Kestrel" in hits[0]["text"], hits
    return {
        "chunks": store.memory.files()[0]["chunks"],
        "cold": cold,
        "rate": chunks / cold,
        "p50": percentile(timings, 0.5),
        "p95": percentile(timings, 0.95),
        "embed": percentile(embed, 0.5),
        "fresh": fresh * 1e3,
        "appended": appended * 1e3,
    }


def stub_sizes(root: Path) -> list[tuple[str, int, int]]:
    cm = ContextManager(cwd=root, home=root / "home", env=False, project=False, user=False, entry_points=False)
    return [(s.name, estimate_text(skill_stub(s)), estimate_text(json_doc(s))) for s in cm.skills()]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        memory = bench_memory(root)
        sizes = stub_sizes(root)
        semantic = bench_semantic(root)
    rows = [
        ("measure", "figure", "target"),
        (f"MEMORY.md: {memory['chunks']:,} chunks, {memory['size_kb']:,.0f} kB", "", ""),
        ("index it (cold: chunk, FTS5 insert, one transaction)", f"{memory['index']:.2f} s", "<= 2 s"),
        ("retrieve top 5 for a message, p50", f"{memory['p50']:.2f} ms", ""),
        ("retrieve top 5 for a message, p95", f"{memory['p95']:.2f} ms", "<= 5 ms"),
        ("  chunks found per message (mean)", f"{memory['hits']:.1f}", ""),
        ("retrieve through the memory-search skill, p50", f"{memory['skill_p50']:.2f} ms", ""),
        ("retrieve through the memory-search skill, p95", f"{memory['skill_p95']:.2f} ms", ""),
        ("after the file changed: re-index and retrieve", f"{memory['reindex']:.0f} ms", ""),
        ("read IDENTITY/SOUL/USER.md whole, p50", f"{memory['whole']:.3f} ms", ""),
        ("compose the built-in layers (discovery mode), p50", f"{memory['compose']:.3f} ms", ""),
    ]
    _table(rows)

    print()
    shown = {"agent", "file-edit", "file-list", "file-read", "file-write", "http-fetch", "load-skills",
             "memory-search", "shell", "skill-describe", "skill-list"}
    rows = [("bundled skill", "stub tokens", "JSON Schema tokens")]
    rows += [(name + ("" if name in shown else " (internal)"), str(a), str(b)) for name, a, b in sizes]
    visible = [(a, b) for name, a, b in sizes if name in shown]
    stub_total, json_total = sum(a for a, _ in visible), sum(b for _, b in visible)
    rows.append(("total, skills a model may be shown", str(stub_total), str(json_total)))
    rows.append(("stubs vs JSON", f"{(stub_total / json_total - 1) * 100:+.0f}%", ""))
    _table(rows)
    if semantic is not None:
        print()
        _table([
            ("hybrid retrieval (all-MiniLM-L6-v2 with numpy)", "figure", ""),
            (f"embed a {semantic['chunks']:,}-chunk MEMORY.md the first time", f"{semantic['cold']:.1f} s",
             f"{semantic['rate']:.0f} chunks/s"),
            ("embed one message, p50", f"{semantic['embed']:.1f} ms", ""),
            ("retrieve top 5 for a message (hybrid), p50", f"{semantic['p50']:.1f} ms", ""),
            ("retrieve top 5 for a message (hybrid), p95", f"{semantic['p95']:.1f} ms", ""),
            ("the first search of another process (vectors read from the store)", f"{semantic['fresh']:.0f} ms", ""),
            ("a fact appended: re-index, embed it, retrieve", f"{semantic['appended']:.0f} ms", ""),
        ])  # fmt: skip


def _table(rows: list[tuple[str, str, str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


if __name__ == "__main__":
    main()
