"""Benchmark the agent-code sandbox side by side with Pydantic's Monty and Pyodide.

    python benchmarks/bench_sandbox.py [--quick] [--json]

Needs the ``sandbox`` extra (wasmtime, componentize-py); builds the component on
first use (~20 s, cached). Monty (``pydantic-monty``, the ``bench`` extra) and
Pyodide (``npm install pyodide`` into a temp dir; needs Node and npm) are
measured when available and skipped with a note otherwise. Medians of many
runs; the machine's noise shows in the spread, so run it twice.

What each row measures:

- load: deserialize the compiled component (once per process).
- fresh: ``Sandbox.start()`` + first ``run("1")`` result (new Store and instance).
- pooled: ``pool.acquire()`` + first ``run("1")`` result from a warm pool.
- warm: a later ``run("1")`` on the same sandbox (the event loop's thread runs
  the wasm call); "the run's driver alone" is the same without the ``Sandbox``
  wrapper (lock, context, result object), and "guest only" is the time the guest
  itself spends (measured inside it).
- call: one ``await ctx.manager.invoke(...)`` round trip to a no-op
  ``call_host``; "call via pipeline" goes through the real ContextManager
  pipeline (untrusted anonymous skill -> no-op skill).
- CPU-bound code: the same three workloads in every engine, timed around the
  workload only (its input is built first): a pure-Python loop of 2 million
  iterations, a JSON round trip of 1 MB (``json.dumps(json.loads(doc))``) and a
  regex over 1 MB of text; each also as a ratio to native CPython (this
  interpreter), timed next to each engine's own samples (the load drifts).
- 1,000 calls: one piece of agent code that makes 1,000 host calls, one after
  another (``for``) or all at once (``asyncio.gather``), through the real
  pipeline (untrusted anonymous skill -> no-op skill), end to end.
- event-loop lag: a heartbeat task on the host's event loop (wakes every 1 ms)
  while a guest runs ``while True: pass`` under a 1 s time limit: the worst
  delay it saw, and how long the time limit took to stop the guest.
- RSS/sandbox: resident memory added per live sandbox with 50 alive (each has
  run once). RSS counts a page of the compiled component's heap snapshot once per
  instance that maps it, although all instances share one copy in the page cache;
  PSS splits shared pages between their mappings, and "private" counts only pages
  that belong to one instance.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

PYODIDE_DIR = Path(tempfile.gettempdir()) / "pyodide-bench"


def rss_mb(pid: int | None = None) -> float:
    path = f"/proc/{pid or 'self'}/status"
    with open(path) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rollup_mb(pid: int | None = None) -> dict[str, float]:
    """Pss and private (dirty + clean) memory from smaps_rollup, in MB."""
    out: dict[str, float] = {}
    try:
        with open(f"/proc/{pid or 'self'}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Pss", "Private_Clean", "Private_Dirty"):
                    out[key] = int(rest.split()[0]) / 1024
    except OSError:
        pass
    out["Private"] = out.get("Private_Clean", 0.0) + out.get("Private_Dirty", 0.0)
    return out


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


#: CPU-bound workloads: (setup, timed code), the same Python for every engine.
WORKLOADS: dict[str, tuple[str, str]] = {
    "loop": ("", "s = 0\nfor i in range(2000000):\n    s += i"),
    "json": (
        'import json\ndoc = json.dumps([{"id": i, "name": "item " + str(i), "tags": ["x", "y"], '
        '"score": i / 3} for i in range(13000)])',
        "out = json.dumps(json.loads(doc))",
    ),
    "regex": (
        'import re\ntext = " ".join(["user" + str(i) + "@example.com and word" + str(i) for i in range(28500)])',
        'found = re.findall(r"\\w+@\\w+\\.com", text)',
    ),
}
CPU_REPEAT = 3


def native_ms(name: str) -> float:
    """One timing of a workload in this interpreter (CPython, no sandbox), in ms."""
    setup, timed = WORKLOADS[name]
    ns: dict[str, Any] = {}
    exec(setup, ns)
    code = compile(timed, f"<{name}>", "exec")
    t = time.perf_counter()
    exec(code, ns)
    return (time.perf_counter() - t) * 1e3


def bench_native() -> dict[str, Any]:
    """The workloads in this interpreter (median of CPU_REPEAT), in ms. Each engine is
    compared with native timings taken next to its own (the machine's load drifts)."""
    return {f"{name}_ms": statistics.median(native_ms(name) for _ in range(CPU_REPEAT)) for name in WORKLOADS}


def _timed_guest_code(setup: str, timed: str) -> str:
    """Agent code that builds the input, then times the workload alone (in ms)."""
    return f"{setup}\nimport time as _t\n_t0 = _t.perf_counter()\n{timed}\n(_t.perf_counter() - _t0) * 1e3"


# -- ours ------------------------------------------------------------------------------


async def bench_ours(n: int) -> dict[str, Any]:
    from agent_apps.sandbox import Sandbox, SandboxPool, _engine, build

    build()
    out: dict[str, Any] = {}
    t = time.perf_counter()
    _engine.runtime()
    out["load_ms"] = (time.perf_counter() - t) * 1e3

    async def noop(name: str, args: Any) -> None:
        return None

    # fresh sandbox, no pool
    warmup = await Sandbox.start()
    await warmup.run("1")
    samples = []
    for _ in range(max(10, n // 50)):
        t = time.perf_counter()
        s = await Sandbox.start(memory={"k": 1}, call_host=noop)
        await s.run("1")
        samples.append(time.perf_counter() - t)
        await s.close()
    out["fresh_us"] = median_us(samples)

    # pooled
    samples = []
    async with SandboxPool(size=2) as pool:
        for _ in range(max(10, n // 50)):
            await pool.wait_ready()
            await asyncio.sleep(0.03)
            t = time.perf_counter()
            s = await pool.acquire(memory={"k": 1}, call_host=noop)
            await s.run("1")
            samples.append(time.perf_counter() - t)
            await s.close()
    out["pooled_us"] = median_us(samples)

    # warm runs
    sb = await Sandbox.start(call_host=noop)
    for _ in range(100):
        await sb.run("1")
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        await sb.run("1")
        samples.append(time.perf_counter() - t)
    out["warm_us"] = median_us(samples)
    samples = []
    for _ in range(max(10, n // 50)):
        await asyncio.sleep(0.03)  # the same idle gap as the pooled measurement
        t = time.perf_counter()
        await sb.run("1")
        samples.append(time.perf_counter() - t)
    out["warm_idle_us"] = median_us(samples)

    core = sb._core
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        await core.run("1", 30.0)
        samples.append(time.perf_counter() - t)
    out["warm_core_us"] = median_us(samples)
    guest = await sb.run(
        "import sys, time\nr = sys.modules['sandbox_guest']._runner\nts = []\n"
        "for _ in range(300):\n    t = time.perf_counter()\n    r.run('1', '')\n"
        "    ts.append(time.perf_counter() - t)\n"
        "sorted(ts)[150] * 1e6"
    )
    out["warm_guest_us"] = guest.value

    # guest -> host call round trip
    calls = 500
    loop_code = f"for _ in range({calls}):\n    await ctx.manager.invoke('noop')"
    base_code = f"for _ in range({calls}):\n    await asyncio.sleep(0)"
    diffs = []
    for _ in range(5):
        t = time.perf_counter()
        r = await sb.run(loop_code)
        a = time.perf_counter() - t
        assert r.error is None, r.error
        t = time.perf_counter()
        await sb.run(base_code)
        b = time.perf_counter() - t
        diffs.append((a - b) / calls)
    out["call_us"] = statistics.median(diffs) * 1e6
    out.update(await bench_pipeline_call(calls))
    await sb.close()

    # CPU-bound workloads, timed inside the guest
    from agent_apps.sandbox import SandboxLimits

    async with await Sandbox.start(limits=SandboxLimits(timeout=120)) as cpu:
        for name, (setup, timed) in WORKLOADS.items():
            samples, native = [], []
            for _ in range(CPU_REPEAT):
                native.append(native_ms(name))
                r = await cpu.run(_timed_guest_code(setup, timed))
                assert r.error is None, r.error
                samples.append(r.value)
            out[f"{name}_ms"] = statistics.median(samples)
            out[f"{name}_native_ms"] = statistics.median(native)

    out.update(await bench_loop_lag())

    # RSS per live sandbox, 50 alive
    gc.collect()
    before, roll0 = rss_mb(), rollup_mb()
    many = [await Sandbox.start(memory={"i": i}) for i in range(50)]
    for s in many:
        await s.run("memory['i'] + 1")
    after, roll1 = rss_mb(), rollup_mb()
    out["rss_per_sandbox_mb"] = (after - before) / 50
    out["pss_per_sandbox_mb"] = (roll1.get("Pss", 0) - roll0.get("Pss", 0)) / 50
    out["private_per_sandbox_mb"] = (roll1["Private"] - roll0["Private"]) / 50
    for s in many:
        await s.close()
    await warmup.close()
    return out


async def bench_loop_lag() -> dict[str, Any]:
    """The worst delay a 1 ms heartbeat on the host loop sees while a guest spins."""
    from agent_apps.sandbox import Sandbox, SandboxLimits

    lags: list[float] = []
    stop = False

    async def heartbeat() -> None:
        while not stop:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t - 0.001)

    async with await Sandbox.start(limits=SandboxLimits(timeout=1.0)) as sb:
        await sb.run("1")
        beat = asyncio.ensure_future(heartbeat())
        await asyncio.sleep(0.05)
        t = time.perf_counter()
        r = await sb.run("while True:\n    pass")
        stopped_after = time.perf_counter() - t
        stop = True
        await beat
    assert r.error and r.error.startswith("TimeoutError"), r.error
    return {"lag_max_ms": max(lags) * 1e3, "lag_p99_ms": sorted(lags)[int(len(lags) * 0.99)] * 1e3,
            "spin_stopped_s": stopped_after}


async def bench_pipeline_call(calls: int) -> dict[str, Any]:
    """Guest invokes of a no-op skill through the full pipeline: the cost of one
    (a loop of ``calls`` minus the same loop without calls), and 1,000 of them end
    to end, one after another and gathered."""
    from agent_apps.manager import ContextManager
    from agent_apps.sandbox import Sandbox

    tmp = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    try:
        (tmp / "skills").mkdir()
        (tmp / "skills" / "noop.skill.py").write_text(
            'frontmatter = {"description": "Does nothing."}\nasync def main(ctx, args):\n    return None\n'
        )
        cm = ContextManager(search_path=[tmp / "skills"], cwd=tmp, home=tmp / "home", env=False,
                            project=False, user=False, entry_points=False)
        holder: dict[str, Any] = {}

        async def call_host(name: str, args: Any) -> Any:
            return await holder["ctx"].manager.invoke(name, args)

        sb = await Sandbox.start(call_host=call_host)

        async def main(ctx: Any, args: Any) -> Any:
            holder["ctx"] = ctx
            return (await sb.run(args["code"])).to_json()

        skill = {"name": "agent-code", "description": "bench", "allowed-tools": "noop", "main": main,
                 "params": {"type": "object", "properties": {"code": {"type": "string"}}}}

        async def timed(code: str) -> float:
            t = time.perf_counter()
            res = await cm.invoke(skill, {"code": code}, internals={"untrusted": True})
            assert not res.get("error"), res
            return time.perf_counter() - t

        loop_code = f"for _ in range({calls}):\n    await ctx.manager.invoke('noop')"
        base_code = f"for _ in range({calls}):\n    await asyncio.sleep(0)"
        await timed(loop_code)
        diffs = [(await timed(loop_code) - await timed(base_code)) / calls for _ in range(5)]
        seq = "for _ in range(1000):\n    await ctx.manager.invoke('noop')"
        gathered = "await asyncio.gather(*(ctx.manager.invoke('noop') for _ in range(1000)))"
        seq_s = statistics.median([await timed(seq) for _ in range(5)])
        gather_s = statistics.median([await timed(gathered) for _ in range(5)])
        await sb.close()
        return {"call_pipeline_us": statistics.median(diffs) * 1e6, "calls_1000_loop_ms": seq_s * 1e3,
                "calls_1000_gather_ms": gather_s * 1e3}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# -- Monty -------------------------------------------------------------------------------


def bench_monty(n: int) -> dict[str, Any]:
    try:
        import pydantic_monty as pm
    except ImportError:
        return {"skipped": "pydantic-monty is not installed (pip install 'agent-apps[bench]')"}
    out: dict[str, Any] = {}
    t = time.perf_counter()
    pool = pm.Monty(min_processes=2, max_processes=60)
    pool.__enter__()
    out["pool_start_ms"] = (time.perf_counter() - t) * 1e3
    try:
        time.sleep(0.5)
        samples = []
        for _ in range(max(10, n // 50)):
            t = time.perf_counter()
            with pool.checkout() as s:
                s.feed_run("1")
                samples.append(time.perf_counter() - t)
            time.sleep(0.03)
        out["pooled_us"] = median_us(samples)
        with pool.checkout() as s:
            for _ in range(100):
                s.feed_run("1")
            samples = []
            for _ in range(n):
                t = time.perf_counter()
                s.feed_run("1")
                samples.append(time.perf_counter() - t)
            out["warm_us"] = median_us(samples)

        def noop() -> None:
            return None

        calls = 500  # a session allows 1000 suspensions (host calls): one session each
        diffs = []
        for _ in range(5):
            with pool.checkout() as s:
                s.feed_run("1")
                t = time.perf_counter()
                s.feed_run(f"for _ in range({calls}):\n    noop()", external_lookup={"noop": noop})
                a = time.perf_counter() - t
                t = time.perf_counter()
                s.feed_run(f"for _ in range({calls}):\n    pass", external_lookup={"noop": noop})
                b = time.perf_counter() - t
                diffs.append((a - b) / calls)
        out["call_us"] = statistics.median(diffs) * 1e6
        for name, (setup, timed) in WORKLOADS.items():
            try:
                with pool.checkout() as s:
                    s.feed_run(setup or "0")
                    samples, native = [], []
                    for _ in range(CPU_REPEAT):
                        native.append(native_ms(name))
                        t = time.perf_counter()
                        s.feed_run(timed)
                        samples.append(time.perf_counter() - t)
                out[f"{name}_ms"] = statistics.median(samples) * 1e3
                out[f"{name}_native_ms"] = statistics.median(native)
            except Exception as e:  # a workload Monty's subset cannot run
                out[f"{name}_ms"] = f"fails: {type(e).__name__}"
        # RSS per live session: 50 checked-out sessions, summed over worker processes
        sessions = []
        for i in range(50):
            s = pool.checkout()
            s.__enter__()
            s.feed_run(f"x = {i}")
            sessions.append(s)
        kids = _children()
        out["rss_per_sandbox_mb"] = sum(rss_mb(pid) for pid in kids) / 50
        out["pss_per_sandbox_mb"] = sum(rollup_mb(pid).get("Pss", 0) for pid in kids) / 50
        out["private_per_sandbox_mb"] = sum(rollup_mb(pid)["Private"] for pid in kids) / 50
        out["workers"] = len(_children())
        for s in sessions:
            s.__exit__(None, None, None)
    finally:
        pool.__exit__(None, None, None)
    return out


def _children() -> list[int]:
    me = str(os.getpid())
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if fields[1] == me:
                pids.append(int(entry))
        except OSError:
            pass
    return pids


# -- Pyodide ---------------------------------------------------------------------------------


def bench_pyodide() -> dict[str, Any]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return {"skipped": "node/npm not found"}
    if not (PYODIDE_DIR / "node_modules" / "pyodide").exists():
        PYODIDE_DIR.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([npm, "install", "--prefix", str(PYODIDE_DIR), "pyodide"],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            return {"skipped": f"npm install pyodide failed: {proc.stderr.strip()[-200:]}"}
    script = PYODIDE_DIR / "pyodide_bench.mjs"
    shutil.copy(HERE / "pyodide_bench.mjs", script)
    env = {**os.environ, "BENCH_WORKLOADS": json.dumps(WORKLOADS), "BENCH_REPEAT": str(CPU_REPEAT)}
    native = bench_native()  # just before Node runs the same workloads
    proc = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=300, cwd=PYODIDE_DIR, env=env)
    if proc.returncode != 0:
        return {"skipped": f"pyodide run failed: {proc.stderr.strip()[-300:]}"}
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update({key.replace("_ms", "_native_ms"): value for key, value in native.items()})
    return out


# -- report ----------------------------------------------------------------------------------------


def fmt(v: Any, unit: str) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if unit == "us":
        return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} us"
    if unit == "ms":
        return f"{v:.0f} ms" if v >= 100 else f"{v:.1f} ms"
    return f"{v:.1f} MB"


def report(ours: dict[str, Any], monty: dict[str, Any], pyo: dict[str, Any]) -> str:
    def m(key: str) -> Any:
        return monty.get(key) if "skipped" not in monty else None

    def p(key: str, scale: float = 1.0) -> Any:
        return pyo[key] * scale if "skipped" not in pyo and key in pyo else None

    def vs_native(key: str, engine: dict[str, Any] | None) -> Any:
        """``12 ms (2.1x)``: a CPU workload's time in an engine, and its ratio to
        native CPython timed next to it."""
        value = None if engine is None or "skipped" in engine else engine.get(key)
        if not isinstance(value, (int, float)):
            return value
        return f"{fmt(value, 'ms')} ({value / engine[key.replace('_ms', '_native_ms')]:.1f}x)"

    rows: list[tuple[str, str, Any, Any, Any, str]] = [
        ("start-up (load / pool start)", "ms", ours["load_ms"], m("pool_start_ms"), p("load_ms"), "-"),
        ("first result, pooled (after 30 ms idle)", "us", ours["pooled_us"], m("pooled_us"), None, "<= 250 us"),
        ("first result, fresh (no pool)", "us", ours["fresh_us"], None, p("first_ms", 1000), "<= 2.5 ms"),
        ("warm run", "us", ours["warm_us"], m("warm_us"), p("warm_ms", 1000), "<= 80 us"),
        ("  warm, after 30 ms idle (control)", "us", ours["warm_idle_us"], None, None, "profile"),
        ("  warm, the run's driver alone (no Sandbox wrapper)", "us", ours["warm_core_us"], None, None, "profile"),
        ("  warm, guest only (inside wasm)", "us", ours["warm_guest_us"], None, None, "profile"),
        ("guest -> host call", "us", ours["call_us"], m("call_us"), p("call_us"), "<= 40 us"),
        ("guest -> no-op skill via pipeline", "us", ours["call_pipeline_us"], None, None, "<= 60 us"),
        ("1,000 calls in a loop, via pipeline, end to end", "ms", ours["calls_1000_loop_ms"], None, None, "report"),
        ("1,000 calls gathered, via pipeline, end to end", "ms", ours["calls_1000_gather_ms"], None, None, "report"),
        ("loop lag while a guest spins (max / p99)", "ms",
         f"{ours['lag_max_ms']:.1f} / {ours['lag_p99_ms']:.1f} ms", None, None, "<= 20 ms"),
        ("  spin stopped by a 1 s time limit after", "ms", ours["spin_stopped_s"] * 1e3, None, None, "~1 s"),
        (f"pure-Python loop, 2M iterations (native {fmt(ours['loop_native_ms'], 'ms')})", "ms",
         vs_native("loop_ms", ours), vs_native("loop_ms", monty), vs_native("loop_ms", pyo), "<= 2.5x"),
        (f"JSON round trip, 1 MB (native {fmt(ours['json_native_ms'], 'ms')})", "ms",
         vs_native("json_ms", ours), vs_native("json_ms", monty), vs_native("json_ms", pyo), "report"),
        (f"regex over 1 MB (native {fmt(ours['regex_native_ms'], 'ms')})", "ms",
         vs_native("regex_ms", ours), vs_native("regex_ms", monty), vs_native("regex_ms", pyo), "report"),
        ("RSS per live sandbox (50 alive)", "MB", ours["rss_per_sandbox_mb"], m("rss_per_sandbox_mb"),
         p("rss_mb"), "profile"),
        ("  PSS per live sandbox (shared split)", "MB", ours["pss_per_sandbox_mb"], m("pss_per_sandbox_mb"),
         None, "<= 1.0 MB"),
        ("  private memory per live sandbox", "MB", ours["private_per_sandbox_mb"], m("private_per_sandbox_mb"),
         None, "profile"),
    ]
    width = max(len(row[0]) for row in rows)
    cols = (17, 15, 15)
    head = (f"| {'measure':<{width}} | {'agent-apps (wasm)':>{cols[0]}} | {'Monty':>{cols[1]}} | "
            f"{'Pyodide':>{cols[2]}} | {'goal':>9} |")
    lines = [head, "|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|"]
    for name, unit, a, b, c, target in rows:
        lines.append(f"| {name:<{width}} | {fmt(a, unit):>{cols[0]}} | {fmt(b, unit):>{cols[1]}} | "
                     f"{fmt(c, unit):>{cols[2]}} | {target:>9} |")
    notes = []
    if "skipped" in monty:
        notes.append(f"Monty skipped: {monty['skipped']}")
    if "skipped" in pyo:
        notes.append(f"Pyodide skipped: {pyo['skipped']}")
    else:
        notes.append(f"Pyodide ({pyo.get('node')}): RSS is the whole Node process with one interpreter; "
                     "its 'fresh' column is the first runPython after load.")
    if "skipped" not in monty:
        notes.append(f"Monty: RSS summed over {monty.get('workers')} worker processes / 50 sessions.")
    notes.append(f"native: CPython {sys.version.split()[0]} (this interpreter); load average at the end: "
                 f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return "\n".join(lines + [""] + notes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples")
    ap.add_argument("--json", action="store_true", help="print raw figures as JSON too")
    args = ap.parse_args()
    n = 300 if args.quick else 2000
    ours = asyncio.run(bench_ours(n))
    monty = bench_monty(n)
    pyo = bench_pyodide()
    print(report(ours, monty, pyo))
    if args.json:
        print(json.dumps({"agent_apps": ours, "monty": monty, "pyodide": pyo}, indent=2))


if __name__ == "__main__":
    main()
