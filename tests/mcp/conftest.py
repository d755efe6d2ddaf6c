from __future__ import annotations

import importlib.util

import pytest

from agent_apps.testing.conformance import TOOLS

if importlib.util.find_spec("mcp") is None:  # the mcp extra is not installed: nothing to test here
    collect_ignore_glob = ["test_*.py"]

SKILLS = {
    "word-count": TOOLS["word-count"],
    "stats": """
        frontmatter = {
            "description": "Text statistics.",
            "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "metadata": {
                "returns": {"type": "object", "properties": {"words": {"type": "integer"}}, "required": ["words"]}
            },
        }
        async def main(ctx, args):
            return {"words": len(args["text"].split())}
    """,
    "hello": """
        frontmatter = {"description": "Say hello (no params)."}
        async def main(ctx, args):
            return "hello"
    """,
    "broken": """
        frontmatter = {"description": "Always raises."}
        async def main(ctx, args):
            raise ValueError("the disk is on fire")
    """,
    "secret": """
        frontmatter = {"description": "Hidden.", "metadata": {"visibility": "hidden"}}
        async def main(ctx, args):
            return "secret!"
    """,
    "slow-tool": """
        import asyncio, pathlib
        frontmatter = {
            "description": "Sleeps until cancelled.",
            "params": {"type": "object", "properties": {"marker": {"type": "string"}}, "required": ["marker"]},
        }
        async def main(ctx, args):
            ctx.signal.add_callback(lambda reason: pathlib.Path(args["marker"]).write_text(reason))
            await asyncio.sleep(60)
            return "slept"
    """,
    "counter.skill.md": """
        ---
        description: Count words with an agent.
        params: {type: object, properties: {text: {type: string}}, required: [text]}
        metadata:
          returns: {type: object, properties: {count: {type: integer}}, required: [count]}
          model:
            agent: agent-scripted
            script:
              - text: "Let me count."
                code: |
                  n = await ctx.manager.invoke("word-count", {"text": "a b c d"})
                  print("n =", n)
                  ctx.manager.finish({"count": n})
        ---
        Count the words.
    """,
}


@pytest.fixture
def skills(write_skill):
    for name, source in SKILLS.items():
        write_skill(name, source)


@pytest.fixture
def server(context_manager, skills):
    """Our MCP server over the test skills (imported here: only when mcp is installed)."""
    from agent_apps.mcp.server import SkillServer

    return SkillServer(context_manager)
