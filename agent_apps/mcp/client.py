"""External MCP servers as skills (``mcp_servers:`` in the config cascade).

::

    # ~/.agent-apps/config.yaml or ./agent-apps.yaml
    mcp_servers:
      files:                               # stdio: a command
        command: npx
        args: ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
        env: {LOG_LEVEL: warn}             # added to a minimal default environment
        cwd: /tmp
      search:                              # streamable HTTP: a URL
        url: https://example.com/mcp
        headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}   # ${VAR} from the environment

Each tool becomes a skill named ``SERVER-TOOL`` (normalized to ``[a-z0-9-]``) with the
tool's input schema as ``params`` and its output schema as ``metadata.returns``.

Connections run on one background thread with its own event loop, so the catalog
(which is synchronous) can list a server's tools, and every caller's event loop can
call them. A server is connected the first time a catalog is built, its tool list is
cached, and it is closed at exit (or by :func:`close_servers`). A server that fails to
start is reported as a load error (``agent-apps list`` shows it) and contributes no
skills; a server that dies makes its own tools fail with a clear error (the next call
reconnects once) and nothing else.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import SkillFailed, SkillLoadError
from ..skill import Skill, as_skill_name, mounted_tool_name
from .guard import ToolLimits, capped_tool, readable_answers, same_origin_redirects, shown_name
from .schemas import WRAPPED
from .server_log import DEFAULT_LOG_KB, ServerLog, current_log, route_library_logging

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["MOUNTED_ENV", "MCPServerError", "ServerConnection", "UnsetVariable", "close_servers", "mcp_skills"]


#: Set in the environment of the stdio servers we start: an agent-apps started that way
#: mounts no servers itself, or a config mounting `agent-apps mcp` would loop forever.
MOUNTED_ENV = "AGENT_APPS_MCP_MOUNTED"
DEFAULT_STARTUP_TIMEOUT = 30.0
#: The most tools one server may list (``mcp_servers.SERVER.max_tools``): the rest are
#: not mounted, with a warning (a server could page through tools for ever).
DEFAULT_MAX_TOOLS = 1000


class MCPServerError(SkillFailed):
    """A mounted MCP server could not be reached, or its tool reported an error."""


# -- the background runtime ---------------------------------------------------------------


class _Runtime:
    """One daemon thread running an event loop for every MCP connection."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="agent-apps-mcp", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


_runtime: _Runtime | None = None
_runtime_lock = threading.Lock()
_connections: weakref.WeakSet[ServerConnection] = weakref.WeakSet()


def _get_runtime() -> _Runtime:
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            _runtime = _Runtime()
            atexit.register(_close_everything)
        return _runtime


#: How long exiting waits for mounted servers to stop (the SDK closes a stdio server's
#: stdin, waits 2 s, then sends SIGTERM and SIGKILL to its process group).
EXIT_TIMEOUT = 10.0


def _close_everything() -> None:
    """At exit: stop every connection, and wait until their processes are gone, so no
    mounted server outlives agent-apps (a stdio server runs in its own session, out of
    reach of the terminal's signals)."""
    connections = list(_connections)
    for conn in connections:
        conn.close(timeout=0)
    deadline = time.monotonic() + EXIT_TIMEOUT
    for conn in connections:
        conn.wait_stopped(max(0.0, deadline - time.monotonic()))


# -- one connection -----------------------------------------------------------------------


