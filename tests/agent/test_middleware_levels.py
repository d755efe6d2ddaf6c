"""Three middleware levels: tool (every invocation), run (agent runs), model (each model
call of an agent run), activated the same three ways; the bundled redactor."""

from __future__ import annotations

import json

import pytest

from agent_apps import AgentAppsError, SkillLoadError
from agent_apps.testing.conformance import strands_bedrock
from agent_apps.testing.plugin import hermetic_manager

from .conftest import HARNESSES

pytestmark = pytest.mark.anyio

RUN_MW = """
frontmatter = {"metadata": {"role": "middleware", "level": "run"}}
async def main(ctx, args):
    ctx.manager.emit("seen", {"mw": "run", "skill": ctx.target.skill.name})
    result = await ctx.manager.next()
    ctx.manager.emit("seen", {"mw": "run-after", "status": ctx.locals["agent"]["status"]})
    return result
"""
TOOL_MW = """
frontmatter = {"metadata": {"role": "middleware"}}
async def main(ctx, args):
    ctx.manager.emit("seen", {"mw": "tool", "skill": ctx.target.skill.name})
    return await ctx.manager.next()
"""
# records each model call, and shouts the user's messages at the model
MODEL_MW = """
frontmatter = {"metadata": {"role": "middleware", "level": "model"}}
async def main(ctx, args):
    call = ctx.target.args
    ctx.manager.emit("seen", {"mw": "model", "skill": ctx.target.skill.name, "turn": call["turn"],
                              "roles": [m["role"] for m in call["messages"]]})
    loud = [{**m, "text": m["text"].upper()} if m["role"] == "user" else m for m in call["messages"]]
    response = await ctx.manager.next({**call, "messages": loud})
    ctx.manager.emit("seen", {"mw": "model-response", "received": response["meta"]["received"]["messages"]})
    return None
"""
CACHE_MW = """
frontmatter = {"metadata": {"role": "middleware", "level": "model"}}
async def main(ctx, args):
    return {"text": "from the cache", "tool_calls": [], "stop_reason": "end_turn"}
"""
REWRITE_MW = """
frontmatter = {"metadata": {"role": "middleware", "level": "model"}}
async def main(ctx, args):
    response = await ctx.manager.next()
    return {**response, "text": response["text"].replace("cat", "dog")}
"""
WORDS = """
frontmatter = {"params": {"type": "object", "properties": {"text": {"type": "string"}}}}
async def main(ctx, args):
    return len(args["text"].split())
"""


@pytest.fixture
def seen(context_manager):
    got: list[dict] = []
    context_manager.events.subscribe("seen", lambda topic, event: got.append(event))
    return got


@pytest.fixture
def skills(write_skill):
    for name, source in {
        "run-mw": RUN_MW,
        "tool-mw": TOOL_MW,
        "model-mw": MODEL_MW,
        "cache-mw": CACHE_MW,
        "rewrite-mw": REWRITE_MW,
        "words": WORDS,
    }.items():
        write_skill(name, source)


def scripted(turns, **extra):
    return {"agent": "agent-scripted", "script": turns, **extra}


async def test_run_level_middleware_wraps_agent_runs_only(skills_path, tmp_path, skills):
    cm = hermetic_manager([skills_path], tmp_path, middleware=["run-mw", "tool-mw"])
    seen: list[dict] = []
    cm.events.subscribe("seen", lambda topic, event: seen.append(event))
    assert await cm.invoke("words", {"text": "a b c"}) == 3
    assert [e["mw"] for e in seen] == ["tool"]  # a plain call: tool level only
    seen.clear()
    turns = [{"code": "n = await ctx.manager.invoke('words', {'text': 'x y'})"}, {"text": "done"}]
    assert await cm.invoke("agent", {"prompt": "P", "config": scripted(turns)}) == "done"
    runs = [e for e in seen if e["mw"] == "run"]
    assert runs == [{"mw": "run", "skill": "agent"}]  # once, around the agent run
    assert {"mw": "run-after", "status": "done"} in seen
    assert {"mw": "tool", "skill": "words"} in seen  # the code's call: tool level


