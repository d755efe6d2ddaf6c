"""What the model is taught to write, run for real: every call form of the system prompt
in the WebAssembly sandbox through the agent, and the per-call middleware option from
agent code with its host-side checks. (The sandbox docs' agent code runs in
tests/test_docs.py, as every doc example does.)"""

from __future__ import annotations

import json
import re

import pytest

from agent_apps import ResultInvalid

pytestmark = pytest.mark.anyio

TIMES = """
frontmatter = {
    "description": "Multiply the wrapped call's (numeric) result.",
    "params": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]},
    "metadata": {"role": "middleware"},
}
async def main(ctx, args):
    return await ctx.manager.next() * args["n"]
"""

ECHO_PROVIDER = """
frontmatter = {
    "params": {"type": "object"},
    "metadata": {"visibility": "hidden", "tags": ["meta-internal", "provider"]},
}
async def main(ctx, args):
    ctx.manager.emit("shown", {"prompt": args["prompt"], "message": args["user_message"]})
    return "shown"
"""


async def shown(cm, call, **options):
    """What the model would be shown for an agent call (its system prompt and message)."""
    got = []
    unsubscribe = cm.events.subscribe("shown", lambda topic, e: got.append(e))
    try:
        await cm.invoke("agent", {**call, "config": {"agent": "echo-provider"}}, **options)
    except ResultInvalid:  # with returns: the echo provider never finishes
        pass
    finally:
        unsubscribe()
    return got[-1]


@pytest.fixture
def mw_tools(write_skill, tools):
    role = '"role": "middleware"'
    write_skill("times", TIMES)
    write_skill("hidden-times", TIMES.replace(role, f'{role}, "visibility": "hidden"'))
    write_skill("internal-times", TIMES.replace(role, f'{role}, "tags": ["meta-internal"]'))
    write_skill("echo-provider", ECHO_PROVIDER)


async def run_code(cm, code, *, allowed_tools="word-count times", **args):
    """Run one piece of agent code through a scripted agent; (result text, error?)."""
    events = []
    unsubscribe = cm.events.subscribe("forms", lambda topic, e: events.append(e))
    try:
        call = {"prompt": "P", "user_message": "Go.", "events": "forms", **args}
        call["config"] = {"agent": "agent-scripted", "script": [{"code": code}, {"text": "done"}]}
        if allowed_tools is not None:
            call["allowed_tools"] = allowed_tools
        await cm.invoke("agent", call)
    finally:
        unsubscribe()
    (result,) = [e for e in events if e["type"] in ("tool-result", "tool-error")]
    return result["result"], result["type"] == "tool-error"


# -- middleware from agent code ------------------------------------------------------------


async def test_middleware_option_from_agent_code(context_manager, mw_tools):
    code = 'await ctx.manager.invoke("word-count", {"text": "a b"}, middleware=["times(n=10)"])'
    text, error = await run_code(context_manager, code)
    assert not error and text == "20", text


