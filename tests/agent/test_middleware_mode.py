"""Middleware mode: a prompt skill with ``metadata.role: middleware`` is an agent serving
the call it wraps (``target``), advancing it with ``await target.manager.next()``; run
end to end with the scripted provider, the real sandbox and the real pipeline."""

from __future__ import annotations

import json

import pytest

from agent_apps import ArgsInvalid, MiddlewareError, SkillFailed

pytestmark = pytest.mark.anyio

SERVED = """
frontmatter = {
    "description": "Count the words (and say so on the 'ran' topic).",
    "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "metadata": {"returns": {"type": "integer"}},
}
async def main(ctx, args):
    ctx.manager.emit("ran", {"text": args["text"]})
    if args["text"] == "boom":
        raise ValueError("the counter broke")
    return len(args["text"].split())
"""


#: Agent code sending a raw ``next`` call for 'word-count' through the poll import.
FORGED_NEXT = (
    "from wit_world.imports import host\nimport json\n"
    "batch = {'calls': [[1, 'word-count', {'text': 'a'}, {'next': True}]], 'cancel': []}\n"
    "%s(host.poll(json.dumps(batch), 1000))"
)


def middleware_skill(write_skill, name, turns, *, params=None, extra=""):
    """Write a prompt middleware NAME.skill.md that plays ``turns``."""
    front = {"description": f"{name}, an agent serving as middleware.", "metadata": {"role": "middleware"}}
    front["metadata"]["model"] = {"agent": "agent-scripted", "script": turns}
    if params is not None:
        front["params"] = params
    write_skill(f"{name}.skill.md", f"---\n{json.dumps(front)}\n{extra}---\nYou serve calls.\n")


@pytest.fixture
def served(write_skill, tools):
    write_skill("counter", SERVED)


@pytest.fixture
def ran(context_manager):
    texts = []
    context_manager.events.subscribe("ran", lambda topic, e: texts.append(e["text"]))
    return texts


@pytest.fixture
def events(context_manager):
    got = []
    context_manager.events.subscribe("mw", lambda topic, e: got.append(e))
    return got


async def serve(cm, middleware, text="a b"):
    return await cm.invoke("counter", {"text": text}, middleware=[middleware], nonlocals={"agent": {"events": "mw"}})


def tool_texts(events):
    return [(e["type"], e["result"]) for e in events if e["type"] in ("tool-result", "tool-error")]


async def test_the_agent_sees_the_call_changes_args_and_result(context_manager, write_skill, served, ran, events):
    code = (
        "print(target.skill, target.args)\n"
        "n = await target.manager.next({**target.args, 'text': target.args['text'] * 2})\n"
        "ctx.manager.finish(n + 100)"
    )
    middleware_skill(write_skill, "doubler", [{"text": "Doubling.", "code": code}])
    assert await serve(context_manager, "doubler") == 103  # "a ba b": 3 words, then + 100
    assert ran == ["a ba b"]
    assert tool_texts(events) == [("tool-result", "counter {'text': 'a b'}\nfinished with: 103")]
    start = next(e for e in events if e["type"] == "agent-start")
    assert start["agent"] == "doubler"


async def test_next_without_finish_passes_the_result_through(context_manager, write_skill, served, ran):
    turns = [{"code": "r = await ctx.manager.next()\nprint('got', r)"}, {"text": "The call returned 2; all good."}]
    middleware_skill(write_skill, "observer", turns)
    assert await serve(context_manager, "observer") == 2
    assert ran == ["a b"]


async def test_never_calling_next_short_circuits_with_the_agents_result(context_manager, write_skill, served, ran):
    middleware_skill(write_skill, "gate", [{"text": "I will not run this."}])
    with pytest.raises(Exception, match="invalid result"):  # the text is not the counter's integer
        await serve(context_manager, "gate")
    middleware_skill(write_skill, "cache", [{"code": "ctx.manager.finish(42)"}])
    context_manager.reload()
    assert await serve(context_manager, "cache") == 42
    assert ran == []  # the served call never ran


async def test_finish_none_without_next_is_a_null_result(context_manager, write_skill, tools, ran):
    write_skill("loose", SERVED.replace('"metadata": {"returns": {"type": "integer"}},', ""))
    middleware_skill(write_skill, "nuller", [{"code": "ctx.manager.finish(None)"}])
    assert await context_manager.invoke("loose", {"text": "a"}, middleware=["nuller"]) is None
    assert ran == []


async def test_next_twice_is_a_clear_error_the_model_sees(context_manager, write_skill, served, ran, events):
    code = (
        "first = await target.manager.next()\n"
        "try:\n    await target.manager.next()\nexcept HostError as e:\n    print(type(e).__name__, e)\n"
        "ctx.manager.finish(first)"
    )
    middleware_skill(write_skill, "twice", [{"code": code}])
    assert await serve(context_manager, "twice") == 2
    assert ran == ["a b"]
    ((kind, text),) = tool_texts(events)
    assert "MiddlewareError twice failed: called ctx.manager.next() twice" in text


async def test_next_args_are_validated_against_the_served_skill(context_manager, write_skill, served, ran, events):
    code = "try:\n    await target.manager.next({'text': 5})\nexcept HostError as e:\n    print(type(e).__name__, e)"
    retry = "await target.manager.next({'text': 'x y z'})"
    middleware_skill(write_skill, "typo", [{"code": code}, {"code": retry}, {"text": "ok"}])
    assert await serve(context_manager, "typo") == 3  # the fixed retry ran the call
    assert "ArgsInvalid counter: invalid args at text: 5 is not of type 'string'" in tool_texts(events)[0][1]
    assert ran == ["x y z"]


