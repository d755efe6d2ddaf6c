"""What a real agent run costs in process: a host call from its code, and a one-turn run.

    python benchmarks/bench_run.py [--profile]

Both measures use a prompt skill (``bench.skill.md``) on the scripted provider, invoked
with ``cm.invoke_sync`` as a user would, journal on (the default):

* **host call**: the skill's code calls a no-op skill 300 times and times the loop
  itself (``time.perf_counter`` inside the sandbox), so the figure is one call from
  agent code through the gateway, the journal, the report, the pipeline and back;
  also with ``model.journal: false`` and ``model.retention: none``.
* **one-turn run**: the skill's code finishes at once (``ctx.manager.finish(1)``);
  the median of 30 runs from ``invoke_sync`` to its result.

Each measure is taken in three rounds and printed as the range of the rounds' medians,
then how many runs took a pooled sandbox and how many made their own on their path.
``--prefilled`` makes every sandbox the runs take before they start, so the pool's
thread is idle while they run: the difference is what its refill costs them.
``--profile`` runs them under cProfile instead: it prints the Python function calls
on the event loop's thread per one-turn run and per host call, the store round trips
per one-turn run (counts, which the load does not change), how often and how long the
event loop slept per one-turn run (waiting for the store's or the pool's thread, or a
timer: a time, so the load moves it) and how often it was ready but not running (the
GIL held by another thread, or no free core), what each store hand-off and each
sandbox the pool's thread made cost (wake-ups, wall and CPU time), the event loop
thread's own CPU per run, and the top entries of the one-turn run's profile. The home
and the run store live in a temporary folder.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_apps import ContextManager

NOOP = 'frontmatter = {"params": {"type": "object"}}\nasync def main(ctx, args):\n    return 1\n'
CALLS = """
import time
start = time.perf_counter()
for _ in range(300):
    await ctx.manager.invoke("noop", {})
ctx.manager.finish((time.perf_counter() - start) / 300 * 1e6)
"""
PROMPT = """---
params: {{type: object}}
allowed-tools: [noop]
metadata:
  model: {{agent: agent-scripted, script: [{{code: {code}}}]{extra}}}
---
Bench.
"""


def write_skill(root: Path, name: str, code: str, extra: str = "") -> None:
    import json

    (root / f"{name}.skill.md").write_text(PROMPT.format(code=json.dumps(code), extra=extra))


def call_us(cm: ContextManager, skill: str) -> float:
    return float(cm.invoke_sync(skill, {}))


def run_ms(cm: ContextManager, runs: int = 30) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        cm.invoke_sync("once", {})
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def profiled(work: Callable[[], object]) -> pstats.Stats:
    profiler = cProfile.Profile()
    profiler.enable()
    work()
    profiler.disable()
    return pstats.Stats(profiler)


def count_round_trips(work: Callable[[], object]) -> int:
    """How many times ``work`` hands work to the store's thread (``Database.call``)."""
    from agent_apps.state._db import Database

    call, trips = Database.call, [0]

    async def counted(self: Database, *args: Any, **kwargs: Any) -> Any:
        trips[0] += 1
        return await call(self, *args, **kwargs)

    Database.call = counted  # type: ignore[method-assign]
    try:
        work()
    finally:
        Database.call = call  # type: ignore[method-assign]
    return trips[0]


def count_waits(work: Callable[[], object]) -> tuple[int, float, int, float]:
    """How many times ``work``'s event loop slept more than 0.1 ms, and for how long in
    all (seconds): each a wait for another thread (the store's, the sandbox pool's) or a
    timer; then how many of its selects that had a ready callback (timeout 0, nothing to
    wait for) still took more than 0.1 ms, and how long: the loop thread waiting to take
    the GIL back from another thread (or for a core)."""
    import selectors

    select, waits = selectors.EpollSelector.select, [0, 0.0, 0, 0.0]

    def timed(self: selectors.EpollSelector, timeout: float | None = None) -> Any:
        start = time.perf_counter()
        try:
            return select(self, timeout)
        finally:
            slept = time.perf_counter() - start
            if slept > 0.0001:
                at = 2 if timeout == 0 else 0
                waits[at] += 1
                waits[at + 1] += slept

    selectors.EpollSelector.select = timed  # type: ignore[method-assign,assignment]
    try:
        work()
    finally:
        selectors.EpollSelector.select = select  # type: ignore[method-assign]
    return int(waits[0]), waits[1], int(waits[2]), waits[3]


