"""What wasmtime's engine settings give the sandbox: Cranelift's optimisation level, the
linear memory's reservation and guard (with 4 GiB reserved and a guard, a 32-bit
memory's bounds checks fold into the address space), signals-based traps, epochs.

    python benchmarks/bench_wasmtime_settings.py [--variants current,opt-none,...] [--rounds 3]

Componentizes the guest once, then for each variant compiles it with that engine in a
process of its own (a compiled component only loads into an engine with its settings;
each variant's cache is a temp folder, the real cache is untouched) and measures there:
the pure-Python loop of bench_sandbox.py (2 million iterations, timed inside the guest,
as a ratio to native CPython timed next to it), a fresh sandbox's first result, and a
warm run. ``--rounds`` whole passes over the variants (the load drifts: compare within
a round). Needs the ``sandbox`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
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

#: name -> (what it changes, the Config attributes it sets)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "current": ("the sandbox's settings (Cranelift speed, 4 GiB reservation, 32 MiB guard, signals)", {}),
    "opt-none": ("Cranelift optimisation off", {"cranelift_opt_level": "none"}),
    "opt-speed-size": ("Cranelift speed_and_size", {"cranelift_opt_level": "speed_and_size"}),
    "bounds-checked": ("64 MiB reservation, no guard: explicit bounds checks",
                       {"memory_reservation": 64 << 20, "memory_guard_size": 0}),
    "no-signals": ("no signals-based traps: explicit checks for every trap",
                   {"signals_based_traps": False, "memory_guard_size": 0}),
    "no-epochs": ("epoch interruption off (no time limits: for its cost only)", {"epoch_interruption": False}),
}
LOOP = "s = 0\nfor i in range(2000000):\n    s += i"


def native_loop_ms() -> float:
    ns: dict[str, Any] = {}
    t = time.perf_counter()
    exec(LOOP, ns)
    return (time.perf_counter() - t) * 1e3


async def measure() -> dict[str, Any]:
    from agent_apps.sandbox import Sandbox, SandboxLimits, _engine

    _engine.runtime()
    out: dict[str, Any] = {}
    firsts = []
    for _ in range(20):
        t = time.perf_counter()
        sb = await Sandbox.start()
        await sb.run("1")
        firsts.append(time.perf_counter() - t)
        await sb.close()
    out["fresh_us"] = statistics.median(firsts) * 1e6
    async with await Sandbox.start(limits=SandboxLimits(timeout=120)) as sb:
        for _ in range(100):
            await sb.run("1")
        warm = []
        for _ in range(1000):
            t = time.perf_counter()
            await sb.run("1")
            warm.append(time.perf_counter() - t)
        out["warm_us"] = statistics.median(warm) * 1e6
        timed = f"import time as _t\n_t0 = _t.perf_counter()\n{LOOP}\n(_t.perf_counter() - _t0) * 1e3"
        loops, natives = [], []
        for _ in range(3):
            natives.append(native_loop_ms())
            r = await sb.run(timed)
            assert r.error is None, r.error
            loops.append(r.value)
    out["loop_ms"] = statistics.median(loops)
    out["loop_native_ms"] = statistics.median(natives)
    return out


def child(variant: str, wasm: str) -> None:
    """In a process of its own: this variant's engine, the prebuilt component, the figures."""
    from agent_apps.sandbox import _build, _engine

    settings = VARIANTS[variant][1]
    base = _engine.engine_config

    def config() -> Any:
        cfg = base()
        for key, value in settings.items():
            setattr(cfg, key, value)
        return cfg

    _engine.engine_config = config  # new_engine() looks it up at each call
    _build.ENGINE_SETTINGS += ";bench=" + variant
    _build._componentize = lambda tmp, out: shutil.copy(wasm, out)  # built once by the parent
    t = time.perf_counter()
    _build.build(quiet=True)
    compile_s = time.perf_counter() - t
    out = asyncio.run(measure())
    out["compile_s"] = compile_s
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    from agent_apps.sandbox import _build

    names = args.variants.split(",")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="bench-wasmtime-") as tmp:
        wasm = Path(tmp) / "guest.wasm"
        work = Path(tmp) / "componentize"
        work.mkdir()
        _build._componentize(work, wasm)
        for _ in range(args.rounds):
            for name in names:
                env = {**os.environ, "AGENT_APPS_CACHE_DIR": str(Path(tmp) / name)}
                proc = subprocess.run([sys.executable, __file__, "--child", name, str(wasm)],
                                      capture_output=True, text=True, env=env)
                if proc.returncode != 0:
                    results[name].append({"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:120]})
                else:
                    results[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print("| variant | loop, 2M iterations, x native (each round) | fresh first result | warm run | compile |")
    print("|---|---|---|---|---|")
    for name in names:
        runs = results[name]
        failed = [r["error"] for r in runs if "error" in r]
        if failed:
            print(f"| {name} | fails: {failed[0]} | | | |")
            continue
        ratios = " / ".join(f"{r['loop_ms'] / r['loop_native_ms']:.1f}" for r in runs)
        fresh = " / ".join(f"{r['fresh_us'] / 1000:.1f}" for r in runs)
        warm = " / ".join(f"{r['warm_us']:.0f}" for r in runs)
        compiled = max(r["compile_s"] for r in runs)  # the first round compiles, the others load the cache
        print(f"| {name} | {ratios} | {fresh} ms | {warm} us | {compiled:.0f} s |")
    print()
    for name in names:
        print(f"{name}: {VARIANTS[name][0]}")
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
