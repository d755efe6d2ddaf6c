"""A provider's model loop in another process: drives a whole agent run over MCP.

Reads a job (JSON on stdin: the tool names of hook_ref and invoke_ref, and a script of
turns), connects to the endpoint in $AGENT_APPS_MCP_URL with the bearer token in
$AGENT_APPS_MCP_TOKEN using the plain ``mcp`` Client, plays the provider protocol and
prints {"result": ...} on stdout. It imports nothing from agent_apps.
"""

import json
import os
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main():
    job = json.loads(sys.stdin.read())
    headers = {"Authorization": f"Bearer {os.environ['AGENT_APPS_MCP_TOKEN']}"}
    timeout = httpx2.Timeout(30, read=300)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        async with Client(streamable_http_client(os.environ["AGENT_APPS_MCP_URL"], http_client=http)) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            assert names == sorted([job["hook_tool"], job["invoke_tool"]]), names

            async def call(tool, args):
                result = await client.call_tool(tool, args)
                if result.is_error:
                    raise RuntimeError(result.content[0].text)
                return result.structured_content["result"]

            async def hook(event):
                return await call(job["hook_tool"], event) or {}

            text = ""
            for turn, entry in enumerate(job["script"], start=1):
                await hook({"type": "turn-start", "turn": turn})
                text = entry.get("text") or ""
                if text:
                    await hook({"type": "message", "text": text})
                codes = entry.get("code") or []
                codes = [codes] if isinstance(codes, str) else codes
                for index, code in enumerate(codes):
                    call_args = {"code": code}
                    call_id = f"remote-{turn}-{index}"
                    directive = await hook({"type": "tool-call", "tool": "invoke", "args": call_args, "id": call_id})
                    if directive.get("deny"):
                        result = {"text": f"denied: {directive['deny']}", "error": True}
                    else:
                        result = await call(job["invoke_tool"], call_args)
                    await hook(
                        {"type": "tool-result", "tool": "invoke", "args": call_args, "result": result, "id": call_id}
                    )
                directive = await hook({"type": "turn-end", "turn": turn, "result": text})
                if directive.get("stop"):
                    print(json.dumps({"result": directive.get("result", text), "pid": os.getpid()}))
                    return
            print(json.dumps({"result": text, "pid": os.getpid()}))


if __name__ == "__main__":
    anyio.run(main)
