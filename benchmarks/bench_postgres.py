"""The state store on PostgreSQL, with SQLite beside it in the same run (docs/state.md).

    python benchmarks/bench_postgres.py [--url postgresql://...] [--only append,window,feed,schedulers,runs]
                                        [--schedules 10000] [--runs 2000]

Without ``--url`` it starts a throwaway PostgreSQL server from this machine's binaries
(``agent_apps.testing.postgres``) on loopback, with the server's default settings
(``fsync`` and ``synchronous_commit`` on: every commit waits for its WAL to reach the
disk, as a production server's does), and each part gets a new store (a schema of its
own). Prints one table, each figure for SQLite, for PostgreSQL, and for PostgreSQL with
``synchronous_commit`` off for the store's connections (the URL's
``options=-c synchronous_commit=off``: a commit does not wait for the disk, as SQLite's
does not with ``synchronous=NORMAL``; a crash of the server may lose the last commits
of a fraction of a second, never leave the store inconsistent). Goals (issue 32):

* appending one message: p99 <= 2 ms on PostgreSQL over loopback;
* the prompt window of a 10,000-message session: <= 60 ms;
* 8 threads writing 8 runs at once (each write takes a change number of the console's
  feed): run writes a second (no goal; the feed must not make them wait for each other);
* 4 scheduler processes sharing 10,000 schedules all due at once: every due time run
  exactly once (checked: one claim per schedule, one run per claim, each run's id
  written once by the skill), a claim pass <= 100 ms;
* 2,000 scripted agent runs at once, each in a session of its own, on one store: no
  errors, the wall time on PostgreSQL within 1.5x of SQLite's. Also printed: the CPU
  time of the benchmark's process and of the throwaway server's processes (from
  ``/proc``) while the runs ran: on two cores the wall time follows their sum.

Stopped early (Ctrl-C, ``kill``: SIGINT, SIGTERM or SIGHUP), it stops and removes its
throwaway server before it exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_sessions import exchange, fill  # noqa: E402

from agent_apps import ContextManager  # noqa: E402
from agent_apps.run_record import RunRecord  # noqa: E402
from agent_apps.state import StateStore  # noqa: E402
from agent_apps.state.window import Budget, PromptWindow, StoreHistory, compaction_strategy  # noqa: E402


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 0.1 else f"{seconds * 1000:.0f} ms"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


# -- appending ----------------------------------------------------------------------------


def bench_append(location: str) -> dict[str, str]:
    store = StateStore(location)
    store.sessions.append("s", [{"role": "user", "text": "warm up"}])
    message = exchange(0)[3]
    times = []
    for _ in range(3000):
        start = time.perf_counter()
        store.sessions.append("s", [message])
        times.append(time.perf_counter() - start)

    async def through_the_loop() -> list[float]:
        out = []
        for _ in range(1000):
            start = time.perf_counter()
            await store.call(store.sessions.append, "s", [message])
            out.append(time.perf_counter() - start)
        return out

    looped = asyncio.run(through_the_loop())
    store.close()
    return {
        "append one message, p50": ms(pct(times, 0.5)),
        "append one message, p99 (goal on PostgreSQL: <= 2 ms)": ms(pct(times, 0.99)),
        "append through the store's threads (async), p99": ms(pct(looped, 0.99)),
    }


# -- the prompt window ----------------------------------------------------------------------


def bench_window(location: str) -> dict[str, str]:
    store = StateStore(location)
    fill(store, "big", 10_000)
    history = StoreHistory(store)

    def timed(strategy: str, context_window: int) -> float:
        window = PromptWindow(history, compaction_strategy({"strategy": strategy}), Budget(context_window, system=3000))
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            assert asyncio.run(window.get_prompt_window("big"))
            best = min(best, time.perf_counter() - start)
        return best

    out = {
        "prompt window, 10,000 messages all in it (goal: <= 60 ms)": ms(timed("truncate", 100_000_000)),
        "prompt window, 10,000 messages, 200k-token model": ms(timed("truncate", 200_000)),
    }
    store.sessions.compact("big", through=7_000, summary="Earlier: 1,750 questions about data.csv, all answered.")
    out["prompt window, 10,000 messages after a summary"] = ms(timed("summarize", 100_000_000))
    store.close()
    return out


# -- schedulers on several machines ---------------------------------------------------------

#: Writes its run id to a log, so a due time that ran twice would show.
RECORDER = """
import os
frontmatter = {"description": "Record the run.", "params": {"type": "object"}}
async def main(ctx, args):
    with open(os.environ["BENCH_LOG"], "a") as fh:
        fh.write(ctx.run.run_id + "\\n")
    return 1
