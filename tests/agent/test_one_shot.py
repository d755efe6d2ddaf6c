"""``ctx.llm`` and the ``llm`` skill: one model call through the caller's provider config,
with a structured answer validated by JSON Schema, counted in the run's budget, under
allowed-tools, and from agent code only with the model keys agent code may set."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from agent_apps import ArgsInvalid, BudgetExceeded, ResultInvalid, ToolNotAllowed
from agent_apps.agent.one_shot import json_answer

from .conftest import HARNESSES

pytestmark = pytest.mark.anyio

#: A code skill that asks the model once, with what its args say.
ASKER = """
frontmatter = {{
    "description": "Ask the model.",
    "allowed-tools": {allowed!r},
    "params": {{"type": "object"}},
    "metadata": {{"model": {model!r}}},
}}
async def main(ctx, args):
    return await ctx.llm(**args)
"""


def scripted(*texts: str, **usage: int) -> dict:
    turns = [{"text": t, **({"usage": usage} if usage else {})} for t in texts]
    return {"agent": "agent-scripted", "script": turns}


def asker(write_skill, model: dict, allowed: str = "llm", name: str = "asker") -> None:
    write_skill(name, ASKER.format(allowed=allowed, model=model))


@pytest.mark.parametrize("name", sorted(HARNESSES))
async def test_a_code_skill_asks_its_own_provider_once_and_gets_the_text(context_manager, write_skill, name):
    with HARNESSES[name]() as harness:
        asker(write_skill, harness.config([{"text": "Paris."}]))
        answer = await context_manager.invoke("asker", {"prompt": "The capital of France?", "system": "Be brief."})
    assert answer == "Paris."


async def test_a_schema_makes_the_answer_a_validated_json_value(context_manager, write_skill):
    asker(write_skill, scripted('```json\n{"city": "Paris", "population": 2}\n```'))
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert await context_manager.invoke("asker", {"prompt": "Where?", "schema": schema}) == {
        "city": "Paris",
        "population": 2,
    }


async def test_an_answer_that_fails_the_schema_is_an_error_naming_the_path(context_manager, write_skill):
    asker(write_skill, scripted('{"city": 7}'))
    asker(write_skill, scripted("I think it is Paris."), name="prose")
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    with pytest.raises(ResultInvalid) as info:
        await context_manager.invoke("asker", {"prompt": "Where?", "schema": schema})
    assert info.value.path == "city" and "llm" in str(info.value)
    with pytest.raises(ResultInvalid, match="not JSON"):
        await context_manager.invoke("prose", {"prompt": "Where?", "schema": schema})


async def test_a_bad_schema_or_no_user_message_is_refused_before_the_model_is_asked(context_manager, write_skill):
    asker(write_skill, scripted("never said"))
    with pytest.raises(ArgsInvalid) as info:
        await context_manager.invoke("asker", {"prompt": "x", "schema": {"type": "nonsense"}})
    assert info.value.path == "schema"
    with pytest.raises(ArgsInvalid, match="last one is the user's"):
        await context_manager.invoke("asker", {"messages": [{"role": "assistant", "text": "hi"}]})
    with pytest.raises(ArgsInvalid) as info:
        await context_manager.invoke("asker", {"messages": [{"role": "system", "text": "hi"}]})
    assert info.value.path.startswith("messages")


async def test_ctx_llm_is_a_call_of_the_llm_skill_under_allowed_tools(context_manager, write_skill):
    asker(write_skill, scripted("hi"), allowed="file-read")
    with pytest.raises(ToolNotAllowed) as info:
        await context_manager.invoke("asker", {"prompt": "hello"})
    assert info.value.callee == "llm"


async def test_calls_outside_any_agent_share_one_budget_per_run(context_manager, write_skill):
    thrice = "return [await ctx.llm(**args) for _ in range(3)]"
    model = {**scripted("one", input_tokens=30, output_tokens=10), "budget": {"tokens": 50}}
    write_skill("thrice", ASKER.format(allowed="llm", model=model).replace("return await ctx.llm(**args)", thrice))
    model["budget"] = {"tokens": 200}
    write_skill("roomy", ASKER.format(allowed="llm", model=model).replace("return await ctx.llm(**args)", thrice))
    with pytest.raises(BudgetExceeded) as info:  # 80 of 50 used after two calls: the third may not start
        await context_manager.invoke("thrice", {"prompt": "a"})
    assert info.value.limit == "model.budget.tokens" and info.value.used == 80
    assert await context_manager.invoke("roomy", {"prompt": "a"}) == ["one"] * 3
    assert await context_manager.invoke("roomy", {"prompt": "a"}) == ["one"] * 3  # each run has its own account


async def test_agent_code_calls_count_in_the_agents_budget_and_report(context_manager):
    code = (
        "r = await ctx.manager.invoke('llm', {'prompt': 'x', 'config': {'agent': 'agent-scripted', "
        "'script': [{'text': 'inner', 'usage': {'input_tokens': 700, 'output_tokens': 11}}]}})\n"
        "ctx.manager.finish(r)"
    )
    script = [{"code": code, "usage": {"input_tokens": 5, "output_tokens": 1}}]
    call = {"prompt": "Test.", "user_message": "Go.", "allowed_tools": "llm", "config": scripted()}
    call["config"]["script"] = script
    assert await context_manager.invoke("agent", call) == "inner"
    (agent,) = context_manager.state.runs.agents(context_manager.state.runs.list()[0].id)
    assert agent.report["budget"]["used"]["input_tokens"] == 705
    assert agent.report["budget"]["used"]["turns"] == 2

    call["config"] = {**call["config"], "budget": {"input_tokens": 100}}
    with pytest.raises(BudgetExceeded):
        await context_manager.invoke("agent", call)


async def test_agent_code_asks_with_its_agents_model_config(context_manager, write_skill):
    # the prompt skill's own model: its code's llm call gets the same provider and script (whose
    # first turn's text is the answer: the tool call in it is refused in a one-shot call)
    code = "ctx.manager.finish(await ctx.manager.invoke('llm', {'prompt': 'x'}))"
    model = {"agent": "agent-scripted", "script": [{"text": "first turn", "code": code}]}
    front = f"description: A.\nallowed-tools: llm\nmetadata:\n  model: {json.dumps(model)}"
    write_skill("asks.skill.md", f"---\n{front}\n---\nGo.\n")
    assert await context_manager.invoke("asks", {}) == "first turn"
    # the agent's config arg too, with the call's own keys on top
    own = {"script": [{"text": "own"}]}
    code = f"ctx.manager.finish(await ctx.manager.invoke('llm', {{'prompt': 'x', 'config': {own!r}}}))"
    call = {"prompt": "T.", "user_message": "Go.", "allowed_tools": "llm", "config": scripted()}
    call["config"]["script"] = [{"text": "agent's", "code": code}]
    assert await context_manager.invoke("agent", call) == "own"


async def test_agent_code_may_not_redirect_the_call_or_name_a_non_provider(context_manager):
    refused = [({"base_url": "http://evil.example"}, "config.base_url"), ({"agent": "file-read"}, "config.agent")]
    for config, path in refused:
        code = (f"try:\n    await ctx.manager.invoke('llm', {{'prompt': 'x', 'config': {config!r}}})\n"
                "except Exception as exc:\n    ctx.manager.finish(f'{type(exc).__name__}: {exc}')")
        call = {"prompt": "T.", "user_message": "Go.", "allowed_tools": "llm", "config": scripted()}
        call["config"]["script"] = [{"code": code}]
        refusal = await context_manager.invoke("agent", call)
        assert refusal.startswith("ToolNotAllowed: agent-code may not call llm") and path in refusal, refusal


#: A model-level middleware: shouts the user's message at the model, and rewrites the answer.
REWRITE_MW = """
frontmatter = {"metadata": {"role": "middleware", "level": "model"}}
async def main(ctx, args):
    call = ctx.target.args
    loud = [{**m, "text": m["text"].upper()} if m["role"] == "user" else m for m in call["messages"]]
    response = await ctx.manager.next({**call, "messages": loud})
    received = response["meta"].get("received")  # config.echo: what the model was sent
    heard = " | heard " + received["messages"][-1]["text"] if received else ""
    return {**response, "text": response["text"].replace("cat", "dog") + heard}
