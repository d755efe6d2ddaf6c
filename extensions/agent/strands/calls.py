"""Each Strands model call, reported to the agent policy (``model-call``, ``model-response``).

:class:`ReportedModel` wraps the real Strands model. Before each request it asks the
hook; a ``response`` directive is played back as the model's stream without calling the
model (a resumed run replays what the model said before), ``messages`` and ``system``
directives change what this request sends. After the request it reports the answer as
a neutral response (see ``agent_apps/agent/model_calls.py``); with ``buffer_responses``
it holds the stream until the hook has seen it, so a directive may replace the answer.

Strands sees nothing of this: it gets Bedrock-shaped stream events either way.

Every reply is also held to what a model endpoint may send (docs/security.md, "What a
peer can do"): reading stops at the next event once the run is cancelled, the event loop
gets a turn between events (so that a flood cannot starve the deadline's timer), the
reply's output is capped (``model.max_output_kb``), its token counts are clamped
(:func:`~agent_apps.budget.clamp_usage`) and a reply without a stop reason is an error
the agent may retry, never a result.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from strands.models.model import Model

from agent_apps import _json
from agent_apps.budget import clamp_usage
from agent_apps.config import DEFAULTS
from agent_apps.errors import Cancelled

from .history import from_converse, to_converse

if TYPE_CHECKING:
    from .loop import Session

__all__ = ["IncompleteReply", "OutputTooLarge", "ReportedModel", "events_of", "response_of"]

#: What each streamed event counts toward ``model.max_output_kb`` beyond its text: a
#: flood of empty events costs too.
EVENT_COST = 16


class OutputTooLarge(Exception):
    """A model reply went past ``model.max_output_kb`` (not retried: it would again)."""


class IncompleteReply(Exception):
    """A model reply ended without a stop reason: cut off, so retried like a dropped
    connection, never taken as the answer."""


class ReportedModel(Model):
    """A Strands model whose every call goes through the agent policy's hook."""

    def __init__(self, inner: Model, session: Session, *, with_messages: bool, buffered: bool) -> None:
        self.inner = inner
        self.session = session
        self.with_messages = with_messages
        self.buffered = buffered

    # -- delegated -------------------------------------------------------------------------

    def update_config(self, **model_config: Any) -> None:
        self.inner.update_config(**model_config)

    def get_config(self) -> Any:
        return self.inner.get_config()

    def structured_output(self, output_model: Any, prompt: Any, system_prompt: str | None = None, **kwargs: Any) -> Any:
        return self.inner.structured_output(output_model, prompt, system_prompt, **kwargs)

    @property
    def stateful(self) -> bool:
        return self.inner.stateful

    # -- the call ----------------------------------------------------------------------------

    async def stream(
        self,
        messages: Any,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        session = self.session
        turn, attempt = session.turn, session.attempt + 1
        built = session.built  # the model's tracing span names them
        event: dict[str, Any] = {
            "type": "model-call",
            "turn": turn,
            "attempt": attempt,
            "provider": built.provider,
            "model": built.model_id,
        }
        if self.with_messages:
            event.update(messages=from_converse(messages), system=system_prompt or "")
        directive = await session.hook(event)
        started = time.perf_counter()
        if "response" in directive:
            response = directive["response"]
            await self._report(turn, attempt, response, started, replayed=True)
            for chunk in events_of(response):
                yield chunk
            return
        if "messages" in directive:
            messages = to_converse(directive["messages"], None)
        if "system" in directive:
            system_prompt = str(directive["system"])
            kwargs["system_prompt_content"] = [{"text": system_prompt}]
        # The run's own cancellation event, not Strands' copy of it (which lags and is
        # cleared when the invocation ends): Bedrock's reader thread checks it at each
        # chunk and closes the stream itself.
        kwargs["cancel_signal"] = session.cancel_event
        chunks: list[Any] = []
        async for chunk in self._checked(self.inner.stream(messages, tool_specs, system_prompt, **kwargs)):
            chunks.append(chunk)
            if not self.buffered:
                yield chunk
        answer = await self._report(turn, attempt, response_of(chunks), started, replayed=False)
        if self.buffered:
            for chunk in events_of(answer) if answer is not None else chunks:
                yield chunk

    async def _checked(self, stream: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The provider's stream, held to what a reply may be (see the module docstring)."""
        session = self.session
        built = session.built
        limit = int(session.config.get("max_output_kb") or DEFAULTS["model"]["max_output_kb"]) * 1024
        size, stopped = 0, False
        built.unfinished = False
        try:
            async for chunk in stream:
                if session.cancel_event.is_set():  # the run is over: read nothing more
                    raise Cancelled(session.ctx.signal.reason or "cancelled")
                size += EVENT_COST + _output_size(chunk)
                if size > limit:
                    built.cut()  # a reader thread (Bedrock) stops reading the flood now
                    raise OutputTooLarge(
                        f"the reply went past model.max_output_kb ({limit // 1024} KB of text, reasoning and "
                        "tool input)"
                    )
                stop = chunk.get("messageStop") if isinstance(chunk, dict) else None
                stopped = stopped or bool(isinstance(stop, dict) and stop.get("stopReason"))
                yield _with_clamped_usage(chunk)
                # A turn of the event loop between events: the deadline's timer and
                # the cancellation run even when the endpoint floods (Bedrock's reader
                # thread queues events faster than the hooks report them).
                await asyncio.sleep(0)
        finally:
            await _close(stream)
        if session.cancel_event.is_set():
            raise Cancelled(session.ctx.signal.reason or "cancelled")
        if not stopped or built.unfinished:
            raise IncompleteReply("the reply ended without a stop reason (cut off)")

    async def _report(
        self, turn: int, attempt: int, response: dict[str, Any], started: float, *, replayed: bool
    ) -> dict[str, Any] | None:
        """Send ``model-response``; returns the replacement answer a directive gave, if any."""
        latency = round((time.perf_counter() - started) * 1000, 3)
        report = {"type": "model-response", "turn": turn, "attempt": attempt, "response": response}
        directive = await self.session.hook({**report, "latency_ms": latency, "replayed": replayed})
        return directive.get("response") if self.buffered else None


def _output_size(chunk: Any) -> int:
    """The characters of text, reasoning and tool input in one stream event."""
    delta = chunk.get("contentBlockDelta") if isinstance(chunk, dict) else None
    if not isinstance(delta, dict) or not isinstance(delta.get("delta"), dict):
        return 0
    delta = delta["delta"]
    tool, reasoning = delta.get("toolUse") or {}, delta.get("reasoningContent") or {}
    parts = (delta.get("text"), tool.get("input"), reasoning.get("text"))
    return sum(len(part) for part in parts if isinstance(part, str))


def _with_clamped_usage(chunk: Any) -> Any:
    """A ``metadata`` event with its token counts clamped: Strands adds them up, and a
    string or a list there would crash its loop."""
    metadata = chunk.get("metadata") if isinstance(chunk, dict) else None
    if not isinstance(metadata, dict) or "usage" not in metadata:
        return chunk
    return {**chunk, "metadata": {**metadata, "usage": clamp_usage(metadata["usage"])}}


async def _close(stream: Any) -> None:
    """Close a provider's stream now (its connection with it), not when it is collected."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


def response_of(chunks: list[Any]) -> dict[str, Any]:
    """A Bedrock-shaped model stream as a neutral response."""
    text, reasoning, signature = [], [], None
    calls: list[dict[str, Any]] = []
    tool: dict[str, Any] | None = None
    response: dict[str, Any] = {"stop_reason": "end_turn"}
    for chunk in chunks:
        if "contentBlockStart" in chunk:
            use = (chunk["contentBlockStart"].get("start") or {}).get("toolUse")
            tool = {"id": str(use["toolUseId"]), "name": str(use["name"]), "json": ""} if use else None
        elif "contentBlockDelta" in chunk:
            delta = chunk["contentBlockDelta"].get("delta") or {}
            if "text" in delta:
                text.append(delta["text"])
            elif "toolUse" in delta and tool is not None:
                tool["json"] += delta["toolUse"].get("input", "")
            elif "reasoningContent" in delta:
                reasoning.append(delta["reasoningContent"].get("text", ""))
                signature = delta["reasoningContent"].get("signature") or signature
        elif "contentBlockStop" in chunk and tool is not None:
            calls.append({"id": tool["id"], "name": tool["name"], "input": _json_object(tool["json"])})
            tool = None
        elif "messageStop" in chunk:
            response["stop_reason"] = chunk["messageStop"].get("stopReason") or "end_turn"
        elif "metadata" in chunk:
            usage = chunk["metadata"].get("usage") or {}
            response["usage"] = clamp_usage(
                {"input_tokens": usage.get("inputTokens"), "output_tokens": usage.get("outputTokens")}
            )
    response.update(text="".join(text), tool_calls=calls)
    if reasoning:
        response["reasoning"] = "".join(reasoning)
    if signature:
        response["meta"] = {"reasoning_signature": signature}
    return response


def events_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A neutral response as the Bedrock-shaped stream Strands reads."""
    chunks: list[dict[str, Any]] = [{"messageStart": {"role": "assistant"}}]

    def block(delta: dict[str, Any], start: dict[str, Any] | None = None) -> None:
        chunks.extend(
            [
                {"contentBlockStart": {"start": start or {}}},
                {"contentBlockDelta": {"delta": delta}},
                {"contentBlockStop": {}},
            ]
        )

    if response.get("reasoning"):
        content: dict[str, Any] = {"text": response["reasoning"]}
        signature = (response.get("meta") or {}).get("reasoning_signature")
        if signature:
            content["signature"] = signature
        block({"reasoningContent": content})
    if response.get("text"):
        block({"text": response["text"]})
    for call in response.get("tool_calls") or ():
        start = {"toolUse": {"toolUseId": call["id"], "name": call["name"]}}
        block({"toolUse": {"input": json.dumps(call.get("input") or {})}}, start)
    stop = response.get("stop_reason") or ("tool_use" if response.get("tool_calls") else "end_turn")
    chunks.append({"messageStop": {"stopReason": stop}})
    usage = clamp_usage(response.get("usage"))
    tokens = {"inputTokens": usage.get("input_tokens", 0), "outputTokens": usage.get("output_tokens", 0)}
    chunks.append({"metadata": {"usage": {**tokens, "totalTokens": sum(tokens.values())}, "metrics": {"latencyMs": 0}}})
    return chunks


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = _json.loads(text) if text else {}
    except ValueError:  # not JSON, or JSON no agent code could be handed (NaN, too deep)
        return {}
    return value if isinstance(value, dict) else {}
