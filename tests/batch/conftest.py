"""Skills for batch tests: a word counter, a two-turn scripted agent, and a gate that
counts the runs in flight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

COUNT = """
frontmatter = {
    "description": "Count the words of a text.",
    "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}
async def main(ctx, args):
    return len(args["text"].split())
"""

#: Two model turns, each running code in the sandbox; the result is the word count.
AGENT = """---
description: Count the words of a text, in two scripted turns.
metadata:
  model:
    agent: agent-scripted
    script:
      - code: |
          memory["n"] = len(memory["args"]["text"].split())
      - code: |
          ctx.manager.finish(memory["n"])
---
Count the words.
"""

#: Counts the runs in flight; each waits until ``n`` are (so the bound is reached, not
#: timed), and returns the most it saw at once.
GATE = """
import asyncio
frontmatter = {"params": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
state = {"now": 0, "max": 0, "full": None}
async def main(ctx, args):
    if state["full"] is None:
        state["full"] = asyncio.Event()
    state["now"] += 1
    state["max"] = max(state["max"], state["now"])
    if state["now"] >= args["n"]:
        state["full"].set()
    try:
        await asyncio.wait_for(state["full"].wait(), 20)
        return state["max"]
    finally:
        state["now"] -= 1
"""

SLOW = """
import asyncio
frontmatter = {"params": {"type": "object", "properties": {"s": {"type": "number"}}, "required": ["s"]}}
async def main(ctx, args):
    await asyncio.sleep(args["s"])
    return args["s"]
"""


@pytest.fixture
def skills(write_skill, skills_path: Path) -> Path:
    write_skill("count", COUNT)
    write_skill("count-agent.skill.md", AGENT)
    write_skill("gate", GATE)
    write_skill("slow", SLOW)
    return skills_path


def write_lines(path: Path, items: list) -> Path:
    """A JSONL file: dicts and lists as JSON, strings as they are (bad lines)."""
    path.write_text("".join((item if isinstance(item, str) else json.dumps(item)) + "\n" for item in items))
    return path


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
