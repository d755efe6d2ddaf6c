"""Our server over real transports: ``agent-apps mcp`` as a stdio subprocess, streamable
HTTP on loopback (in-process and ``agent-apps mcp --http`` as a subprocess)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from agent_apps.mcp.transports import expose_refs, listening_socket, serving_http

pytestmark = pytest.mark.anyio


def _stdio(skills_path, *extra):
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agent_apps", "mcp", "--path", str(skills_path), *extra],
        env={"AGENT_APPS_HOME": os.environ["AGENT_APPS_HOME"], "NO_COLOR": "1"},
        cwd=str(skills_path.parent),
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_subprocess(skills, skills_path, mode):
    messages = []

    async def progress(value, total, message):
        messages.append(message)

    async with Client(_stdio(skills_path), mode=mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"word-count", "counter", "hello"} <= tools and "secret" not in tools
        result = await client.call_tool("word-count", {"text": "one two"})
        assert result.structured_content == {"result": 2}
        failed = await client.call_tool("broken", {})
        assert failed.is_error and "the disk is on fire" in failed.content[0].text
        agent = await client.call_tool("counter", {"text": "x"}, progress_callback=progress)
        assert agent.structured_content == {"count": 4}
    assert "counter says: Let me count." in messages


async def test_stdio_subprocess_notices_new_skill_files(skills, skills_path, write_skill):
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification) or getattr(message, "method", "") == (
            "notifications/tools/list_changed"
        ):
            changed.set()

    async with Client(_stdio(skills_path), mode="legacy", message_handler=on_message) as client:
        await client.list_tools()
        for attempt in range(10):  # the server may not have taken its first snapshot yet
            write_skill(
                "fresh",
                f'frontmatter = {{"description": "Fresh {attempt}."}}\nasync def main(ctx, args):\n    return "new"\n',
            )
            with anyio.move_on_after(5):
                await changed.wait()
            if changed.is_set():
                break
        assert changed.is_set()
        assert (await client.call_tool("fresh", {})).content[0].text == "new"


async def test_http_loopback_in_process(context_manager, skills):
    async with serving_http(context_manager, "127.0.0.1", 0, watch=False) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        for mode in ("auto", "legacy"):
            messages: list[str] = []

            async def progress(value, total, message, messages=messages):
                messages.append(message)

            async with Client(url, mode=mode) as client:
                assert "word-count" in {t.name for t in (await client.list_tools()).tools}
                result = await client.call_tool("stats", {"text": "a b c"})
                assert result.structured_content == {"words": 3}
                agent = await client.call_tool("counter", {"text": "x"}, progress_callback=progress)
                assert agent.structured_content == {"count": 4}
            assert any(m.startswith("counter runs code") for m in messages)


async def test_http_token_is_required_when_set(context_manager, skills):
    async with serving_http(context_manager, watch=False, token="s3cret") as url:
        async with httpx2.AsyncClient() as http:
            response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert response.status_code == 401
        async with httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                assert (await client.call_tool("hello", {})).content[0].text == "hello"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_http_subprocess(skills, skills_path):
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_apps", "mcp", "--http", f"127.0.0.1:{port}", "--path", str(skills_path)],
        cwd=skills_path.parent,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = await anyio.to_thread.run_sync(proc.stderr.readline)
        assert f"serving MCP on http://127.0.0.1:{port}/mcp" in line, line
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            result = await client.call_tool("word-count", {"text": "a b c d e"})
            assert result.structured_content == {"result": 5}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_listening_sockets_send_without_delay():
    """TCP_NODELAY on the listening socket and on every accepted connection: without it,
    Nagle's algorithm and delayed ACKs hold each part of a streamed response ~40 ms."""
    sock = listening_socket("127.0.0.1", 0)
    accepted: list[int] = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport):
            accepted.append(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        with anyio.fail_after(10):
            while not accepted:
                await anyio.sleep(0.01)
        writer.close()
        assert accepted[0] != 0
    finally:
        server.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_http_declares_the_tool_list_changes_it_sends(context_manager, skills, mode):
    async with serving_http(context_manager, watch=False) as url:
        async with Client(url, mode=mode) as client:
            assert client.server_capabilities.tools.list_changed is True
    async with expose_refs(context_manager, ["word-count"]) as endpoint:  # a fixed set of tools: no changes
        async with httpx2.AsyncClient(headers=endpoint.headers) as http:
            async with Client(streamable_http_client(endpoint.url, http_client=http), mode=mode) as client:
                assert not client.server_capabilities.tools.list_changed
                assert (await client.call_tool("word-count", {"text": "a b"})).structured_content == {"result": 2}


async def test_http_legacy_clients_hear_of_new_tools(context_manager, skills, write_skill):
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with serving_http(context_manager, watch=True, interval=0.2) as url:
        async with Client(url, mode="legacy", message_handler=on_message) as client:
            await client.list_tools()
            for attempt in range(10):  # the watcher may not have taken its first snapshot yet
                source = f'frontmatter = {{"description": "Fresh {attempt}."}}\n'
                source += "async def main(ctx, args):\n    return 1\n"
                write_skill("fresh", source)
                with anyio.move_on_after(3):
                    await changed.wait()
                if changed.is_set():
                    break
            assert changed.is_set()


async def test_bearer_scheme_is_case_insensitive(context_manager, skills):
    async with serving_http(context_manager, watch=False, token="s3cret") as url:
        for header in ("bearer s3cret", "BEARER  s3cret"):
            async with httpx2.AsyncClient(headers={"Authorization": header}) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    assert (await client.call_tool("hello", {})).content[0].text == "hello"
        async with httpx2.AsyncClient() as http:
            for header in ("Basic s3cret", "Bearer wrong", "Bearer", "s3cret", "Bearers3cret"):
                response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                           headers={"Authorization": header})
                assert response.status_code == 401, header


async def test_a_loopback_endpoint_stops_when_told_without_polling(context_manager, skills, monkeypatch):
    """An ACP run ends only once its endpoint has stopped, so the endpoint stops as soon as
    it is told: uvicorn alone looks at its exit flag every 0.1 s, then waits a fixed 0.1 s
    for connections even when none is left."""
    polls: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float, *args: object) -> object:
        if delay >= 0.1:
            polls.append(delay)
        return await real_sleep(delay, *args)

    async with expose_refs(context_manager, ["word-count"]):
        monkeypatch.setattr(asyncio, "sleep", sleep)
    monkeypatch.undo()
    assert polls == []
