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
``--profile`` runs them under cProfile instead: it prints the Python function calls
on the event loop's thread per one-turn run and per host call, the store round trips
per one-turn run (counts, which the load does not change), how often and how long the
event loop slept per one-turn run (waiting for the store's or the pool's thread, or a
timer: a time, so the load moves it), and the top entries of the one-turn run's
profile. The home and the run store live in a temporary folder.
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


def count_waits(work: Callable[[], object]) -> tuple[int, float]:
    """How many times ``work``'s event loop slept more than 0.1 ms (each a wait for
    another thread: the store's, the sandbox pool's; or for a timer), and for how long
    in all (seconds)."""
    import selectors

    select, waits = selectors.EpollSelector.select, [0, 0.0]

    def timed(self: selectors.EpollSelector, timeout: float | None = None) -> Any:
        start = time.perf_counter()
        try:
            return select(self, timeout)
        finally:
            slept = time.perf_counter() - start
            if slept > 0.0001:
                waits[0] += 1
                waits[1] += slept

    selectors.EpollSelector.select = timed  # type: ignore[method-assign,assignment]
    try:
        work()
    finally:
        selectors.EpollSelector.select = select  # type: ignore[method-assign]
    return int(waits[0]), waits[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", action="store_true", help="cProfile 30 one-turn runs instead")
    parser.add_argument("--sort", default="cumulative", help="the profile's order (cumulative, tottime, ncalls)")
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
        if options.profile:
            trips = count_round_trips(lambda: run_ms(cm, runs=30))
            waits, slept = count_waits(lambda: run_ms(cm, runs=30))
            once = profiled(lambda: run_ms(cm, runs=30))
            calls = profiled(lambda: [call_us(cm, "calls") for _ in range(3)])
            per_run = once.total_calls / 30  # type: ignore[attr-defined]
            per_call = (calls.total_calls / 3 - per_run) / 300  # type: ignore[attr-defined]
            print(f"Python function calls (event loop thread): {per_run:.0f} per one-turn run, "
                  f"{per_call:.0f} per host call")
            print(f"store round trips (hand-offs to the store's thread): {trips / 30:.1f} per one-turn run")
            print(f"event loop asleep, waiting for another thread or a timer: {waits / 30:.1f} times, "
                  f"{slept / 30 * 1000:.2f} ms per one-turn run")
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
