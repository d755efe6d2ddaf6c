"""Serve skills as MCP tools (``agent-apps mcp``), and expose callback refs to other
processes over an ephemeral, secret-guarded loopback endpoint.

Built on the low-level :class:`mcp.server.Server` of mcp 2.x (constructor callbacks):

* ``tools/list``: every visible skill (not hidden, not meta-internal), with its
  description, ``params`` as the input schema and ``metadata.returns`` as the output
  schema. Structured content is the result itself when ``returns`` is an object schema,
  else ``{"result": value}`` (MCP structured content is an object; the output schema
  says so).
* ``tools/call``: the skill runs through the pipeline with a fresh :class:`Signal` and
  ``nonlocals={"agent": {"events": TOPIC}}``; every agent event on that topic becomes a
  progress notification with a readable message. Invalid args and failures come back
  as tool errors (``isError``), never as a crashed server. A client's cancellation
  (``notifications/cancelled``) cancels the handler, which cancels the signal, which
  stops the sandbox and the provider.
* Tool-list changes: :meth:`SkillServer.watch` polls the search path (``os.scandir``
  and mtimes, about once a second), reloads the catalog and notifies clients:
  ``notifications/tools/list_changed`` on handshake-era connections, and a
  ``subscriptions/listen`` event on 2026-07-28 connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import socket
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..allowed_tools import visible_tools
from ..context import Context, Signal
from ..errors import AgentAppsError
from ..skill import Skill

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = [
    "Endpoint",
    "SkillServer",
    "build_server",
    "event_message",
    "expose_refs",
    "output_schema",
    "serve_http",
    "serve_stdio",
    "serving_http",
    "tool_name_for_ref",
]

log = logging.getLogger("agent_apps.mcp")

CALLBACK_SCHEME = "callback://"
EMPTY_PARAMS: dict[str, Any] = {"type": "object", "properties": {}}
#: Result metadata marking structured content wrapped as ``{"result": value}``.
WRAPPED = "agent-apps/wrapped"
_WRAP_NOTE = 'The skill\'s result, wrapped as {"result": value} because MCP structured content is a JSON object.'
_WATCHED_SUFFIXES = (".skill.py", "skill.md", "SKILL.md", "agent-apps.yaml")
_SKIP_DIRS = {"__pycache__", "node_modules"}
_MESSAGE_LIMIT = 500

Invoker = Callable[..., Awaitable[Any]]


# -- schemas and results ------------------------------------------------------------------


def _object_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object"


def output_schema(returns: dict[str, Any] | None) -> dict[str, Any] | None:
    """The MCP output schema for a skill's ``metadata.returns``."""
    if returns is None:
        return None
    if _object_schema(returns):
        return returns
    return {
        "type": "object",
        "description": _WRAP_NOTE,
        "properties": {"result": returns},
        "required": ["result"],
        WRAPPED: True,  # an unknown keyword to validators; our client unwraps by it
    }


def structured(skill: Skill, value: Any) -> dict[str, Any]:
    """The structured content for a result: the value itself for object ``returns``,
    else ``{"result": value}``."""
    if _object_schema(skill.returns) and isinstance(value, dict):
        return value
    return {"result": value}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _error_result(message: str, data: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=message)],
        structured_content={"error": data} if data is not None else None,
        is_error=True,
    )


def tool_name_for_ref(ref: str) -> str:
    """The MCP tool name of a ref: a skill name as is; ``callback://NAME.TOKEN`` as
    ``NAME.TOKEN`` (MCP tool names use ``[A-Za-z0-9._-]``). The server also accepts
    the ref itself as the tool name."""
    return ref[len(CALLBACK_SCHEME) :] if ref.startswith(CALLBACK_SCHEME) else ref


def skill_tool(skill: Skill, name: str | None = None) -> types.Tool:
    params = dict(skill.params) if skill.params else dict(EMPTY_PARAMS)
    params.setdefault("type", "object")
    return types.Tool(
        name=name or skill.name,
        description=skill.description or skill.name,
        input_schema=params,
        output_schema=output_schema(skill.returns),
    )