class ServerConnection:
    """One configured MCP server: connect, list tools, call tools, close."""

    def __init__(self, name: str, spec: Mapping[str, Any], *, log_dir: Path | None = None) -> None:
        self.name = name
        self.spec = dict(spec)
        #: Where a stdio server's stderr goes (``AGENT_APPS_DEBUG=1``: the terminal), and
        #: what the mcp library logs about the connection.
        self.log: ServerLog | None = None
        if log_dir is not None:
            path = log_dir / f"mcp-{as_skill_name(name)}.log"
            self.log = ServerLog(path, limit_kb=int(spec.get("log_kb") or DEFAULT_LOG_KB))
        self.max_tools = max(1, int(spec.get("max_tools") or DEFAULT_MAX_TOOLS))
        #: Tools past max_tools, not mounted (for the warning).
        self.tools_left_out = 0
        self.startup_timeout = float(spec.get("startup_timeout") or DEFAULT_STARTUP_TIMEOUT)
        timeout = spec.get("timeout")
        self.call_timeout: float | None = float(timeout) if timeout else None
        self.tools: list[Any] | None = None
        self.error: str | None = None
        self._client: Any = None
        self._closing: asyncio.Event | None = None
        self._task: concurrent.futures.Future[Any] | None = None
        self._stopped: threading.Event | None = None
        self._lock = threading.Lock()
        _connections.add(self)

    # -- lifecycle (blocking, any thread) ----------------------------------------------------

    def start(self) -> concurrent.futures.Future[list[Any]]:
        """Begin connecting; the future resolves to the tool list."""
        with self._lock:
            runtime = _get_runtime()
            ready: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
            self._closing, self._stopped = asyncio.Event(), threading.Event()
            self._task = runtime.submit(self._run(ready, self._closing, self._stopped))
            return ready

    def connect(self) -> list[Any]:
        """Connect (if not connected) and return the tool list; raises MCPServerError."""
        if self._client is not None and self.tools is not None:
            return self.tools
        ready = self.start()
        return self.wait(ready)

    def wait(self, ready: concurrent.futures.Future[list[Any]]) -> list[Any]:
        try:
            self.tools = ready.result(timeout=self.startup_timeout)
            self.error = None
            return self.tools
        except concurrent.futures.TimeoutError:
            self.close(timeout=0)  # stopped in the background; exiting waits for it
            self.error = f"no answer within {self.startup_timeout:g} s (startup_timeout)"
        except BaseException as exc:
            self.error = _describe(exc)
        raise MCPServerError(self.name, f"MCP server {self.name!r} failed to start: {self.error}{self._stderr_note()}")

    def close(self, timeout: float = 5) -> None:
        """Disconnect and stop a stdio server's process (waiting up to ``timeout``
        seconds for it to be gone). Safe to call twice."""
        task, closing, runtime = self._task, self._closing, _runtime
        if task is None or runtime is None:
            return
        if closing is not None:
            runtime.loop.call_soon_threadsafe(closing.set)
        if self._client is None:
            task.cancel()  # still connecting: the transport's shutdown stops the process
        self.wait_stopped(timeout)

    def wait_stopped(self, timeout: float) -> bool:
        """Wait until the connection (and a stdio server's process) has ended."""
        stopped = self._stopped
        return stopped is None or stopped.wait(timeout)

    async def _run(
        self, ready: concurrent.futures.Future[list[Any]], closing: asyncio.Event, stopped: threading.Event
    ) -> None:
        from mcp import Client

        route_library_logging()
        current_log.set(self.log)  # this task's (and its children's) library records go to its log
        stderr: TextIO = sys.stderr
        pipe = None
        if self.log is not None:
            self.log.start(str(self.spec.get("command") or self.spec.get("url")))
            if self.spec.get("command") and not os.environ.get("AGENT_APPS_DEBUG"):
                # a chatty server does not flood the command line's output, nor the disk
                pipe = await self.log.stderr_pipe()
                stderr = pipe.writer
        try:
            async with _transport(self.spec, stderr) as transport:
                async with Client(readable_answers(transport), mode=self.spec.get("mode") or "auto") as client:
                    if pipe is not None:
                        pipe.writer.close()  # the server holds its end now: the pipe ends with it
                    tools = await _list_all_tools(client, self)
                    self._client = client
                    ready.set_result(tools)
                    await closing.wait()
        except BaseException as exc:
            if pipe is not None:  # its last words reach the log before the failure names them
                await pipe.finish(timeout=1.0)
            if not ready.done():
                ready.set_exception(exc)
            else:
                self.error = f"disconnected: {_describe(exc)}"
            if not isinstance(exc, Exception):
                raise
        finally:
            self._client = None
            if pipe is not None:
                pipe.close()
            stopped.set()

    def _stderr_note(self) -> str:
        """The server's last words, for a failure message."""
        if self.log is None or os.environ.get("AGENT_APPS_DEBUG") or "command" not in self.spec:
            return ""
        last = self.log.last_line()
        said = f"; its stderr ends: {last!r}" if last else ""
        return f"{said} (log: {self.log.path})"

    # -- calls (async, any event loop) ---------------------------------------------------------

    async def call(self, tool: str, args: dict[str, Any], skill: str) -> Any:
        """Call ``tool`` from any event loop; the result as a skill returns it."""
        if self._client is None:  # never connected, or died: reconnect once
            ready = self.start()
            try:
                await asyncio.wrap_future(ready)
                self.tools, self.error = ready.result(), None
            except Exception as exc:
                self.error = _describe(exc)
                raise MCPServerError(skill, f"MCP server {self.name!r} is not available: {self.error}") from None
        client = self._client
        runtime = _get_runtime()
        holder: dict[str, Any] = {}

        async def run() -> Any:
            import anyio

            # An anyio scope (not a bare task.cancel() from another thread) so that the mcp
            # client abandons the request properly and sends notifications/cancelled.
            with anyio.CancelScope() as scope:
                holder["scope"] = scope
                if holder.get("cancelled"):
                    return None
                return await client.call_tool(tool, args, read_timeout_seconds=self.call_timeout)
            return None

        future = runtime.submit(run())
        try:
            result = await asyncio.shield(asyncio.wrap_future(future))
        except asyncio.CancelledError:
            holder["cancelled"] = True

            def cancel() -> None:
                scope = holder.get("scope")
                if scope is not None:
                    scope.cancel()

            runtime.loop.call_soon_threadsafe(cancel)
            raise
        except Exception as exc:
            if _connection_lost(exc) and self._client is client:
                # the server died or hung up: drop this connection, reconnect on the next call
                self._client = None
                closing = self._closing
                if closing is not None:
                    _get_runtime().loop.call_soon_threadsafe(closing.set)
            raise MCPServerError(skill, f"MCP server {self.name!r}, tool {tool!r}: {_describe(exc)}") from None
        return _result(result, skill, self.name, tool)


