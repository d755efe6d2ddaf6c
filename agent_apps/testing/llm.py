"""Real, local fakes of the common model APIs, for offline tests of model providers.

Each is an HTTP server on ``127.0.0.1`` (ephemeral port) that speaks one API's wire
protocol, streaming included, so the API's own client library talks to it unchanged:

=================  ===========================  ===============================================
fake               request                      streamed reply
=================  ===========================  ===============================================
:class:`FakeAnthropic`  ``POST /v1/messages``   server-sent events (``message_start``,
                                                ``content_block_delta`` ... ``message_stop``)
:class:`FakeOpenAI`     ``POST .../chat/completions``  server-sent ``chat.completion.chunk``
                                                events, then ``data: [DONE]``
:class:`FakeOllama`     ``POST /api/chat``      newline-delimited JSON, the last with
                                                ``done: true`` and the token counts
=================  ===========================  ===============================================

They replay **scripted model turns**, one per request, exactly like
:class:`~agent_apps.testing.bedrock.FakeBedrock` (the same turn keys: ``text``,
``reasoning``, ``tool_uses``, ``stop_reason``, ``usage``, ``chunk_size``, ``delay``,
``hang_after``, ``error``, ``message``, ``status``, ``mid_stream``, and the hostile
``flood``, ``trickle``, ``no_stop``, ``raw_usage``, ``redirect``), and record every
request (:class:`ModelRequest`: the parsed body, headers, how its stream ended)::

    with FakeOpenAI(["Hello!"]) as fake:
        client = openai.OpenAI(base_url=fake.base_url, api_key="k")
        client.chat.completions.create(model="m", messages=[...])
        fake.requests[0].messages

**Errors** are named by kind, the same for every fake, and sent in that API's own shape
(status code and JSON body, as the real service sends them), so the client library raises
its real exception:

==================  ======  ===================================================
``error``           status  meaning
==================  ======  ===================================================
``rate_limit``      429     too many requests (retry later)
``overloaded``      529 / 503  the service is overloaded (retry later)
``server_error``    500     an internal error (retry later)
``context_too_long`` 400    the conversation outgrew the model's context window
``bad_key``         401     a missing or wrong API key
``not_found``       404     an unknown model
``bad_request``     400     anything else the request got wrong
==================  ======  ===================================================

With ``mid_stream: true`` a streamed reply starts normally, streams the turn's content,
then reports the error in-stream (an SSE ``error`` event, or an ``{"error": ...}`` line).
``api_key`` makes the fake check the key as the real service does (``bad_key`` otherwise);
``model_ids`` accepts only those models (``not_found`` otherwise).

Importing this module imports no client library.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ._scripted import (
    Rendered,
    ScriptedHandler,
    ScriptedServer,
    StreamOutcome,
    TurnLike,
    TurnSource,
    chunks,
    flood_text,
    render,
)

__all__ = ["ERROR_KINDS", "FakeAnthropic", "FakeOllama", "FakeOpenAI", "ModelRequest"]

#: The error kinds a turn's ``error`` may name.
ERROR_KINDS = ("rate_limit", "overloaded", "server_error", "context_too_long", "bad_key", "not_found", "bad_request")


@dataclass
class ModelRequest:
    """One request a fake received: ``body`` is the parsed JSON request."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    request_id: str
    turn: dict[str, Any] | None = None
    stream_outcome: StreamOutcome | None = None
    events_sent: int = 0

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def streaming(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def system(self) -> Any:
        """Anthropic's ``system`` field, else the content of the first system message."""
        if "system" in self.body:
            return self.body["system"]
        return next((m.get("content") for m in self.messages if m.get("role") == "system"), None)

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered to the model (any of the three APIs' shapes)."""
        return [t.get("function", t).get("name") for t in self.body.get("tools") or []]


# -- the APIs ---------------------------------------------------------------------------------


class _Api:
    """How one API routes, frames and fails. Subclasses fill in the blanks."""

    name: ClassVar[str]
    #: kind -> (status, error type or code, default message)
    errors: ClassVar[dict[str, tuple[int, str, str]]]

    def route(self, path: str) -> bool:
        raise NotImplementedError

    def authorized(self, headers: Mapping[str, str], api_key: str) -> bool:
        given = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        return given == f"Bearer {api_key}"

    def error_body(self, kind: str, message: str) -> Any:
        raise NotImplementedError

    def response(self, rendered: Rendered, model: str) -> dict[str, Any]:
        raise NotImplementedError

    def stream(
        self, rendered: Rendered, model: str, size: int, body: Mapping[str, Any]
    ) -> tuple[list[bytes], list[bytes]]:
        """The streamed reply: the content frames, then the frames that end it."""
        raise NotImplementedError

    def stream_error(self, kind: str, message: str) -> bytes:
        raise NotImplementedError

    def flood_frame(self, rendered: Rendered, model: str, text: str) -> bytes:
        """One more text delta, as a ``flood`` turn sends forever."""
        raise NotImplementedError

    content_type: ClassVar[str] = "text/event-stream"
    #: Whether a request without ``stream`` gets a streamed reply.
    streams_by_default: ClassVar[bool] = False


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


class _Anthropic(_Api):
    name = "Anthropic"
    errors: ClassVar[dict[str, tuple[int, str, str]]] = {
        "rate_limit": (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
        "overloaded": (529, "overloaded_error", "Overloaded"),
        "server_error": (500, "api_error", "Internal server error"),
        "context_too_long": (400, "invalid_request_error", "prompt is too long: 213462 tokens > 200000 maximum"),
        "bad_key": (401, "authentication_error", "invalid x-api-key"),
        "not_found": (404, "not_found_error", "model: {model}"),
        "bad_request": (400, "invalid_request_error", "invalid request"),
    }
    _STOP = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}

    def route(self, path: str) -> bool:
        return path.endswith("/v1/messages")

    def authorized(self, headers: Mapping[str, str], api_key: str) -> bool:
        given = next((v for k, v in headers.items() if k.lower() == "x-api-key"), None)
        return given == api_key or super().authorized(headers, api_key)

    def error_body(self, kind: str, message: str) -> Any:
        return {"type": "error", "error": {"type": self.errors[kind][1], "message": message}}

    def _blocks(self, rendered: Rendered) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if rendered.reasoning is not None:
            blocks.append(
                {"type": "thinking", "thinking": rendered.reasoning, "signature": rendered.reasoning_signature or "sig"}
            )
        if rendered.text is not None:
            blocks.append({"type": "text", "text": rendered.text})
        for use in rendered.tool_uses:
            blocks.append({"type": "tool_use", "id": use["toolUseId"], "name": use["name"], "input": use["input"]})
        return blocks

    def _message(self, rendered: Rendered, model: str, content: list[Any], stop: str | None) -> dict[str, Any]:
        tokens_in, tokens_out = rendered.counts()
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": tokens_in, "output_tokens": 0 if stop is None else tokens_out},
        }

    def response(self, rendered: Rendered, model: str) -> dict[str, Any]:
        stop = self._STOP.get(rendered.stop_reason, rendered.stop_reason)
        return self._message(rendered, model, self._blocks(rendered), stop)

    def stream(
        self, rendered: Rendered, model: str, size: int, body: Mapping[str, Any]
    ) -> tuple[list[bytes], list[bytes]]:
        frames = [_sse({"type": "message_start", "message": self._message(rendered, model, [], None)}, "message_start")]
        for index, block in enumerate(self._blocks(rendered)):
            kind = block["type"]
            start = {"thinking": {"type": "thinking", "thinking": ""}, "text": {"type": "text", "text": ""}}.get(
                kind, {**block, "input": {}}
            )
            frames.append(
                _sse({"type": "content_block_start", "index": index, "content_block": start}, "content_block_start")
            )
            if kind == "thinking":
                deltas = [{"type": "thinking_delta", "thinking": p} for p in chunks(block["thinking"], size)]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            elif kind == "text":
                deltas = [{"type": "text_delta", "text": p} for p in chunks(block["text"], size)]
            else:
                deltas = [
                    {"type": "input_json_delta", "partial_json": p} for p in chunks(json.dumps(block["input"]), size)
                ]
            for delta in deltas:
                frames.append(
                    _sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
                )
            frames.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        stop = self._STOP.get(rendered.stop_reason, rendered.stop_reason)
        ending: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": rendered.counts()[1]},
        }
        return frames, [_sse(ending, "message_delta"), _sse({"type": "message_stop"}, "message_stop")]

    def stream_error(self, kind: str, message: str) -> bytes:
        return _sse(self.error_body(kind, message), "error")

    def flood_frame(self, rendered: Rendered, model: str, text: str) -> bytes:
        index = 1 if rendered.reasoning is not None else 0
        delta = {"type": "text_delta", "text": text}
        return _sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")