# -- events as progress messages ----------------------------------------------------------


def _clip(text: Any, limit: int = _MESSAGE_LIMIT) -> str:
    text = str(text if text is not None else "").strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event_message(event: dict[str, Any]) -> str:
    """A one-line, human-readable message for an agent event (CONTRACT section 7)."""
    kind = event.get("type")
    who = event.get("agent") or "agent"
    if kind == "agent-start":
        tools = event.get("tools") or []
        return f"{who}: started ({event.get('provider')}, {len(tools)} tools)"
    if kind == "turn-start":
        return f"{who}: turn {event.get('turn')}"
    if kind == "turn-end":
        return f"{who}: turn {event.get('turn')} done"
    if kind == "agent-message":
        verb = "thinks" if event.get("reasoning") else "says"
        return f"{who} {verb}: {_clip(event.get('text'))}"
    if kind == "tool-call":
        code = str(event.get("code") or "").strip()
        lines = code.splitlines()
        first = lines[0] if lines else ""
        more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
        return f"{who} runs code: {_clip(first, 200)}{more}"
    if kind == "tool-result":
        return f"{who}: code result: {_clip(event.get('result'))}"
    if kind == "tool-error":
        return f"{who}: code error: {_clip(event.get('result'))}"
    if kind == "agent-error":
        if event.get("retrying"):
            return f"{who}: retrying (attempt {event.get('attempt')}, in {event.get('delay')} s)"
        error = event.get("error") or {}
        message = error.get("message") if isinstance(error, dict) else error
        return f"{who} error: {_clip(message)}"
    if kind == "agent-complete":
        done = "complete" if event.get("status") in (None, "done") else str(event.get("message") or event.get("status"))
        return f"{who}: {done} after {event.get('turns')} turn(s), {event.get('steps')} code run(s)"
    return _clip(json.dumps({k: v for k, v in event.items() if k != "timestamp"}, default=str))


# -- the server ---------------------------------------------------------------------------


