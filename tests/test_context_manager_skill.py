"""The hidden, internal ``context-manager`` skill: the ContextManager's operations for
code that only calls skills, always on behalf of its caller and under the caller's
allowed-tools; agent code can never reach it."""

from __future__ import annotations

import json

import pytest

from agent_apps import ArgsInvalid, SkillNotFound, ToolNotAllowed

pytestmark = pytest.mark.anyio

PROGRAM = """
frontmatter = {
    "allowed-tools": %r,
    "params": {"type": "object", "properties": {"call": {"type": "object"}}, "required": ["call"]},
}
async def main(ctx, args):
    return await ctx.manager.invoke("context-manager", args["call"])
"""


SKILLS = {
    "word-count": """
        frontmatter = {
            "description": "Count words.",
            "params": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
        async def main(ctx, args):
            return len(args["text"].split())
    """,
    "other": """
        frontmatter = {"description": "Another tool."}
        async def main(ctx, args):
            return "other"
    """,
    "secret": """
        frontmatter = {"description": "Hidden.", "metadata": {"visibility": "hidden"}}
        async def main(ctx, args):
            return "secret!"
    """,
    "shout": """
        frontmatter = {"metadata": {"role": "middleware"}}
        async def main(ctx, args):
            return str(await ctx.manager.next()).upper()
    """,
    "open": """
        frontmatter = {}
        async def main(ctx, args):
            return await ctx.manager.invoke("context-manager", {"op": "list"})
    """,
    "narrow": PROGRAM % "context-manager word-count",
    "named": PROGRAM % "context-manager secret",
}


@pytest.fixture
def skills(write_skill, skills_path):
    for name, source in SKILLS.items():
        write_skill(name, source)
    (skills_path / "agent-apps.yaml").write_text("model:\n  temperature: 0.3\n")


async def program(cm, caller, **call):
    return await cm.invoke(caller, {"call": call})


async def test_invoke_on_behalf_of_the_caller(context_manager, skills):
    assert await program(context_manager, "narrow", op="invoke", ref="word-count", args={"text": "a b c"}) == 3
    # the caller's allowed-tools apply (not the context-manager's): 'other' is not in them
    with pytest.raises(ToolNotAllowed, match="narrow may not call other: not in allowed-tools 'context-manager word-"):
        await program(context_manager, "narrow", op="invoke", ref="other")
    with pytest.raises(ToolNotAllowed, match="narrow may not call secret"):
        await program(context_manager, "narrow", op="invoke", ref="secret")
    # a caller that names a hidden skill may call it through the context-manager too
    assert await program(context_manager, "named", op="invoke", ref="secret") == "secret!"
    # call-time middleware
    got = await program(context_manager, "named", op="invoke", ref="secret", middleware=["shout"])
    assert got == "SECRET!"


async def test_list_describe_and_config_show_what_the_caller_may_see(context_manager, skills):
    listed = await program(context_manager, "narrow", op="list")
    assert [s["name"] for s in listed] == ["word-count"]  # not itself (internal), not 'other'
    assert [s["name"] for s in await program(context_manager, "named", op="list")] == ["secret"]
    described = await program(context_manager, "narrow", op="describe", name="word-count")
    assert described["params"]["properties"]["text"] == {"type": "string"} and "path" not in described
    with pytest.raises(SkillNotFound, match="'other'"):
        await program(context_manager, "narrow", op="describe", name="other")
    config = await program(context_manager, "narrow", op="config", name="word-count")
    assert config["values"]["model"]["temperature"] == 0.3
    assert config["sources"]["model.temperature"].endswith("agent-apps.yaml")
    with pytest.raises(SkillNotFound):
        await program(context_manager, "narrow", op="config", name="other")
    assert (await program(context_manager, "narrow", op="config"))["values"]["model"]["max_turns"] == 30


async def test_the_skill_is_hidden_and_internal(context_manager, skills):
    # a caller must name it: without allowed-tools every *visible* skill is callable
    with pytest.raises(ToolNotAllowed, match="open may not call context-manager: it is hidden"):
        await context_manager.invoke("open")
    skill = context_manager.get("context-manager")
    assert skill.hidden and "meta-internal" in skill.tags
    assert "context-manager" not in [s.name for s in context_manager.visible_tools("*").tools]


async def test_from_outside_any_skill(context_manager, skills):
    # Python, the command line: the caller is the outside world, which may use everything
    assert await context_manager.invoke("context-manager", {"op": "invoke", "ref": "secret"}) == "secret!"
    names = [s["name"] for s in await context_manager.invoke("context-manager", {"op": "list", "match": "s*"})]
    assert sorted(names) == ["schedule-list", "shell", "shout", "skill-describe", "skill-list"]  # hidden: only named
    with pytest.raises(ArgsInvalid, match="'ref' is a required property"):
        await context_manager.invoke("context-manager", {"op": "invoke"})
    with pytest.raises(ArgsInvalid, match="op"):
        await context_manager.invoke("context-manager", {"op": "delete"})


ESCAPES = [
    "await ctx.manager.invoke('context-manager', {'op': 'invoke', 'ref': 'file:///tmp/evil.skill.py'})",
    "await ctx.manager.invoke('context-manager', {'op': 'invoke', 'ref': 'secret'})",
    "await ctx.manager.invoke('context-manager', {'op': 'list'})",
    "await ctx.manager.invoke('word-count', {'text': 'a'}, middleware=['context-manager'])",
]


@pytest.mark.parametrize("allowed", ["*", "context-manager word-count", None])
async def test_agent_code_cannot_use_it_to_escape(context_manager, skills, allowed):
    events = []
    context_manager.events.subscribe("x", lambda topic, e: events.append(e))
    script = [{"code": ESCAPES}, {"text": "ok"}]
    call = {"prompt": "P", "events": "x", "config": {"agent": "agent-scripted", "script": script}}
    if allowed is not None:
        call["allowed_tools"] = allowed
    await context_manager.invoke("agent", call)
    results = [e for e in events if e["type"] in ("tool-result", "tool-error")]
    assert len(results) == len(ESCAPES) and all(e["type"] == "tool-error" for e in results)
    for e in results[:3]:
        assert "ToolNotAllowed: agent-code may not call context-manager" in e["result"], e["result"]
    assert "may not use internal skills as middleware" in results[3]["result"]
    assert "secret!" not in json.dumps(events)