async def test_run_level_middleware_of_a_prompt_skill_wraps_its_agent(context_manager, write_skill, skills, seen):
    write_skill(
        "poem.skill.md",
        "---\ndescription: P.\nmiddleware: [run-mw]\nmetadata: {model: {agent: agent-scripted, script: [{text: ok}]}}"
        "\n---\nWrite.\n",
    )
    write_skill(
        "plain.skill.md",
        "---\ndescription: P.\nmetadata: {model: {agent: agent-scripted, script: [{text: ok}]}}\n---\nW.\n",
    )
    assert await context_manager.invoke("poem") == "ok"
    assert [e for e in seen if e["mw"] == "run"] == [{"mw": "run", "skill": "agent"}]
    seen.clear()
    # per call, on the prompt skill: it reaches the agent that serves the call
    assert await context_manager.invoke("plain", middleware=["run-mw"]) == "ok"
    assert [e for e in seen if e["mw"] == "run"] == [{"mw": "run", "skill": "agent"}]


async def test_model_level_middleware_sees_and_changes_each_model_call(context_manager, skills, seen):
    turns = [{"code": "n = await ctx.manager.invoke('words', {'text': 'x y'})"}, {"text": "done"}]
    config = scripted(turns, echo=True)
    result = await context_manager.invoke(
        "agent", {"prompt": "P", "user_message": "count quietly", "config": config}, middleware=["model-mw"]
    )
    assert result == "done"
    calls = [e for e in seen if e["mw"] == "model"]
    assert [c["turn"] for c in calls] == [1, 2]  # one onion per model call
    assert calls[1]["roles"] == ["user", "assistant", "tool"]
    received = [e["received"] for e in seen if e["mw"] == "model-response"]
    assert received[0] == [{"role": "user", "text": "COUNT QUIETLY"}]  # what the model was sent
    assert not any(e.get("skill") == "words" for e in seen)  # tool calls are not model calls


async def test_model_level_middleware_may_answer_or_rewrite(context_manager, skills):
    cached = await context_manager.invoke(
        "agent", {"prompt": "P", "config": scripted([{"text": "from the model"}])}, middleware=["cache-mw"]
    )
    assert cached == "from the cache"
    rewritten = await context_manager.invoke(
        "agent", {"prompt": "P", "config": scripted([{"text": "a cat"}])}, middleware=["rewrite-mw"]
    )
    assert rewritten == "a dog"


async def test_model_level_middleware_from_config_and_model_middleware(write_skill, skills_path, tmp_path, skills):
    (skills_path / "agent-apps.yaml").write_text("model:\n  middleware: [rewrite-mw]\n")
    write_skill(
        "tale.skill.md",
        "---\ndescription: T.\nmetadata: {model: {agent: agent-scripted, script: [{text: the cat}]}}\n---\nT.\n",
    )
    cm = hermetic_manager([skills_path], tmp_path)
    assert await cm.invoke("tale") == "the dog"


async def test_a_provider_without_model_calls_is_refused_clearly(context_manager, write_skill, skills):
    write_skill(
        "old-provider",
        """
        frontmatter = {"params": {"type": "object"}, "metadata": {"tags": ["meta-internal", "provider"]}}
        async def main(ctx, args):
            return "hi"
        """,
    )
    with pytest.raises(AgentAppsError, match="'old-provider' does not report its model calls"):
        await context_manager.invoke(
            "agent", {"prompt": "P", "config": {"agent": "old-provider"}}, middleware=["model-mw"]
        )


async def test_a_bad_level_names_the_file(context_manager, write_skill):
    path = write_skill(
        "odd-mw",
        'frontmatter = {"metadata": {"role": "middleware", "level": "turn"}}\nasync def main(ctx, args):\n    pass\n',
    )
    with pytest.raises(SkillLoadError) as info:
        await context_manager.invoke("agent", {"prompt": "P"}, middleware=["odd-mw"])
    assert str(path) in str(info.value) and "'metadata.level' of a middleware must be one of tool, model, run" in str(
        info.value
    )


# -- the bundled redactor ----------------------------------------------------------------

SECRETS = (
    "Mail alice.smith@example.com, use key AKIAIOSFODNN7EXAMPLE and password=hunter2hunter2; "
    "the db is postgres://app:s3cr3t-pw@db.internal:5432/app"
)