class SkillServer:
    """An MCP server over a ContextManager's skills (or over a fixed set of refs).

    ``refs``: serve exactly these refs (skill names or callback refs) instead of the
    visible skills; a mapping names their tools (``{"invoke": ref}``). ``invoker``: how
    to invoke (default ``cm.invoke``; :func:`expose_refs` passes the owner's
    ``ctx.manager.invoke`` so calls run as its children). ``signal``: a parent signal
    for every invocation. ``render``: turns a result into the tool result (else the
    value as text and structured content). ``elicit``: ask the client when a call needs
    a human's approval, if it can answer elicitations (else the approver in effect where
    the server was started is asked).
    """

    def __init__(
        self,
        cm: ContextManager,
        *,
        refs: Iterable[str] | Mapping[str, str] | None = None,
        invoker: Invoker | None = None,
        signal: Signal | None = None,
        name: str = "agent-apps",
        render: Callable[[Any], types.CallToolResult] | None = None,
        elicit: bool = True,
    ) -> None:
        self.cm = cm
        self.elicit = elicit
        self.refs: dict[str, str] | None = None
        if isinstance(refs, Mapping):
            self.refs = dict(refs)
        elif refs is not None:
            self.refs = {tool_name_for_ref(r): r for r in refs}
        self._render = render
        self._invoker = invoker or cm.invoke
        self._signal = signal
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        self._legacy: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self._tools_key: str | None = None
        self._suspended: dict[str, _Run] = {}
        from .. import __version__

        # Only the catalog server watches the search path and tells clients about new
        # tools; an endpoint of fixed refs never does, so it does not say it would.
        watched = refs is None
        self.server: Server[Any] = _Server(
            name,
            tools_changed=watched,
            version=__version__,
            instructions="Skills of agent-apps. Agent skills report their progress (turns, code, results) "
            "as progress notifications.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self.listen if watched else None,
        )
        self.server.middleware.append(self._track_sessions)

    # -- options -------------------------------------------------------------------

    def initialization_options(self) -> Any:
        return self.server.create_initialization_options()

    # -- tools -----------------------------------------------------------------------

    def tools(self) -> list[types.Tool]:
        """The current tool list."""
        if self.refs is not None:
            out = []
            for name, ref in self.refs.items():
                try:
                    skill = self.cm._resolve(ref, None)
                except AgentAppsError:
                    continue  # released callback ref
                out.append(skill_tool(skill, name))
            return out
        return [skill_tool(s) for s in self.cm.visible_tools(None).tools]

    def _lookup(self, name: str) -> tuple[str, Skill]:
        if self.refs is not None:
            ref = self.refs.get(name) or (name if name in self.refs.values() else None)
            if ref is None:
                raise AgentAppsError(f"unknown tool {name!r}: this endpoint serves {', '.join(self.refs) or 'nothing'}")
            return ref, self.cm._resolve(ref, None)
        skill = self.cm.get(name)  # SkillNotFound with suggestions
        if not visible_tools([skill], None).tools:  # one skill: no list of all per call
            raise AgentAppsError(f"{name!r} is not served over MCP (hidden or internal)", skill=name)
        return name, skill

    async def _list_tools(self, ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools())

    async def _call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        if params.request_state is not None:
            # A 2026-07-28 client retrying with the answers to our input requests.
            run = self._suspended.pop(params.request_state, None)
            if run is None or run.tool != params.name:
                return _error_result("error: unknown or expired requestState (the call it belonged to has ended)")
            run.answer(params.input_responses or {})
            return await self._serve_round(ctx, run)
        try:
            ref, skill = self._lookup(params.name)
        except AgentAppsError as exc:
            return _error_result(f"error: {exc}", exc.to_json())
        run = _Run(self, params.name, skill)
        options: dict[str, Any] = {"signal": run.signal}
        if self.refs is None:
            # A top-level call: hear every agent below it. (Refs run inside an agent run that
            # has its own scope and topic; overriding its ``agent`` nonlocal would change
            # what its code sees.)
            options["nonlocals"] = {"agent": {"events": run.topic}}
        asking = _approval_session(ctx, run) if self.elicit else contextlib.nullcontext()
        with asking:  # the task copies the context: its approver is this client's user
            run.task = asyncio.ensure_future(self._invoker(ref, dict(params.arguments or {}), **options))
        run.task.add_done_callback(lambda _: run.close())
        return await self._serve_round(ctx, run)

    async def _serve_round(self, ctx: ServerRequestContext[Any], run: _Run) -> Any:
        """Wait for the run to end (or to need the client's input), forwarding its events
        as progress notifications of this request."""
        task = run.task
        assert task is not None
        outcome: Any = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run.forward, ctx)
                question = asyncio.ensure_future(run.questions.get())
                try:
                    await asyncio.wait([task, question], return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not question.done():
                        question.cancel()
                    if not task.done() and not question.done():
                        # The client cancelled: cancel through the signal first (its callbacks stop
                        # the sandbox, the provider and every tool below), then wait for the run to end.
                        run.signal.cancel("cancelled by the MCP client")
                        with anyio.CancelScope(shield=True):
                            await _wind_down(task)
                if question.done() and not question.cancelled() and not task.done():
                    outcome = run.suspend(question.result())
                else:
                    if question.done() and not question.cancelled():
                        run.questions.put_nowait(question.result())
                    run.events_send.close()  # the forwarder drains what is left, then ends
                    await run.forwarded.wait()
                tg.cancel_scope.cancel()
        finally:
            if task.done():
                run.close()
        if outcome is not None:
            return outcome
        exc = task.exception() if not task.cancelled() else None
        if task.cancelled() or exc is not None:
            if isinstance(exc, AgentAppsError):
                return _error_result(f"error: {exc}", exc.to_json())
            if exc is None:
                return _error_result("error: cancelled")
            log.warning("tool %s: internal error", run.tool, exc_info=exc)
            return _error_result(f"internal error: {type(exc).__name__}: {exc}")
        value = task.result()
        if self._render is not None:
            return self._render(value)
        content = structured(run.skill, value)
        return types.CallToolResult(
            content=[types.TextContent(text=_text(value))],
            structured_content=content,
            is_error=False,
            # tells an agent-apps client to unwrap {"result": value} back to the value
            meta={WRAPPED: True} if content is not value else None,  # type: ignore[call-arg]  # the "_meta" alias
        )

    # -- tool-list changes -------------------------------------------------------------

    async def _track_sessions(self, ctx: ServerRequestContext[Any], call_next: Any) -> Any:
        """Remember handshake-era connections: they get ``tools/list_changed``."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            connection = getattr(ctx.session, "_connection", None)
            if connection is not None and getattr(connection, "outbound", None) is not None:
                self._legacy[id(connection)] = connection  # weak: forgotten when the client goes
        return await call_next(ctx)

    async def notify_tools_changed(self) -> None:
        """Tell every connected client that the tool list changed."""
        notification = types.ToolListChangedNotification().model_dump(by_alias=True, mode="json", exclude_none=True)
        for key, connection in list(self._legacy.items()):
            try:
                await connection.outbound.notify(notification["method"], notification.get("params"))
            except Exception:
                self._legacy.pop(key, None)
        await self.bus.publish(ToolsListChanged())

    def _tools_signature(self) -> str:
        return json.dumps([t.model_dump(mode="json") for t in self.tools()], sort_keys=True, default=str)

    async def check_for_changes(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        """Reload and notify if the search path changed since ``snapshot``; returns the new one."""
        current = await anyio.to_thread.run_sync(search_path_snapshot, self.cm)
        if current != snapshot:
            if self._tools_key is None:
                self._tools_key = self._tools_signature()
            self.cm.reload()
            key = self._tools_signature()
            if key != self._tools_key:
                self._tools_key = key
                await self.notify_tools_changed()
        return current

    async def watch(self, interval: float = 1.0) -> None:
        """Poll the search path forever (run it in a task group next to the server)."""
        snapshot = await anyio.to_thread.run_sync(search_path_snapshot, self.cm)
        self._tools_key = self._tools_signature()
        while True:
            await anyio.sleep(interval)
            try:
                snapshot = await self.check_for_changes(snapshot)
            except Exception:
                log.warning("watching the search path failed", exc_info=True)


class _Server(Server[Any]):
    """The SDK's low-level server, declaring ``tools.listChanged`` as it is: every
    transport (stdio, and each streamable-HTTP session, which builds its options
    without arguments) asks :meth:`create_initialization_options`."""

    def __init__(self, name: str, *, tools_changed: bool, **options: Any) -> None:
        super().__init__(name, **options)
        self._tools_changed = tools_changed

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        options = notification_options or NotificationOptions(tools_changed=self._tools_changed)
        return super().create_initialization_options(options, experimental_capabilities, extensions)


class _Run:
    """One tool call in flight: its task, signal, event stream, and (2026-07-28) the
    questions it waits on between rounds of ``input_required`` results."""

    def __init__(self, srv: SkillServer, tool: str, skill: Skill) -> None:
        self.srv = srv
        self.tool = tool
        self.skill = skill
        self.topic = f"mcp.{srv.cm.id}.{secrets.token_hex(6)}"
        self.signal = srv._signal.child() if srv._signal is not None else Signal()
        self.task: asyncio.Future[Any] | None = None
        self.questions: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.pending: dict[str, asyncio.Future[Any]] = {}
        self.progress = 0
        self.forwarded = anyio.Event()
        self.events_send, self.events_recv = anyio.create_memory_object_stream[dict[str, Any]](1000)
        self._loop = asyncio.get_running_loop()
        self._unsubscribe: Callable[[], None] | None = srv.cm.events.subscribe(self.topic, self._on_event)
        self._closed = False

    def _on_event(self, _topic: str, event: dict[str, Any]) -> None:
        def put() -> None:
            with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                self.events_send.send_nowait(event)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            put()
        else:
            self._loop.call_soon_threadsafe(put)

    async def forward(self, ctx: ServerRequestContext[Any]) -> None:
        """Events to progress notifications of ``ctx``'s request, until the stream closes
        (or this round is cancelled: the rest waits for the next round)."""
        async for event in self.events_recv:
            self.progress += 1
            try:
                await ctx.session.report_progress(self.progress, None, event_message(event))
            except Exception:  # a client gone away must not fail the call
                log.debug("progress notification failed", exc_info=True)
        self.forwarded.set()

    # -- input-required rounds (2026-07-28 elicitation) ---------------------------------

    async def ask(self, message: str, timeout: float) -> Any:
        """Called by the approver: queue a question, wait for the client's answer."""
        key = f"approval-{secrets.token_hex(4)}"
        future: asyncio.Future[Any] = self._loop.create_future()
        self.pending[key] = future
        self.questions.put_nowait((key, message))
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self.pending.pop(key, None)

    def suspend(self, first: tuple[str, str]) -> types.InputRequiredResult:
        """End this round with the queued questions; the run goes on waiting for answers."""
        from .approval import APPROVAL_SCHEMA

        asked = [first]
        while not self.questions.empty():
            asked.append(self.questions.get_nowait())
        state = secrets.token_urlsafe(24)
        self.srv._suspended[state] = self
        requests: dict[str, types.CreateMessageRequest | types.ListRootsRequest | types.ElicitRequest] = {
            key: types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_SCHEMA)
            )
            for key, message in asked
        }
        return types.InputRequiredResult(input_requests=requests, request_state=state)

    def answer(self, responses: Mapping[str, Any]) -> None:
        for key, response in responses.items():
            future = self.pending.get(key)
            if future is not None and not future.done():
                future.set_result(response)
        for future in self.pending.values():  # asked but not answered: no
            if not future.done():
                future.set_result(None)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
        for state, run in list(self.srv._suspended.items()):
            if run is self:
                del self.srv._suspended[state]
        if self.srv._signal is not None:
            self.signal.detach()


