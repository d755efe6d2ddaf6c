"""Serve skills as MCP tools: the server behind ``agent-apps mcp`` and :func:`expose_refs`.

Built on the low-level :class:`mcp.server.Server` of mcp 2.x (constructor callbacks):

* ``tools/list``: every visible skill (not hidden, not meta-internal), with its
  description, ``params`` as the input schema and ``metadata.returns`` as the output
  schema (schemas.py says how a skill looks as a tool).
* ``tools/call``: the skill runs through the pipeline with a fresh :class:`Signal` and
  ``nonlocals={"agent": {"events": TOPIC}}`` (tool_call.py: its events become
  progress notifications, a client's cancellation stops it, approvals may ask the
  client). Invalid args and failures come back as tool errors (``isError``), never as
  a crashed server.
* Tool-list changes: :meth:`SkillServer.watch` polls the search path (``os.scandir``
  and mtimes, about once a second), reloads the catalog and notifies clients:
  ``notifications/tools/list_changed`` on handshake-era connections, and a
  ``subscriptions/listen`` event on 2026-07-28 connections.

The transports (stdio, streamable HTTP, the loopback endpoint of callback refs) are in
transports.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from ..allowed_tools import visible_tools
from ..context import Signal
from ..errors import AgentAppsError
from ..skill import Skill
from .schemas import EMPTY_PARAMS, WRAPPED, output_schema, structured, tool_name_for_ref
from .tool_call import ToolCall, approval_session, wind_down

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["Invoker", "SkillServer", "build_server", "search_path_snapshot", "skill_tool"]

log = logging.getLogger("agent_apps.mcp")

_WATCHED_SUFFIXES = (".skill.py", "skill.md", "SKILL.md", "agent-apps.yaml")
_SKIP_DIRS = {"__pycache__", "node_modules"}

Invoker = Callable[..., Awaitable[Any]]


# -- tools and results --------------------------------------------------------------------


def skill_tool(skill: Skill, name: str | None = None) -> types.Tool:
    params = dict(skill.params) if skill.params else dict(EMPTY_PARAMS)
    params.setdefault("type", "object")
    return types.Tool(
        name=name or skill.name,
        description=skill.description or skill.name,
        input_schema=params,
        output_schema=output_schema(skill.returns),
    )


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
        self._suspended: dict[str, ToolCall] = {}
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
        run = ToolCall(self, params.name, skill)
        options: dict[str, Any] = {"signal": run.signal}
        if self.refs is None:
            # A top-level call: hear every agent below it. (Refs run inside an agent run that
            # has its own scope and topic; overriding its ``agent`` nonlocal would change
            # what its code sees.)
            options["nonlocals"] = {"agent": {"events": run.topic}}
        asking = approval_session(ctx, run) if self.elicit else contextlib.nullcontext()
        with asking:  # the task copies the context: its approver is this client's user
            run.task = asyncio.ensure_future(self._invoker(ref, dict(params.arguments or {}), **options))
        run.task.add_done_callback(lambda _: run.close())
        return await self._serve_round(ctx, run)

    async def _serve_round(self, ctx: ServerRequestContext[Any], run: ToolCall) -> Any:
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
                            await wind_down(task)
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
