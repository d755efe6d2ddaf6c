"""Ask the MCP client's user to approve a call (elicitation).

The security policy (``agent_apps.tools.approval``) asks an *approver*
``async def approve(request) -> bool | str`` when a call needs a human. While a tool
call runs through our MCP server, and the client declared the elicitation capability,
the server installs one with ``approval.session(...)`` around the call: the user sees a
small form (approve yes/no, and a reason to refuse) in their MCP client.
:class:`ElicitationApprover` sends ``elicitation/create`` (handshake-era connections);
:class:`RoundApprover` answers the call with ``input_required`` and resumes the waiting
run when the client retries with the answer (2026-07-28 connections).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["APPROVAL_SCHEMA", "ElicitationApprover", "RoundApprover", "answer", "can_elicit"]

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve", "description": "Allow this call?"},
        "reason": {"type": "string", "title": "Reason", "description": "If you refuse: why (the agent sees it)"},
    },
    "required": ["approve"],
}


def can_elicit(session: Any) -> bool:
    """Whether the client behind ``session`` declared the elicitation capability."""
    caps = getattr(session, "client_capabilities", None)
    return caps is not None and getattr(caps, "elicitation", None) is not None


def answer(result: Any) -> bool | str:
    """An approver's answer from an ``ElicitResult`` (or its JSON, or None: no answer)."""
    if result is None:
        return "the MCP client gave no answer"
    if isinstance(result, dict):
        action, content = result.get("action"), result.get("content")
    else:
        action, content = getattr(result, "action", None), getattr(result, "content", None)
    if action != "accept":
        return f"the user chose {action!r} when asked to approve"
    content = content or {}
    if content.get("approve") is True:
        return True
    return str(content.get("reason") or "").strip() or "refused by the user"


def _question(request: Any) -> str:
    summary = request.summary() if hasattr(request, "summary") else str(request)
    return f"agent-apps asks: allow {summary}?"


class ElicitationApprover:
    """An approver that asks the MCP client's user with an ``elicitation/create`` request
    (handshake-era connections, which can send requests to the client mid-call).

    ``session``: the ``ServerRequestContext.session`` of the tool call being served;
    ``request_id``: that call's JSON-RPC id (so the question rides its stream).
    Accept with ``approve: true`` approves; accept with ``approve: false`` refuses with
    the given reason; decline or cancel refuses.
    """

    def __init__(self, session: Any, request_id: Any = None) -> None:
        self.session = session
        self.request_id = request_id

    async def __call__(self, request: Any) -> bool | str:
        result = await self.session.elicit_form(_question(request), APPROVAL_SCHEMA, related_request_id=self.request_id)
        return answer(result)


class RoundApprover:
    """An approver for 2026-07-28 connections: the tool call answers ``input_required``
    with the question, the client asks its user and retries the call with the answer;
    meanwhile the run waits (at most ``timeout`` seconds, then the call is refused).

    ``ask(message, timeout)`` is the server's hook that queues the question and returns
    the client's ``ElicitResult`` (or None).
    """

    def __init__(self, ask: Callable[[str, float], Awaitable[Any]], timeout: float = 600.0) -> None:
        self._ask = ask
        self.timeout = timeout

    async def __call__(self, request: Any) -> bool | str:
        try:
            result = await self._ask(_question(request), self.timeout)
        except TimeoutError:
            return f"no answer from the MCP client within {self.timeout:g} s"
        return answer(result)
