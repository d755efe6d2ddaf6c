"""allowed-tools: globs, argument constraints, hidden skills, and visibility."""

from __future__ import annotations

import dataclasses

import pytest

from agent_apps import ToolNotAllowed
from agent_apps.allowed_tools import Spec, check_call, parse_specs
from agent_apps.skill import Skill

pytestmark = pytest.mark.anyio

LEAF = """
frontmatter = {
    "params": {"type": "object", "properties": {
        "allowed_tools": {"type": "string"}, "ref": {"type": "string"}, "n": {"type": "integer"}}},
    "metadata": %s,
}
async def main(ctx, args):
    return "%s ran"
"""


def caller(write_skill, allowed, name="caller"):
    allowed_line = f'"allowed-tools": {allowed!r},' if allowed is not None else ""
    write_skill(
        name,
        f"""
        frontmatter = {{
            {allowed_line}
            "params": {{"type": "object", "properties": {{"ref": {{"type": "string"}}, "args": {{"type": "object"}}}}}},
        }}
        async def main(ctx, args):
            return await ctx.manager.invoke(args["ref"], args.get("args"))
        """,
    )


@pytest.fixture
def leaves(write_skill):
    for name, meta in [
        ("doc-read", "{}"),
        ("doc-write", "{}"),
        ("shell", "{}"),
        ("agent-sub", "{}"),
        ("schedule-create", "{}"),
        ("secret", '{"visibility": "hidden"}'),
    ]:
        write_skill(name, LEAF % (meta, name))


CASES = [
    # allowed-tools, callee, args, allowed?
    (None, "doc-read", None, True),
    (None, "secret", None, False),
    ("*", "secret", None, True),
    ("doc-*", "doc-write", None, True),
    ("doc-*", "shell", None, False),
    ("doc-*", "secret", None, False),
    ("doc-* secret", "secret", None, True),
    ("sec*", "secret", None, False),
    ("agent-sub(allowed_tools=doc-read)", "agent-sub", {"allowed_tools": "doc-read"}, True),
    ("agent-sub(allowed_tools=doc-read)", "agent-sub", {"allowed_tools": "doc-read shell"}, False),
    ("agent-sub(allowed_tools=doc-*)", "agent-sub", {"allowed_tools": "doc-read doc-write"}, True),
    ("agent-sub(allowed_tools=doc-*)", "agent-sub", {"allowed_tools": "doc-read *"}, False),
    ("agent-sub(allowed_tools=doc-read)", "agent-sub", None, False),
    ("schedule-create(ref=my-*)", "schedule-create", {"ref": "my-job"}, True),
    ("schedule-create(ref=my-*)", "schedule-create", {"ref": "other"}, False),
    ("schedule-create(ref=my-*, n=1?)", "schedule-create", {"ref": "my-x", "n": 12}, True),
    ("schedule-create(ref=my-*, n=1?)", "schedule-create", {"ref": "my-x", "n": 2}, False),
    ("shell doc-read", "doc-write", None, False),
]


@pytest.mark.parametrize(("allowed", "callee", "args", "ok"), CASES)
async def test_allowed_tools_decisions(write_skill, context_manager, leaves, allowed, callee, args, ok):
    caller(write_skill, allowed)
    call = {"ref": callee, **({"args": args} if args is not None else {})}
    if ok:
        assert await context_manager.invoke("caller", call) == f"{callee} ran"
    else:
        with pytest.raises(ToolNotAllowed) as info:
            await context_manager.invoke("caller", call)
        error = info.value
        assert error.caller == "caller" and error.callee == callee
        assert str(error).startswith(f"caller may not call {callee}: ")
        assert error.depth == 1  # the outer call was fine; the skill failed


async def test_denial_names_the_spec_that_was_checked(write_skill, context_manager, leaves):
    caller(write_skill, "agent-sub(allowed_tools=doc-read)")
    with pytest.raises(ToolNotAllowed) as info:
        await context_manager.invoke("caller", {"ref": "agent-sub", "args": {"allowed_tools": "shell"}})
    assert "spec 'agent-sub(allowed_tools=doc-read)'" in str(info.value)
    assert "allowed_tools=\"shell\" does not match 'doc-read'" in str(info.value)


