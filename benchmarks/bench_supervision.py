"""Many agent runs at once: admission keeps memory bounded, and no run sees another's data.

    python benchmarks/bench_supervision.py [RUNS] [--sandboxes N] [--profile]

Starts RUNS (default 2,000) scripted agent runs concurrently on one ContextManager.
Each run has two model turns and makes five host calls (a skill that echoes its args
back) from its code, with data of its own: its number is seeded into its memory, sent
in every call, and checked in what comes back and in the result. Admission control
(``admission.sandboxes``) bounds how many hold a live sandbox at once; the rest wait
in line. Prints the wall time, the latency of a run from its start to its result
(p50, p99, waiting included), the peak of live sandboxes, the peak RSS of the
process and its CPU time per run, split by thread (the event loop's, the store's, the
sandbox pool's: they share the GIL, so this shows what bounds the runs per second), how
much of the event loop's was spent running wasm, and how much in the cyclic garbage
collector. ``--profile`` also counts the Python calls per run on the event loop's thread
and the calls among them that release the GIL (cProfile: its times are then the
profiler's). A run that sees another's data fails the benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from agent_apps import ContextManager

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


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def time_the_sandbox() -> list[float]:
    """Count the event loop thread's time inside the sandboxes from now on: ``[calls
    into wasm, their wall time, their CPU time]`` (a call's wall time past its CPU
    time is the wait for a core, or for the GIL back when the call returns)."""
    from agent_apps.sandbox import _engine

    spent, poll, loop = [0.0, 0.0, 0.0], _engine.Call.poll, threading.get_ident()

    def timed(call: _engine.Call) -> bool:
        if threading.get_ident() != loop:  # the pool's thread making an instance
            return poll(call)
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return poll(call)
        finally:
            spent[0] += 1
            spent[1] += time.perf_counter() - wall
            spent[2] += time.thread_time() - cpu

    _engine.Call.poll = timed  # type: ignore[method-assign,assignment]
    return spent


def time_the_collector() -> dict[int, list[float]]:
    """Count the event loop thread's CPU in the cyclic garbage collector from now on, by
    generation: ``{generation: [collections, CPU seconds]}``. Runs waiting for a sandbox
    hold their objects, so a full collection walks every waiting run's."""
    import gc

    spent: dict[int, list[float]] = {generation: [0, 0.0] for generation in range(3)}
    loop, started = threading.get_ident(), [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if threading.get_ident() != loop:
            return
        if phase == "start":
            started[0] = time.thread_time()
        else:
            spent[info["generation"]][0] += 1
            spent[info["generation"]][1] += time.thread_time() - started[0]

    gc.callbacks.append(timed)
    return spent


#: Calls on the event loop's thread that release the GIL (another thread may take it,
#: and the loop waits to get it back), counted by ``--profile``.
RELEASING = {
    "os.urandom": "<built-in method posix.urandom>",
    "os.stat": "<built-in method posix.stat>",
    "RE2 match": "<built-in method re2._re2.Match>",
    "SQLite statement": "<method 'execute' of 'sqlite3.Connection' objects>",
}


def print_calls(stats: pstats.Stats, runs: int) -> None:
    """Python calls per run on the event loop's thread, and those of them that release the GIL."""
    table: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    calls = sum(entry[1] for entry in table.values())
    print(f"  Python calls       {calls / runs:8.0f} per run on the event loop's thread (--profile)")
    counted = {name: sum(entry[1] for key, entry in table.items() if key[2] == function) / runs
               for name, function in RELEASING.items()}
    print("  GIL released by    " + ", ".join(f"{name} {count:.1f}" for name, count in counted.items()) + " per run")


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user and system) of each of this process's threads, by the part
    it plays: the event loop's, the store's, the sandbox pool's, the others (Linux)."""
    parts: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for thread in threading.enumerate():
        name = ("event loop" if thread is threading.main_thread() else "store" if thread.name.startswith(
            "agent-apps-state") else "sandbox pool" if thread.name == "agent-apps-sandbox-pool" else "other")
        try:
            with open(f"/proc/self/task/{thread.native_id}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # not Linux, or the thread ended
            continue
        parts[name] = parts.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return parts


async def one(cm: ContextManager, n: int) -> float:
    start = time.perf_counter()
    result = await cm.invoke(
        "agent",
        {"prompt": "bench", "memory": {"n": n}, "config": {"agent": "agent-scripted", "script": SCRIPT}},
    )
    if result != {"run": n, "calls": 5}:
        raise AssertionError(f"run {n} got {result!r}: cross-talk or a lost call")
    return time.perf_counter() - start


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", type=int, nargs="?", default=2000)
    parser.add_argument("--sandboxes", type=int, default=None,
                        help="admission.sandboxes (default: derived from this machine)")
    parser.add_argument("--profile", action="store_true",
                        help="count the event loop thread's Python calls per run (cProfile: times grow)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "skills").mkdir()
        (root / "skills" / "echo.skill.py").write_text(ECHO)
        if options.sandboxes:
            (root / "agent-apps.yaml").write_text(f"admission: {{sandboxes: {options.sandboxes}}}\n")
        cm = ContextManager(
            [root / "skills"],
            cwd=root,
            home=root / "home",
            env=False,
            user=False,
            entry_points=False,
            state=root / "state.db",
        )
        await one(cm, -1)  # load the sandbox component, open the store
        rss_before = peak_rss_mb()
        in_sandbox = time_the_sandbox()
        collector = time_the_collector()
        cpu_before, process_before = thread_cpu(), time.process_time()
        start = time.perf_counter()
        profile = cProfile.Profile() if options.profile else None
        if profile is not None:
            profile.enable()  # this thread's calls only: the event loop's
        latencies = await asyncio.gather(*(one(cm, n) for n in range(options.runs)))
        if profile is not None:
            profile.disable()
        wall = time.perf_counter() - start
        cpu = {part: seconds - cpu_before.get(part, 0.0) for part, seconds in thread_cpu().items()}
        process = time.process_time() - process_before
        gate = cm.admission.sandboxes
        cm.state.close()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"{options.runs} concurrent agent runs (2 turns, 5 host calls each), admission.sandboxes = {gate.size}")
    print(f"  wall time          {wall:8.2f} s   ({options.runs / wall:.0f} runs/s)")
    print(f"  run latency p50    {statistics.median(latencies) * 1000:8.0f} ms (waiting for a sandbox included)")
    print(f"  run latency p99    {p99 * 1000:8.0f} ms")
    print(f"  live sandboxes     {gate.peak:8d} at most")
    print(f"  peak RSS           {peak_rss_mb():8.0f} MB (after one warm-up run: {rss_before:.0f} MB)")
    print("  cross-talk         none (every run got its own data back)")
    per_run = ", ".join(f"{part} {seconds / options.runs * 1000:.1f}" for part, seconds in sorted(cpu.items()))
    print(f"  CPU per run        {process / options.runs * 1000:8.1f} ms ({per_run}; {process / wall:.2f} cores busy)")
    calls, in_wall, in_cpu = (value / options.runs for value in in_sandbox)
    print(f"  in the sandboxes   {in_cpu * 1000:8.1f} ms of the event loop's CPU per run ({calls:.1f} calls into wasm, "
          f"{in_wall * 1000:.1f} ms wall)")
    if profile is not None:
        print_calls(pstats.Stats(profile), options.runs)
    per_generation = ", ".join(
        f"generation {generation} {count / options.runs:.2f} times {seconds / options.runs * 1000:.2f} ms"
        for generation, (count, seconds) in collector.items()
    )
    print(f"  garbage collector  {sum(s for _, s in collector.values()) / options.runs * 1000:8.1f} ms of the event "
          f"loop's CPU per run ({per_generation})")


if __name__ == "__main__":
    asyncio.run(main())
