"""A fake clock for the scheduler, a counting skill, and the permission to schedule."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

#: The call config that lets tests (unattended: stdin is no terminal) use the skills that
#: change what runs later, which the permission policy denies unattended by default.
ALLOW = {"security": {"policy": {"allow": ["schedule-*", "event-*", "skill-register"]}}}

COUNTER = """
import json, os
frontmatter = {
    "description": "Append its args to a log.",
    "params": {"type": "object", "properties": {"log": {"type": "string"}, "n": {"type": "integer"}},
               "required": ["log"]},
}
async def main(ctx, args):
    with open(args["log"], "a") as fh:
        fh.write(json.dumps({"n": args.get("n"), "run": ctx.run.run_id, "pid": os.getpid()}) + "\\n")
    return "ok"
"""


class FakeClock:
    """Time that moves only when told to; ``sleep`` just yields."""

    def __init__(self, start: float = 1_795_000_000.0) -> None:
        self.now = start

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def counter(write_skill, tmp_path: Path) -> Path:
    """The ``counter`` skill, and the log it appends one line per run to."""
    write_skill("counter", COUNTER)
    return tmp_path / "runs.log"


def lines(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
