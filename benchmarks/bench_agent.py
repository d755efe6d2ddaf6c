"""Agent overhead per turn with the scripted provider: everything except the model.

    python benchmarks/bench_agent.py

A turn here is what a real model turn costs us besides the model: the provider loop,
the hook callbacks (trace, events, directives), the invoke callback, the pipeline
(anonymous untrusted skill, allowed-tools, validation) and the sandbox run, with one
guest -> host skill call per turn in the later rows: plain, wrapped in a middleware
named by the agent's code (host checks and the onion), and served by an agent in
middleware mode (whose code runs the call with ``target.manager.next()``).

Each measure is taken in three rounds and printed as the range (lowest-highest median
of each round), so one noisy round on a loaded machine shows as a wide range rather
than a wrong figure. The run keeps its home (and so the run store, state.db) in a
temporary folder: benchmarks never write into the real home.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from agent_apps import ContextManager

NOOP = 'frontmatter = {"params": {"type": "object"}}\nasync def main(ctx, args):\n    return 1\n'
PASS = """frontmatter = {"metadata": {"role": "middleware"}}
async def main(ctx, args):
    return await ctx.manager.next()
"""
SERVE = """---
metadata:
  role: middleware
  model: {agent: agent-scripted, script: [{code: "await target.manager.next()"}, {text: done}]}
---
Serve.
"""


async def per_turn_ms(cm: ContextManager, turns: list[dict], runs: int = 15) -> float:
    config = {"agent": "agent-scripted", "script": turns}
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await cm.invoke("agent", {"prompt": "bench", "config": config, "events": "bench"})
        samples.append((time.perf_counter() - start) * 1000 / len(turns))
    return statistics.median(samples)


async def measures(cm: ContextManager) -> dict[str, float]:
    n = 20
    code = [{"code": "x = 1 + 1"} for _ in range(n - 1)] + [{"text": "done"}]
    call = [{"code": 'await ctx.manager.invoke("noop")'} for _ in range(n - 1)] + [{"text": "done"}]
    wrapped = [{"code": 'await ctx.manager.invoke("noop", middleware=["pass"])'} for _ in range(n - 1)]
    served = [{"code": 'await ctx.manager.invoke("noop", middleware=["serve"])'} for _ in range(n - 1)]
    return {
        "agent run of 1 text turn (whole run)": await per_turn_ms(cm, [{"text": "hi"}]),
        "text-only turn (hooks, trace, events)": await per_turn_ms(
            cm, [{"text": f"turn {i}"} for i in range(n)], runs=5),
        "turn with one invoke (code in the sandbox)": await per_turn_ms(cm, code),
        "turn with one invoke calling a skill": await per_turn_ms(cm, call),
        "- the call with middleware=[...] from the code": await per_turn_ms(cm, [*wrapped, {"text": "done"}]),
        "- the call served by a middleware-mode agent": await per_turn_ms(cm, [*served, {"text": "done"}], runs=5),
    }


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "noop.skill.py").write_text(NOOP)
        (root / "pass.skill.py").write_text(PASS)
        (root / "serve.skill.md").write_text(SERVE)
        cm = ContextManager([root], cwd=root, home=root / "home", env=False, project=False, user=False,
                            entry_points=False)
        cm.events.subscribe("bench", lambda topic, event: None)
        await per_turn_ms(cm, [{"text": "warm"}], runs=3)  # build/load the sandbox, fill the pool
        rounds = [await measures(cm) for _ in range(3)]
    print(f"{'measure':<46} {'per turn, 3 rounds (range)':>28}")
    for name in rounds[0]:
        low, high = min(r[name] for r in rounds), max(r[name] for r in rounds)
        print(f"{name:<46} {low:>10.3f} - {high:.3f} ms")


if __name__ == "__main__":
    asyncio.run(main())
