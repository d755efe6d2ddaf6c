"""``ctx.llm`` overhead: one model call from a code skill through the ``llm`` skill.

    python benchmarks/bench_llm.py [--calls 200] [--runs 3]

The model is the scripted provider, which answers at once, so the figures are what the
call adds: the ``llm`` invocation through the pipeline, the caller's model config, the
budget's account, the provider run for one turn with its two callbacks. It prints the
milliseconds per call of each run, and cProfile's function calls per call (steady
under load, unlike the time).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

from agent_apps.testing.plugin import hermetic_manager

ASKER = """
frontmatter = {"params": {"type": "object"}, "metadata": {"model": {"agent": "agent-scripted",
    "script": [{"text": "hi", "usage": {"input_tokens": 5, "output_tokens": 1}}]}}}
async def main(ctx, args):
    return [await ctx.llm("hello") for _ in range(args["n"])]
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:  # the skills and the home: nothing outside it
        root = Path(folder)
        (root / "skills").mkdir()
        (root / "skills" / "asker.skill.py").write_text(ASKER)
        cm = hermetic_manager([root / "skills"], root, state=str(root / "state.db"))
        asyncio.run(cm.invoke("asker", {"n": 5}))  # warm: imports, the parse cache
        for run in range(options.runs):
            started = time.perf_counter()
            asyncio.run(cm.invoke("asker", {"n": options.calls}))
            elapsed = time.perf_counter() - started
            print(f"run {run + 1}: {elapsed / options.calls * 1e3:.3f} ms per ctx.llm call")
        profile = cProfile.Profile()
        profile.enable()
        asyncio.run(cm.invoke("asker", {"n": 100}))
        profile.disable()
        print(f"function calls per ctx.llm call: {pstats.Stats(profile).total_calls / 100:.0f}")  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
