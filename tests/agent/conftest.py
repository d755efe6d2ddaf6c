from __future__ import annotations

import pytest

from .providers import HARNESSES

TOOLS = {
    "word-count": """
        frontmatter = {
            "description": "Count the words in a text.",
            "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "metadata": {"returns": {"type": "integer"}},
        }
        async def main(ctx, args):
            return len(args["text"].split())
    """,
    "slow-tool": """
        import asyncio
        frontmatter = {"description": "Sleeps until cancelled.", "params": {"type": "object", "properties": {"seconds": {"type": "number"}}}}
        async def main(ctx, args):
            ctx.signal.add_callback(lambda reason: ctx.manager.emit("tool-cancelled", {"reason": reason}))
            ctx.manager.emit("tool-started", {})
            await asyncio.sleep(args.get("seconds", 60))
            return "slept"
    """,
    "secret": """
        frontmatter = {"description": "Hidden.", "metadata": {"visibility": "hidden"}}
        async def main(ctx, args):
            return "secret!"
    """,
}


@pytest.fixture
def tools(write_skill):
    for name, source in TOOLS.items():
        write_skill(name, source)


@pytest.fixture(params=sorted(HARNESSES))
def harness(request):
    with HARNESSES[request.param]() as h:
        yield h


@pytest.fixture
def run_agent(context_manager, tools):
    """``await run_agent(harness, turns, **agent_args)``: the agent's result."""

    async def run(harness, turns, *, config=None, **args):
        call = {"prompt": "You are a test agent.", "user_message": "Do the test.", **args}
        call["config"] = {**harness.config(turns), **(config or {})}
        return await context_manager.invoke("agent", call)

    return run
