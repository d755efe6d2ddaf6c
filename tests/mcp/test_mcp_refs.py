"""Callback refs across processes: a provider whose model loop runs in a subprocess
drives a whole agent run through MCP (hook_ref and invoke_ref over loopback HTTP)."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agent_apps.mcp.transports import expose_refs

pytestmark = pytest.mark.anyio

REMOTE = Path(__file__).with_name("remote_provider.py")

PROVIDER = f"""
import asyncio, json, os, sys

frontmatter = {{
    "description": "A provider whose model loop runs in another process, over MCP.",
    "params": {{"type": "object", "properties": {{"prompt": {{"type": "string"}}, "config": {{"type": "object"}},
        "invoke_ref": {{"type": "string"}}, "hook_ref": {{"type": "string"}}, "user_message": {{"type": "string"}},
        "skill_name": {{"type": "string"}}}}, "required": ["prompt", "invoke_ref", "hook_ref"]}},
    "metadata": {{"visibility": "hidden", "tags": ["meta-internal", "provider"]}},
}}

async def main(ctx, args):
    from agent_apps.mcp import expose_refs
    invoke_ref, hook_ref = args["invoke_ref"], args["hook_ref"]
    async with expose_refs(ctx, [invoke_ref, hook_ref]) as endpoint:
        job = {{"hook_tool": endpoint.tools[hook_ref], "invoke_tool": endpoint.tools[invoke_ref],
               "script": args["config"]["script"]}}
        proc = await asyncio.create_subprocess_exec(
            {sys.executable!r}, {str(REMOTE)!r},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={{**os.environ, **endpoint.to_env()}},
        )
        try:
            out, err = await proc.communicate(json.dumps(job).encode())
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    if proc.returncode != 0:
        raise RuntimeError("remote provider failed: " + err.decode()[-3000:])
    answer = json.loads(out)
    ctx.locals["remote_pid"] = answer["pid"]
    return answer["result"]
"""


async def test_a_subprocess_provider_drives_an_agent_run_over_mcp(context_manager, skills, write_skill):
    write_skill("remote-provider", PROVIDER)
    events = []
    context_manager.events.subscribe("run", lambda topic, event: events.append(event))
    script = [
        {
            "text": "Let me count.",
            "code": 'memory["n"] = await ctx.manager.invoke("word-count", {"text": "a b c"})\n'
            'print("n is", memory["n"])',
        },
        {"text": "Now finish.", "code": 'ctx.manager.finish({"count": memory["n"] * 2})'},
    ]
    result = await context_manager.invoke(
        "agent",
        {
            "prompt": "Count.",
            "user_message": "Go.",
            "config": {"agent": "remote-provider", "script": script},
            "returns": {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]},
        },
        nonlocals={"agent": {"events": "run"}},
    )
    assert result["count"] == 6
    kinds = [e["type"] for e in events]
    assert kinds[0] == "agent-start" and kinds[-1] == "agent-complete"
    assert kinds.count("turn-start") == 2 and kinds.count("tool-call") == 2
    results = [e["result"] for e in events if e["type"] == "tool-result"]
    assert "n is 3" in results[0]  # the sandbox ran the code and the output came back over MCP
    messages = [e["text"] for e in events if e["type"] == "agent-message"]
    assert messages == ["Let me count.", "Now finish."]


async def test_the_endpoint_needs_its_secret_and_serves_only_the_refs(context_manager, skills):
    seen = []

    async def callback(ctx, args):
        seen.append(args)
        return {"ok": True}

    ref = context_manager.callback(callback, name="probe")
    async with expose_refs(context_manager, [ref, "word-count"]) as endpoint:
        assert endpoint.url.startswith("http://127.0.0.1:")
        async with httpx2.AsyncClient() as http:
            anonymous = await http.post(endpoint.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert anonymous.status_code == 401
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer wrong"}) as http:
            wrong = await http.post(endpoint.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert wrong.status_code == 401
        async with httpx2.AsyncClient(headers=endpoint.headers) as http:
            async with Client(streamable_http_client(endpoint.url, http_client=http)) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert names == {endpoint.tools[ref], "word-count"}
                result = await client.call_tool(endpoint.tools[ref], {"x": 1})
                assert result.structured_content == {"result": {"ok": True}}
                counted = await client.call_tool("word-count", {"text": "a b"})
                assert counted.structured_content == {"result": 2}
                other = await client.call_tool("stats", {"text": "a"})
                assert other.is_error and "unknown tool" in other.content[0].text
    assert seen == [{"x": 1}]
