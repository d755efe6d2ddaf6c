"""What guards our MCP HTTP endpoints (docs/mcp.md): the bearer token, compared whole,
and, on loopback, the refusal of requests whose Host or Origin is not local (DNS
rebinding). Both endpoints that serve over HTTP are held to it: ``serving_http`` (and
``agent-apps mcp --http``) and the per-run ``expose_refs`` endpoint."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest

from agent_apps.mcp.transports import expose_refs, serving_http

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


async def status(url: str, headers: dict[str, str]) -> int:
    """The HTTP status of an MCP initialize request with ``headers``."""
    headers = {"Accept": "application/json, text/event-stream", **headers}
    async with httpx2.AsyncClient() as http:
        response = await http.post(url, json=INITIALIZE, headers=headers)
        return response.status_code


@contextlib.asynccontextmanager
async def endpoint(cm, kind: str, token: str | None = None):
    """``(url, token)`` of a running endpoint of ``kind``: serving_http or expose_refs."""
    if kind == "serving_http":
        async with serving_http(cm, "127.0.0.1", 0, watch=False, token=token) as url:
            yield url, token
    else:
        async with expose_refs(cm, ["word-count"]) as refs:
            yield refs.url, refs.token


def near_misses(token: str) -> list[str]:
    """Authorization headers that are not ``Bearer TOKEN``: the token with anything
    added, missing a part, or in another case."""
    return [
        f"Bearer {token}x",
        f"Bearer {token} {token}",
        f"Bearer {token},",
        f"Bearer {token[:-1]}",
        f"Bearer x{token}",
        f"Bearer {token.swapcase()}",
        f"Bearerx {token}",
        f"Basic {token}",
        token,
        "Bearer",
        "",
    ]


@pytest.mark.parametrize("kind", ["serving_http", "expose_refs"])
async def test_only_the_whole_token_is_accepted(context_manager, skills, kind):
    async with endpoint(context_manager, kind, token="s3cret-Token") as (url, token):
        assert await status(url, {"Authorization": f"Bearer {token}"}) == 200
        assert await status(url, {"Authorization": f"bearer  {token}"}) == 200  # scheme in any case
        for header in near_misses(token):
            assert await status(url, {"Authorization": header}) == 401, header
        async with httpx2.AsyncClient() as http:  # every method, not only POST
            for method in ("GET", "DELETE"):
                response = await http.request(method, url, headers={"Authorization": f"Bearer {token}x"})
                assert response.status_code == 401, method


@pytest.mark.parametrize("kind", ["serving_http", "expose_refs"])
async def test_loopback_endpoints_refuse_foreign_hosts_and_origins(context_manager, skills, kind):
    async with endpoint(context_manager, kind) as (url, token):
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        port = urlsplit(url).port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
            assert await status(url, {**auth, "Host": host}) == 200, host
        assert await status(url, {**auth, "Origin": f"http://localhost:{port}"}) == 200
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}"):
            assert await status(url, {**auth, "Host": host}) == 421, host
        for origin in ("http://evil.example", f"http://evil.example:{port}", "null"):
            assert await status(url, {**auth, "Origin": origin}) == 403, origin


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_command_line_server_has_both_guards(skills, skills_path, monkeypatch):
    port = _free_port()
    monkeypatch.setenv("AGENT_APPS_MCP_TOKEN", "s3cret")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_apps", "mcp", "--http", f"127.0.0.1:{port}", "--path", str(skills_path)],
        cwd=skills_path.parent,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = await anyio.to_thread.run_sync(proc.stderr.readline)
        assert "Authorization: Bearer $AGENT_APPS_MCP_TOKEN required" in line, line
        url = f"http://127.0.0.1:{port}/mcp"
        assert await status(url, {"Authorization": "Bearer s3cret"}) == 200
        assert await status(url, {"Authorization": "Bearer s3cretx"}) == 401
        assert await status(url, {"Authorization": "Bearer s3cret", "Host": "evil.example"}) == 421
        assert await status(url, {"Authorization": "Bearer s3cret", "Origin": "http://evil.example"}) == 403
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_a_callback_ref_is_its_whole_secret(context_manager, skills):
    """Holding a callback ref is the permission to call it: a ref or tool name with its
    token changed in any way names nothing, in this process or over the endpoint."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from agent_apps import SkillNotFound

    async def callback(ctx, args):
        return "called"

    ref = context_manager.callback(callback, name="probe")
    assert await context_manager.invoke(ref) == "called"
    for forged in (ref + "x", ref[:-1], ref.upper(), ref.replace("probe.", "probe..")):
        with pytest.raises(SkillNotFound):
            await context_manager.invoke(forged)
    async with expose_refs(context_manager, [ref]) as refs:
        name = refs.tools[ref]
        assert name == ref.removeprefix("callback://")  # MCP tool names allow [A-Za-z0-9._-]
        async with httpx2.AsyncClient(headers=refs.headers) as http:
            async with Client(streamable_http_client(refs.url, http_client=http)) as client:
                assert [tool.name for tool in (await client.list_tools()).tools] == [name]
                for tool in (name, ref):
                    assert (await client.call_tool(tool, {})).structured_content == {"result": "called"}
                for tool in (name + "x", name[:-1], ref + "x", "probe"):
                    result = await client.call_tool(tool, {})
                    assert result.is_error and "unknown tool" in result.content[0].text, tool


async def test_each_endpoint_has_a_port_and_a_secret_of_its_own(context_manager, skills):
    """Nested agents each open one: they run side by side, and one's token opens no other."""
    async with expose_refs(context_manager, ["word-count"]) as first, expose_refs(context_manager, ["hello"]) as second:
        assert urlsplit(first.url).port != urlsplit(second.url).port and first.token != second.token
        assert await status(first.url, {"Authorization": f"Bearer {first.token}"}) == 200
        assert await status(second.url, {"Authorization": f"Bearer {second.token}"}) == 200
        assert await status(second.url, {"Authorization": f"Bearer {first.token}"}) == 401