class _OpenAI(_Api):
    name = "OpenAI"
    errors: ClassVar[dict[str, tuple[int, str, str]]] = {
        "rate_limit": (429, "rate_limit_exceeded", "Rate limit reached for requests. Please try again in 20ms."),
        "overloaded": (503, "server_error", "The engine is currently overloaded, please try again later."),
        "server_error": (
            500,
            "server_error",
            "The server had an error while processing your request. Sorry about that!",
        ),
        "context_too_long": (
            400,
            "context_length_exceeded",
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 "
            "tokens. Please reduce the length of the messages.",
        ),
        "bad_key": (
            401,
            "invalid_api_key",
            "Incorrect API key provided. You can find your API key in your account settings.",
        ),
        "not_found": (404, "model_not_found", "The model `{model}` does not exist or you do not have access to it."),
        "bad_request": (400, "invalid_request_error", "invalid request"),
    }
    _STOP = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}

    def route(self, path: str) -> bool:
        return path.endswith("/chat/completions")

    def error_body(self, kind: str, message: str) -> Any:
        code = self.errors[kind][1]
        kind_type = (
            "requests"
            if kind == "rate_limit"
            else ("server_error" if code == "server_error" else "invalid_request_error")
        )
        return {"error": {"message": message, "type": kind_type, "param": None, "code": code}}

    def _calls(self, rendered: Rendered) -> list[dict[str, Any]]:
        return [
            {
                "id": use["toolUseId"],
                "type": "function",
                "function": {"name": use["name"], "arguments": json.dumps(use["input"])},
            }
            for use in rendered.tool_uses
        ]

    def _usage(self, rendered: Rendered) -> dict[str, Any]:
        """OpenAI's usage: ``prompt_tokens`` counts cached tokens too, and
        ``prompt_tokens_details`` says how many of them were cache reads and writes."""
        tokens_in, tokens_out = rendered.counts()
        cached = rendered.cache_read_tokens + rendered.cache_write_tokens
        prompt = tokens_in + cached if rendered.raw_usage is None else tokens_in
        total = rendered.input_tokens + cached + rendered.output_tokens
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": tokens_out, "total_tokens": total}
        if cached:
            usage["prompt_tokens_details"] = {
                "cached_tokens": rendered.cache_read_tokens,
                "cache_write_tokens": rendered.cache_write_tokens,
            }
        return usage

    def response(self, rendered: Rendered, model: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": rendered.text}
        if rendered.reasoning is not None:
            message["reasoning_content"] = rendered.reasoning
        if rendered.tool_uses:
            message["tool_calls"] = self._calls(rendered)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": self._STOP.get(rendered.stop_reason, "stop")}
            ],
            "usage": self._usage(rendered),
        }

    def stream(
        self, rendered: Rendered, model: str, size: int, body: Mapping[str, Any]
    ) -> tuple[list[bytes], list[bytes]]:
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

        frames = [chunk({"role": "assistant", "content": ""})]
        for piece in chunks(rendered.reasoning, size) if rendered.reasoning is not None else ():
            frames.append(chunk({"reasoning_content": piece}))
        for piece in chunks(rendered.text, size) if rendered.text is not None else ():
            frames.append(chunk({"content": piece}))
        for index, call in enumerate(self._calls(rendered)):
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            frames.append(chunk({"tool_calls": [head]}))
            for piece in chunks(call["function"]["arguments"], size):
                frames.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        ending = [chunk({}, self._STOP.get(rendered.stop_reason, "stop"))]
        if (body.get("stream_options") or {}).get("include_usage"):
            ending.append(_sse({**base, "choices": [], "usage": self._usage(rendered)}))
        ending.append(_sse("[DONE]"))
        return frames, ending

    def stream_error(self, kind: str, message: str) -> bytes:
        return _sse(self.error_body(kind, message))

    def flood_frame(self, rendered: Rendered, model: str, text: str) -> bytes:
        chunk = {"id": "chatcmpl-flood", "object": "chat.completion.chunk", "created": 0, "model": model}
        return _sse({**chunk, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})


