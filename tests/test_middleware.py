"""Middleware: the onion, its order, its activation, and its protocol errors."""

from __future__ import annotations

import pytest

from agent_apps import ArgsInvalid, ContextManager, MiddlewareError, SkillFailed, SkillLoadError, hookimpl
from agent_apps.middleware import compose

pytestmark = pytest.mark.anyio

TRACE_MW = """
frontmatter = {
    "params": {"type": "object", "properties": {"tag": {"type": "string", "default": "%s"}, "n": {"type": "integer"}}},
    "metadata": {"role": "middleware"},
}
async def main(ctx, args):
    ctx.locals.setdefault("order", []).append("in:" + args["tag"])
    result = await ctx.manager.next()
    ctx.locals["order"].append("out:" + args["tag"])
    return result
"""

TARGET = """
frontmatter = {
    "params": {"type": "object", "properties": {"x": {"type": "integer"}}},
    "middleware": %s,
}
async def main(ctx, args):
    ctx.locals.setdefault("order", []).append("skill")
    return {"x": args.get("x"), "order": ctx.locals["order"]}
"""


def _mw(write_skill, name, tag=None):
    write_skill(name, TRACE_MW % (tag or name))


async def test_order_plugin_config_frontmatter_call(write_skill, skills_path, tmp_path):
    for name in ("plug", "conf", "front", "call"):
        _mw(write_skill, name)
    write_skill("target", TARGET % '["front"]')
    (skills_path / "agent-apps.yaml").write_text("middleware: [conf]\n")

    class Plugin:
        @hookimpl
        def agent_apps_middleware(self):
            return ["plug"]

    cm = ContextManager(
        [skills_path], cwd=tmp_path, plugins=[Plugin()], env=False, project=False, user=False, entry_points=False
    )
    result = await cm.invoke("target", {"x": 1}, middleware=["call(tag=CALL)"])
    # the skill returned the live list, so the way out shows too
    assert result["order"] == [
        *["in:plug", "in:conf", "in:front", "in:CALL"],
        "skill",
        *["out:CALL", "out:front", "out:conf", "out:plug"],
    ]


async def test_middleware_changes_args_short_circuits_transforms_and_catches(write_skill, context_manager):
    write_skill(
        "double-x",
        """
        frontmatter = {"metadata": {"role": "middleware"}}
        async def main(ctx, args):
            return await ctx.manager.next({**ctx.target.args, "x": ctx.target.args["x"] * 2})
        """,
    )
    write_skill(
        "cache",
        """
        frontmatter = {"metadata": {"role": "middleware"}}
        async def main(ctx, args):
            if ctx.target.args.get("x") == 42:
                return {"cached": True}
            return await ctx.manager.next()
        """,
    )
    write_skill(
        "wrap",
        """
        frontmatter = {"metadata": {"role": "middleware"}}
        async def main(ctx, args):
            result = await ctx.manager.next()
            return {"wrapped": result}
        """,
    )
    write_skill(
        "rescue",
        """
        frontmatter = {"metadata": {"role": "middleware"}}
        async def main(ctx, args):
            try:
                return await ctx.manager.next()
            except Exception as exc:
                return {"rescued": type(exc).__name__}
        """,
    )
    write_skill("target", TARGET % "[]")
    write_skill("fails", "frontmatter = {}\nasync def main(ctx, args):\n    raise KeyError('k')\n")
    r = await context_manager.invoke("target", {"x": 3}, middleware=["double-x"])
    assert r["x"] == 6
    assert await context_manager.invoke("target", {"x": 42}, middleware=["cache"]) == {"cached": True}
    r = await context_manager.invoke("target", {"x": 1}, middleware=["wrap"])
    assert r["wrapped"]["x"] == 1
    assert await context_manager.invoke("fails", middleware=["rescue"]) == {"rescued": "SkillFailed"}


async def test_args_changed_by_middleware_are_validated_again(write_skill, context_manager):
    write_skill(
        "breaks-args",
        """
        frontmatter = {"metadata": {"role": "middleware"}}
        async def main(ctx, args):
            return await ctx.manager.next({"x": "not an int"})
        """,
    )
    write_skill("target", TARGET % "[]")
    with pytest.raises(ArgsInvalid, match="target: invalid args at x"):
        await context_manager.invoke("target", {"x": 1}, middleware=["breaks-args"])


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("return None", "returned without calling ctx.manager.next()"),
        ("await ctx.manager.next()\n    await ctx.manager.next()", "called ctx.manager.next() twice"),
    ],
)
async def test_next_never_or_twice_is_a_clear_error(write_skill, context_manager, body, words):
    write_skill(
        "bad-mw", f'frontmatter = {{"metadata": {{"role": "middleware"}}}}\nasync def main(ctx, args):\n    {body}\n'
    )
    write_skill("target", TARGET % "[]")
    with pytest.raises(MiddlewareError) as info:
        await context_manager.invoke("target", middleware=["bad-mw"])
    assert str(info.value).startswith("bad-mw failed: ") and words in str(info.value)


async def test_finish_none_short_circuits_with_null(write_skill, context_manager):
    write_skill(
        "nuller",
        'frontmatter = {"metadata": {"role": "middleware"}}\n'
        'async def main(ctx, args):\n    ctx.manager.finish(None)\n',
    )
    write_skill("target", TARGET % "[]")
    assert await context_manager.invoke("target", middleware=["nuller"]) is None


async def test_middleware_raising_names_the_middleware(write_skill, context_manager):
    write_skill(
        "broken-mw", 'frontmatter = {"metadata": {"role": "middleware"}}\nasync def main(ctx, args):\n    1/0\n'
    )
    write_skill("target", TARGET % "[]")
    with pytest.raises(SkillFailed, match="broken-mw failed: ZeroDivisionError"):
        await context_manager.invoke("target", middleware=["broken-mw"])


async def test_middleware_params_are_coerced_and_validated(write_skill, context_manager):
    _mw(write_skill, "tagger")
    write_skill("target", TARGET % "[]")
    r = await context_manager.invoke("target", middleware=["tagger(tag=a, n=3)"])
    assert r["order"][0] == "in:a"
    with pytest.raises(ArgsInvalid, match="tagger: invalid args at n"):
        await context_manager.invoke("target", middleware=["tagger(n=three)"])


async def test_a_non_middleware_skill_cannot_be_used_as_middleware(write_skill, context_manager):
    write_skill("target", TARGET % "[]")
    with pytest.raises(SkillLoadError, match="lacks 'metadata: {role: middleware}'"):
        await context_manager.invoke("target", middleware=["target"])


async def test_plain_callable_middleware(write_skill, context_manager):
    write_skill("target", TARGET % "[]")
    seen = []

    async def timing(ctx, call_next):
        seen.append(ctx.skill.name)
        return await call_next()

    await context_manager.invoke("target", middleware=[timing])
    assert seen == ["target"]


async def test_next_outside_middleware_is_an_error(write_skill, context_manager):
    write_skill("eager", "frontmatter = {}\nasync def main(ctx, args):\n    return await ctx.manager.next()\n")
    with pytest.raises(Exception, match="only available in middleware"):
        await context_manager.invoke("eager")


async def test_compose_alone_is_koa():
    calls = []

    def layer(name):
        async def mw(ctx, call_next):
            calls.append(f">{name}")
            result = await call_next()
            calls.append(f"<{name}")
            return result + name

        return mw

    async def terminal(ctx):
        calls.append("core")
        return ""

    assert await compose([layer("a"), layer("b")])(object(), terminal) == "ba"
    assert calls == [">a", ">b", "core", "<b", "<a"]
