"""Call-time config (``invoke(..., config={"model": ...})``) is the top of the agent's
cascade, for a prompt skill as for the ``agent`` skill; the agent's own ``config`` arg
sits above it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio

SKILL = """
---
description: Says what its model config says.
metadata:
  model:
    agent: agent-scripted
    max_turns: 7
    script: [{text: "from the skill's metadata"}]
---
Say it.
"""


def script(text):
    return {"script": [{"text": text}]}


async def test_call_config_is_the_top_layer_for_prompt_skills(context_manager, write_skill):
    write_skill("teller.skill.md", SKILL)
    assert await context_manager.invoke("teller") == "from the skill's metadata"
    assert await context_manager.invoke("teller", config={"model": script("from the call")}) == "from the call"


async def test_the_call_layer_holds_below_the_call_and_the_agent_arg_above_it(context_manager, write_skill):
    write_skill("teller.skill.md", SKILL)
    write_skill(
        "runner",
        """
        frontmatter = {"params": {"type": "object", "properties": {"own": {"type": "boolean"}}}}
        async def main(ctx, args):
            if args.get("own"):
                return await ctx.manager.invoke("agent", {"prompt": "p", "config": {"agent": "agent-scripted",
                                                          "script": [{"text": "from the agent arg"}]}})
            return await ctx.manager.invoke("teller")
        """,
    )
    call = {"model": script("from the outer call")}
    assert await context_manager.invoke("runner", config=call) == "from the outer call"
    assert await context_manager.invoke("runner", {"own": True}, config=call) == "from the agent arg"


async def test_the_model_layer_configures_the_served_agent_not_the_agents_its_code_starts(
    context_manager, write_skill
):
    """A script (or model id) given for the outer agent must not replace the model of a
    prompt skill that agent's code runs: ``model`` stops at the first agent below the
    call; other sections (``security``) still reach everything beneath it."""
    write_skill("teller.skill.md", SKILL)
    outer = {
        "model": {
            "agent": "agent-scripted",
            "script": [{"code": 'ctx.manager.finish(await ctx.manager.invoke("teller"))'}],
        }
    }
    result = await context_manager.invoke("agent", {"prompt": "p", "allowed_tools": "teller"}, config=outer)
    assert result == "from the skill's metadata"
