"""Pipeline overhead, cold listing and whole-process invoke (issue 2 targets).

    python benchmarks/bench_pipeline.py

Prints one table. Targets: <= 25 us per invoke of a no-op skill with two middleware
(over a bare await of the same function); <= 300 ms to list 1,000 skills from a cold
process; <= 300 ms for `agent-apps invoke` of a trivial skill, whole process.

"from agent code" is the host side of a sandboxed call (benchmarks/bench_sandbox.py,
"call via pipeline") without the sandbox: an untrusted anonymous skill whose
allowed-tools names a no-op skill (no schema, no middleware of its own) invokes it in a
loop; every stage runs (bare-name check, allowed-tools, args and result checks, the
permission middleware, context and signal bookkeeping).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent_apps import ContextManager

MW = """
frontmatter = {"metadata": {"role": "middleware"}}
async def main(ctx, args):
    return await ctx.manager.next()
"""
PLAIN = """
frontmatter = {"description": "Does nothing."}
async def main(ctx, args):
    return None
"""
NOOP = """
frontmatter = {"middleware": ["mw-one", "mw-two"]}
async def main(ctx, args):
    return None
"""
CALLER = """
frontmatter = {"params": {"type": "object", "properties": {"n": {"type": "integer"}}}}
async def main(ctx, args):
    invoke = ctx.manager.invoke
    for _ in range(args["n"]):
        await invoke("noop")
"""


def hermetic(path: Path) -> ContextManager:
    return ContextManager([path], cwd=path, home=path / "home", env=False, project=False, user=False,
                          entry_points=False, bundled=False)


async def per_call_us(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await fn()
    return (time.perf_counter() - start) / n * 1e6


async def bench_overhead(root: Path) -> dict[str, float]:
    (root / "mw-one.skill.py").write_text(MW)
    (root / "mw-two.skill.py").write_text(MW)
    (root / "noop.skill.py").write_text(NOOP)
    (root / "caller.skill.py").write_text(CALLER)
    (root / "plain.skill.py").write_text(PLAIN)
    cm = hermetic(root)
    main = cm.get("noop").main

    async def bare():
        return await main(None, {})

    async def root_invoke():
        return await cm.invoke("noop")

    n = 20000
    for _ in range(3):  # warm up caches and the allocator
        await per_call_us(root_invoke, 2000)
    bare_us = min([await per_call_us(bare, n) for _ in range(5)])
    root_us = min([await per_call_us(root_invoke, n) for _ in range(5)])
    nested = []
    for _ in range(5):
        start = time.perf_counter()
        await cm.invoke("caller", {"n": n})
        nested.append((time.perf_counter() - start) / n * 1e6)
    return {"bare": bare_us, "root": root_us, "nested": min(nested), "agent_code": await agent_code_us(cm, n)}


async def agent_code_us(cm: ContextManager, n: int) -> float:
    """Per call: agent code (untrusted) invoking the no-op ``plain`` by name, median of 7."""

    async def main(ctx, args):
        invoke = ctx.manager.invoke
        start = time.perf_counter()
        for _ in range(args["n"]):
            await invoke("plain")
        return (time.perf_counter() - start) / args["n"] * 1e6

    agent_code = {
        "name": "agent-code",
        "description": "bench",
        "allowed-tools": "plain",
        "main": main,
        "params": {"type": "object", "properties": {"n": {"type": "integer"}}},
    }
    await cm.invoke(agent_code, {"n": 2000}, internals={"untrusted": True})  # warm up
    return statistics.median([await cm.invoke(agent_code, {"n": n}, internals={"untrusted": True}) for _ in range(7)])


def timed_process(argv: list[str], cwd: Path, runs: int = 7) -> float:
    env = {**os.environ, "AGENT_APPS_HOME": str(cwd / "home")}
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pipeline_dir = root / "pipeline"
        pipeline_dir.mkdir()
        overhead = asyncio.run(bench_overhead(pipeline_dir))

        many = root / "many"
        many.mkdir()
        for i in range(1000):
            (many / f"skill-{i:04d}.skill.py").write_text(
                f'frontmatter = {{"description": "Generated skill {i}.", "params": {{"type": "object", '
                f'"properties": {{"x": {{"type": "integer"}}}}}}}}\n\nasync def main(ctx, args):\n    return {i}\n'
            )
        exe = [sys.executable, "-m", "agent_apps"]
        list_ms = timed_process([*exe, "list", "--path", str(many)], root)
        (pipeline_dir / "trivial.skill.py").write_text(
            'frontmatter = {"params": {"type": "object", "properties": {"s": {"type": "string"}}}}\n'
            "async def main(ctx, args):\n    return args['s']\n"
        )
        invoke_ms = timed_process([*exe, "invoke", "trivial", "s=hi", "--path", str(pipeline_dir)], root)
        python_ms = timed_process([sys.executable, "-c", "pass"], root)

    rows = [
        ("bare await of the no-op main", f"{overhead['bare']:.2f} us", ""),
        ("invoke, 2 middleware, from a skill", f"{overhead['nested'] - overhead['bare']:.1f} us overhead", "<= 25 us"),
        (
            "invoke from agent code, no-op skill",
            f"{overhead['agent_code']:.1f} us per call",
            "(sandbox call, host side)",
        ),
        (
            "invoke, 2 middleware, top level",
            f"{overhead['root'] - overhead['bare']:.1f} us overhead",
            "(includes signal setup)",
        ),
        ("list 1,000 skills, cold process", f"{list_ms:.0f} ms", "<= 300 ms"),
        ("agent-apps invoke trivial, process", f"{invoke_ms:.0f} ms", "<= 300 ms"),
        ("python -c pass (for scale)", f"{python_ms:.0f} ms", ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(width)}  {'figure':>22}  target")
    for name, figure, target in rows:
        print(f"{name.ljust(width)}  {figure:>22}  {target}")


if __name__ == "__main__":
    main()