NOT_ALLOWED = "ToolNotAllowed: agent-code may not call"
NOT_MIDDLEWARE = "ArgsInvalid: word-count: invalid args at middleware[0]:"
REFUSED = {  # name: (the agent's allowed-tools, the middleware ref, what the model is told)
    "not-in-allowed-tools": ("word-count", "times(n=2)", f"{NOT_ALLOWED} times: not in allowed-tools"),
    "hidden-not-named": (None, "hidden-times(n=2)", f"{NOT_ALLOWED} hidden-times: it is hidden"),
    "internal": ("*", "internal-times(n=2)", f"{NOT_ALLOWED} internal-times: agent code may not use internal"),
    "not-middleware": ("*", "word-count", f"{NOT_MIDDLEWARE} 'word-count' is not a middleware"),
    "bad-params": ("word-count times", "times(n=0)", "ArgsInvalid: times: invalid args at n: 0 is less than the"),
    "missing-params": ("word-count times", "times", "ArgsInvalid: times: invalid args: 'n' is a required property"),
    "unknown": ("*", "tims(n=2)", "SkillNotFound: no skill named 'tims' (did you mean times"),
    "constraint": ("word-count times(n=10)", "times(n=2)", f"{NOT_ALLOWED} times: argument n=2 does not match '10'"),
    "malformed": ("word-count times", "times(n=2", f"{NOT_MIDDLEWARE} not 'name' or 'name(key=value)'"),
    "uri": ("*", "file:///x.skill.py", "ToolNotAllowed: agent code calling 'word-count': middleware 'file:///x"),
    "callback-ref": ("*", "callback://agent-hook.x", "ToolNotAllowed"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_middleware_from_agent_code_is_checked_like_the_call(context_manager, mw_tools, name):
    allowed, ref, words = REFUSED[name]
    code = f'await ctx.manager.invoke("word-count", {{"text": "a b"}}, middleware=[{ref!r}])'
    text, error = await run_code(context_manager, code, allowed_tools=allowed)
    assert error and words in text, text


async def test_allowed_middleware_forms(context_manager, mw_tools):
    # hidden middleware named exactly, and an argument constraint that matches
    for allowed, ref in [("word-count hidden-times", "hidden-times(n=2)"), ("word-count times(n=2)", "times(n=2)")]:
        code = f'await ctx.manager.invoke("word-count", {{"text": "a b c"}}, middleware=[{ref!r}])'
        text, error = await run_code(context_manager, code, allowed_tools=allowed)
        assert not error and text == "6", text


# -- every call form the prompt teaches ---------------------------------------------------------

#: Placeholders of the prompt's examples and what stands in for them. A new example with
#: a placeholder not listed here fails the test below: add a stand-in for it.
_COUNT = 'ctx.manager.invoke("word-count", {"text": "a b"})'
STAND_INS = [
    ('"skill-name"', '"word-count"'),
    ("{...args}", '{"text": "a b"}'),
    ("invoke(name, args)", 'invoke("word-count", {"text": "a b"})'),
    (", args,", ', {"text": "a b"},'),
    ("name(key=value)", "times(n=2)"),
    ("asyncio.gather(...)", f"asyncio.gather({_COUNT}, {_COUNT})"),
    ("print(...)", 'print("hello")'),
    ("finish(value)", 'finish({"count": 2})'),
]
_CODE_HINTS = ("ctx.", "target", "memory", "asyncio", "print(")


def examples(text: str) -> list[str]:
    """The inline code spans of ``text`` that are agent code, stand-ins applied."""
    out = []
    for span in re.findall(r"`([^`\n]+)`", text):
        if not any(h in span for h in _CODE_HINTS):
            continue
        for placeholder, stand_in in STAND_INS:
            span = span.replace(placeholder, stand_in)
        assert "..." not in span, f"an example with an unknown placeholder: {span!r}"
        compile(span, "<example>", "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT
        out.append(span)
    return sorted(set(out))


async def test_every_call_form_the_prompt_teaches_runs_in_the_sandbox(context_manager, mw_tools):
    from agent_apps.agent import INVOKE_TOOL

    returns = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
    prompt = (await shown(context_manager, {"prompt": "P", "allowed_tools": "word-count times", "returns": returns}))[
        "prompt"
    ]
    assert "## Middleware you can activate" in prompt and "## Your result" in prompt  # every section is there
    forms = examples(prompt + "\n" + INVOKE_TOOL["description"])
    assert any("middleware=" in f for f in forms) and any("gather" in f for f in forms), forms
    assert any("finish" in f for f in forms) and any("memory" in f for f in forms), forms
    for code in forms:
        extra = {"returns": returns} if "finish" in code else {}
        text, error = await run_code(context_manager, code, **extra)
        assert not error, f"{code!r} failed in the sandbox: {text}"


async def test_discovery_mode_examples_run(context_manager, mw_tools):
    prompt = (await shown(context_manager, {"prompt": "P"}))["prompt"]
    assert '`skill-list` (filter with `{"match": "file-*"}`)' in prompt
    assert '`skill-describe` (`{"name": ...}`)' in prompt
    code = (
        'found = await ctx.manager.invoke("skill-list", {"match": "file-*"})\n'
        'await ctx.manager.invoke("skill-describe", {"name": found[0]["name"]})'
    )
    text, error = await run_code(context_manager, code, allowed_tools=None)
    assert not error and json.loads(text)["name"].startswith("file-"), text


ECHO_TEXT = """
frontmatter = {
    "description": "Return the args.",
    "params": {"type": "object", "properties": {"text": {"type": "string"}}},
}
async def main(ctx, args):
    return args
"""


async def test_every_call_form_of_middleware_mode_runs_in_the_sandbox(context_manager, write_skill, mw_tools):
    write_skill("echo-text", ECHO_TEXT)
    write_skill("echo-mw.skill.md", "---\nmetadata: {role: middleware, model: {agent: echo-provider}}\n---\nServe.\n")
    got = []
    context_manager.events.subscribe("shown", lambda topic, e: got.append(e))
    assert await context_manager.invoke("echo-text", {"text": "a b"}, middleware=["echo-mw"]) == "shown"
    prompt = got[-1]["prompt"]
    assert "## The call you serve" in prompt and got[-1]["message"] == "Serve the call of echo-text."
    forms = examples(prompt)
    assert {"target.skill", "target.args", "result = await target.manager.next()"} <= set(forms), forms
    for index, code in enumerate(forms):
        script = json.dumps([{"code": code}, {"text": "done"}])
        write_skill(
            f"serve-{index}.skill.md",
            f"---\nmetadata:\n  role: middleware\n  model: {{agent: agent-scripted, script: {script}}}\n---\nServe.\n",
        )
        context_manager.reload()
        events: list = []
        unsubscribe = context_manager.events.subscribe("mw-forms", lambda topic, e, got=events: got.append(e))
        try:
            scope = {"agent": {"events": "mw-forms"}}
            await context_manager.invoke("echo-text", {"text": "a b"}, middleware=[f"serve-{index}"], nonlocals=scope)
        finally:
            unsubscribe()
        (result,) = [e for e in events if e["type"] in ("tool-result", "tool-error")]
        assert result["type"] == "tool-result", f"{code!r} failed in the sandbox: {result['result']}"


# -- the stubs and the guidance the prompt shows ---------------------------------------------------


def stub_calls(prompt: str) -> dict[str, str]:
    """Each stub's call (the body of ``async def``), by function name, with its
    parameters bound to example values the way a model fills them in."""
    calls = {}
    stub = r"async def (\w+)\(([^)]*)\)[^\n]*\n(?:.*\n)*?    return (await ctx\.manager\.invoke\(.*\))"
    for match in re.finditer(stub, prompt):
        name, params, call = match.groups()
        bound = [p.split(":")[0].strip() for p in params.split(",") if p.strip() and "=" not in p]
        calls[name] = "".join(f"{p} = {EXAMPLE_VALUES[p]!r}\n" for p in bound) + call
    return calls


EXAMPLE_VALUES = {"text": "a b", "name": "word-count"}


async def test_the_stubs_calls_run_in_the_sandbox(context_manager, mw_tools):
    prompt = (await shown(context_manager, {"prompt": "P", "allowed_tools": "word-count skill-describe"}))["prompt"]
    calls = stub_calls(prompt)
    assert set(calls) == {"word_count", "skill_describe"}, calls
    assert calls["word_count"] == 'text = \'a b\'\nawait ctx.manager.invoke("word-count", {"text": text})'
    text, error = await run_code(context_manager, calls["word_count"], allowed_tools="word-count")
    assert not error and text == "2", text
    text, error = await run_code(context_manager, calls["skill_describe"], allowed_tools="skill-describe word-count")
    assert not error and json.loads(text)["stub"].startswith("async def word_count(text: str) -> int:"), text


async def test_the_guidance_load_example_runs_in_the_sandbox(context_manager, write_skill, mw_tools):
    write_skill("checklist/SKILL.md", "---\ndescription: A checklist.\n---\n- check the tests\n")
    context_manager.reload()
    prompt = (await shown(context_manager, {"prompt": "P", "allowed_tools": "word-count checklist"}))["prompt"]
    (form,) = [f for f in examples(prompt) if "load-skills" in f]
    assert form == 'await ctx.manager.invoke("load-skills", {"skills": ["checklist"]})'
    text, error = await run_code(context_manager, form, allowed_tools="word-count checklist")
    assert not error and text.startswith("# Guidance: checklist") and "- check the tests" in text, text