"""

#: One scheduler process (a machine of its own): runs until no due time is left, and
#: prints how long each claim pass took and how many due times it claimed.
SCHEDULER = """
import asyncio, json, sys, time
from agent_apps import ContextManager
from agent_apps.scheduling import Scheduler
location, skills, home = sys.argv[1:4]
cm = ContextManager([skills], cwd=home, home=home, env=False, project=False, user=False, entry_points=False,
                    state=location)
store = cm.state
passes = []
claim = store.schedules.claim
def timed(*args, **kwargs):
    start = time.perf_counter()
    out = claim(*args, **kwargs)
    passes.append([time.perf_counter() - start, len(out.claims)])
    return out
store.schedules.claim = timed
async def main():
    scheduler = Scheduler(cm, poll=0.05, concurrency=8)
    task = asyncio.create_task(scheduler.run())
    while True:
        await asyncio.sleep(0.2)
        if await store.call(store.schedules.next_due) is None and not scheduler.running:
            break
    scheduler.stop()
    await task
print("ready", flush=True)
sys.stdin.readline()
asyncio.run(main())
print(json.dumps(passes))
"""


def bench_schedulers(location: str, root: Path, count: int, processes: int = 4) -> dict[str, str]:
    skills = root / "skills"
    skills.mkdir(exist_ok=True)
    (skills / "recorder.skill.py").write_text(RECORDER)
    log = root / f"ran-{time.monotonic_ns()}.log"
    store = StateStore(location)
    now = time.time()
    due = now + 5  # all at once, after every scheduler started
    with store.db.write() as conn:  # as schedule-create writes them, one due time each
        conn.executemany(
            "INSERT INTO schedules (id, name, ref, args, at, catch_up, created_at, next_at) "
            "VALUES (?, NULL, 'recorder', '{}', ?, 'one', ?, ?)",
            [(f"s{i:05d}", due, now, due) for i in range(count)],
        )
    env = {**os.environ, "BENCH_LOG": str(log)}
    procs = []
    for i in range(processes):
        home = root / f"machine{i}"
        home.mkdir(exist_ok=True)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", SCHEDULER, location, str(skills), str(home)],
                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
        )
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    passes: list[list[float]] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=1800)
        assert proc.returncode == 0
        passes += json.loads(out.strip().splitlines()[-1])
    finished = time.time()
    ran = log.read_text().split()
    with store.db.read() as conn:
        claims, schedules = conn.execute("SELECT count(*), count(DISTINCT schedule_id) FROM schedule_runs").fetchone()
        done = conn.execute("SELECT count(*) FROM runs WHERE status = 'done'").fetchone()[0]
    store.close()
    once = claims == schedules == count == done == len(ran) == len(set(ran))
    claiming = [seconds for seconds, claimed in passes if claimed]
    return {
        f"{processes} schedulers x {count:,} schedules: each due time run once": (
            "yes" if once else f"NO: {claims} claims of {schedules} schedules, {done} done, {len(ran)} ran"
        ),
        "  claim pass p50 / p99 / max (goal: <= 100 ms)": " / ".join(
            ms(value) for value in (pct(claiming, 0.5), pct(claiming, 0.99), max(claiming))
        ),
        "  runs a second, all schedulers together": f"{count / (finished - due):.0f}",
    }


# -- many agent runs at once ----------------------------------------------------------------

ECHO = """frontmatter = {"params": {"type": "object"}}
async def main(ctx, args):
    return args
"""
TURN_1 = """
replies = await asyncio.gather(*[ctx.manager.invoke("echo", {"run": memory["n"], "call": i}) for i in range(5)])
assert all(r == {"run": memory["n"], "call": i} for i, r in enumerate(replies)), replies
memory["calls"] = len(replies)
"""
TURN_2 = 'ctx.manager.finish({"run": memory["n"], "calls": memory["calls"]})'
SCRIPT = [{"text": "calling", "code": TURN_1}, {"text": "done", "code": TURN_2}]


def server_cpu(folder: Path | None) -> float:
    """CPU seconds the throwaway server's processes have used (its postmaster's own, its
    children's that ended, and those of its live children), from ``/proc``; 0 without one."""
    if folder is None or not Path("/proc/self/stat").exists():
        return 0.0
    postmaster = int((folder / "data" / "postmaster.pid").read_text().split()[0])
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(stat.parent.name) == postmaster:
            total += sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
        elif int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def bench_runs(location: str, root: Path, count: int, server: Path | None = None) -> dict[str, Any]:
    skills = root / "run-skills"
    skills.mkdir(exist_ok=True)
    (skills / "echo.skill.py").write_text(ECHO)
    cm = ContextManager([skills], cwd=root, home=root / "home", env=False, user=False, entry_points=False,
                        state=location)  # fmt: skip

    async def one(n: int) -> None:
        config = {"agent": "agent-scripted", "script": SCRIPT}
        result = await cm.invoke("agent", {"prompt": "bench", "memory": {"n": n}, "config": config}, session=f"s{n}")
        if result != {"run": n, "calls": 5}:
            raise AssertionError(f"run {n} got {result!r}")

    async def main() -> tuple[float, list[BaseException]]:
        await one(-1)  # the sandbox component loaded, the store opened
        start = time.perf_counter()
        outcomes = await asyncio.gather(*(one(n) for n in range(count)), return_exceptions=True)
        wall = time.perf_counter() - start
        return wall, [o for o in outcomes if isinstance(o, BaseException)]

    client, served = time.process_time(), server_cpu(server)
    wall, errors = asyncio.run(main())
    client, served = time.process_time() - client, server_cpu(server) - served
    for error in errors[:3]:
        print(f"{location.split('?')[0]}: {type(error).__name__}: {error}", file=sys.stderr)
    stored = len(cm.state.sessions.list())
    cm.state.close()
    return {"wall": wall, "errors": len(errors), "sessions": stored, "client": client, "server": served}


