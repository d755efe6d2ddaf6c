"""Durable runs: the journal's cost per host call, and the time to resume a run.

    python benchmarks/bench_durability.py

Goals: journaling adds at most 0.1 ms to a host call from agent code (measured as the
median difference per call between runs of an agent whose code makes 400 calls, with
the journal on and with ``model.journal: false``, taken in alternation; and as the
journal's own work per call: number, look up, queue and write in batches, and how many
batches a run of those calls writes: a store transaction each, on the store's thread); resuming a run of 100 journaled
host calls takes at most 200 ms (``cm.resume`` from the claim to the result: 10 code runs
of 10 calls each replayed, then the approved call and a last model turn live).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from agent_apps import ApprovalPending, ContextManager
from agent_apps.agent.durable import AgentJournal, RunJournal
from agent_apps.run_record import RunRecord

NOOP = """
frontmatter = {"params": {"type": "object", "properties": {"i": {"type": "integer"}}}}
async def main(ctx, args):
    return args.get("i", 0)
"""
CALLS = 400
LOOP = f"for i in range({CALLS}):\n    await ctx.manager.invoke('noop', {{'i': i}})"
ASK = {"security": {"mode": "unattended", "policy": {"unattended": {"ask": ["file-write"]}}}}


def manager(root: Path, store: str) -> ContextManager:
    return ContextManager(
        search_path=[root / "skills"], cwd=root, home=root / "home", env=False, project=False, user=False,
        entry_points=False, state=store,
    )  # fmt: skip


def agent_call(script: list[dict], **model: object) -> dict:
    return {"prompt": "Bench.", "config": {"agent": "agent-scripted", "script": script, **model}}


async def per_call(cm: ContextManager, journal: bool) -> float:
    """Seconds per host call of one agent run whose code makes CALLS calls."""
    await cm.invoke("agent", agent_call([{"code": LOOP}, {}], journal=journal))
    (run, *_) = cm.state.runs.list(limit=1)
    (agent,) = cm.state.runs.agents(run.id)
    return float(agent.report["steps"][0]["tool_calls"][0]["latency_ms"]) / 1000 / CALLS


async def overhead(cm: ContextManager, pairs: int = 9) -> tuple[float, float, float]:
    """Per call: without the journal, with it, and the median of the differences of
    runs taken in alternation (a noisy machine slows both alike)."""
    off, on = [], []
    for _ in range(pairs):
        off.append(await per_call(cm, journal=False))
        on.append(await per_call(cm, journal=True))
    diffs = [b - a for a, b in zip(off, on, strict=True)]
    return statistics.median(off), statistics.median(on), statistics.median(diffs)


async def batches(cm: ContextManager, runs: int = 3) -> float:
    """Batches of journal entries written (one store transaction each) per journaled run
    of CALLS calls: entries come every few microseconds, a batch is due 5 ms after the
    first of its entries (``WRITE_DELAY``), and the run's flushes write what is left."""
    journal = cm.state.journal
    add_rows = journal.add_rows
    written: list[int] = []

    def counted(run_id: str, rows: list) -> None:
        written.append(len(rows))
        add_rows(run_id, rows)

    journal.add_rows = counted  # type: ignore[method-assign]
    try:
        for _ in range(runs):
            await per_call(cm, journal=True)
    finally:
        del journal.add_rows
    return len(written) / runs


async def journal_work(cm: ContextManager) -> tuple[float, float]:
    """The journal's own work per host call: on the event loop (number the call, look it
    up, queue its entry), and on the store's thread (writing it, in a batch)."""
    record = RunRecord.new()
    cm.state.runs.start_agent(record.child(), name="bench")
    journal = AgentJournal(RunJournal(cm.state, record.run_id), "a1", {}, name="bench")
    journal.code_run(1)
    calls = 5000
    start = time.perf_counter()
    for i in range(calls):
        call = journal.issue("noop", {"i": i})
        journal.replayed(call)
        journal.record(call, {"ok": True, "result": i})
    queued = time.perf_counter()
    await journal.run.flush()
    return (queued - start) / calls, (time.perf_counter() - queued) / calls


async def checkpointed(cm: ContextManager, script: list[dict]) -> str:
    try:
        await cm.invoke("agent", agent_call(script), config=ASK)
    except ApprovalPending as pending:
        return pending.run_id
    raise AssertionError("the run did not stop for approval")


async def resume_time(cm: ContextManager, root: Path) -> tuple[float, int]:
    """Milliseconds to resume a run of 100 journaled calls (median of 5), and their count."""
    ten = "for i in range(10):\n    await ctx.manager.invoke('noop', {'i': i})"
    script = [{"code": ten} for _ in range(10)]
    script += [{"code": "await ctx.manager.invoke('file-write', {'path': 'out.txt', 'content': 'x'})"}, {"text": "ok"}]
    times, calls = [], 0
    for attempt in range(6):  # the first warms this process up (imports, the sandbox pool)
        run_id = await checkpointed(cm, script)
        calls = sum(1 for e in cm.state.journal.entries(run_id) if e.kind == "call")
        other = manager(root, cm.state.path)
        other.approve(run_id)
        start = time.perf_counter()
        assert await other.resume(run_id) == "ok"
        if attempt:
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), calls


async def run() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "skills").mkdir()
        (root / "skills" / "noop.skill.py").write_text(NOOP)
        cm = manager(root, str(root / "state.db"))
        await cm.invoke("agent", agent_call([{"code": "1"}, {}]))  # warm up the sandbox and imports
        off, on, diff = await overhead(cm)
        on_loop, written = await journal_work(cm)
        per_run = await batches(cm)
        resumed, calls = await resume_time(cm, root)
    print(f"{'measure':<52} {'value':>10}  goal")
    print(f"{'host call from agent code, no journal':<52} {off * 1e6:>7.1f} us")
    print(f"{'host call from agent code, journaled':<52} {on * 1e6:>7.1f} us")
    print(f"{'journaling overhead per host call (difference)':<52} {diff * 1e6:>7.1f} us  <= 100 us")
    print(f"{'journal work per call on the event loop':<52} {on_loop * 1e6:>7.1f} us")
    print(f"{'journal write per call (store thread, batched)':<52} {written * 1e6:>7.1f} us")
    print(f"{f'journal batches written per run of {CALLS} calls':<52} {per_run:>7.1f}")
    print(f"{f'resume a run of {calls} journaled host calls':<52} {resumed:>7.1f} ms  <= 200 ms")


if __name__ == "__main__":
    asyncio.run(run())