async def test_top_level_calls_may_name_hidden_skills(context_manager, write_skill, leaves):
    assert await context_manager.invoke("secret") == "secret ran"


def test_spec_parsing_keeps_spaces_and_quotes_inside_parens():
    specs = parse_specs('doc-* agent(allowed_tools="doc-read doc-write", name=x)  shell')
    assert [s.glob for s in specs] == ["doc-*", "agent", "shell"]
    assert specs[1].constraints == (("allowed_tools", "doc-read doc-write"), ("name", "x"))
    with pytest.raises(ValueError, match="missing '\\)'"):
        parse_specs("agent(allowed_tools=x")


def test_visible_tools_modes_hidden_self_and_exclusions(write_skill, context_manager, leaves):
    write_skill(
        "audit",
        'frontmatter = {"params": {"type": "object"}, "metadata": {"role": "middleware"}}\n'
        'async def main(ctx, args):\n    return await ctx.manager.next()\n',
    )
    write_skill("provider", LEAF % ('{"visibility": "hidden", "tags": ["meta-internal"]}', "provider"))
    names = lambda skills: sorted(s.name for s in skills)  # noqa: E731

    constrained = context_manager.visible_tools("doc-* secret caller", caller="caller")
    assert constrained.mode == "constrained"
    assert names(constrained.tools) == ["doc-read", "doc-write", "secret"]

    discovery = context_manager.visible_tools(None, caller="shell", exclude=["agent-sub"])
    assert discovery.mode == "discovery"
    found = names(discovery.tools)
    assert "shell" not in found and "agent-sub" not in found and "secret" not in found and "provider" not in found
    assert {"doc-read", "skill-list", "skill-describe"} <= set(found)
    assert names(discovery.middleware) == ["audit"]

    starred = context_manager.visible_tools("* secret", caller="shell")
    assert starred.mode == "discovery" and names(starred.named) == ["secret"]
    assert "shell" in names(context_manager.visible_tools("doc-* shell", caller="shell").tools)


async def test_skill_list_shows_what_the_caller_may_see(write_skill, context_manager, leaves):
    caller(write_skill, "doc-* skill-list")
    listed = await context_manager.invoke("caller", {"ref": "skill-list"})
    assert [s["name"] for s in listed] == ["doc-read", "doc-write", "skill-list"]
    described = await context_manager.invoke("caller", {"ref": "skill-list", "args": {"match": "doc-w*"}})
    assert [s["name"] for s in described] == ["doc-write"]


async def test_skill_describe_refuses_what_the_caller_cannot_see(write_skill, context_manager, leaves):
    caller(write_skill, "doc-read skill-describe")
    data = await context_manager.invoke("caller", {"ref": "skill-describe", "args": {"name": "doc-read"}})
    assert data["name"] == "doc-read" and "path" not in data
    with pytest.raises(Exception, match="no skill named 'shell'"):
        await context_manager.invoke("caller", {"ref": "skill-describe", "args": {"name": "shell"}})


# -- constraint values of every kind: a list, a string of words, a number, nothing -------

OPEN_LEAF = "frontmatter = {'params': {'type': 'object'}}\nasync def main(ctx, args):\n    return 'ran'\n"
OPEN_CALLER = """
frontmatter = {"allowed-tools": %r, "params": {"type": "object"}}
async def main(ctx, args):
    return await ctx.manager.invoke("leaf", args)
"""