def _connection_lost(exc: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    return True  # transport errors (closed or broken streams, HTTP errors)


def _describe(exc: BaseException) -> str:
    """One line (at most 500 characters) that says what went wrong: a server's own text
    may be long, and spread over lines."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    text = " ".join((str(exc) or type(exc).__name__)[:2000].split())
    text = text if len(text) <= 500 else text[:499] + "…"
    return text if type(exc).__name__ in text else f"{type(exc).__name__}: {text}"


#: In a server's spec, the Python interpreter agent-apps runs on (its virtualenv's, even
#: when that is not activated, where a bare ``python`` would be the system's).
PYTHON_VAR = "${AGENT_APPS_PYTHON}"


class UnsetVariable(ValueError):
    """A ``${VAR}`` in a server's config names a variable that is not set."""


_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def _expand(value: Any, where: str = "") -> Any:
    """``${VAR}`` (and ``$VAR``) from the environment, in strings, lists and mappings.

    ``${VAR}`` must be set (``${VAR:-default}`` gives a default), else
    :class:`UnsetVariable` names it; an unset ``$VAR`` stays as written.
    ``${AGENT_APPS_PYTHON}`` is always set: :data:`PYTHON_VAR`.
    """
    if isinstance(value, str):
        value = value.replace(PYTHON_VAR, sys.executable)

        def substitute(match: re.Match[str]) -> str:
            braced, default, bare = match.groups()
            found = os.environ.get(braced or bare)
            if braced and not found and default is not None:
                return default
            if found is None:
                if bare:
                    return match[0]
                raise UnsetVariable(f"environment variable {braced} is not set (${{{braced}}} in {where or 'config'})")
            return found

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, list):
        return [_expand(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): _expand(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    return value


class _transport:
    """The transport for a server spec: stdio for ``command``, HTTP for ``url``."""

    def __init__(self, spec: Mapping[str, Any], stderr: TextIO) -> None:
        self.spec = _expand(dict(spec))
        self._stderr = stderr
        self._http: Any = None

    async def __aenter__(self) -> Any:
        spec = self.spec
        if spec.get("url"):
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            self._http = create_mcp_http_client(headers={k: str(v) for k, v in (spec.get("headers") or {}).items()})
            self._http.event_hooks["response"].append(same_origin_redirects)
            return streamable_http_client(spec["url"], http_client=self._http)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        # Marked, so that an agent-apps started here does not mount servers in turn:
        # a config that mounts `agent-apps mcp` would otherwise start copies forever.
        env = {**{k: str(v) for k, v in (spec.get("env") or {}).items()}, MOUNTED_ENV: "1"}
        params = StdioServerParameters(
            command=str(spec["command"]),
            args=[str(a) for a in spec.get("args") or []],
            env=env,
            cwd=spec.get("cwd"),
        )
        return stdio_client(params, errlog=self._stderr)

    async def __aexit__(self, *exc: Any) -> None:
        if self._http is not None:
            await self._http.aclose()


async def _list_all_tools(client: Any, conn: ServerConnection) -> list[Any]:
    """Every page of the server's tool list, up to ``conn.max_tools`` tools."""
    tools: list[Any] = []
    cursor = None
    conn.tools_left_out = 0
    while True:
        page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        tools += page.tools
        cursor = getattr(page, "next_cursor", None)
        if len(tools) > conn.max_tools:
            conn.tools_left_out = len(tools) - conn.max_tools
            return tools[: conn.max_tools]
        if not cursor:
            return tools


def _result(result: Any, skill: str, server: str, tool: str) -> Any:
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    if result.is_error:
        message = "\n".join(texts) or "the tool reported an error"
        raise MCPServerError(skill, f"{message} (tool {tool!r} of MCP server {server!r})")
    if result.structured_content is not None:
        if (result.meta or {}).get(WRAPPED) and set(result.structured_content) == {"result"}:
            return result.structured_content["result"]  # an agent-apps server wrapped a non-object
        return result.structured_content
    if len(texts) == len(result.content):
        return texts[0] if len(texts) == 1 else "\n".join(texts)
    return [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content]


# -- skills from connections ----------------------------------------------------------------

_registries: weakref.WeakKeyDictionary[Any, dict[str, ServerConnection]] = weakref.WeakKeyDictionary()


def _registry(manager: ContextManager) -> dict[str, ServerConnection]:
    registry = _registries.get(manager)
    if registry is None:
        registry = _registries[manager] = {}
    return registry


def close_servers(manager: ContextManager) -> None:
    """Close every MCP connection of ``manager`` (at exit this happens by itself)."""
    for conn in _registry(manager).values():
        conn.close()
    _registry(manager).clear()


def mcp_skills(manager: ContextManager, servers: Any, sources: Mapping[str, str] | None = None) -> Iterator[Any]:
    """The skills of the configured servers (and a load error for each broken one).

    Servers connect in parallel; tool lists are cached per manager, so a reload does
    not reconnect unless the server's config changed.
    """
    sources = sources or {}

    def where(name: str) -> str:
        keys = [v for k, v in sources.items() if k == f"mcp_servers.{name}" or k.startswith(f"mcp_servers.{name}.")]
        return f"{keys[0]} (mcp_servers.{name})" if keys else f"config (mcp_servers.{name})"

    if not isinstance(servers, Mapping):
        yield SkillLoadError(
            "'mcp_servers' must map server names to {command, args, env, cwd} or {url, headers}", path="config"
        )
        return
    try:
        import mcp  # noqa: F401
    except ImportError:
        yield SkillLoadError(
            f"MCP servers are configured ({', '.join(map(str, servers))}) but the mcp package is not installed: "
            "pip install 'agent-apps[mcp]'",
            path=where(next(iter(servers), "")),
        )
        return
    registry = _registry(manager)
    pending: dict[str, tuple[ServerConnection, concurrent.futures.Future[list[Any]] | None]] = {}
    for name, spec in servers.items():
        name = str(name)
        if not isinstance(spec, Mapping) or not (spec.get("command") or spec.get("url")):
            yield SkillLoadError(
                "an MCP server needs 'command' (stdio, with optional args, env, cwd) or 'url' (HTTP, with optional "
                "headers)",
                path=where(name),
            )
            continue
        try:
            _expand(dict(spec))
        except UnsetVariable as exc:
            yield SkillLoadError(f"MCP server {name!r}: {exc}", path=where(name))
            continue
        conn = registry.get(name)
        if conn is not None and conn.spec != dict(spec):
            conn.close()
            conn = None
        if conn is None:
            conn = registry[name] = ServerConnection(name, spec, log_dir=manager.home / "logs")
        pending[name] = (conn, conn.start() if conn.tools is None else None)
    for name, (conn, ready) in pending.items():
        if ready is not None:
            try:
                conn.wait(ready)
            except MCPServerError as exc:
                del registry[name]
                # skill: the names its tools would have had, so that invoking one says why it is missing
                yield SkillLoadError(exc.reason, path=where(name), skill=f"{as_skill_name(name)}-*")
                continue
        taken: dict[str, str] = {}
        limits = ToolLimits.of(conn.spec)
        for tool in conn.tools or ():
            yield _tool_skill(conn, tool, where(name), taken, limits)


def _tool_skill(
    conn: ServerConnection, tool: Any, config: str, taken: dict[str, str], limits: ToolLimits
) -> Skill | SkillLoadError:
    """The skill of one tool, its text capped (:func:`~.guard.capped_tool`). Two tools
    whose names normalize alike (``read_file``, ``readFile``) never collapse into one
    skill: the later one gets a numbered name."""
    key = f"mcp_servers.{conn.name}"
    capped = capped_tool(tool, conn.name, limits, key=key)
    name = base = _cut(mounted_tool_name(conn.name, tool.name), limits.name_chars)
    number = 1
    while name in taken:
        number += 1
        name = f"{_cut(base, limits.name_chars - len(str(number)) - 1)}-{number}"
    taken[name] = tool.name
    if capped.refused is not None:
        return SkillLoadError(capped.refused, path=config, skill=name)
    params = dict(capped.input_schema or {"type": "object", "properties": {}})
    metadata: dict[str, Any] = {"mcp": {"server": conn.name, "tool": tool.name, "config": config}}
    if capped.output_schema:
        schema = dict(capped.output_schema)
        # an agent-apps server wraps non-object results; the skill returns them unwrapped
        metadata["returns"] = schema["properties"]["result"] if schema.get(WRAPPED) else schema

    async def main(ctx: Any, args: dict[str, Any]) -> Any:
        return await conn.call(tool.name, args, name)

    shown = shown_name(str(tool.name))
    warnings = [f"{config}: {warning}" for warning in capped.warnings]
    if base != mounted_tool_name(conn.name, tool.name):
        warnings.append(
            f"{config}: MCP server {conn.name!r}, tool {shown!r}: its name is longer than {limits.name_chars} "
            f"characters; it is mounted as {name!r}"
        )
    elif name != base:
        warnings.append(
            f"{config}: MCP server {conn.name!r}: tools {shown_name(taken[base])!r} and {shown!r} both become "
            f"{base!r}; {shown!r} is mounted as {name!r}"
        )
    if conn.tools_left_out and tool is conn.tools[-1]:  # type: ignore[index]
        warnings.append(
            f"{config}: MCP server {conn.name!r} lists more than {conn.max_tools} tools; "
            f"{conn.tools_left_out} more are not mounted ({key}.max_tools)"
        )
    return Skill(
        name=name,
        description=capped.description or f"Tool {shown!r} of MCP server {conn.name!r}.",
        params=params,
        metadata=metadata,
        kind="code",
        origin=f"mcp:{conn.name}",
        warnings=warnings,
        _main=main,
    )


def _cut(name: str, length: int) -> str:
    """A skill name cut to ``length`` characters (not ending with ``-``)."""
    return name if len(name) <= length else name[:length].rstrip("-")


def _dumps(value: Any) -> str:  # pragma: no cover - debugging aid
    return json.dumps(value, default=str)
