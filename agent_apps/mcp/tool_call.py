"""One MCP tool call while it runs: its task, its events as progress, its questions.

A call of a skill runs as a task with a :class:`~agent_apps.Signal` of its own, so a
client's cancellation stops the sandbox, the provider and every tool below it. Every
agent event on the call's topic becomes a progress notification with a readable
message (:func:`event_message`). When a call needs a human's approval and the client
can answer elicitations, the client is asked: a direct ``elicitation/create`` request
on handshake-era connections, ``input_required`` rounds on 2026-07-28 ones (the call
is suspended between rounds and taken up again by the client's retry).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..context import Signal

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext

    from ..skill import Skill
    from .server import SkillServer

__all__ = ["ToolCall", "approval_session", "event_message", "wind_down"]

log = logging.getLogger("agent_apps.mcp")

_MESSAGE_LIMIT = 500


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
    if kind == "model-call":
        return f"{who}: asks the model (turn {event.get('turn')})"
    if kind == "model-response":
        return f"{who}: the model answered (turn {event.get('turn')}, {event.get('latency_ms')} ms)"
    if kind == "approval-requested":
        return f"{who}: waits for approval of {event.get('skill')}"
    if kind == "approval-resolved":
        return f"{who}: {event.get('skill')}: {event.get('decision')} ({event.get('by')})"
    if kind == "agent-complete":
        done = "complete" if event.get("status") in (None, "done") else str(event.get("message") or event.get("status"))
        return f"{who}: {done} after {event.get('turns')} turn(s), {event.get('steps')} code run(s)"
    return _clip(json.dumps({k: v for k, v in event.items() if k != "timestamp"}, default=str))


# -- the call ---------------------------------------------------------------------------


class ToolCall:
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


def approval_session(ctx: ServerRequestContext[Any], run: ToolCall) -> Any:
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


async def wind_down(task: asyncio.Future[Any], grace: float = 5.0) -> None:
    """Wait for a cancelled invocation to finish; cancel its task if it ignores the signal."""
    await asyncio.wait([task], timeout=grace)
    if not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=grace)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: the client is gone, nobody else will look
