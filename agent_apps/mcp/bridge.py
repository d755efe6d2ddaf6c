"""A stdio MCP server that forwards every request to an HTTP one.

``python -m agent_apps.mcp.bridge`` serves, over its stdin and stdout, the tools of the
streamable-HTTP endpoint in ``$AGENT_APPS_MCP_URL`` (bearer token in
``$AGENT_APPS_MCP_TOKEN``, as :meth:`Endpoint.to_env` gives them). It is how a program
that can start only stdio MCP servers (an ACP agent CLI without
``mcpCapabilities.http``) reaches refs exposed with :func:`expose_refs`.
"""

from __future__ import annotations

import os
from typing import Any

import anyio


async def bridge(url: str, token: str) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=None)) as http:
        async with Client(streamable_http_client(url, http_client=http)) as remote:

            async def list_tools(ctx: Any, params: Any) -> Any:
                return await remote.list_tools()

            async def call_tool(ctx: Any, params: Any) -> Any:
                return await remote.call_tool(params.name, dict(params.arguments or {}))

            server: Server[Any] = Server("agent-apps-bridge", on_list_tools=list_tools, on_call_tool=call_tool)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())


def main() -> None:
    anyio.run(bridge, os.environ["AGENT_APPS_MCP_URL"], os.environ["AGENT_APPS_MCP_TOKEN"])


if __name__ == "__main__":
    main()
