"""A program that reaches agent-apps only through skills, over MCP: a skill exposes the
``context-manager`` skill on a loopback endpoint, and an MCP client uses it to list,
describe and invoke skills, under the allowed-tools of the skill that exposed it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio

PROGRAM = """
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

frontmatter = {"allowed-tools": "context-manager word-count stats"}

async def main(ctx, args):
    from agent_apps.mcp import expose_refs

    out = {}
    async with expose_refs(ctx, ["context-manager"]) as endpoint:
        async with httpx2.AsyncClient(headers=endpoint.headers) as http:
            async with Client(streamable_http_client(endpoint.url, http_client=http)) as client:
                async def cm(**call):
                    result = await client.call_tool("context-manager", call)
                    return ("error", result.content[0].text) if result.is_error else result.structured_content["result"]

                out["tools"] = [t.name for t in (await client.list_tools()).tools]
                out["list"] = [s["name"] for s in await cm(op="list")]
                out["describe"] = (await cm(op="describe", name="stats"))["returns"]
                out["invoke"] = await cm(op="invoke", ref="word-count", args={"text": "a b c"})
                out["refused"] = await cm(op="invoke", ref="hello")
                out["hidden"] = await cm(op="invoke", ref="secret")
    return out
"""


async def test_context_manager_over_mcp_under_the_owners_allowed_tools(context_manager, skills, write_skill):
    write_skill("program", PROGRAM)
    out = await context_manager.invoke("program")
    assert out["tools"] == ["context-manager"]
    assert out["list"] == ["stats", "word-count"]
    assert out["describe"]["required"] == ["words"]
    assert out["invoke"] == 3
    assert out["refused"][0] == "error" and "program may not call hello: not in allowed-tools" in out["refused"][1]
    assert out["hidden"][0] == "error" and "program may not call secret" in out["hidden"][1]
