"""The pipeline: refs, contexts, validation, results, errors, cancellation, depth."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from agent_apps import (
    AgentAppsError,
    ArgsInvalid,
    Cancelled,
    LimitExceeded,
    ResultInvalid,
    Signal,
    Skill,
    SkillFailed,
    SkillNotFound,
)

pytestmark = pytest.mark.anyio

ECHO = """
frontmatter = {
    "params": {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "times": {"type": "integer", "minimum": 1, "default": 1},
            "opts": {"type": "object", "properties": {"sep": {"type": "string", "default": " "}}, "default": {}},
            "items": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    "metadata": {"returns": {"type": "string"}},
}
async def main(ctx, args):
    return args["opts"]["sep"].join([args["text"]] * args["times"])
"""


async def test_bare_name_with_schema_defaults(write_skill, context_manager):
    write_skill("echo", ECHO)
    assert await context_manager.invoke("echo", {"text": "hi"}) == "hi"
    assert await context_manager.invoke("echo", {"text": "hi", "times": 2, "opts": {"sep": "-"}}) == "hi-hi"


async def test_defaults_never_mutate_the_callers_args(write_skill, context_manager):
    write_skill("echo", ECHO)
    args = {"text": "x", "opts": {}}
    await context_manager.invoke("echo", args)
    assert args == {"text": "x", "opts": {}}


@pytest.mark.parametrize(
    ("args", "path", "words"),
    [
        ({}, "", "'text' is a required property"),
        ({"text": 3}, "text", "not of type 'string'"),
        ({"text": "a", "times": 0}, "times", "less than the minimum"),
        ({"text": "a", "items": [{"n": 1}, {"n": "two"}]}, "items[1].n", "not of type 'integer'"),
        ({"text": "a", "extra": 1}, "", "Additional properties"),
    ],
)
async def test_invalid_args_name_the_path(write_skill, context_manager, args, path, words):
    write_skill("echo", ECHO)
    with pytest.raises(ArgsInvalid) as info:
        await context_manager.invoke("echo", args)
    assert info.value.path == path
    assert words in str(info.value) and str(info.value).startswith("echo: invalid args")
    assert info.value.call_error and info.value.depth == 0


async def test_skill_without_params_takes_no_args(write_skill, context_manager):
    write_skill("noargs", "frontmatter = {}\nasync def main(ctx, args):\n    return args\n")
    assert await context_manager.invoke("noargs") == {}
    with pytest.raises(ArgsInvalid, match="takes no args"):
        await context_manager.invoke("noargs", {"x": 1})


async def test_invalid_and_non_json_results(write_skill, context_manager):
    write_skill(
        "bad",
        'frontmatter = {"metadata": {"returns": {"type": "object", "required": ["n"]}}}\n'
        'async def main(ctx, args):\n    return {"m": 1}\n',
    )
    write_skill("setty", "frontmatter = {}\nasync def main(ctx, args):\n    return {'a': [1, {2, 3}]}\n")
    with pytest.raises(ResultInvalid, match="'n' is a required property"):
        await context_manager.invoke("bad")
    with pytest.raises(ResultInvalid) as info:
        await context_manager.invoke("setty")
    assert info.value.path == "result.a[1]" and "set is not JSON-serializable" in str(info.value)


async def test_skill_raising_becomes_skill_failed_with_cause(write_skill, context_manager):
    write_skill("raiser", "frontmatter = {}\nasync def main(ctx, args):\n    raise ValueError('nope')\n")
    with pytest.raises(SkillFailed) as info:
        await context_manager.invoke("raiser")
    assert str(info.value) == "raiser failed: ValueError: nope"
    assert isinstance(info.value.__cause__, ValueError)
    assert not info.value.call_error


async def test_unknown_skill_suggests_close_names(write_skill, context_manager):
    write_skill("echo", ECHO)
    with pytest.raises(SkillNotFound, match="did you mean echo"):
        await context_manager.invoke("ecko")


async def test_sync_skill_runs_off_the_event_loop_and_can_call_back(write_skill, context_manager):
    write_skill("echo", ECHO)
    write_skill(
        "sync-caller",
        """
        import threading
        frontmatter = {}
        def main(ctx, args):
            return [threading.current_thread() is threading.main_thread(),
                    ctx.manager.invoke_sync("echo", {"text": "hi"})]
        """,
    )
    assert await context_manager.invoke("sync-caller") == [False, "hi"]


async def test_finish_ends_the_invocation_even_through_except_exception(write_skill, context_manager):
    write_skill(
        "finisher",
        """
        frontmatter = {}
        async def main(ctx, args):
            try:
                ctx.manager.finish({"done": True})
            except Exception:
                return "swallowed"
            return "not reached"
        """,
    )
    assert await context_manager.invoke("finisher") == {"done": True}


async def test_refs_file_inline_anonymous_and_skill_objects(write_skill, context_manager, tmp_path):
    path = write_skill("echo", ECHO, directory=tmp_path / "elsewhere")
    assert await context_manager.invoke(f"file://{path}", {"text": "f"}) == "f"
    assert await context_manager.invoke(str(path), {"text": "p"}) == "p"
    source = "frontmatter = {'name': 'tiny'}\nasync def main(ctx, args):\n    return 'inline'\n"
    assert await context_manager.invoke(f"inline://{source}") == "inline"

    async def main(ctx, args):
        return args["n"] * 2

    definition = {"params": {"type": "object", "properties": {"n": {"type": "integer"}}}, "main": main}
    assert await context_manager.invoke(definition, {"n": 21}) == 42
    with pytest.raises(ArgsInvalid):
        await context_manager.invoke(definition, {"n": "x"})
    assert await context_manager.invoke(Skill(name="obj", _main=main, params={"type": "object"}), {"n": 1}) == 2
    with pytest.raises(SkillNotFound, match="no skill file .*: No such file or directory"):
        await context_manager.invoke("file:///nonexistent/x.skill.py")
    with pytest.raises(AgentAppsError, match="needs a callable 'main'"):
        await context_manager.invoke({"name": "x"})


async def test_context_scopes(write_skill, context_manager):
    write_skill(
        "outer",
        """
        frontmatter = {}
        async def main(ctx, args):
            ctx.nonlocals["shared"] = "from outer"
            ctx.locals["mine"] = 1
            ctx.internals["untrusted"] = False
            inner = await ctx.manager.invoke("inner")
            return {"inner": inner, "outer_sees_inner_write": "inner-wrote" in ctx.nonlocals}
        """,
    )
    write_skill(
        "inner",
        """
        frontmatter = {}
        async def main(ctx, args):
            ctx.nonlocals["inner-wrote"] = True
            return {
                "nonlocal": ctx.nonlocals.get("shared"),
                "locals": dict(ctx.locals),
                "internals": dict(ctx.internals),
                "parent": ctx.parent.skill.name,
                "skill": ctx.skill.name,
                "depth": ctx.depth,
                "chain": ctx.chain,
            }
        """,
    )
    result = await context_manager.invoke("outer")
    assert result == {
        "inner": {
            "nonlocal": "from outer",
            "locals": {},
            "internals": {},
            "parent": "outer",
            "skill": "inner",
            "depth": 1,
            "chain": ["outer", "inner"],
        },
        "outer_sees_inner_write": False,
    }


async def test_cycle_is_bounded_with_a_clear_error(write_skill, context_manager):
    write_skill("ping", 'frontmatter = {}\nasync def main(ctx, args):\n    return await ctx.manager.invoke("pong")\n')
    write_skill("pong", 'frontmatter = {}\nasync def main(ctx, args):\n    return await ctx.manager.invoke("ping")\n')
    context_manager.max_depth = 20
    with pytest.raises(LimitExceeded) as info:
        await context_manager.invoke("ping")
    assert "depth limit (20)" in str(info.value) and "ping -> pong -> ping" in str(info.value)


async def test_an_invocation_leaves_no_reference_cycles(write_skill, context_manager):
    """A finished invocation is freed at once, not by the cycle collector: agent code
    calls tools in loops, and a cycle per call (the onion's closures holding the
    Context) kept every call's Context alive until a collection, and made them often."""
    write_skill("noop", "frontmatter = {}\nasync def main(ctx, args):\n    return None\n")
    write_skill(
        "mw",
        'frontmatter = {"metadata": {"role": "middleware"}}\nasync def main(ctx, args):\n'
        "    return await ctx.manager.next()\n",
    )

    async def agent_code(ctx, args):
        for middleware in (None, ["mw"]):
            await ctx.manager.invoke("noop", middleware=middleware)  # warm the caches
        gc.collect()
        gc.disable()
        try:
            for middleware in (None, ["mw"]) * 10:
                await ctx.manager.invoke("noop", middleware=middleware)
            return gc.collect()
        finally:
            gc.enable()

    caller = {"name": "agent-code", "allowed-tools": "noop mw", "main": agent_code}
    assert await context_manager.invoke(caller, internals={"untrusted": True}) == 0


async def test_unknown_option_is_a_type_error(write_skill, context_manager):
    write_skill("echo", ECHO)
    with pytest.raises(TypeError, match="unknown options: colour"):
        await context_manager.invoke("echo", {"text": "x"}, colour="red")


async def test_signal_cancels_a_running_invocation_and_its_children(write_skill, context_manager):
    write_skill(
        "waiter",
        """
        import asyncio
        frontmatter = {}
        async def main(ctx, args):
            return await ctx.manager.invoke("child")
        """,
    )
    write_skill(
        "child",
        """
        import asyncio
        frontmatter = {}
        async def main(ctx, args):
            ctx.signal.add_callback(lambda reason: ctx.manager.emit("child-cancelled", {"reason": reason}))
            await asyncio.sleep(30)
        """,
    )
    heard = []
    context_manager.events.subscribe("child-cancelled", lambda topic, event: heard.append(event["reason"]))
    signal = Signal()
    task = asyncio.ensure_future(context_manager.invoke("waiter", signal=signal))
    await asyncio.sleep(0.05)
    threading.Thread(target=signal.cancel, args=("user pressed stop",)).start()
    with pytest.raises(Cancelled, match="user pressed stop"):
        await asyncio.wait_for(task, 5)
    assert heard == ["user pressed stop"]


async def test_cancelling_the_task_cancels_the_signal(write_skill, context_manager):
    reasons = []
    write_skill(
        "sleeper",
        "import asyncio\nfrontmatter = {}\nasync def main(ctx, args):\n    await asyncio.sleep(30)\n",
    )
    signal = Signal()
    signal.child().add_callback(reasons.append)
    task = asyncio.ensure_future(context_manager.invoke("sleeper", signal=signal))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reasons == ["cancelled"]


async def test_signal_cancel_after_completion_does_not_touch_the_caller(write_skill, context_manager):
    write_skill("echo", ECHO)
    signal = Signal()
    assert await context_manager.invoke("echo", {"text": "x"}, signal=signal) == "x"
    signal.cancel()
    await asyncio.sleep(0.01)  # the caller's task must not be cancelled by the late cancel


def test_invoke_sync_refuses_inside_a_loop(context_manager):
    async def inner():
        with pytest.raises(RuntimeError, match="use 'await"):
            context_manager.invoke_sync("skill-list")

    asyncio.run(inner())


def test_signal_is_thread_safe_and_children_follow():
    parent = Signal()
    children = [parent.child() for _ in range(50)]
    threads = [threading.Thread(target=parent.cancel, args=("stop",)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(c.cancelled and c.reason == "stop" for c in children)
    late = parent.child()
    assert late.cancelled
    with pytest.raises(Cancelled):
        late.raise_if_cancelled()


async def test_signal_wait():
    signal = Signal()
    threading.Timer(0.05, signal.cancel, args=("timer",)).start()
    assert await asyncio.wait_for(signal.wait(), 5) == "timer"


async def test_cancelling_the_task_reaches_nested_signal_listeners(write_skill, context_manager):
    write_skill("outer", 'frontmatter = {}\nasync def main(ctx, args):\n    return await ctx.manager.invoke("inner")\n')
    write_skill(
        "inner",
        """
        import asyncio
        frontmatter = {}
        async def main(ctx, args):
            ctx.signal.add_callback(lambda reason: ctx.manager.emit("inner-heard", {"reason": reason}))
            ctx.manager.emit("inner-started", {})
            await asyncio.sleep(30)
        """,
    )
    heard = []
    context_manager.events.subscribe("inner-*", lambda topic, event: heard.append(topic))
    task = asyncio.ensure_future(context_manager.invoke("outer"))
    for _ in range(100):
        if heard:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert heard == ["inner-started", "inner-heard"]
