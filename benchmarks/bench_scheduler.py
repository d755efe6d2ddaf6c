"""Schedules and the scheduler: the cost of an idle pass, of claiming, of catching up,
and how late runs start.

    python benchmarks/bench_scheduler.py

Prints one table. What it measures:

* an idle pass with 10,000 schedules, none due (what a scheduler does every ``--poll``
  seconds: the earliest due time, and the persisted subscriptions);
* ``schedule-list`` (``store.schedules.list()``) of 10,000 schedules;
* one claim of 1,000 due schedules (one write transaction), per due time;
* the claim of a minutely cron schedule after a week down (``catch_up: one``), which
  holds the store's write lock while it counts the missed due times;
* a real scheduler (system clock, ``concurrency`` 4): how late it claims the due times
  of a schedule every 0.1 s, and how many runs of a trivial skill per second it makes
  when 200 schedules are due at once (each run: claim, invoke, record);
* what running under a maker's authority costs (docs/security.md, "Deferred work"): one
  invocation of a trivial skill under it, against a top-level one.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from agent_apps import ContextManager
from agent_apps.authority import Authority, invoke_as
from agent_apps.scheduling import Scheduler, When
from agent_apps.state import StateStore

SKILL = "frontmatter = {'description': 'Nothing.'}\nasync def main(ctx, args):\n    return 1\n"


def timed(fn, repeat: int = 20) -> float:
    """The median of ``repeat`` calls, in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def bench_store(root: Path) -> dict[str, str]:
    store = StateStore(root / "many.db")
    now = time.time()
    with store.db.write() as conn:  # 10,000 schedules in one transaction, as create() would write them
        conn.executemany(
            "INSERT INTO schedules (id, name, ref, args, every, catch_up, created_at, next_at) "
            "VALUES (?, NULL, 'nothing', '{}', 3600, 'one', ?, ?)",
            [(f"s{i:05d}", now, now + 3600 + i) for i in range(10_000)],
        )
    idle = timed(lambda: (store.schedules.next_due(), store.subscriptions.list()), 50)
    listing = timed(store.schedules.list, 5)

    due = StateStore(root / "due.db")
    with due.db.write() as conn:
        conn.executemany(
            "INSERT INTO schedules (id, name, ref, args, every, catch_up, created_at, next_at) "
            "VALUES (?, NULL, 'nothing', '{}', 60, 'one', ?, ?)",
            [(f"d{i:04d}", now - 90, now - 30) for i in range(1_000)],
        )
    start = time.perf_counter()
    claimed = due.schedules.claim(now, limit=1_000, grace=60)
    claim_ms = (time.perf_counter() - start) * 1000
    assert len(claimed.claims) == 1_000

    week = StateStore(root / "week.db")
    week.schedules.create(ref="nothing", args={}, when=When(cron="* * * * *", tz="UTC"), now=now - 7 * 86400)
    start = time.perf_counter()
    week.schedules.claim(now, limit=1, grace=60)
    catch_up_ms = (time.perf_counter() - start) * 1000
    return {
        "idle pass, 10,000 schedules (ms)": f"{idle:.2f}",
        "schedule-list, 10,000 schedules (ms)": f"{listing:.0f}",
        "claim 1,000 due times, one transaction (ms)": f"{claim_ms:.0f} ({claim_ms / 1000:.2f} per due time)",
        "claim after a week down, cron every minute (ms)": f"{catch_up_ms:.0f}",
    }


def bench_runs(root: Path) -> dict[str, str]:
    skills = root / "skills"
    skills.mkdir()
    (skills / "nothing.skill.py").write_text(SKILL)
    cm = ContextManager(search_path=[skills], cwd=root, home=root / "home", state=root / "runs.db", env=False,
                        project=False, user=False, entry_points=False)
    store = cm.state

    def serve(done) -> float:
        """Run a scheduler until ``done()``; returns when that was seen."""

        async def run() -> float:
            scheduler = Scheduler(cm, poll=0.05, concurrency=4)
            loop = asyncio.create_task(scheduler.run())
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not done():
                await asyncio.sleep(0.01)
            seen = time.time()
            scheduler.stop()
            await loop
            return seen

        return asyncio.run(run())

    # how late a due time is claimed: one schedule, every 0.1 s, 40 runs
    ticking = store.schedules.create(ref="nothing", args={}, when=When(every=0.1))
    serve(lambda: store.schedules.get(ticking.id).runs >= 40)
    late = sorted(run["claimed_at"] - run["due_at"] for run in store.schedules.runs_of(ticking.id))
    store.schedules.delete(ticking.id)
    # throughput: 200 schedules due at the same moment
    now = time.time()
    due_at = now + 0.5
    made = [store.schedules.create(ref="nothing", args={}, when=When(at=due_at), now=now) for _ in range(200)]

    def all_done() -> bool:
        return all(s.runs == 1 and s.last and s.last["status"] == "done" for s in store.schedules.list())

    finished = serve(all_done)
    assert len(made) == 200 and all_done()
    return {
        "due time to claim, every 0.1 s, p50 / p95 (ms)": f"{late[len(late) // 2] * 1000:.1f} / "
        f"{late[int(len(late) * 0.95)] * 1000:.1f}",
        "200 runs due at once, concurrency 4 (runs/s)": f"{200 / (finished - due_at):.0f}",
    }


def bench_authority(root: Path) -> dict[str, str]:
    skills = root / "authority-skills"
    skills.mkdir()
    (skills / "nothing.skill.py").write_text(SKILL)
    cm = ContextManager(search_path=[skills], cwd=root, home=root / "home", state=":memory:", env=False,
                        project=False, user=False, entry_points=False)
    maker = Authority("nothing", untrusted=True, by="agent code of bench")

    async def per_call(call) -> float:
        """The median of 5 batches of 2,000 calls, in microseconds per call."""
        for _ in range(200):
            await call()
        batches = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(2000):
                await call()
            batches.append((time.perf_counter() - start) / 2000 * 1e6)
        return statistics.median(batches)

    async def run() -> tuple[float, float]:
        direct = await per_call(lambda: cm.invoke("nothing", {}))
        delegated = await per_call(lambda: invoke_as(cm, maker, "nothing", {}))
        return direct, delegated

    direct, delegated = asyncio.run(run())
    return {"a trivial skill, top-level / under its maker's authority (us)": f"{direct:.0f} / {delegated:.0f}"}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows = {**bench_store(root), **bench_runs(root), **bench_authority(root)}
    width = max(map(len, rows))
    for label, value in rows.items():
        print(f"{label:<{width}}  {value}")


if __name__ == "__main__":
    main()
