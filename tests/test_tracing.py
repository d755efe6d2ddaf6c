"""OpenTelemetry spans: runs, turns, model calls and skill invocations share the run's
trace (Strands' own spans join it); without a tracer provider nothing is imported.

Each test runs in a fresh interpreter: a tracer provider is set once per process.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("opentelemetry.sdk") is None, reason="needs the otel extra")

SETUP = """
import asyncio, json, sys, tempfile
from pathlib import Path
from agent_apps import ContextManager

root = Path(tempfile.mkdtemp())
(root / "count.skill.py").write_text(
    'frontmatter = {"params": {"type": "object"}}\\n'
    'async def main(ctx, args):\\n    return len(args["text"].split())\\n'
)
cm = ContextManager([root], cwd=root, home=root / "home", env=False, project=False, user=False, entry_points=False,
                    state=":memory:")
"""

TRACED = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
"""


def python(code: str, env: dict[str, str] | None = None) -> dict:
    import os

    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_runs_turns_model_calls_and_invocations_share_the_runs_trace():
    data = python(
        SETUP
        + TRACED
        + """
turns = [{"code": "n = await ctx.manager.invoke('count', {'text': 'a b c'})"}, {"text": "done"}]
config = {"agent": "agent-scripted", "script": turns}
result = asyncio.run(cm.invoke("agent", {"prompt": "P", "config": config}))
report = cm.state.runs.agents(cm.state.runs.list()[0].id)[0].report
spans = [{"name": s.name, "trace": format(s.context.trace_id, "032x"), "id": s.context.span_id,
          "parent": s.parent.span_id if s.parent else None, "attrs": dict(s.attributes)}
         for s in exporter.get_finished_spans()]
print(json.dumps({"result": result, "report_trace": report["trace_id"], "spans": spans}))
"""
    )
    assert data["result"] == "done"
    spans = data["spans"]
    names = [s["name"] for s in spans]
    for name in ("invoke agent", "invoke agent-scripted", "turn 1", "turn 2", "chat", "invoke count"):
        assert name in names, names
    assert names.count("chat") == 2  # agent-scripted names no model
    assert {s["trace"] for s in spans} == {data["report_trace"]}  # one trace, the run record's
    by_id = {s["id"]: s for s in spans}
    agent = next(s for s in spans if s["name"] == "invoke agent")
    assert agent["parent"] is None and agent["attrs"]["agent_apps.depth"] == 0
    count = next(s for s in spans if s["name"] == "invoke count")
    chain = []
    node = count
    while node["parent"] is not None:  # the call from sandboxed code hangs under the agent's span
        node = by_id[node["parent"]]
        chain.append(node["name"])
    assert chain[-1] == "invoke agent" and "invoke agent-code" in chain


def test_the_agent_span_carries_the_runs_tenant():
    data = python(
        SETUP
        + TRACED
        + """
config = {"agent": "agent-scripted", "script": [{"text": "done"}]}
asyncio.run(cm.invoke("agent", {"prompt": "P", "config": config}, tenant="acme"))
asyncio.run(cm.invoke("agent", {"prompt": "P", "config": config}))
agents = [dict(s.attributes) for s in exporter.get_finished_spans() if s.name == "invoke agent"]
print(json.dumps([a.get("agent_apps.tenant_id") for a in agents]))
"""
    )
    assert data == ["acme", None]