class _Ollama(_Api):
    name = "Ollama"
    content_type = "application/x-ndjson"
    streams_by_default = True
    errors: ClassVar[dict[str, tuple[int, str, str]]] = {
        "rate_limit": (429, "", "too many requests"),
        "overloaded": (503, "", "server busy, please try again.  maximum pending requests exceeded"),
        "server_error": (500, "", "an error was encountered while running the model"),
        "context_too_long": (400, "", "the input length exceeds the context length"),
        "bad_key": (401, "", "unauthorized"),
        "not_found": (404, "", 'model "{model}" not found, try pulling it first'),
        "bad_request": (400, "", "invalid request"),
    }
    _STOP = {"end_turn": "stop", "tool_use": "stop", "max_tokens": "length"}

    def route(self, path: str) -> bool:
        return path.endswith("/api/chat")

    def error_body(self, kind: str, message: str) -> Any:
        return {"error": message}

    def _line(self, model: str, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
        created = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        return {"model": model, "created_at": created, "message": {"role": "assistant", **message}, **extra}

    def _done(self, rendered: Rendered) -> dict[str, Any]:
        nanos = rendered.latency_ms * 1_000_000
        tokens_in, tokens_out = rendered.counts()
        return {
            "done": True,
            "done_reason": self._STOP.get(rendered.stop_reason, "stop"),
            "total_duration": nanos,
            "load_duration": 0,
            "prompt_eval_count": tokens_in,
            "prompt_eval_duration": nanos // 2,
            "eval_count": tokens_out,
            "eval_duration": nanos // 2,
        }

    def _calls(self, rendered: Rendered) -> list[dict[str, Any]]:
        return [{"function": {"name": use["name"], "arguments": use["input"]}} for use in rendered.tool_uses]

    def response(self, rendered: Rendered, model: str) -> dict[str, Any]:
        message: dict[str, Any] = {"content": rendered.text or ""}
        if rendered.reasoning is not None:
            message["thinking"] = rendered.reasoning
        if rendered.tool_uses:
            message["tool_calls"] = self._calls(rendered)
        return self._line(model, message, **self._done(rendered))

    def stream(
        self, rendered: Rendered, model: str, size: int, body: Mapping[str, Any]
    ) -> tuple[list[bytes], list[bytes]]:
        def line(message: dict[str, Any], **extra: Any) -> bytes:
            return json.dumps(self._line(model, message, **extra)).encode() + b"\n"

        frames = []
        for piece in chunks(rendered.reasoning, size) if rendered.reasoning is not None else ():
            frames.append(line({"content": "", "thinking": piece}, done=False))
        for piece in chunks(rendered.text, size) if rendered.text is not None else ():
            frames.append(line({"content": piece}, done=False))
        if rendered.tool_uses:  # Ollama sends a message's tool calls whole, in one line
            frames.append(line({"content": "", "tool_calls": self._calls(rendered)}, done=False))
        return frames, [line({"content": ""}, **self._done(rendered))]

    def stream_error(self, kind: str, message: str) -> bytes:
        return json.dumps(self.error_body(kind, message)).encode() + b"\n"

    def flood_frame(self, rendered: Rendered, model: str, text: str) -> bytes:
        return json.dumps(self._line(model, {"content": text}, done=False)).encode() + b"\n"


# -- the server -------------------------------------------------------------------------------


class _Handler(ScriptedHandler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._fail("not_found", f"no such endpoint: GET {self.path}")

    def _fail(self, kind: str, message: str | None = None, status: int | None = None, model: str = "") -> None:
        api: _Api = self.server.fake.api  # type: ignore[attr-defined]
        default_status, _, default_message = api.errors[kind]
        text = (message or default_message).replace("{model}", model)
        self.send_json(
            status or default_status, api.error_body(kind, text), {"request-id": f"req_{uuid.uuid4().hex[:12]}"}
        )

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        fake: _FakeModelAPI = self.server.fake  # type: ignore[assignment]
        api = fake.api
        raw = self.read_body()
        path = self.path.split("?", 1)[0]
        if not api.route(path):
            self._fail("not_found", f"no such endpoint: POST {path}")
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._fail("bad_request", "the request body is not valid JSON")
            return
        record = ModelRequest(path, body, dict(self.headers.items()), f"req_{uuid.uuid4().hex[:12]}")
        fake._record(record)
        model = str(body.get("model") or "")
        if fake.api_key is not None and not api.authorized(record.headers, fake.api_key):
            self._fail("bad_key")
            return
        if fake.model_ids is not None and model not in fake.model_ids:
            self._fail("not_found", model=model)
            return
        turn = fake._next_turn(body)
        if turn is None:
            message = f"{type(fake).__name__}: no scripted turn left for request #{len(fake.requests)}"
            self._fail("bad_request", message)
            return
        record.turn = dict(turn)
        if turn.get("redirect"):
            self.send_redirect(str(turn["redirect"]))
            return
        error = turn.get("error")
        if error is not None and error not in api.errors:
            raise ValueError(f"unknown error kind {error!r} in a scripted turn: use one of {', '.join(ERROR_KINDS)}")
        streaming = body.get("stream", api.streams_by_default)
        if error and not (streaming and turn.get("mid_stream")):
            self._fail(error, turn.get("message"), turn.get("status"), model)
            return
        rendered = render(turn, {k: body.get(k) for k in ("system", "messages", "tools")}, len(fake.requests))
        if not streaming:
            self.send_json(200, api.response(rendered, model), {"request-id": record.request_id})
            return
        size = int(turn.get("chunk_size") or fake.chunk_size)
        frames, ending = api.stream(rendered, model, size, body)
        if error:  # in-stream: the content so far, then the error instead of the ending
            text = (turn.get("message") or api.errors[error][2]).replace("{model}", model)
            ending = [api.stream_error(error, text)]
        def flood(n: int) -> bytes:
            return api.flood_frame(rendered, model, flood_text(n, size))

        self.send_stream(
            record, turn, frames, ending=ending, flood=flood, content_type=api.content_type, error=bool(error)
        )


class _FakeModelAPI(ScriptedServer):
    handler = _Handler
    api: _Api
    requests: list[ModelRequest]

    def __init__(
        self,
        turns: Iterable[TurnSource] | Callable[[dict[str, Any]], TurnLike] | None = None,
        *,
        api_key: str | None = None,
        model_ids: Iterable[str] | None = None,
        chunk_size: int = 8,
        chunk_delay: float = 0.0,
        host: str = "127.0.0.1",
    ) -> None:
        self.api_key = api_key
        self.model_ids: frozenset[str] | None = frozenset(model_ids) if model_ids is not None else None
        super().__init__(turns, chunk_size=chunk_size, chunk_delay=chunk_delay, host=host)
        #: ``http://127.0.0.1:PORT``: the server's root.
        self.url = f"http://{host}:{self.port}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}, requests={len(self.requests)}, remaining={self.remaining_turns})"


class FakeAnthropic(_FakeModelAPI):
    """A local Anthropic Messages API (``POST /v1/messages``, streamed as server-sent
    events when ``stream`` is true). Point the client's ``base_url`` at :attr:`url`; the key
    comes in ``x-api-key``."""

    api = _Anthropic()


class FakeOpenAI(_FakeModelAPI):
    """A local OpenAI Chat Completions API (``POST /v1/chat/completions``, streamed as
    server-sent chunks when ``stream`` is true). Point the client's ``base_url`` at
    :attr:`base_url` (``.../v1``); the key comes as a bearer token."""

    api = _OpenAI()

    @property
    def base_url(self) -> str:
        return self.url + "/v1"


class FakeOllama(_FakeModelAPI):
    """A local Ollama server (``POST /api/chat``, newline-delimited JSON, streamed unless
    ``stream`` is false). Point the client's ``host`` at :attr:`url`."""

    api = _Ollama()