def other_threads(work: Callable[[], object]) -> dict[str, float]:
    """What ``work`` costs the other threads, and its own: per store hand-off, the
    store's thread waking up (from the hand-off to the write's start), the write there
    (wall and that thread's CPU) and the event loop waking up after it; per sandbox
    the pool's thread made, its wall and CPU; the event loop thread's user and system
    CPU and its involuntary context switches (a core taken from it). Sums, in seconds
    (counts for the rest)."""
    import resource

    from agent_apps.sandbox import _pool
    from agent_apps.state._db import Database

    totals: dict[str, float] = dict.fromkeys(
        ("hand-offs", "store wake-up", "store write", "store cpu", "loop wake-up", "sandboxes made",
         "make wall", "make cpu"), 0.0)
    call, make = Database.call, _pool._make_one

    async def timed_call(self: Database, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        handed, seen = time.perf_counter(), {}

        def timed() -> Any:
            seen["start"], cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                seen["end"], seen["cpu"] = time.perf_counter(), time.thread_time() - cpu

        try:
            return await call(self, timed)
        finally:
            if seen:
                totals["hand-offs"] += 1
                totals["store wake-up"] += seen["start"] - handed
                totals["store write"] += seen["end"] - seen["start"]
                totals["store cpu"] += seen["cpu"]
                totals["loop wake-up"] += time.perf_counter() - seen["end"]

    def timed_make() -> Any:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return make()
        finally:
            totals["sandboxes made"] += 1
            totals["make wall"] += time.perf_counter() - start
            totals["make cpu"] += time.thread_time() - cpu

    Database.call, _pool._make_one = timed_call, timed_make  # type: ignore[method-assign]
    before = resource.getrusage(resource.RUSAGE_THREAD)
    try:
        work()
    finally:
        Database.call, _pool._make_one = call, make  # type: ignore[method-assign]
    after = resource.getrusage(resource.RUSAGE_THREAD)
    totals["loop user"] = after.ru_utime - before.ru_utime
    totals["loop system"] = after.ru_stime - before.ru_stime
    totals["loop preempted"] = after.ru_nivcsw - before.ru_nivcsw
    return totals


def prefill(count: int) -> None:
    """Replace the agents' sandbox pool by one holding ``count`` ready sandboxes that
    it does not refill: no sandbox is made while the runs go on."""
    import asyncio

    from agent_apps.agent import executor
    from agent_apps.sandbox import SandboxPool

    pool = SandboxPool(size=count)
    asyncio.run(pool.wait_ready(timeout=600))
    pool.size = 0
    executor._POOL = pool


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", action="store_true", help="cProfile 30 one-turn runs instead")
    parser.add_argument("--sort", default="cumulative", help="the profile's order (cumulative, tottime, ncalls)")
    parser.add_argument("--prefilled", action="store_true",
                        help="make every sandbox the runs take before they start: the pool's thread is idle while "
                             "they run (what its refill costs them)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "noop.skill.py").write_text(NOOP)
        write_skill(root, "calls", CALLS)
        write_skill(root, "calls-nojournal", CALLS, ", journal: false")
        write_skill(root, "calls-noretention", CALLS, ", retention: none")
        write_skill(root, "once", "ctx.manager.finish(1)")
        cm = ContextManager([root], cwd=root, home=root / "home", env=False, project=False, user=False,
                            entry_points=False)
        run_ms(cm, runs=3)  # build/load the sandbox, open the store
        if options.prefilled:
            prefill(130)
        if options.profile:
            trips = count_round_trips(lambda: run_ms(cm, runs=30))
            waits, slept, late, late_s = count_waits(lambda: run_ms(cm, runs=30))
            threads = {key: value / 30 for key, value in other_threads(lambda: run_ms(cm, runs=30)).items()}
            once = profiled(lambda: run_ms(cm, runs=30))
            calls = profiled(lambda: [call_us(cm, "calls") for _ in range(3)])
            per_run = once.total_calls / 30  # type: ignore[attr-defined]
            per_call = (calls.total_calls / 3 - per_run) / 300  # type: ignore[attr-defined]
            print(f"Python function calls (event loop thread): {per_run:.0f} per one-turn run, "
                  f"{per_call:.0f} per host call")
            print(f"store round trips (hand-offs to the store's thread): {trips / 30:.1f} per one-turn run")
            print(f"event loop asleep, waiting for another thread or a timer: {waits / 30:.1f} times, "
                  f"{slept / 30 * 1000:.2f} ms per one-turn run")
            print(f"event loop awake but not running (the GIL, or no core): {late / 30:.1f} times, "
                  f"{late_s / 30 * 1000:.2f} ms per one-turn run")
            per_trip = 1e6 / (threads["hand-offs"] or 1)
            print(f"per store hand-off ({threads['hand-offs']:.1f} per run): store's thread woken after "
                  f"{threads['store wake-up'] * per_trip:.0f} us, its write {threads['store write'] * per_trip:.0f}"
                  f" us ({threads['store cpu'] * per_trip:.0f} us CPU), event loop woken "
                  f"{threads['loop wake-up'] * per_trip:.0f} us after it")
            made = threads["sandboxes made"] or 1
            print(f"sandbox pool's thread: {threads['sandboxes made']:.1f} sandboxes made per run, each "
                  f"{threads['make wall'] / made * 1000:.2f} ms ({threads['make cpu'] / made * 1000:.2f} ms CPU)")
            print(f"event loop thread per run: {threads['loop user'] * 1000:.2f} ms user CPU, "
                  f"{threads['loop system'] * 1000:.2f} ms system, preempted {threads['loop preempted']:.1f} times")
            once.sort_stats(options.sort).print_stats(45)
            return
        rounds = []
        for _ in range(3):
            rounds.append({
                "host call, journal on (us)": statistics.median(call_us(cm, "calls") for _ in range(3)),
                "host call, model.journal: false (us)": statistics.median(
                    call_us(cm, "calls-nojournal") for _ in range(3)),
                "host call, model.retention: none (us)": statistics.median(
                    call_us(cm, "calls-noretention") for _ in range(3)),
                "one-turn run, median of 30 (ms)": run_ms(cm),
            })
        cm.state.close()
    print(f"{'measure':<40} {'3 rounds (range)':>20}")
    for name in rounds[0]:
        low, high = min(r[name] for r in rounds), max(r[name] for r in rounds)
        print(f"{name:<40} {low:>9.1f} - {high:.1f}")
    from agent_apps.agent import executor

    if executor._POOL is not None:
        stats = executor._POOL.stats
        print(f"sandboxes: {stats.pooled} runs took a pooled one, {stats.fresh} made their own")


if __name__ == "__main__":
    main()