async def test_a_failing_served_call(context_manager, write_skill, served, events):
    # the agent catches the error and answers with a fallback
    code = "try:\n    await target.manager.next()\nexcept HostError as e:\n    print(e)\n    ctx.manager.finish(-1)"
    middleware_skill(write_skill, "fallback", [{"code": code}])
    assert await serve(context_manager, "fallback", "boom") == -1
    assert "the counter broke" in tool_texts(events)[0][1]
    # an agent that does not finish leaves the call failed, with the served skill's own error
    middleware_skill(write_skill, "shrug", [{"code": "await target.manager.next()"}, {"text": "it failed"}])
    context_manager.reload()
    with pytest.raises(SkillFailed, match="counter failed: ValueError: the counter broke"):
        await serve(context_manager, "shrug", "boom")


async def test_next_outside_middleware_mode_is_refused(context_manager, tools):
    events = []
    context_manager.events.subscribe("x", lambda topic, e: events.append(e))
    forged = FORGED_NEXT % "json.loads"
    turns = [{"code": ["ctx.manager.next()", forged]}, {"text": "done"}]
    call = {"prompt": "P", "events": "x", "config": {"agent": "agent-scripted", "script": turns}}
    await context_manager.invoke("agent", call)
    first, second = [e["result"] for e in events if e["type"] in ("tool-result", "tool-error")]
    assert "RuntimeError: ctx.manager.next() is only available when this agent serves as middleware" in first
    assert "MiddlewareError" in second and "only available when the agent serves as middleware" in second


async def test_forged_next_for_another_skill_is_refused(context_manager, write_skill, served, ran, events):
    forged = FORGED_NEXT % "print"
    middleware_skill(write_skill, "sly", [{"code": forged}, {"code": "ctx.manager.finish(0)"}])
    assert await serve(context_manager, "sly") == 0
    assert "next() advances the served call of 'counter' only" in tool_texts(events)[0][1]
    assert ran == []


async def test_params_activation_and_memory(context_manager, write_skill, served):
    params = {"type": "object", "properties": {"bonus": {"type": "integer"}}, "required": ["bonus"]}
    code = "ctx.manager.finish(await target.manager.next() + memory['args']['bonus'])"
    middleware_skill(write_skill, "bonus", [{"code": code}], params=params)
    assert await serve(context_manager, "bonus(bonus=5)") == 7
    with pytest.raises(ArgsInvalid, match="bonus: invalid args: 'bonus' is a required property"):
        await serve(context_manager, "bonus")
    # a prompt middleware without params takes none (not the free-form 'task' of other prompt skills)
    middleware_skill(write_skill, "plain", [{"code": "ctx.manager.finish(1)"}])
    context_manager.reload()
    assert context_manager.get("plain").params is None


async def test_frontmatter_and_config_activation_without_serving_its_own_calls(
    context_manager, write_skill, served, skills_path, events
):
    turns = [{"code": "n = await target.manager.next()\nctx.manager.finish(n * 10)"}]
    middleware_skill(write_skill, "tenfold", turns)
    # every invocation, from config: the agent's own calls (agent-execute, agent, the
    # provider, its code, the callbacks) are not served by it again
    (skills_path / "agent-apps.yaml").write_text("middleware: [tenfold]\n")
    context_manager.reload()
    assert await serve(context_manager, "tenfold") == 200  # tenfold twice: config, then call-time
    assert [e["agent"] for e in events if e["type"] == "agent-start"] == ["tenfold", "tenfold"]


async def test_the_served_calls_own_agent_state_is_kept(context_manager, write_skill, tools):
    write_skill(
        "inner.skill.md",
        "---\ndescription: An agent.\nmetadata:\n  model:\n    agent: agent-scripted\n    script:\n"
        "      - text: inner answer\n---\nAnswer.\n",
    )
    middleware_skill(write_skill, "observer", [{"code": "await ctx.manager.next()"}, {"text": "observed"}])
    seen = {}

    async def watch(ctx, call_next):
        result = await call_next()
        seen.update(ctx.locals["agent"])
        return result

    assert await context_manager.invoke("inner", {"task": "q"}, middleware=[watch, "observer"]) == "inner answer"
    messages = [t["text"] for t in seen["trace"] if t["type"] == "message"]
    assert messages == ["inner answer"] and seen["status"] == "done"  # the inner agent's, not the observer's


async def test_middleware_error_names_the_middleware_when_the_run_is_broken(context_manager, write_skill, served):
    # a provider error inside the middleware agent fails the call with the agent's error
    middleware_skill(write_skill, "broken", [{"error": {"type": "AccessDenied", "message": "no"}}])
    with pytest.raises(SkillFailed, match="AccessDenied"):
        await serve(context_manager, "broken")
    assert issubclass(MiddlewareError, SkillFailed)


async def test_the_docs_example_runs(context_manager, write_skill, served, ran, repo_root):
    text = (repo_root / "docs" / "middleware.md").read_text().split("## Agents as middleware", 1)[1]
    example = text.split("```markdown\n", 1)[1].split("```", 1)[0]
    write_skill("doubler.skill.md", example)
    assert await serve(context_manager, "doubler") == 103
    assert ran == ["a ba b"]
