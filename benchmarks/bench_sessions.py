"""The state store: appends, prompt windows, `sessions list`, size, a busy database.

    python benchmarks/bench_sessions.py

Prints one table. Targets: append one message p99 <= 1 ms; the prompt window of a
10,000-message session <= 50 ms; `agent-apps sessions list` with 10,000 sessions <= 300
ms as a whole process. Also printed: the store's size per 1,000 messages, and how long
the event loop stalls while another process holds the database's write lock.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent_apps.state import StateStore
from agent_apps.state.window import Budget, PromptWindow, StoreHistory, compaction_strategy

CODE = "rows = await ctx.manager.invoke('file-read', {'path': 'data.csv'})\nprint(len(rows.splitlines()))"


def exchange(n: int) -> list[dict]:
    """One turn of a typical session: ~2 kB over four messages."""
    call = {"id": f"c{n}", "name": "invoke", "input": {"code": CODE}}
    return [
        {"role": "user", "text": f"Question {n}: " + "what do the numbers in data.csv say about it? " * 4},
        {"role": "assistant", "text": "Let me read the file.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "name": "invoke", "text": "date,value\n" + "2026-01-01,42\n" * 60},
        {"role": "assistant", "text": "The values hold steady at 42 over the whole period. " * 3},
    ]


def fill(store: StateStore, session: str, messages: int) -> None:
    for n in range(messages // 4):
        store.sessions.append(session, exchange(n), run_id=f"r{n // 10}")


def bench_append(root: Path) -> dict[str, float]:
    store = StateStore(root / "append.db")
    store.sessions.append("s", [{"role": "user", "text": "warm up"}])
    times = []
    message = exchange(0)[3]
    for _ in range(3000):
        start = time.perf_counter()
        store.sessions.append("s", [message])
        times.append(time.perf_counter() - start)
    times.sort()

    async def through_the_loop() -> list[float]:
        out = []
        for _ in range(1000):
            start = time.perf_counter()
            await store.call(store.sessions.append, "s", [message])
            out.append(time.perf_counter() - start)
        return sorted(out)

    loop_times = asyncio.run(through_the_loop())
    store.close()
    return {
        "p50": times[len(times) // 2] * 1e3,
        "p99": times[int(len(times) * 0.99)] * 1e3,
        "loop_p99": loop_times[int(len(loop_times) * 0.99)] * 1e3,
    }


def bench_window(root: Path) -> dict[str, float]:
    store = StateStore(root / "window.db")
    fill(store, "big", 10_000)
    history = StoreHistory(store)

    def timed(strategy: str, context_window: int) -> float:
        budget = Budget(context_window, system=3000)
        window = PromptWindow(history, compaction_strategy({"strategy": strategy}), budget, stale_turns=4)
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            messages = asyncio.run(window.get_prompt_window("big"))
            best = min(best, time.perf_counter() - start)
        assert messages
        return best * 1e3

    out = {
        "all": timed("truncate", 100_000_000),  # every one of the 10,000 messages in the window
        "truncated": timed("truncate", 200_000),  # a 200k-token model: the newest that fit
    }
    # after a summarizing compaction at 70%: the window is the summary and the newest part
    store.sessions.compact("big", through=7_000, summary="Earlier: 1,750 questions about data.csv, all answered.")
    out["summarized"] = timed("summarize", 100_000_000)
    store.close()
    return out


def bench_list(root: Path) -> dict[str, float]:
    path = root / "list.db"
    StateStore(path).sessions.list()
    conn = sqlite3.connect(path)
    now = time.time()
    conn.executemany(
        "INSERT INTO sessions (id, created_at, updated_at, seq, tokens) VALUES (?, ?, ?, ?, ?)",
        [(f"session-{i:05d}", now - i, now - i, 40, 9000) for i in range(10_000)],
    )
    conn.commit()
    conn.close()
    env = {**os.environ, "AGENT_APPS_STATE": str(path), "AGENT_APPS_HOME": str(root / "home")}
    cmd = [sys.executable, "-m", "agent_apps", "sessions", "list"]
    best, lines = float("inf"), 0
    for _ in range(5):
        start = time.perf_counter()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        best = min(best, time.perf_counter() - start)
        lines = len(out.stdout.splitlines())
    assert lines == 10_001, lines
    scale = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        scale = min(scale, time.perf_counter() - start)
    return {"list": best * 1e3, "python": scale * 1e3}


def bench_size(root: Path) -> dict[str, float]:
    path = root / "size.db"
    store = StateStore(path)
    fill(store, "s", 10_000)
    store.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = conn.execute("SELECT sum(length(body)) FROM messages").fetchone()[0]
    conn.close()
    size = sum(p.stat().st_size for p in root.glob("size.db*"))
    return {"kb": size / 10 / 1024, "json_kb": raw / 10 / 1024}


HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def bench_busy(root: Path, hold: float = 0.5) -> dict[str, float]:
    path = root / "busy.db"
    store = StateStore(path)
    store.sessions.list()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(hold)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"

    async def main() -> tuple[float, float]:
        gaps: list[float] = []

        async def ticker() -> None:
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        task = asyncio.create_task(ticker())
        start = time.perf_counter()
        await store.call(store.sessions.append, "s", [{"role": "user", "text": "x"}])
        waited = time.perf_counter() - start
        task.cancel()
        return waited, max(gaps) if gaps else 0.0

    waited, gap = asyncio.run(main())
    holder.wait(timeout=30)
    store.close()
    return {"waited": waited * 1e3, "gap": gap * 1e3}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        append = bench_append(root)
        window = bench_window(root)
        listing = bench_list(root)
        size = bench_size(root)
        busy = bench_busy(root)
    rows = [
        ("measure", "figure", "target"),
        ("append one message, p50", f"{append['p50']:.3f} ms", ""),
        ("append one message, p99", f"{append['p99']:.3f} ms", "<= 1 ms"),
        ("append through the store thread (async), p99", f"{append['loop_p99']:.3f} ms", ""),
        ("prompt window, 10,000 messages all in it", f"{window['all']:.1f} ms", "<= 50 ms"),
        ("prompt window, 10,000 messages, 200k-token model", f"{window['truncated']:.1f} ms", ""),
        ("prompt window, 10,000 messages after a summary", f"{window['summarized']:.1f} ms", ""),
        ("agent-apps sessions list, 10,000 sessions, process", f"{listing['list']:.0f} ms", "<= 300 ms"),
        ("python -c pass (for scale)", f"{listing['python']:.0f} ms", ""),
        ("store size per 1,000 messages (~2 kB turns)", f"{size['kb']:.0f} kB", ""),
        ("  of which message JSON", f"{size['json_kb']:.0f} kB", ""),
        ("append while another process holds the lock 500 ms", f"{busy['waited']:.0f} ms", "(waits)"),
        ("  longest event-loop stall meanwhile", f"{busy['gap']:.1f} ms", "(loop not blocked)"),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]}")


if __name__ == "__main__":
    main()
