"""agent-acp overhead: starting an ACP agent CLI, each ``invoke`` call it makes, and a run's end.

    python benchmarks/bench_acp.py [--calls 20] [--runs 3]

The CLI is the scripted ACP agent of the test suite (tests/extensions/acp_agent.py), a
real subprocess speaking ACP over stdio whose "model" answers at once, so the figures
are what the provider adds:

- start: the run's MCP endpoint, spawning the CLI and its ``initialize`` /
  ``session/new`` (the CLI's own start-up included: Python and its imports), to the
  first ``turn-start``;
- per call: one ``invoke`` round trip as the CLI sees it, from one ``tool-call`` event
  to the next (the MCP request over HTTP, the hook events, the sandbox run, the CLI's
  next turn): the span from the first call to the last, over the calls in between;
- end: from the last ``turn-end`` to the run's result (closing the session, the CLI's
  exit, which a run waits for so that none of its processes outlives it, and the
  endpoint's shutdown).

The same turns on the scripted provider are the baseline for the per-call figure.
Three-run ranges: the machine's load shows in their spread.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from agent_apps import ContextManager

AGENT = Path(__file__).resolve().parents[1] / "tests" / "extensions" / "acp_agent.py"


async def one_run(cm: ContextManager, config: dict, topic: str) -> dict[str, float]:
    """The run's phases in ms: ``start``, ``per_call``, ``end`` and ``total``."""
    seen: list[tuple[str, float]] = []
    unsubscribe = cm.events.subscribe(topic, lambda t, e: seen.append((e["type"], time.perf_counter())))
    start = time.perf_counter()
    await cm.invoke("agent", {"prompt": "bench", "user_message": "go", "config": config, "events": topic})
    done = time.perf_counter()
    unsubscribe()
    first = next(at for kind, at in seen if kind == "turn-start")
    calls = [at for kind, at in seen if kind == "tool-call"]
    last_turn = [at for kind, at in seen if kind == "turn-end"][-1]
    return {
        "start": (first - start) * 1000,
        "per_call": (calls[-1] - calls[0]) / (len(calls) - 1) * 1000,
        "end": (done - last_turn) * 1000,
        "total": (done - start) * 1000,
    }


def spread(values: list[float]) -> str:
    return f"{min(values):7.1f} - {max(values):7.1f} ms"


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
        acp_runs = [await one_run(cm, acp, "acp") for _ in range(runs)]
        base_runs = [await one_run(cm, scripted, "scripted") for _ in range(runs)]
    print(f"agent-acp start (spawn, initialize, session/new) : {spread([r['start'] for r in acp_runs])}")
    print(f"agent-acp per invoke round trip (MCP over HTTP)  : {spread([r['per_call'] for r in acp_runs])}")
    print(f"agent-acp end (session closed, CLI exited)       : {spread([r['end'] for r in acp_runs])}")
    print(f"agent-scripted per call (baseline)               : {spread([r['per_call'] for r in base_runs])}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.runs))