"""


async def test_model_level_middleware_sits_around_the_call(context_manager, write_skill):
    write_skill("rewrite-mw", REWRITE_MW)
    asker(write_skill, {**scripted("a cat"), "echo": True, "middleware": ["rewrite-mw"]})
    assert await context_manager.invoke("asker", {"prompt": "a pet?"}) == "a dog | heard A PET?"
    # and an enclosing agent's model-level middleware reaches the calls its code makes
    code = "ctx.manager.finish(await ctx.manager.invoke('llm', {'prompt': 'pet', 'config': CONFIG}))"
    inner = {"agent": "agent-scripted", "script": [{"text": "one cat"}]}
    call = {"prompt": "T.", "user_message": "Go.", "allowed_tools": "llm", "config": scripted()}
    call["config"]["script"] = [{"code": code.replace("CONFIG", repr(inner)), "usage": {"input_tokens": 1}}]
    assert await context_manager.invoke("agent", call, middleware=["rewrite-mw"]) == "one dog"


def test_json_answer_takes_fenced_and_embedded_json_and_refuses_prose():
    assert json_answer('Sure: {"a": [1, 2]} done') == {"a": [1, 2]}
    assert json_answer("```\n[1]\n```") == [1]
    assert json_answer("[" * 100_000) is not None  # bounded: too deep is not JSON, not a crash
    assert json_answer("no json here") is json_answer("{broken")


def test_the_command_line_invokes_llm_with_a_config(tmp_path):
    script = json.dumps([{"text": '{"n": 3}'}])
    cmd = [sys.executable, "-m", "agent_apps", "invoke", "llm", "prompt=count", 'schema:={"type": "object"}',
           "--json", "--config", "model.agent=agent-scripted", "--config", f"model.script:={script}"]  # fmt: skip
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"n": 3}
    bad = subprocess.run([*cmd[:5], "prompt:=3"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "prompt" in bad.stderr


@pytest.mark.skipif(importlib.util.find_spec("opentelemetry.sdk") is None, reason="needs the otel extra")
def test_the_calls_span_carries_its_token_usage(tmp_path):
    code = """
import asyncio, json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from agent_apps import ContextManager

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
cm = ContextManager(cwd=".", home="home", env=False, project=False, user=False, state=":memory:")
model = {"agent": "agent-scripted", "script": [{"text": "hi", "usage": {"input_tokens": 12, "output_tokens": 3}}]}
asyncio.run(cm.invoke("llm", {"prompt": "hello", "config": model}))
print(json.dumps({s.name: dict(s.attributes) for s in exporter.get_finished_spans()}))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    spans = json.loads(done.stdout.strip().splitlines()[-1])
    assert spans["invoke llm"]["gen_ai.usage.input_tokens"] == 12
    assert spans["invoke llm"]["gen_ai.usage.output_tokens"] == 3
    assert "invoke agent-scripted" in spans