def _approval_session(ctx: ServerRequestContext[Any], run: _Run) -> Any:
    """``approval.session(approver)`` when the client can answer elicitations: a direct
    ``elicitation/create`` request on handshake-era connections, ``input_required``
    rounds on 2026-07-28 ones."""
    from .approval import ElicitationApprover, RoundApprover, can_elicit

    try:
        from ..tools import approval
    except ImportError:  # pragma: no cover - the security tools are optional
        return contextlib.nullcontext()
    if not can_elicit(ctx.session):
        return contextlib.nullcontext()
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return approval.session(RoundApprover(run.ask))
    if getattr(ctx.session, "can_send_request", False):
        return approval.session(ElicitationApprover(ctx.session, ctx.request_id))
    return contextlib.nullcontext()


async def _wind_down(task: asyncio.Future[Any], grace: float = 5.0) -> None:
    """Wait for a cancelled invocation to finish; cancel its task if it ignores the signal."""
    await asyncio.wait([task], timeout=grace)
    if not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=grace)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: the client is gone, nobody else will look


def build_server(cm: ContextManager, **options: Any) -> SkillServer:
    """A :class:`SkillServer` over ``cm`` (see its options)."""
    return SkillServer(cm, **options)


def search_path_snapshot(cm: ContextManager) -> dict[str, Any]:
    """Skill files and directories on the search path, with their mtimes and sizes."""
    snap: dict[str, Any] = {}
    for root in cm.roots():
        _walk(str(root.path), snap)
    return snap


def _walk(directory: str, snap: dict[str, Any]) -> None:
    try:
        st = os.stat(directory)
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError:
        snap[directory] = None
        return
    snap[directory] = st.st_mtime_ns
    for entry in entries:
        name = entry.name
        try:
            if entry.is_dir():
                if not name.startswith(".") and name not in _SKIP_DIRS:
                    _walk(entry.path, snap)
            elif name.endswith(_WATCHED_SUFFIXES):
                st = entry.stat()
                snap[entry.path] = (st.st_mtime_ns, st.st_size)
        except OSError:
            continue


# -- transports ---------------------------------------------------------------------------


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
    """uvicorn without its signal handlers (the host process owns SIGINT)."""

    @staticmethod
    def make(app: Any, host: str, port: int) -> Any:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Any:
                yield

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
        server.should_exit = True
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
