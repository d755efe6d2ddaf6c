"""Call options across the sandbox boundary: ``middleware=[...]`` on invoke, ``target``
and ``next()`` for an agent serving as middleware. The guest carries them as the
optional 4th element of a call entry; the host checks their shape and names before
``call_host`` sees them (forged entries included)."""

from __future__ import annotations

import json

import pytest

from agent_apps.sandbox import Sandbox, SandboxLimits

pytestmark = pytest.mark.anyio


def forged(entry: list) -> str:
    """Agent code that sends one raw call entry through the poll import itself."""
    batch = json.dumps({"calls": [entry], "cancel": []})
    return f"from wit_world.imports import host\nimport json\njson.loads(host.poll({batch!r}, 1000))"


async def test_middleware_option_reaches_call_host(sb, host):
    res = await sb.run(
        "a = await ctx.manager.invoke('echo', {'x': 1}, middleware=['audit(level=info)', 'timing'])\n"
        "b = await ctx.manager.invoke('echo', middleware='timing')\n"
        "c = await ctx.manager.invoke('echo', {'y': 2})\n"
        "[a, b, c]"
    )
    assert res.error is None, res.error
    assert res.value == [{"x": 1}, None, {"y": 2}]
    assert host.calls == [("echo", {"x": 1}), ("echo", None), ("echo", {"y": 2})]
    assert host.options == [{"middleware": ["audit(level=info)", "timing"]}, {"middleware": ["timing"]}, {}]


@pytest.mark.parametrize(
    ("code", "needle"),
    [
        ("await ctx.manager.invoke('echo', middleware=[1])", "middleware must be a list of strings"),
        ("await ctx.manager.invoke('echo', middleware={'a': 1})", "middleware must be a list of strings"),
        ("await ctx.manager.invoke('echo', config={'x': 1})", "unexpected keyword argument 'config'"),
        ("ctx.manager.next()", "only available when this agent serves as middleware"),
    ],
)
async def test_bad_options_fail_on_the_agents_line(sb, host, code, needle):
    res = await sb.run(code)
    assert res.error is not None and ("TypeError" in res.error or "RuntimeError" in res.error), res.error
    assert needle in res.error and 'File "<agent>", line 1' in res.error
    assert host.calls == []


@pytest.mark.parametrize(
    ("entry", "kind", "needle"),
    [
        ([1, "echo", None, "middleware"], "ArgsInvalid", "call options must be a JSON object"),
        ([1, "echo", None, {"config": {"sandbox": {"timeout": 99}}}], "ArgsInvalid", "unknown call option(s) 'config'"),
        ([1, "echo", None, {"target": "x"}], "ArgsInvalid", "unknown call option"),
        ([1, "echo", None, {}], "ArgsInvalid", "middleware must be a list"),
        ([1, "echo", None, {"middleware": "audit"}], "ArgsInvalid", "middleware must be a list"),
        ([1, "echo", None, {"middleware": ["file:///etc/passwd"]}], "ToolNotAllowed", "is a URI"),
        ([1, "echo", None, {"middleware": ["inline://x(a=1)"]}], "ToolNotAllowed", "bare name"),
        ([1, "echo", None, {"middleware": ["../evil.skill.py"]}], "ToolNotAllowed", "is a path"),
        ([1, "echo", None, {"middleware": ["Audit"]}], "ToolNotAllowed", "upper-case"),
        ([1, "echo", None, {"middleware": ["a"] * 17}], "LimitExceeded", "at most 16 middleware"),
        ([1, "echo", None, {"middleware": ["a(x=" + "y" * 2000 + ")"]}], "ArgsInvalid", "longer than"),
        ([1, "echo", None, {"next": 1}], "ArgsInvalid", "'next' option is true and comes alone"),
        ([1, "echo", None, {"next": True, "middleware": ["a"]}], "ArgsInvalid", "comes alone"),
    ],
)
async def test_forged_options_are_refused_host_side(sb, host, entry, kind, needle):
    res = await sb.run(forged(entry))
    ((call_id, ok, error),) = res.value  # the host's reply to the forged batch
    assert (call_id, ok, error["type"]) == (1, False, kind), res.value
    assert error["message"].startswith("agent code calling 'echo': ") and needle in error["message"]
    assert host.calls == []  # refused before call_host


async def test_a_call_entry_of_five_elements_is_malformed(sb, host):
    res = await sb.run(forged([1, "echo", None, {"middleware": []}, "extra"]))
    assert res.error is not None and "malformed call" in res.error
    assert host.calls == []


async def test_target_and_next_in_middleware_mode(host):
    served = {"skill": "echo", "args": {"text": "a b"}}
    sb = await Sandbox.start(limits=SandboxLimits(timeout=2), call_host=host, target=served)
    try:
        res = await sb.run("[target.skill, target.args, target.manager is ctx.manager]")
        assert res.value == ["echo", {"text": "a b"}, True]
        res = await sb.run("await target.manager.next()")
        assert res.error is None and res.value == {"text": "a b"}
        res = await sb.run("target.args['text'] = 'changed'\nawait ctx.manager.next()")
        assert res.value == {"text": "changed"}  # next() without args sends target.args
        res = await sb.run("await ctx.manager.next({'text': 'new'})")
        assert res.value == {"text": "new"}
        assert host.calls == [("echo", {"text": "a b"}), ("echo", {"text": "changed"}), ("echo", {"text": "new"})]
        assert host.options == [{"next": True}] * 3
        # the target survives a reset (a trap re-seeds the instance from the host's copy)
        res = await sb.run("while True:\n    pass", timeout=0.3)
        assert res.replaced
        res = await sb.run("[target.skill, target.args]")
        assert res.value == ["echo", {"text": "a b"}]
    finally:
        await sb.close()


async def test_no_target_outside_middleware_mode(sb):
    res = await sb.run("target")
    assert res.error is None and res.value is None
