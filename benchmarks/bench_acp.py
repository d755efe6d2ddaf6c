"""agent-acp overhead: starting an ACP agent CLI, and each ``invoke`` call it makes.

    python benchmarks/bench_acp.py [--calls 20] [--runs 3]

The CLI is the scripted ACP agent of the test suite (tests/extensions/acp_agent.py), a
real subprocess speaking ACP over stdio whose "model" answers at once, so the figures
are what the provider adds: the run's MCP endpoint, spawning the CLI and its
``initialize`` / ``session/new`` (the CLI's own start-up included: Python and its
imports), and per call the MCP round trip over HTTP, the hook events and the sandbox run.
The same turns on the scripted provider are the baseline for the per-call figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agent_apps import ContextManager

AGENT = Path(__file__).resolve().parents[1] / "tests" / "extensions" / "acp_agent.py"


async def one_run(cm: ContextManager, config: dict, topic: str) -> tuple[float, float]:
    """(ms to the first turn, ms for the whole run)."""
    first: list[float] = []
    unsubscribe = cm.events.subscribe(
        topic, lambda t, e: first.append(time.perf_counter()) if e["type"] == "turn-start" and not first else None
    )
    start = time.perf_counter()
    await cm.invoke("agent", {"prompt": "bench", "user_message": "go", "config": config, "events": topic})
    total = time.perf_counter() - start
    unsubscribe()
    return (first[0] - start) * 1000, total * 1000


async def main(calls: int, runs: int) -> None:
    turns = [{"code": f"x = {i}"} for i in range(calls)] + [{"text": "done"}]
    with tempfile.TemporaryDirectory() as directory:
        script = Path(directory) / "script.json"
        script.write_text(json.dumps(turns))
        cm = ContextManager([directory], cwd=directory, home=Path(directory) / "home", env=False, project=False,
                            user=False, entry_points=False)
        acp = {
            "agent": "agent-acp",
            "command": [sys.executable, str(AGENT), str(script)],
            "max_turns": calls + 5,
            "max_steps": calls + 5,
        }
        scripted = {"agent": "agent-scripted", "script": turns, "max_turns": calls + 5, "max_steps": calls + 5}
        await one_run(cm, scripted, "warm")  # the sandbox pool and imports
        await one_run(cm, acp, "warm")
        starts, per_call, baseline = [], [], []
        for _ in range(runs):
            first, total = await one_run(cm, acp, "acp")
            starts.append(first)
            per_call.append((total - first) / calls)
            _, base = await one_run(cm, scripted, "scripted")
            baseline.append(base / calls)
    print(f"agent-acp start (spawn, initialize, session/new) : {statistics.median(starts):8.1f} ms")
    print(f"agent-acp per invoke call (MCP over HTTP + hooks): {statistics.median(per_call):8.1f} ms")
    print(f"agent-scripted per call (baseline)               : {statistics.median(baseline):8.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.runs))