async def test_redact_masks_secrets_and_emails_in_what_the_model_receives(context_manager):
    config = scripted([{"code": f"print({SECRETS!r})"}, {"text": "done"}], echo=True)
    received: list[dict] = []

    async def spy(ctx, call_next):  # a plain model-level middleware inside redact: what leaves
        response = await call_next()
        received.append(response["meta"]["received"])
        return response

    spy.level = "model"
    result = await context_manager.invoke(
        "agent",
        {"prompt": f"System: reach ops@example.org. {SECRETS}", "user_message": SECRETS, "config": config},
        middleware=["redact", spy],
    )
    assert result == "done"
    sent = json.dumps(received)
    for secret in ("alice.smith@example.com", "AKIAIOSFODNN7EXAMPLE", "hunter2hunter2", "s3cr3t-pw", "ops@example.org"):
        assert secret not in sent
    assert "[REDACTED EMAIL]" in sent and "[REDACTED SECRET]" in sent
    assert "password=[REDACTED SECRET]" in sent and "postgres://app:[REDACTED SECRET]@db.internal" in sent
    # the second call carries the tool result (the printed secrets): masked as well
    assert received[1]["messages"][-1]["role"] == "tool" and "[REDACTED SECRET]" in received[1]["messages"][-1]["text"]


async def test_redact_can_keep_emails(context_manager):
    config = scripted([{"text": "ok"}], echo=True)
    seen: list[dict] = []

    async def spy(ctx, call_next):
        response = await call_next()
        seen.append(response["meta"]["received"])
        return response

    spy.level = "model"
    await context_manager.invoke(
        "agent", {"prompt": "P", "user_message": SECRETS, "config": config}, middleware=["redact(emails=false)", spy]
    )
    text = seen[0]["messages"][0]["text"]
    assert "alice.smith@example.com" in text and "AKIAIOSFODNN7EXAMPLE" not in text


@pytest.mark.skipif("agent-strands" not in HARNESSES, reason="needs the 'strands' extra")
async def test_redact_masks_what_bedrock_receives(context_manager):
    """agent-strands, real Strands and boto3, over HTTP: the request body on the wire."""
    with strands_bedrock() as harness:
        config = harness.config([{"code": f"print({SECRETS!r})"}, {"text": "done"}])
        call = {"prompt": f"Reach ops@example.org. {SECRETS}", "user_message": SECRETS, "config": config}
        assert await context_manager.invoke("agent", call, middleware=["redact"]) == "done"
        bodies = [json.dumps(request.body) for request in harness.fake.requests]
    assert len(bodies) == 2
    for body in bodies:
        for secret in (
            "alice.smith@example.com",
            "AKIAIOSFODNN7EXAMPLE",
            "hunter2hunter2",
            "s3cr3t-pw",
            "ops@example.org",
        ):
            assert secret not in body
        assert "[REDACTED EMAIL]" in body and "password=[REDACTED SECRET]" in body
    assert "print(" in bodies[1]  # the model's own earlier code is still there, masked where it must be


async def test_agents_started_by_agent_code_keep_their_callers_model_middleware(context_manager):
    sent: list[str] = []

    async def spy(ctx, call_next):  # inside redact: sees what leaves for the model
        sent.append(json.dumps(ctx.args["messages"]))  # a plain callable: ctx is the model call
        return await call_next()

    spy.level = "model"
    child = {"prompt": "P", "user_message": SECRETS, "config": {"agent": "agent-scripted", "script": [{"text": "ok"}]}}
    turns = [{"code": f"await ctx.manager.invoke('agent', {json.dumps(child)})"}, {"text": "done"}]
    call = {"prompt": "P", "allowed_tools": "agent", "config": scripted(turns)}
    assert await context_manager.invoke("agent", call, middleware=["redact", spy]) == "done"
    assert len(sent) == 3  # the parent's two calls and the child's one
    child_call = next(s for s in sent if "[REDACTED" in s)
    assert "AKIAIOSFODNN7EXAMPLE" not in child_call and "alice.smith@example.com" not in child_call


# -- MiddlewareTermination: halt a chain with a reason ------------------------------------

