from __future__ import annotations

import contextlib
import importlib.util

import pytest

from agent_apps.testing.conformance import TOOLS as CONFORMANCE_TOOLS
from agent_apps.testing.conformance import Scripted, strands_bedrock

#: The conformance suite's tools (word-count, slow-tool) and a hidden one.
TOOLS = {
    **CONFORMANCE_TOOLS,
    "secret": """
        frontmatter = {"description": "Hidden.", "metadata": {"visibility": "hidden"}}
        async def main(ctx, args):
            return "secret!"
    """,
}

#: Counts its calls in a file, so calls made in any process are counted.
COUNTER = """
from pathlib import Path
frontmatter = {"description": "Count a call.", "params": {"type": "object", "properties": {"tag": {"type": "string"}}}}
async def main(ctx, args):
    log = Path(ctx.manager.context_manager.cwd) / "counter.log"
    with log.open("a") as fh:
        fh.write(args.get("tag", "") + "\\n")
    return len(log.read_text().splitlines())
"""

#: The bundled providers' harnesses (the conformance suite's), for tests that hold every
#: provider to a protocol beyond the suite (model calls, sessions).
HARNESSES = {"agent-scripted": lambda: contextlib.nullcontext(Scripted())}
if importlib.util.find_spec("strands") and importlib.util.find_spec("boto3"):
    HARNESSES["agent-strands"] = strands_bedrock


@pytest.fixture
def tools(write_skill):
    for name, source in TOOLS.items():
        write_skill(name, source)


@pytest.fixture(params=sorted(HARNESSES))
def harness(request):
    with HARNESSES[request.param]() as made:
        yield made


@pytest.fixture
def run_agent(context_manager, tools):
    """``await run_agent(harness, turns, **agent_args)``: the agent's result."""

    async def run(harness, turns, *, config=None, **args):
        call = {"prompt": "You are a test agent.", "user_message": "Do the test.", **args}
        call["config"] = {**harness.config(turns), **(config or {})}
        return await context_manager.invoke("agent", call)

    return run


def no_timers(monkeypatch: pytest.MonkeyPatch) -> None:
    """No journal batch falls due by itself: only flushes write (and ``_start``, called)."""
    from agent_apps.agent import durable

    monkeypatch.setattr(durable, "WRITE_DELAY", 3600.0)
    monkeypatch.setattr(durable, "UNACTED_DELAY", 3600.0)
