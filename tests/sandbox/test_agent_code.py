"""Agent code through the real pipeline (phase 2 of the sandbox issue).

The agent's code runs as an anonymous skill with the untrusted flag, driven by the
offline ``agent-scripted`` provider; each ``ctx.manager.invoke`` of the guest is
a child invocation of that anonymous skill, so allowed-tools, hidden skills, arg
constraints, validation and middleware all apply, and non-bare refs are refused.
"""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.anyio

SKILLS = {
    "word-count": """
        frontmatter = {
            "description": "Count words.",
            "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        }
        async def main(ctx, args):
            return len(args["text"].split())
    """,
    "secret": """
        frontmatter = {"description": "Hidden.", "metadata": {"visibility": "hidden"}}
        async def main(ctx, args):
            return "secret!"
    """,
    "outside": """
        frontmatter = {"description": "Visible but not allowed."}
        async def main(ctx, args):
            return "outside!"
    """,
    "nap": """
        import asyncio
        frontmatter = {"description": "Sleep.", "params": {"type": "object", "properties": {"s": {"type": "number"}}}}
        async def main(ctx, args):
            await asyncio.sleep(args.get("s", 0.3))
            return "rested"
    """,
    "give-callback": """
        frontmatter = {"description": "Returns a callback ref."}
        async def main(ctx, args):
            return ctx.manager.callback(lambda c, a: "called back!", name="cb")
    """,
    "whoami": """
        frontmatter = {"description": "Reports its flags and its child's."}
        async def main(ctx, args):
            probe = {"name": "probe", "main": lambda c, a: c.internals.get("untrusted", False)}
            child = await ctx.manager.invoke(probe)
            return {"untrusted": ctx.internals.get("untrusted", False), "child": child}
    """,
}

PROBE = """
out = {}
for label, ref, args in ATTEMPTS:
    try:
        out[label] = ["ALLOWED", await ctx.manager.invoke(ref, args)]
    except HostError as e:
        out[label] = [type(e).__name__, str(e)]
ctx.manager.finish(out)
"""


@pytest.fixture
def skills(write_skill):
    for name, source in SKILLS.items():
        write_skill(name, source)


async def run_agent(cm, code, *, allowed_tools=None, memory=None, turns=None):
    call = {
        "prompt": "Test.",
        "user_message": "Go.",
        "config": {"agent": "agent-scripted", "script": turns or [{"code": code}]},
    }
    if allowed_tools is not None:
        call["allowed_tools"] = allowed_tools
    if memory is not None:
        call["memory"] = memory
    return await cm.invoke("agent", call)


async def probe(cm, attempts, **kw):
    return await run_agent(cm, f"ATTEMPTS = {attempts!r}\n" + PROBE, **kw)


async def test_allowed_calls_work_and_refusals_are_typed(context_manager, skills):
    out = await probe(context_manager, [
        ("ok", "word-count", {"text": "a b c"}),
        ("hidden", "secret", None),
        ("outside", "outside", None),
    ], allowed_tools="word-count nap")
    assert out["ok"] == ["ALLOWED", 3]
    assert out["hidden"][0] == "ToolNotAllowed" and "secret" in out["hidden"][1]
    assert out["outside"][0] == "ToolNotAllowed" and "outside" in out["outside"][1]


async def test_hidden_skills_are_refused_without_allowed_tools(context_manager, skills):
    out = await probe(context_manager, [("hidden", "secret", None), ("visible", "outside", None)])
    assert out["hidden"][0] in ("ToolNotAllowed", "SkillNotFound")
    assert out["visible"] == ["ALLOWED", "outside!"]


async def test_arg_constraints_cannot_be_bypassed(context_manager, skills):
    out = await probe(context_manager, [
        ("match", "word-count", {"text": "hello"}),
        ("other", "word-count", {"text": "goodbye"}),
        ("smuggled", "word-count", {"text": "hello rm-rf"}),
        ("missing", "word-count", {}),
        ("case", "word-count", {"text": "HELLO"}),
    ], allowed_tools="word-count(text=hello*)")
    assert out["match"] == ["ALLOWED", 1]
    for label in ("other", "smuggled", "missing", "case"):
        assert out[label][0] in ("ToolNotAllowed", "ArgsInvalid"), (label, out[label])


