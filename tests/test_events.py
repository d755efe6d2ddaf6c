"""The event bus and callback refs."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from agent_apps import SkillNotFound
from agent_apps.events import EventBus

pytestmark = pytest.mark.anyio


async def test_subscribe_emit_globs_and_unsubscribe():
    bus = EventBus()
    got = []
    stop = bus.subscribe("agent.*", lambda topic, event: got.append((topic, event["n"])))
    bus.subscribe("other", lambda topic, event: got.append(("other", 0)))
    bus.emit("agent.run", {"n": 1})
    bus.emit("agents", {"n": 2})
    stop()
    bus.emit("agent.run", {"n": 3})
    assert got == [("agent.run", 1)]


async def test_failing_subscriber_never_breaks_the_emitter(caplog):
    bus = EventBus()
    got = []

    def broken(topic, event):
        raise RuntimeError("subscriber bug")

    async def broken_async(topic, event):
        raise RuntimeError("async subscriber bug")

    bus.subscribe("t", broken)
    bus.subscribe("t", broken_async)
    bus.subscribe("t", lambda topic, event: got.append(event))
    with caplog.at_level(logging.WARNING, logger="agent_apps.events"):
        bus.emit("t", {"ok": True})
        await bus.drain()
    assert got == [{"ok": True}]
    assert caplog.text.count("failed") == 2


async def test_async_and_ref_subscribers_and_emit_from_a_thread(write_skill, context_manager):
    write_skill(
        "collector",
        """
        frontmatter = {"params": {"type": "object",
                                  "properties": {"topic": {"type": "string"}, "event": {"type": "object"}}}}
        SEEN = []
        async def main(ctx, args):
            ctx.manager.context_manager.events.emit("collected", args["event"])
        """,
    )
    bus = context_manager.events
    collected = []
    bus.subscribe("collected", lambda topic, event: collected.append(event))
    bus.subscribe("work", "collector")

    async def slow(topic, event):
        await asyncio.sleep(0.01)
        collected.append({"async": event["n"]})

    bus.subscribe("work", slow)
    bus.emit("work", {"n": 1})
    thread = threading.Thread(target=bus.emit, args=("work", {"n": 2}))
    thread.start()
    thread.join()
    for _ in range(50):
        await bus.drain()
        if len(collected) == 4:
            break
        await asyncio.sleep(0.01)
    assert sorted(map(str, collected)) == sorted(map(str, [{"n": 1}, {"n": 2}, {"async": 1}, {"async": 2}]))


async def test_skill_ref_subscriber_that_fails_is_logged(write_skill, context_manager, caplog):
    bus = context_manager.events
    bus.subscribe("t", "no-such-skill")
    with caplog.at_level(logging.WARNING, logger="agent_apps.events"):
        bus.emit("t", {})
        await bus.drain()
    assert "no-such-skill" in caplog.text


async def test_callback_ref_invokes_like_a_skill_and_is_released_with_its_owner(write_skill, context_manager):
    write_skill(
        "owner",
        """
        frontmatter = {"allowed-tools": "nothing"}
        async def main(ctx, args):
            async def double(cctx, cargs):
                return cargs["n"] * 2
            ref = ctx.manager.callback(double, name="doubler",
                                       params={"type": "object", "properties": {"n": {"type": "integer"}},
                                               "required": ["n"]})
            ctx.nonlocals["ref"] = ref
            return {"ref": ref, "value": await ctx.manager.invoke(ref, {"n": 21})}
        """,
    )
    result = await context_manager.invoke("owner")
    assert result["value"] == 42  # allowed-tools does not apply: holding the ref is the permission
    assert result["ref"].startswith("callback://doubler.")
    with pytest.raises(SkillNotFound, match="released or unknown"):
        await context_manager.invoke(result["ref"], {"n": 1})


async def test_callback_args_are_validated(context_manager):
    async def fn(ctx, args):
        return args

    ref = context_manager.callback(fn, params={"type": "object", "properties": {"n": {"type": "integer"}}})
    from agent_apps import ArgsInvalid

    with pytest.raises(ArgsInvalid):
        await context_manager.invoke(ref, {"n": "x"})
    assert await context_manager.invoke(ref, {"n": 1}) == {"n": 1}
    context_manager.release(ref)
    with pytest.raises(SkillNotFound):
        await context_manager.invoke(ref, {"n": 1})