# -- run writes at once (the change feed) ------------------------------------------------------


def bench_feed(location: str, threads: int = 8, writes: int = 300) -> dict[str, str]:
    """``threads`` threads (and as many connections in the PostgreSQL store's pool), each
    writing the turn in flight of a run of its own ``writes`` times: every write takes a
    change number."""
    store = StateStore(location if location.endswith(".db") else f"{location}&pool_size={threads}")
    records = [RunRecord.new().child() for _ in range(threads)]
    for n, record in enumerate(records):
        store.runs.start_agent(record, name=f"writer-{n}")

    def write(record: RunRecord) -> None:
        for turn in range(writes):
            store.runs.live(record, json.dumps({"index": 0, "turn": turn}))

    workers = [threading.Thread(target=write, args=(record,)) for record in records]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - start
    store.close()
    return {f"{threads} threads writing runs at once: run writes a second": f"{threads * writes / wall:,.0f}"}


# -- the table ------------------------------------------------------------------------------


def _exit(signum: int, frame: Any) -> None:
    """A signal that asks the bench to stop: exit as the shell reports it (128 + the signal)."""
    raise SystemExit(128 + signum)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", help="a PostgreSQL server to use (default: a throwaway one)")
    parser.add_argument("--only", default="append,window,feed,schedulers,runs")
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=2_000)
    options = parser.parse_args()
    parts = options.only.split(",")
    for stop in (signal.SIGTERM, signal.SIGHUP):  # as Ctrl-C does: the `finally` below runs
        signal.signal(stop, _exit)
    server = None
    try:
        if options.url is None:
            from agent_apps.testing.postgres import PostgresServer

            server = PostgresServer()
            server.start()
        base = options.url or server.url("bench")  # type: ignore[union-attr]
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            rows: dict[str, tuple[str, ...]] = {}
            join = "&" if "?" in base else "?"
            fast = "options=-c%20synchronous_commit%3Doff"

            def stores(part: str) -> list[str]:
                schema = f"schema=bench_{part}_{os.getpid()}"
                return [str(root / f"{part}.db"), f"{base}{join}{schema}", f"{base}{join}{schema}_async&{fast}"]

            def each(part: str, bench: Callable[[str], dict[str, str]]) -> None:
                figures = [bench(location) for location in stores(part)]
                for label in figures[0]:
                    rows[label] = tuple(figure[label] for figure in figures)

            if "append" in parts:
                each("append", bench_append)
            if "window" in parts:
                each("window", bench_window)
            if "feed" in parts:
                each("feed", bench_feed)
            if "schedulers" in parts:
                each("schedulers", lambda where: bench_schedulers(where, root, options.schedules))
            if "runs" in parts:
                folder = server.folder if server is not None else None
                done = [bench_runs(location, root, options.runs, folder) for location in stores("runs")]
                lite = done[0]["wall"]
                label = f"{options.runs:,} agent runs at once, a session each: wall time (goal: <= 1.5x SQLite)"
                rows[label] = tuple(
                    f"{d['wall']:.1f} s" + (f" ({d['wall'] / lite:.2f}x)" if d is not done[0] else "") for d in done
                )
                rows["  errors, sessions stored"] = tuple(f"{d['errors']}, {d['sessions']}" for d in done)
                rows["  CPU: this process, the throwaway server"] = tuple(
                    f"{d['client']:.1f} s" + (f", {d['server']:.1f} s" if d is not done[0] else "") for d in done
                )
    finally:
        if server is not None:
            server.stop()
    header = ("measure", "SQLite", "PostgreSQL", "PostgreSQL, synchronous_commit off")
    table = [header, *((label, *values) for label, values in rows.items())]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        cells = zip(row[1:], widths[1:], strict=True)
        print(f"{row[0]:<{widths[0]}}" + "".join(f"  {cell:>{width}}" for cell, width in cells))


if __name__ == "__main__":
    main()
