"""A small real MCP server for the client tests (stdio), built on mcp's low-level Server.

Tools: ``add`` (structured output), ``shout`` (text), ``fail`` (a tool error),
``die`` (the process exits), ``wait`` (sleeps; writes ``$MARKER`` when cancelled).
``$HELPER_GREETING`` shows that env reaches the server. ``$HELPER_EXTRA_TOOLS``
(comma-separated names) adds tools that answer with their own name;
``$HELPER_STDERR_LINES`` makes the server write that many lines to stderr at start.
"""

import os
import sys

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(
        name="add",
        description="Add two integers.",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        output_schema={"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]},
    ),
    types.Tool(
        name="shoutText",
        description="Upper-case a text.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(name="fail", description="Always fails.", input_schema={"type": "object", "properties": {}}),
    types.Tool(name="die", description="Exits the server.", input_schema={"type": "object", "properties": {}}),
    types.Tool(name="wait", description="Sleeps until cancelled.", input_schema={"type": "object", "properties": {}}),
    types.Tool(name="greeting", description="The env greeting.", input_schema={"type": "object", "properties": {}}),
]

for extra in filter(None, os.environ.get("HELPER_EXTRA_TOOLS", "").split(",")):
    TOOLS.append(types.Tool(name=extra, description=f"Answers {extra!r}.", input_schema={"type": "object"}))


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    args = params.arguments or {}
    if params.name == "add":
        total = args["a"] + args["b"]
        return types.CallToolResult(content=[types.TextContent(text=str(total))], structured_content={"sum": total})
    if params.name == "shoutText":
        return types.CallToolResult(content=[types.TextContent(text=args["text"].upper())])
    if params.name == "fail":
        return types.CallToolResult(content=[types.TextContent(text="this tool always fails")], is_error=True)
    if params.name == "die":
        sys.stderr.write("helper server: exiting\n")
        os._exit(3)
    if params.name == "wait":
        with open(os.environ["MARKER"] + ".started", "w") as fh:
            fh.write("started")
        try:
            await anyio.sleep(60)
        finally:
            with open(os.environ["MARKER"], "w") as fh:
                fh.write("cancelled")
        return types.CallToolResult(content=[types.TextContent(text="slept")])
    if params.name in os.environ.get("HELPER_EXTRA_TOOLS", "").split(","):
        return types.CallToolResult(content=[types.TextContent(text=params.name)])
    if params.name == "greeting":
        return types.CallToolResult(content=[types.TextContent(text=os.environ.get("HELPER_GREETING", "none"))])
    return types.CallToolResult(content=[types.TextContent(text=f"unknown tool {params.name}")], is_error=True)


server = Server("helper", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    for i in range(int(os.environ.get("HELPER_STDERR_LINES", "0"))):
        sys.stderr.write(f"helper server: noisy line {i}\n")
    sys.stderr.flush()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