QUOTA_MW = """
from agent_apps.errors import MiddlewareTermination
frontmatter = {"metadata": {"role": "middleware"}}
async def main(ctx, args):
    if ctx.target.args.get("text") == "too much":
        raise MiddlewareTermination("over the quota")
    return await ctx.manager.next()
"""
# halts the second model call of a run, before the model is asked; or after it answered
HALT_MODEL_MW = """
from agent_apps.errors import MiddlewareTermination
frontmatter = {"metadata": {"role": "middleware", "level": "model"}}
async def main(ctx, args):
    if ctx.target.args["turn"] == 2:
        raise MiddlewareTermination("budget watch: enough for today")
    response = await ctx.manager.next()
    if "halt after" in response["text"]:
        raise MiddlewareTermination("the answer said so")
    return response
"""


async def test_a_tool_level_middleware_halts_the_call_with_a_reason_naming_itself(context_manager, write_skill):
    from agent_apps import MiddlewareTermination

    write_skill("quota-mw", QUOTA_MW)
    write_skill("words", WORDS)
    assert await context_manager.invoke("words", {"text": "a b"}, middleware=["quota-mw"]) == 2
    with pytest.raises(MiddlewareTermination) as info:
        await context_manager.invoke("words", {"text": "too much"}, middleware=["quota-mw"])
    error = info.value
    assert (error.middleware, error.reason, str(error)) == ("quota-mw", "over the quota",
                                                             "quota-mw halted the call: over the quota")  # fmt: skip
    assert error.call_error and error.to_json()["middleware"] == "quota-mw"

    async def gate(ctx, call_next):  # a plain callable, outside the skill: named after the function
        raise MiddlewareTermination("closed")

    with pytest.raises(MiddlewareTermination, match="^gate halted the call: closed$"):
        await context_manager.invoke("words", {"text": "x"}, middleware=[gate, "quota-mw"])


def test_a_halted_call_exits_2_on_the_command_line(context_manager, write_skill, capsys):
    from agent_apps.cli import main

    write_skill("quota-mw", QUOTA_MW)
    path = write_skill("words", WORDS.replace('"params"', '"middleware": ["quota-mw"], "params"'))
    assert main(["invoke", "words", "--path", str(path.parent), "text=too much"]) == 2
    assert capsys.readouterr().err.strip() == "error: quota-mw halted the call: over the quota"


async def test_agent_code_sees_the_halt_as_the_error_of_its_call(context_manager, write_skill):
    write_skill("quota-mw", QUOTA_MW)
    write_skill("words", WORDS)
    code = ("try:\n    await ctx.manager.invoke('words', {'text': 'too much'}, middleware=['quota-mw'])\n"
            "except Exception as e:\n    ctx.manager.finish(f'{type(e).__name__}: {e}')")  # fmt: skip
    result = await context_manager.invoke("agent", {"prompt": "P", "config": scripted([{"code": code}])})
    assert result == "MiddlewareTermination: quota-mw halted the call: over the quota"


async def test_a_model_level_halt_stops_the_run_gracefully_with_its_reason(context_manager, write_skill):
    write_skill("halt-model-mw", HALT_MODEL_MW)
    events: list[dict] = []
    context_manager.events.subscribe("t", lambda topic, event: events.append(event))
    turns = [{"text": "First.", "code": "print(1)"}, {"text": "Second, never asked."}]
    call = {"prompt": "P", "events": "t", "config": scripted(turns)}
    assert await context_manager.invoke("agent", call, middleware=["halt-model-mw"]) == "First."
    done = events[-1]
    assert (done["status"], done["message"]) == ("stopped", "Stopped: halt-model-mw: budget watch: enough for today")
    assert [e["turn"] for e in events if e["type"] == "model-response"] == [1]  # turn 2's model was not asked
    events.clear()
    turns = [{"text": "Now halt after this.", "code": "print('never run')"}, {"text": "x"}]
    assert await context_manager.invoke("agent", {**call, "config": scripted(turns)},
                                        middleware=["halt-model-mw"]) == "Now halt after this."  # fmt: skip
    assert events[-1]["message"] == "Stopped: halt-model-mw: the answer said so"
    denied = [e["result"] for e in events if e["type"] in ("tool-result", "tool-error")]
    assert denied == ["Tool call denied: the run was stopped (halt-model-mw: the answer said so): no more code runs"]