async def test_invalid_args_are_refused_by_validation(context_manager, skills):
    out = await probe(context_manager, [("bad", "word-count", {"text": 5})], allowed_tools="word-count")
    assert out["bad"][0] == "ArgsInvalid"


async def test_callback_refs_and_providers_are_refused(context_manager, skills):
    code = (
        "ref = await ctx.manager.invoke('give-callback')\n"
        "ATTEMPTS = [('callback', ref, None), ('agent', 'agent', {'prompt': 'x'}),\n"
        "            ('provider', 'agent-scripted', {'prompt': 'x', 'invoke_ref': 'a', 'hook_ref': 'b'}),\n"
        "            ('executor', 'agent-execute', {}), ('inline', 'inline://frontmatter = {}', None),\n"
        "            ('file', 'file:///etc/passwd', None), ('path', '../word-count.skill.py', None)]\n"
        + PROBE
    )
    out = await run_agent(context_manager, code, allowed_tools="give-callback word-count")
    assert out["callback"][0] == "ToolNotAllowed" and "bare name" in out["callback"][1]
    for label in ("agent", "provider", "executor", "inline", "file", "path"):
        assert out[label][0] == "ToolNotAllowed", (label, out[label])
    out = await run_agent(
        context_manager,
        "ATTEMPTS = [('provider', 'agent-scripted', {'prompt': 'x', 'invoke_ref': 'a', 'hook_ref': 'b'})]\n" + PROBE,
    )  # no allowed-tools: every *visible* skill; the provider is hidden, so still refused
    assert out["provider"][0] == "ToolNotAllowed" and "hidden" in out["provider"][1]


async def test_untrusted_flag_does_not_leak(context_manager, skills):
    out = await run_agent(context_manager, "ctx.manager.finish(await ctx.manager.invoke('whoami'))")
    assert out == {"untrusted": False, "child": False}


async def test_every_guest_call_goes_through_middleware(context_manager, skills, write_skill, skills_path):
    write_skill(
        "count-calls",
        'frontmatter = {"metadata": {"role": "middleware"}}\n'
        "async def main(ctx, args):\n"
        '    ctx.manager.emit("mw", {"skill": ctx.target.skill.name})\n'
        "    return await ctx.manager.next()\n",
    )
    (skills_path / "agent-apps.yaml").write_text("middleware: [count-calls]\n")
    context_manager.reload()
    seen: list[str] = []
    context_manager.events.subscribe("mw", lambda topic, e: seen.append(e["skill"]))
    code = (
        "r = await asyncio.gather(*(ctx.manager.invoke('word-count', {'text': 'a ' * i}) for i in range(1, 4)))\n"
        "r.append(await ctx.manager.invoke('outside'))\n"
        "ctx.manager.finish(r)"
    )
    assert await run_agent(context_manager, code) == [1, 2, 3, "outside!"]
    assert seen.count("word-count") == 3 and seen.count("outside") == 1


async def test_gathered_calls_run_concurrently_through_the_pipeline(context_manager, skills):
    code = "ctx.manager.finish(await asyncio.gather(*(ctx.manager.invoke('nap', {'s': 0.3}) for _ in range(3))))"
    t0 = time.monotonic()
    assert await run_agent(context_manager, code) == ["rested"] * 3
    assert time.monotonic() - t0 < 0.75 + 0.5  # 0.9 s if sequential; slack for agent set-up


async def test_memory_is_per_agent(context_manager, skills):
    turns_a = [{"code": "memory['who'] = 'a'"}, {"code": "ctx.manager.finish(memory)"}]
    turns_b = [{"code": "ctx.manager.finish(memory)"}]
    a = await run_agent(context_manager, None, memory={"seed": "a"}, turns=turns_a)
    b = await run_agent(context_manager, None, memory={"seed": "b"}, turns=turns_b)
    assert a == {"seed": "a", "who": "a"} and b == {"seed": "b"}
