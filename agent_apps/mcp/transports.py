"""The ways to reach a :class:`~agent_apps.mcp.server.SkillServer`: stdio, streamable
HTTP, and an ephemeral loopback endpoint that lets another process call callback refs.

``agent-apps mcp`` serves over stdio (:func:`serve_stdio`) or streamable HTTP
(:func:`serve_http`, optionally behind a bearer token). :func:`expose_refs` serves a
few refs (``invoke_ref``, ``hook_ref``) on ``127.0.0.1``, guarded by a per-run secret,
so a provider running its model loop in another process can call them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from ..context import Context, Signal
from .schemas import tool_name_for_ref
from .server import Invoker, SkillServer

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["BearerGuard", "Endpoint", "expose_refs", "listening_socket", "serve_http", "serve_stdio", "serving_http"]


async def serve_stdio(cm: ContextManager, *, watch: bool = True, interval: float = 1.0) -> None:
    """Serve ``cm``'s skills over stdin/stdout until the client goes away."""
    from mcp.server.stdio import stdio_server

    srv = SkillServer(cm)
    async with anyio.create_task_group() as tg:
        if watch:
            tg.start_soon(srv.watch, interval)
        async with stdio_server() as (read, write):
            await srv.server.run(read, write, srv.initialization_options())
        tg.cancel_scope.cancel()


class _QuietUvicorn:
    """uvicorn without its signal handlers (the host process owns SIGINT), which stops
    as soon as it is told to: uvicorn's own looks at ``should_exit`` every 0.1 s, then
    waits a fixed 0.1 s for its connections to take their shutdown, even when none is
    left (a provider's CLI has closed its own by the time its run's endpoint stops): up
    to 0.2 s of every ACP run's end. ``stop()`` ends the wait at once."""

    @staticmethod
    def make(app: Any, host: str, port: int) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Any:
                yield

            async def main_loop(self) -> None:
                self._stopping = asyncio.Event()
                counter = 0
                while not await self.on_tick(counter):  # its once-a-second work (the Date header)
                    counter = (counter + 1) % 864000
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stopping.wait(), 0.1)

            def stop(self) -> None:
                self.should_exit = True
                stopping = getattr(self, "_stopping", None)
                if stopping is not None:
                    stopping.set()

            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                if self.server_state.connections or self.server_state.tasks:
                    await super().shutdown(sockets)
                    return
                for server in self.servers:
                    server.close()
                for server in self.servers:
                    await server.wait_closed()
                await self.lifespan.shutdown()

        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        return Server(config)


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket whose connections send without delay.

    Created with ``IPPROTO_TCP`` explicitly: asyncio sets ``TCP_NODELAY`` on accepted
    connections only when the socket says it is TCP (``proto`` 0 does not), and without
    it Nagle's algorithm and delayed ACKs hold each part of a streamed (SSE) response
    for ~40 ms. The listening socket has the option too (accepted sockets inherit it on
    Linux and the BSDs).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def _uvicorn(app: Any, host: str, port: int) -> AsyncIterator[str]:
    """Run ``app`` on ``host:port`` (port 0: any free port) in a task; yields the base URL."""
    sock = listening_socket(host, port)
    actual = sock.getsockname()[1]
    server = _QuietUvicorn.make(app, host, actual)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("the HTTP server stopped before it started")
            await asyncio.sleep(0.01)
        shown = f"[{host}]" if ":" in host else host
        yield f"http://{shown}:{actual}"
    finally:
        server.stop()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(task), timeout=5)
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        sock.close()


@contextlib.asynccontextmanager
async def serving_http(
    cm: ContextManager,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    path: str = "/mcp",
    watch: bool = True,
    interval: float = 1.0,
    token: str | None = None,
) -> AsyncIterator[str]:
    """Serve ``cm``'s skills over streamable HTTP while the block runs; yields the URL.

    ``token``: require ``Authorization: Bearer TOKEN`` on every request.
    """
    srv = SkillServer(cm)
    app: Any = srv.server.streamable_http_app(streamable_http_path=path, host=host)
    if token:
        app = BearerGuard(app, token)
    async with anyio.create_task_group() as tg:
        if watch:
            tg.start_soon(srv.watch, interval)
        async with _uvicorn(app, host, port) as base:
            yield base + path
        tg.cancel_scope.cancel()


async def serve_http(
    cm: ContextManager,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    path: str = "/mcp",
    token: str | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve over streamable HTTP until cancelled (Ctrl-C)."""
    async with serving_http(cm, host, port, path=path, token=token) as url:
        if ready is not None:
            ready(url)
        await anyio.sleep_forever()


class BearerGuard:
    """ASGI wrapper: every HTTP request needs ``Authorization: Bearer TOKEN``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    def authorized(self, header: bytes) -> bool:
        """``Bearer TOKEN``, the scheme in any case (RFC 9110: schemes are case-insensitive)."""
        scheme, _, credentials = header.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(b" "), self._expected)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not self.authorized(given):
                body = b'{"error": "unauthorized: this endpoint needs its per-run bearer token"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


# -- callback refs across processes -------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """Where a provider in another process reaches the exposed refs.

    Pass :meth:`to_env` (or :meth:`to_json`) to the child process. Call a ref with
    ``tools[ref]`` (or the ref itself) as the MCP tool name and the header
    ``Authorization: Bearer TOKEN``; the result is ``structuredContent["result"]``.
    """

    url: str
    token: str
    tools: dict[str, str] = field(default_factory=dict)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def to_json(self) -> dict[str, Any]:
        return {"url": self.url, "token": self.token, "tools": dict(self.tools)}

    def to_env(self) -> dict[str, str]:
        return {"AGENT_APPS_MCP_URL": self.url, "AGENT_APPS_MCP_TOKEN": self.token}


@contextlib.asynccontextmanager
async def expose_refs(
    owner: Context | ContextManager,
    refs: Iterable[str] | Mapping[str, str],
    *,
    render: Callable[[Any], types.CallToolResult] | None = None,
    elicit: bool = True,
) -> AsyncIterator[Endpoint]:
    """Serve ``refs`` (skill names and callback refs; a mapping names their tools) on
    an ephemeral loopback endpoint guarded by a per-run secret, while the block runs.
    ``render`` shapes the tool results and ``elicit: False`` keeps approvals with the
    owner's approver (see :class:`SkillServer`).

    ``owner``: a skill's ``ctx`` (the calls then run as its children: its signal
    cancels them, its nesting applies) or a ContextManager. Typical use, in a provider
    that runs its model loop in another process::

        async with expose_refs(ctx, [args["invoke_ref"], args["hook_ref"]]) as endpoint:
            ...start the process with endpoint.to_env() and the refs...
    """
    tools = dict(refs) if isinstance(refs, Mapping) else {tool_name_for_ref(ref): ref for ref in refs}
    if isinstance(owner, Context):
        cm = owner.manager.context_manager
        invoker: Invoker = owner.manager.invoke
        signal: Signal | None = owner.signal
    else:
        cm, invoker, signal = owner, owner.invoke, None
    token = secrets.token_urlsafe(32)
    srv = SkillServer(
        cm, refs=tools, invoker=invoker, signal=signal, name="agent-apps-refs", render=render, elicit=elicit
    )
    app = BearerGuard(srv.server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1"), token)
    async with _uvicorn(app, "127.0.0.1", 0) as base:
        yield Endpoint(url=base + "/mcp", token=token, tools={ref: name for name, ref in tools.items()})
