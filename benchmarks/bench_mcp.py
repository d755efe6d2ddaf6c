"""MCP over HTTP: per-request latency of our server against the MCP SDK's own server.

    python benchmarks/bench_mcp.py [--requests 200] [--rounds 5]

Both servers offer an ``echo`` tool and are served in this process over streamable
HTTP on loopback: ours with ``agent_apps.mcp.serving_http`` (every call goes
through the pipeline: args validation, middleware, the permission check), the SDK's
``MCPServer`` with uvicorn as ``MCPServer.run("streamable-http")`` serves it. One
``mcp.Client`` per server and protocol makes sequential ``tools/call`` requests, the
two servers alternating in rounds so that noise hits both alike. Printed: the median
and 90th percentile per request, and the ratio ours / SDK per protocol (2026-07-28,
the client's default; 2025-11-25, the handshake era). Goal: a ratio within 1.5.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import statistics
import tempfile
import time
from pathlib import Path

import uvicorn
from mcp import Client
from mcp.server import MCPServer

from agent_apps import ContextManager
from agent_apps.mcp import serving_http

ECHO = """
frontmatter = {
    "description": "Echo a text.",
    "params": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "metadata": {"returns": {"type": "string"}},
}
async def main(ctx, args):
    return args["text"]
"""
PROTOCOLS = {"2026-07-28": "auto", "2025-11-25": "legacy"}


def sdk_app() -> object:
    server = MCPServer("sdk")

    @server.tool()
    def echo(text: str) -> str:
        """Echo a text."""
        return text

    return server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def timed(client: Client, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        result = await client.call_tool("echo", {"text": "hello"})
        times.append(time.perf_counter() - start)
        assert not result.is_error, result
    return times


async def main(requests: int, rounds: int) -> None:
    logging.disable(logging.INFO)
    root = Path(tempfile.mkdtemp())
    (root / "echo.skill.py").write_text(ECHO)
    cm = ContextManager([root], cwd=root, home=root / "home", env=False, project=False, user=False, entry_points=False)
    port = free_port()
    sdk = uvicorn.Server(uvicorn.Config(sdk_app(), host="127.0.0.1", port=port, log_level="warning"))
    sdk_task = asyncio.ensure_future(sdk.serve())
    while not sdk.started:
        await asyncio.sleep(0.01)
    rows = []
    try:
        async with serving_http(cm, watch=False) as ours:
            urls = {"agent-apps": ours, "MCP SDK": f"http://127.0.0.1:{port}/mcp"}
            for protocol, mode in PROTOCOLS.items():
                samples: dict[str, list[float]] = {name: [] for name in urls}
                async with Client(urls["agent-apps"], mode=mode) as a, Client(urls["MCP SDK"], mode=mode) as b:
                    clients = {"agent-apps": a, "MCP SDK": b}
                    for client in clients.values():
                        await timed(client, 10)  # warm up
                    for _ in range(rounds):
                        for name, client in clients.items():
                            samples[name] += await timed(client, max(1, requests // rounds))
                median = {name: statistics.median(values) * 1000 for name, values in samples.items()}
                p90 = {name: statistics.quantiles(values, n=10)[-1] * 1000 for name, values in samples.items()}
                rows.append((protocol, median, p90))
    finally:
        sdk.should_exit = True
        await sdk_task
    print(f"MCP tools/call over streamable HTTP, {requests} sequential requests per server and protocol\n")
    print(f"{'protocol':<12} {'agent-apps ms (p50/p90)':>24} {'MCP SDK ms (p50/p90)':>22} {'ratio p50':>10}")
    for protocol, median, p90 in rows:
        ours, theirs = median["agent-apps"], median["MCP SDK"]
        print(
            f"{protocol:<12} {ours:>15.2f} / {p90['agent-apps']:<6.2f} {theirs:>13.2f} / {p90['MCP SDK']:<6.2f}"
            f" {ours / theirs:>9.2f}x"
        )
    print("\ngoal: ratio within 1.5x on both protocols")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    asyncio.run(main(options.requests, options.rounds))