@pytest.mark.skipif(importlib.util.find_spec("strands") is None, reason="needs the strands extra")
def test_strands_spans_join_the_runs_trace_with_tool_code_under_execute_tool_and_one_span_a_model_call():
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g

    data = python(
        SETUP
        + TRACED
        + """
from agent_apps.testing.bedrock import FakeBedrock
model = "anthropic.claude-fake-v1:0"
code = "print(await ctx.manager.invoke('count', {'text': 'a b c'}))"
with FakeBedrock(model_ids=[model]) as fake:
    fake.add_turns({"tool_uses": [{"name": "invoke", "input": {"code": code}}], "usage": {"input_tokens": 900,
                    "output_tokens": 30}}, {"text": "hello", "usage": {"input_tokens": 950, "output_tokens": 2}})
    config = {"agent": "agent-strands", "model_id": model, "endpoint_url": fake.endpoint_url, "region": "us-east-1"}
    result = asyncio.run(cm.invoke("agent", {"prompt": "P", "config": config}))
spans = [{"name": s.name, "trace": format(s.context.trace_id, "032x"), "scope": s.instrumentation_scope.name,
          "id": s.context.span_id, "parent": s.parent.span_id if s.parent else None,
          "attrs": {k: list(v) if isinstance(v, tuple) else v for k, v in s.attributes.items()}}
         for s in exporter.get_finished_spans()]
print(json.dumps({"result": result, "spans": spans}))
""",
        env={"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_REGION": "us-east-1"},
    )
    assert data["result"] == "hello"
    spans = data["spans"]
    theirs = [s for s in spans if s["scope"] != "agent_apps"]
    ours = [s for s in spans if s["scope"] == "agent_apps"]
    assert theirs and ours
    assert {s["trace"] for s in spans} == {ours[0]["trace"]}
    by_id = {s["id"]: s for s in spans}

    def ancestors(span):
        chain = []
        while span["parent"] is not None:
            span = by_id[span["parent"]]
            chain.append(span["name"])
        return chain

    # the tool call's code, and the skill it called, nest under Strands' execute_tool span
    count = next(s for s in spans if s["name"] == "invoke count")
    assert ancestors(count)[:3] == ["invoke agent-code", "invoke agent-invoke", "execute_tool invoke"]
    tool = next(s for s in spans if s["name"] == "invoke agent-invoke")
    assert tool["attrs"][g.GEN_AI_OPERATION_NAME] == "execute_tool" and tool["attrs"][g.GEN_AI_TOOL_NAME] == "invoke"
    # each model call appears once: ours, named for the model, with the GenAI attributes
    calls = [s for s in spans if s["attrs"].get(g.GEN_AI_OPERATION_NAME) == "chat"]
    assert [s["name"] for s in calls] == [f"chat {MODEL}"] * 2
    assert [(s["attrs"][g.GEN_AI_USAGE_INPUT_TOKENS], s["attrs"][g.GEN_AI_USAGE_OUTPUT_TOKENS]) for s in calls] == [
        (900, 30),
        (950, 2),
    ]
    first = calls[0]["attrs"]
    assert first[g.GEN_AI_REQUEST_MODEL] == MODEL
    assert first[g.GEN_AI_PROVIDER_NAME] == first[g.GEN_AI_SYSTEM] == g.GenAiProviderNameValues.AWS_BEDROCK.value
    assert first[g.GEN_AI_RESPONSE_FINISH_REASONS] == ["tool_use"]
    assert ancestors(calls[0])[-2:] == ["turn 1", "invoke agent"]
    agent = next(s for s in spans if s["name"] == "invoke agent")
    assert agent["attrs"][g.GEN_AI_OPERATION_NAME] == "invoke_agent" and agent["attrs"][g.GEN_AI_REQUEST_MODEL] == MODEL


MODEL = "anthropic.claude-fake-v1:0"


def test_without_a_tracer_provider_nothing_is_imported():
    data = python(
        SETUP
        + """
config = {"agent": "agent-scripted", "script": [{"code": "n = await ctx.manager.invoke('count', {'text': 'a'})"},
                                                 {"text": "done"}]}
result = asyncio.run(cm.invoke("agent", {"prompt": "P", "config": config}))
report = cm.state.runs.agents(cm.state.runs.list()[0].id)[0].report
print(json.dumps({"result": result, "otel": [m for m in sys.modules if m.startswith("opentelemetry")],
                  "trace": report["trace_id"], "run": report["run_id"]}))
"""
    )
    assert data["result"] == "done" and data["otel"] == []
    assert data["trace"] == data["run"]


def test_the_command_line_exports_spans_as_the_otel_variables_say(tmp_path, skills_path, write_skill):
    write_skill(
        "hello.skill.md",
        "---\ndescription: H.\nmetadata: {model: {agent: agent-scripted, script: [{text: hi}]}}\n---\nP\n",
    )
    import os

    def invoke(exporter: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "OTEL_TRACES_EXPORTER": exporter, "AGENT_APPS_STATE": str(tmp_path / "s.db")}
        argv = [sys.executable, "-m", "agent_apps", "invoke", "hello", "--path", str(skills_path)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)

    out = invoke("console")
    assert out.returncode == 0 and out.stdout == "hi\n", out.stderr
    assert '"name": "invoke agent"' in out.stderr and '"name": "chat"' in out.stderr
    bad = invoke("zipkin")
    assert bad.returncode == 1 and "OTEL_TRACES_EXPORTER='zipkin'" in bad.stderr
