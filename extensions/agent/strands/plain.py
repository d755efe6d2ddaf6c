"""Model calls Strands streams whatever ``model.streaming`` says: Anthropic and Ollama.

Strands' Anthropic and Ollama model classes always stream. With ``streaming: false``
each turn is one plain request instead (some proxies and gateways take no streams):

* **Anthropic**: the model's client answers ``messages.stream(...)`` with one
  ``messages.create(...)``, whose reply is replayed as the stream events Strands reads.
* **Ollama**: the model's ``stream`` sends ``stream: false`` and reads the one reply.
  Streaming or not, the reply's ``thinking`` (``model.thinking``) becomes a reasoning
  block before the text, which Strands' own Ollama model drops; it is not sent back.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

__all__ = ["ollama_turns", "plain_anthropic"]


def plain_anthropic(model: Any) -> None:
    """Make each turn of the Anthropic ``model`` one plain ``messages.create`` request."""
    messages = model.client.messages

    def stream(**request: Any) -> _PlainAnthropic:
        return _PlainAnthropic(messages.create, request)

    messages.stream = stream


class _PlainAnthropic:
    """One plain Messages API reply, read as the SDK's message stream: the events a
    stream of the same reply would have carried, then the reply as its final message."""

    def __init__(self, create: Any, request: dict[str, Any]) -> None:
        self._create = create
        self._request = request
        self._message: Any = None

    async def __aenter__(self) -> _PlainAnthropic:
        self._message = await self._create(**self._request)
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def get_final_message(self) -> Any:
        return self._message

    def __aiter__(self) -> AsyncIterator[_Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[_Event]:
        message = self._message
        yield _Event({"type": "message_start", "message": {"role": "assistant"}})
        for index, block in enumerate(message.content):
            whole = block.model_dump()
            kind = whole["type"]
            deltas: list[dict[str, Any]] = []
            if kind == "text":
                start, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": whole["text"]}]
            elif kind == "thinking":
                start = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [
                    {"type": "thinking_delta", "thinking": whole["thinking"]},
                    {"type": "signature_delta", "signature": whole.get("signature") or ""},
                ]
            elif kind == "tool_use":
                start = {**whole, "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": json.dumps(whole["input"])}]
            else:  # a server tool's block: Strands logs it and skips it
                start = whole
            yield _Event({"type": "content_block_start", "index": index, "content_block": start})
            for delta in deltas:
                yield _Event({"type": "content_block_delta", "index": index, "delta": delta})
            yield _Event({"type": "content_block_stop", "index": index})
        yield _Event({"type": "message_stop"}, message=SimpleNamespace(stop_reason=message.stop_reason))


class _Event:
    """One stream event as Strands reads it: ``type``, ``index``, ``content_block``,
    ``message``, and ``model_dump()`` (a fresh dict each time: Strands changes it)."""

    def __init__(self, payload: dict[str, Any], message: Any = None) -> None:
        self._payload = payload
        self.type = payload["type"]
        self.index = payload.get("index")
        self.content_block = SimpleNamespace(**payload.get("content_block", {"type": None}))
        self.message = message

    def model_dump(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._payload))


def ollama_turns(model: Any, streaming: bool) -> None:
    """Give the Ollama ``model`` the model call of the module docstring."""
    model.stream = functools.partial(_ollama_stream, model, streaming)


async def _ollama_stream(
    model: Any,
    streaming: bool,
    messages: Any,
    tool_specs: Any = None,
    system_prompt: str | None = None,
    **kwargs: Any,
) -> AsyncIterator[dict[str, Any]]:
    """Strands' Ollama model call, but the request streams only when ``streaming``,
    and the reply's ``thinking`` is a reasoning block of its own."""
    import ollama
    from strands.types.exceptions import ContextWindowOverflowException

    chunk = model.format_chunk
    # the turn's reasoning stays in the session, not in what goes back (Strands' Ollama
    # model cannot write it, and Ollama needs none of it)
    messages = [{**m, "content": [c for c in m["content"] if "reasoningContent" not in c]} for m in messages]
    request = {**model.format_request(messages, tool_specs, system_prompt), "stream": streaming}
    client = ollama.AsyncClient(model.host, **model.client_args)
    event = None
    reasoning = text = tool_requested = False
    try:
        response = await client.chat(**request)
        yield chunk({"chunk_type": "message_start"})
        async for event in response if streaming else _one(response):
            thinking = getattr(event.message, "thinking", None)
            if thinking:
                if not reasoning:
                    reasoning = True
                    yield {"contentBlockStart": {"start": {}}}
                yield {"contentBlockDelta": {"delta": {"reasoningContent": {"text": thinking}}}}
            if not (event.message.content or event.message.tool_calls or event.done):
                continue
            if reasoning:  # the reasoning came first, and is over
                reasoning = False
                yield {"contentBlockStop": {}}
            if not text:
                text = True
                yield chunk({"chunk_type": "content_start", "data_type": "text"})
            for tool_call in event.message.tool_calls or []:
                yield chunk({"chunk_type": "content_start", "data_type": "tool", "data": tool_call})
                yield chunk({"chunk_type": "content_delta", "data_type": "tool", "data": tool_call})
                yield chunk({"chunk_type": "content_stop", "data_type": "tool", "data": tool_call})
                tool_requested = True
            yield chunk({"chunk_type": "content_delta", "data_type": "text", "data": event.message.content})
    except ollama.ResponseError as error:
        if any(message in str(error).lower() for message in model.OVERFLOW_MESSAGES):
            raise ContextWindowOverflowException(str(error)) from error
        raise
    if reasoning:
        yield {"contentBlockStop": {}}
    if not text:
        yield chunk({"chunk_type": "content_start", "data_type": "text"})
    yield chunk({"chunk_type": "content_stop", "data_type": "text"})
    stop = "tool_use" if tool_requested else getattr(event, "done_reason", None)
    yield chunk({"chunk_type": "message_stop", "data": stop})
    if event is not None:
        yield chunk({"chunk_type": "metadata", "data": event})


async def _one(reply: Any) -> AsyncIterator[Any]:
    yield reply
