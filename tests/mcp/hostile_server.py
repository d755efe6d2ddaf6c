"""A hostile MCP server for the red-team tests (stdio): raw JSON-RPC lines, what the
``mcp`` package would refuse to send.

    python hostile_server.py MODE

It answers ``initialize`` and lists one tool, ``poke``; then, as MODE says:

``deep``       answers ``poke`` with a result nested 200,000 levels deep
``chatty``     writes 300 lines of non-JSON to stdout, then answers ``poke``
``stderr``     writes 48 MB to stderr, then answers ``poke``
``big-text``   lists tools with a 10 MB description, a 300-character name and a 100 KB schema
``endless``    lists tools page after page, for ever

It imports nothing but the standard library.
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1]
OUT = sys.stdout


def send(message: dict) -> None:
    OUT.write(json.dumps(message) + "\n")
    OUT.flush()


def answer(request: dict, result: dict) -> None:
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


POKE = {"name": "poke", "description": "Poke the server.", "inputSchema": {"type": "object", "properties": {}}}


def tools(request: dict) -> dict:
    if MODE == "big-text":
        huge = {"type": "object", "properties": {f"p{i}": {"type": "string", "enum": ["v" * 90]} for i in range(1000)}}
        return {
            "tools": [
                {**POKE, "name": "wordy", "description": "Words. " * 1_500_000},
                {**POKE, "name": "n" + "a" * 299},
                {**POKE, "name": "schemer", "inputSchema": huge},
                POKE,
            ]
        }
    if MODE == "endless":
        page = int((request.get("params") or {}).get("cursor") or 0)
        listed = [{**POKE, "name": f"tool{page * 50 + i}"} for i in range(50)]
        return {"tools": listed, "nextCursor": str(page + 1)}
    return {"tools": [POKE]}


def poke(request: dict) -> None:
    if MODE == "deep":
        deep = "[" * 200_000 + "]" * 200_000
        text = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"content": [], "structuredContent": None}})
        OUT.write(text.replace("null", deep) + "\n")
        OUT.flush()
        return
    if MODE == "chatty":
        for number in range(300):
            OUT.write(f"debug: handling the poke, step {number}\n")
    if MODE == "stderr":
        line = "e" * 1023 + "\n"
        for _ in range(48 * 1024):
            sys.stderr.write(line)
        sys.stderr.flush()
    answer(request, {"content": [{"type": "text", "text": "poked"}]})


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        method = request.get("method")
        if method == "initialize":
            info = {"name": "hostile", "version": "1.0"}
            version = request["params"]["protocolVersion"]
            answer(request, {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info})
        elif method == "tools/list":
            answer(request, tools(request))
        elif method == "tools/call":
            poke(request)
        elif "id" in request and method is not None:
            answer(request, {})


if __name__ == "__main__":
    main()