@pytest.mark.parametrize(
    ("spec", "args", "ok"),
    [
        # a list: every item must match, whichever item is the odd one out
        ("leaf(paths=docs/*)", {"paths": ["docs/a", "docs/b"]}, True),
        ("leaf(paths=docs/*)", {"paths": ["docs/a", "etc/passwd"]}, False),
        ("leaf(paths=docs/*)", {"paths": ["etc/passwd", "docs/a"]}, False),
        ("leaf(paths=docs/*)", {"paths": ["docs/a", "docs/../.env"]}, False),
        ("leaf(paths=docs/*)", {"paths": [["docs/a"], ["etc/passwd"]]}, False),
        ("leaf(paths=docs/*)", {"paths": ["docs/a etc/passwd"]}, False),  # an item's words, one by one
        ("leaf(paths=docs/*)", {"paths": []}, False),  # nothing to match grants nothing
        # a string: each word must match; no words grant nothing
        ("leaf(tools=doc-*)", {"tools": "doc-read  doc-write"}, True),
        ("leaf(tools=doc-*)", {"tools": "shell doc-read"}, False),
        ("leaf(tools=doc-*)", {"tools": ""}, False),
        ("leaf(tools=doc-*)", {"tools": " \t"}, False),
        # a glob with whitespace matches the whole string, and each item of a list
        ('leaf(command="git *")', {"command": "git log -n 3"}, True),
        ('leaf(command="git *")', {"command": "rm -rf git"}, False),
        ('leaf(command="git *")', {"command": ["git log", "git status"]}, True),
        ('leaf(command="git *")', {"command": ["git log", "rm -rf /"]}, False),
        ('leaf(tools="doc-read doc-write")', {"tools": "doc-read"}, False),
        # other JSON values match as their JSON text
        ("leaf(n=1?)", {"n": 12}, True),
        ("leaf(n=1?)", {"n": 2}, False),
        ("leaf(flag=true)", {"flag": True}, True),
        ("leaf(flag=true)", {"flag": False}, False),
        ("leaf(n=1?)", {"n": None}, False),
        # every constraint of a spec holds, and any spec naming the callee may allow it
        ("leaf(a=x*, b=y*)", {"a": "x1", "b": "y1"}, True),
        ("leaf(a=x*, b=y*)", {"a": "no", "b": "y1"}, False),
        ("leaf(a=x*, b=y*)", {"a": "x1", "b": "no"}, False),
        ("leaf(a=x*) leaf(a=y*)", {"a": "y1"}, True),
        ("leaf(a=x*) leaf(a=y*)", {"a": "z1"}, False),
        ("leaf(a=x*) leaf", {"a": "z1"}, True),
    ],
)
async def test_constraints_hold_for_values_of_every_kind(context_manager, write_skill, spec, args, ok):
    write_skill("leaf", OPEN_LEAF)
    write_skill("caller", OPEN_CALLER % spec)
    if ok:
        assert await context_manager.invoke("caller", args) == "ran"
    else:
        with pytest.raises(ToolNotAllowed) as info:
            await context_manager.invoke("caller", args)
        assert info.value.callee == "leaf" and f"(spec '{spec.split()[0]}" in str(info.value)



def test_a_malformed_allowed_tools_refuses_every_call_naming_the_spec(context_manager, write_skill, leaves):
    """Frontmatter refuses a malformed allowed-tools at load; a skill built another way
    (a derived agent, a registered alias) still may call nothing, and says why."""
    caller(write_skill, "doc-read")
    loaded = context_manager.get("caller")
    broken = dataclasses.replace(loaded, allowed_tools="doc-read agent(allowed_tools=x")
    with pytest.raises(ToolNotAllowed, match=r"caller may not call doc-read: .*missing '\)'") as info:
        check_call(broken, context_manager.get("doc-read"), {})
    assert info.value.spec == "doc-read agent(allowed_tools=x"


def test_a_callers_specs_are_matched_to_a_callee_once_until_either_changes(monkeypatch):
    """Agent code calls the same skill in loops: the globs are matched on its first call,
    while a new callee (a reload: hidden now) or a new allowed-tools is matched again."""
    matched = []
    matches_name = Spec.matches_name
    monkeypatch.setattr(
        Spec, "matches_name", lambda spec, skill: matched.append(spec.glob) or matches_name(spec, skill)
    )
    caller_skill = Skill(name="code", allowed_tools="other* lea? stay")
    leaf = Skill(name="leaf")
    for _ in range(5):
        check_call(caller_skill, leaf, {})
    assert matched == ["other*", "lea?", "stay"]
    hidden = Skill(name="leaf", metadata={"visibility": "hidden"})
    with pytest.raises(ToolNotAllowed, match="it is hidden: only a spec naming it exactly matches"):
        check_call(caller_skill, hidden, {})
    narrowed = dataclasses.replace(caller_skill, allowed_tools="other*")  # shares the cache dict
    with pytest.raises(ToolNotAllowed, match="not in allowed-tools 'other\\*'"):
        check_call(narrowed, leaf, {})
    check_call(caller_skill, leaf, {})
