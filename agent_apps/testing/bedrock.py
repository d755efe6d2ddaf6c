"""A real, local fake of the Amazon Bedrock Runtime ``Converse`` API, for offline tests.

:class:`FakeBedrock` is an HTTP server on ``127.0.0.1`` (ephemeral port) that speaks the
wire protocol boto3 uses for ``bedrock-runtime``: ``Converse`` (``POST
/model/{modelId}/converse``, a JSON response) and ``ConverseStream`` (``POST
/model/{modelId}/converse-stream``, an ``application/vnd.amazon.eventstream`` body in the
AWS event-stream binary framing). Real boto3 clients and Strands ``BedrockModel`` talk to
it through ``endpoint_url`` with dummy credentials; signatures are not verified.

It replays **scripted model turns**, one per request, in arrival order::

    with FakeBedrock([
        {"text": "Let me check.", "tool_uses": [{"name": "invoke", "input": {"code": "1+1"}}]},
        {"text": "The answer is 2.", "usage": {"inputTokens": 40, "outputTokens": 6}},
    ]) as fake:
        client = fake.client()                     # boto3 client, no botocore retries
        client.converse(modelId="m", messages=[...])
        fake.requests[0].messages                  # what the model was sent

A **turn** is a mapping (see :class:`Turn`), a plain ``str`` (short for ``{"text": s}``), or
a callable ``(request_body: dict) -> turn`` that can look at the parsed request. The whole
script may also be one callable, called for every request. Keys of a turn:

``text``
    Assistant text. Streamed as several ``contentBlockDelta`` events of ``chunk_size``
    characters.
``reasoning`` / ``reasoning_signature``
    Reasoning text (a ``reasoningContent`` block before the text), and its signature.
``tool_uses``
    ``[{"name": str, "input": dict, "id": str (optional)}]``. The input JSON is streamed in
    ``chunk_size`` pieces. Default ids are ``tooluse_<request#>_<i>`` (deterministic).
``stop_reason``
    Default ``"tool_use"`` when there are tool uses, else ``"end_turn"``.
``usage``
    ``{"inputTokens", "outputTokens"}`` (``totalTokens`` is filled in). Defaults are a rough
    four-characters-per-token estimate of the request and of the turn's output.
``latency_ms``
    ``metrics.latencyMs`` in the response (default 1).
``chunk_size``
    Characters per text/reasoning delta and per tool-input chunk (default: the server's).
``delay``
    Seconds to wait before each event-stream message (default: the server's ``chunk_delay``).
``hang_after``
    Streaming only: send this many event-stream messages, then block until the client
    disconnects, :meth:`FakeBedrock.release` is called (the stream then completes) or the
    server closes. :meth:`FakeBedrock.wait_hanging` tells a test when the stream got there.
``error`` / ``message`` / ``status`` / ``mid_stream``
    Make the turn an error. ``error`` is an error code such as ``"ThrottlingException"``
    (see :data:`ERRORS` for codes, default statuses and messages). The reply is an HTTP error
    with an ``x-amzn-ErrorType`` header and a ``{"message": ...}`` JSON body, which botocore
    turns into ``ClientError`` with ``response["Error"]["Code"] == error``. With
    ``mid_stream`` (the default for ``ModelStreamErrorException``) a ``ConverseStream`` reply
    instead starts normally, streams the turn's content, then sends an exception message
    (``:message-type: exception``) that botocore raises as ``EventStreamError`` with the
    camel-case code, e.g. ``"modelStreamErrorException"``. ``Converse`` always gets the
    HTTP error.

Streams can be paced (``chunk_delay`` / ``delay``) and stalled (``hang_after``) to test
cancellation: :meth:`FakeBedrock.wait_hanging` waits until a stream is stalled,
:meth:`FakeBedrock.release` lets it finish, :meth:`FakeBedrock.wait_streams_ended` waits
until every stream has ended, and :attr:`RecordedRequest.stream_outcome` tells how each
ended (``complete``, ``error``, ``client_disconnected``, ``server_closed``).

Requests for a model id not in ``model_ids`` (when given) get the real service's
``ValidationException`` ("The provided model identifier is invalid.") without using a turn.
When the script runs out, requests get a 400 ``FakeBedrockScriptExhausted`` error.

Every request is recorded in :attr:`FakeBedrock.requests` as a :class:`RecordedRequest`.

Importing this module does not import boto3 or strands; only :meth:`FakeBedrock.client` does.

With Strands, point ``BedrockModel`` at the fake. botocore retries throttling and 5xx
errors on its own (each retry uses a turn); turn that off to let Strands' retry strategy
see every error, and let the fake close the client::

    model = BedrockModel(model_id="m", endpoint_url=fake.endpoint_url, region_name="us-east-1",
                         boto_client_config=Config(retries={"total_max_attempts": 1}))
    fake.track_client(model.client)

Use as a pytest fixture::

    @pytest.fixture
    def bedrock(monkeypatch):
        for name, value in dummy_aws_env().items():
            monkeypatch.setenv(name, value)
        with FakeBedrock() as fake:
            yield fake

    def test_x(bedrock):
        bedrock.add_turns("hello")
        ...
"""

from __future__ import annotations

import binascii
import json
import select
import socket
import struct
import sys
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, TypedDict
from urllib.parse import unquote

__all__ = [
    "ERRORS",
    "FakeBedrock",
    "RecordedRequest",
    "ToolUse",
    "Turn",
    "TurnSource",
    "decode_event_stream",
    "dummy_aws_env",
    "encode_event",
]


# --------------------------------------------------------------------------------------------
# Turn shape
# --------------------------------------------------------------------------------------------


class ToolUse(TypedDict, total=False):
    """A tool call the fake model makes: ``name`` and ``input`` are required."""

    name: str
    input: Any
    id: str


class Turn(TypedDict, total=False):
    """One scripted model reply (every key is optional; see the module docstring)."""

    text: str
    reasoning: str
    reasoning_signature: str
    tool_uses: list[ToolUse]
    stop_reason: str
    usage: dict[str, int]
    latency_ms: int
    chunk_size: int
    delay: float
    hang_after: int
    error: str
    message: str
    status: int
    mid_stream: bool


TurnLike = Turn | Mapping[str, Any] | str
"""A turn mapping, or a ``str`` meaning ``{"text": s}``."""

TurnSource = TurnLike | Callable[[dict[str, Any]], TurnLike]
"""A turn, or a callable that gets the parsed request body and returns one."""

StreamOutcome = Literal["complete", "error", "client_disconnected", "server_closed"]


# Error code -> (default HTTP status, default message, event-stream member name or None).
# Messages follow the real service's wording where it is known.
ERRORS: dict[str, tuple[int, str, str | None]] = {
    "ThrottlingException": (
        429,
        "Too many requests, please wait before trying again.",
        "throttlingException",
    ),
    "ValidationException": (400, "The provided model identifier is invalid.", "validationException"),
    "AccessDeniedException": (
        403,
        "You don't have access to the model with the specified model ID.",
        None,
    ),
    "ResourceNotFoundException": (404, "The requested model was not found.", None),
    "ServiceUnavailableException": (
        503,
        "Bedrock is unable to process your request.",
        "serviceUnavailableException",
    ),
    "InternalServerException": (
        500,
        "The server encountered an internal error while processing the request.",
        "internalServerException",
    ),
    "ModelTimeoutException": (408, "Model has timed out in processing the request.", None),
    "ModelNotReadyException": (429, "Model is not ready to serve inference requests.", None),
    "ModelErrorException": (424, "The model returned an error.", None),
    "ModelStreamErrorException": (
        424,
        "An error occurred while streaming the response. Retry your request.",
        "modelStreamErrorException",
    ),
    "UnrecognizedClientException": (403, "The security token included in the request is invalid.", None),
}

_ERROR_TYPE_SUFFIX = ":http://internal.amazon.com/coral/com.amazon.bedrock/"


# --------------------------------------------------------------------------------------------
# AWS event-stream framing
# --------------------------------------------------------------------------------------------

_HEADER_TYPE_STRING = 7


def _crc32(data: bytes, crc: int = 0) -> int:
    return binascii.crc32(data, crc) & 0xFFFFFFFF


def encode_event(headers: Mapping[str, str], payload: bytes) -> bytes:
    """Encode one AWS event-stream message (string headers only).

    Layout (all integers big-endian)::

        [total length u32][headers length u32][prelude CRC32 u32]
        headers: [name length u8][name][type u8 = 7 (string)][value length u16][value] ...
        [payload][message CRC32 u32 over everything before it]
    """
    encoded_headers = bytearray()
    for name, value in headers.items():
        raw_name = name.encode("utf-8")
        raw_value = value.encode("utf-8")
        encoded_headers += struct.pack("!B", len(raw_name)) + raw_name
        encoded_headers += struct.pack("!BH", _HEADER_TYPE_STRING, len(raw_value)) + raw_value
    total_length = 12 + len(encoded_headers) + len(payload) + 4
    prelude = struct.pack("!II", total_length, len(encoded_headers))
    message = prelude + struct.pack("!I", _crc32(prelude)) + bytes(encoded_headers) + payload
    return message + struct.pack("!I", _crc32(message))


def _event(event_type: str, body: Mapping[str, Any], *, message_type: str = "event") -> bytes:
    """One JSON event-stream message; ``message_type="exception"`` makes ``event_type``
    the exception's name, as the service sends errors that happen mid-stream."""
    kind = ":exception-type" if message_type == "exception" else ":event-type"
    return encode_event(
        {kind: event_type, ":content-type": "application/json", ":message-type": message_type},
        json.dumps(body).encode("utf-8"),
    )


def _exception_event(member: str, body: Mapping[str, Any]) -> bytes:
    return _event(member, body, message_type="exception")


def decode_event_stream(data: bytes) -> list[tuple[dict[str, str], bytes]]:
    """Decode a complete event-stream body into ``(headers, payload)`` pairs.

    A small checker for tests of the encoder (string headers only); it verifies both CRCs.
    """
    messages = []
    offset = 0
    while offset < len(data):
        total, headers_length, prelude_crc = struct.unpack_from("!III", data, offset)
        if _crc32(data[offset : offset + 8]) != prelude_crc:
            raise ValueError("prelude CRC mismatch")
        end = offset + total
        (message_crc,) = struct.unpack_from("!I", data, end - 4)
        if _crc32(data[offset : end - 4]) != message_crc:
            raise ValueError("message CRC mismatch")
        pos = offset + 12
        headers_end = pos + headers_length
        headers: dict[str, str] = {}
        while pos < headers_end:
            name_length = data[pos]
            name = data[pos + 1 : pos + 1 + name_length].decode("utf-8")
            pos += 1 + name_length
            header_type, value_length = struct.unpack_from("!BH", data, pos)
            if header_type != _HEADER_TYPE_STRING:
                raise ValueError(f"unsupported header type {header_type}")
            pos += 3
            headers[name] = data[pos : pos + value_length].decode("utf-8")
            pos += value_length
        messages.append((headers, data[headers_end : end - 4]))
        offset = end
    return messages


# --------------------------------------------------------------------------------------------
# Recorded requests
# --------------------------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One request the fake received.

    ``body`` is the parsed JSON request (``messages``, ``system``, ``toolConfig``,
    ``inferenceConfig``, ``additionalModelRequestFields``...); the model id is in the path,
    not the body. ``turn`` is the scripted turn used (None if none was). For
    ``ConverseStream``, ``events_sent`` counts the event-stream messages sent and
    ``stream_outcome`` says how the reply ended (set with the last message).
    """

    operation: Literal["Converse", "ConverseStream"]
    model_id: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    request_id: str
    turn: dict[str, Any] | None = None
    stream_outcome: StreamOutcome | None = None
    events_sent: int = 0

    @property
    def has_authorization(self) -> bool:
        """Whether an ``Authorization`` header was sent (SigV4 or a bearer API key)."""
        return any(name.lower() == "authorization" for name in self.headers)

    @property
    def auth_scheme(self) -> str | None:
        """First word of the ``Authorization`` header (``AWS4-HMAC-SHA256``, ``Bearer``), if any."""
        for name, value in self.headers.items():
            if name.lower() == "authorization":
                return value.split(" ", 1)[0]
        return None

    @property
    def streaming(self) -> bool:
        return self.operation == "ConverseStream"

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def system(self) -> list[dict[str, Any]] | None:
        return self.body.get("system")

    @property
    def tool_config(self) -> dict[str, Any] | None:
        return self.body.get("toolConfig")

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered to the model (from ``toolConfig.tools[].toolSpec``)."""
        tools = (self.tool_config or {}).get("tools", [])
        return [t["toolSpec"]["name"] for t in tools if "toolSpec" in t]

    @property
    def inference_config(self) -> dict[str, Any] | None:
        return self.body.get("inferenceConfig")


# --------------------------------------------------------------------------------------------
# Turn rendering
# --------------------------------------------------------------------------------------------


def _chunks(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _estimate_tokens(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return max(1, len(text) // 4)


@dataclass
class _Rendered:
    """A turn turned into response content, shared by Converse and ConverseStream."""

    reasoning: str | None
    reasoning_signature: str | None
    text: str | None
    tool_uses: list[dict[str, Any]]
    stop_reason: str
    usage: dict[str, int]
    latency_ms: int


def _render(turn: Mapping[str, Any], body: Mapping[str, Any], request_number: int) -> _Rendered:
    tool_uses = []
    for index, tool_use in enumerate(turn.get("tool_uses") or []):
        tool_uses.append(
            {
                "toolUseId": tool_use.get("id") or f"tooluse_{request_number}_{index}",
                "name": tool_use["name"],
                "input": tool_use.get("input", {}),
            }
        )
    text = turn.get("text")
    reasoning = turn.get("reasoning")
    stop_reason = turn.get("stop_reason") or ("tool_use" if tool_uses else "end_turn")
    usage = dict(turn.get("usage") or {})
    if "inputTokens" not in usage:
        usage["inputTokens"] = _estimate_tokens(
            {k: body.get(k) for k in ("system", "messages", "toolConfig")}
        )
    if "outputTokens" not in usage:
        usage["outputTokens"] = _estimate_tokens((reasoning or "") + (text or "") + json.dumps(tool_uses))
    usage.setdefault("totalTokens", usage["inputTokens"] + usage["outputTokens"])
    return _Rendered(
        reasoning=reasoning,
        reasoning_signature=turn.get("reasoning_signature"),
        text=text,
        tool_uses=tool_uses,
        stop_reason=stop_reason,
        usage=usage,
        latency_ms=int(turn.get("latency_ms", 1)),
    )


def _converse_body(rendered: _Rendered) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if rendered.reasoning is not None:
        reasoning_text: dict[str, Any] = {"text": rendered.reasoning}
        if rendered.reasoning_signature is not None:
            reasoning_text["signature"] = rendered.reasoning_signature
        content.append({"reasoningContent": {"reasoningText": reasoning_text}})
    if rendered.text is not None:
        content.append({"text": rendered.text})
    content.extend({"toolUse": tool_use} for tool_use in rendered.tool_uses)
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": rendered.stop_reason,
        "usage": rendered.usage,
        "metrics": {"latencyMs": rendered.latency_ms},
    }


def _content_events(rendered: _Rendered, chunk_size: int) -> list[bytes]:
    """``messageStart`` and the content blocks, as the real service streams them.

    Like the real service, text and reasoning blocks have no ``contentBlockStart``; tool-use
    blocks do.
    """
    events = [_event("messageStart", {"role": "assistant"})]
    index = 0
    if rendered.reasoning is not None:
        for piece in _chunks(rendered.reasoning, chunk_size):
            events.append(
                _event(
                    "contentBlockDelta",
                    {"contentBlockIndex": index, "delta": {"reasoningContent": {"text": piece}}},
                )
            )
        if rendered.reasoning_signature is not None:
            events.append(
                _event(
                    "contentBlockDelta",
                    {
                        "contentBlockIndex": index,
                        "delta": {"reasoningContent": {"signature": rendered.reasoning_signature}},
                    },
                )
            )
        events.append(_event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if rendered.text is not None:
        for piece in _chunks(rendered.text, chunk_size):
            events.append(_event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}}))
        events.append(_event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    for tool_use in rendered.tool_uses:
        events.append(
            _event(
                "contentBlockStart",
                {
                    "contentBlockIndex": index,
                    "start": {"toolUse": {"toolUseId": tool_use["toolUseId"], "name": tool_use["name"]}},
                },
            )
        )
        for piece in _chunks(json.dumps(tool_use["input"]), chunk_size):
            events.append(
                _event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}})
            )
        events.append(_event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    return events


def _final_events(rendered: _Rendered) -> list[bytes]:
    return [
        _event("messageStop", {"stopReason": rendered.stop_reason}),
        _event("metadata", {"usage": rendered.usage, "metrics": {"latencyMs": rendered.latency_ms}}),
    ]


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    # Handler threads are joined by server_close(), so close() leaves no thread behind.
    daemon_threads = False
    block_on_close = True
    fake: FakeBedrock


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    server_version = "FakeBedrock/1.0"
    # Small responses must not wait ~40 ms for TCP's Nagle buffering (a real endpoint
    # is not that slow, and the tests and benchmarks would measure the wait).
    disable_nagle_algorithm = True

    # -- plumbing --------------------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _send_json(self, status: int, body: Mapping[str, Any], headers: Mapping[str, str]) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, code: str, message: str, status: int, request_id: str) -> None:
        self._send_json(
            status,
            {"message": message},
            {"x-amzn-ErrorType": code + _ERROR_TYPE_SUFFIX, "x-amzn-RequestId": request_id},
        )

    # -- requests --------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._unknown_operation()

    def do_PUT(self) -> None:  # noqa: N802 - stdlib name
        self._unknown_operation()

    def _unknown_operation(self, *, body_read: bool = False) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length and not body_read:
            self.rfile.read(length)
        self._send_error("UnknownOperationException", f"Unknown operation {self.command} {self.path}", 404, "")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        fake = self.server.fake
        request_id = str(uuid.uuid4())
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        parts = path.split("/")
        # "/model/{modelId}/converse" -> ["", "model", modelId, "converse"]
        if len(parts) != 4 or parts[1] != "model" or parts[3] not in ("converse", "converse-stream"):
            self._unknown_operation(body_read=True)
            return
        operation: Literal["Converse", "ConverseStream"] = (
            "ConverseStream" if parts[3] == "converse-stream" else "Converse"
        )
        model_id = unquote(parts[2])
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_error("SerializationException", "Request body is not valid JSON.", 400, request_id)
            return
        record = RecordedRequest(
            operation=operation,
            model_id=model_id,
            path=path,
            body=body,
            headers=dict(self.headers.items()),
            request_id=request_id,
        )
        fake._record(record)

        if fake.model_ids is not None and model_id not in fake.model_ids:
            status, message, _ = ERRORS["ValidationException"]
            self._send_error("ValidationException", message, status, request_id)
            return

        turn = fake._next_turn(body)
        if turn is None:
            self._send_error(
                "FakeBedrockScriptExhausted",
                f"FakeBedrock: no scripted turn left for request #{len(fake.requests)} ({operation} {model_id}).",
                400,
                request_id,
            )
            return
        record.turn = dict(turn)

        error = turn.get("error")
        mid_stream = bool(turn.get("mid_stream", error == "ModelStreamErrorException"))
        if error and not (operation == "ConverseStream" and mid_stream):
            status, message, _ = ERRORS.get(error, (400, error, None))
            self._send_error(
                error, turn.get("message") or message, int(turn.get("status") or status), request_id
            )
            return

        rendered = _render(turn, body, len(fake.requests))
        if operation == "Converse":
            self._send_json(200, _converse_body(rendered), {"x-amzn-RequestId": request_id})
            return
        self._stream(record, turn, rendered, request_id)

    # -- ConverseStream --------------------------------------------------------------------

    def _stream(
        self, record: RecordedRequest, turn: Mapping[str, Any], rendered: _Rendered, request_id: str
    ) -> None:
        fake = self.server.fake
        events = _content_events(rendered, int(turn.get("chunk_size") or fake.chunk_size))
        error = turn.get("error")
        if error:
            _, default_message, member = ERRORS.get(error, (400, error, None))
            member = member or (error[:1].lower() + error[1:])
            exception_body: dict[str, Any] = {"message": turn.get("message") or default_message}
            if member == "modelStreamErrorException":
                exception_body["originalStatusCode"] = int(turn.get("status") or 424)
                exception_body["originalMessage"] = exception_body["message"]
            events.append(_exception_event(member, exception_body))
        else:
            events.extend(_final_events(rendered))

        delay = float(turn.get("delay", fake.chunk_delay))
        hang_after = turn.get("hang_after")

        outcome: StreamOutcome = "error" if error else "complete"
        fake._stream_started()  # before the headers, so wait_streams_ended() can't miss it
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.amazon.eventstream")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("x-amzn-RequestId", request_id)
            self.end_headers()
            for number, data in enumerate(events):
                if hang_after is not None and number == int(hang_after):
                    hang_result = self._hang(record)
                    if hang_result is not None:
                        outcome = hang_result
                        break
                if delay > 0 and fake._stopping.wait(delay):
                    outcome = "server_closed"
                    break
                # Bookkeeping first: the client may act on this message before write() returns.
                record.events_sent += 1
                if number == len(events) - 1:
                    record.stream_outcome = outcome
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            else:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:  # BrokenPipeError, ConnectionResetError...
            outcome = "server_closed" if fake._stopping.is_set() else "client_disconnected"
        finally:
            record.stream_outcome = outcome
            fake._stream_ended()
        if outcome in ("client_disconnected", "server_closed"):
            # The chunked body was cut short: the connection cannot be reused.
            self.close_connection = True

    def _hang(self, record: RecordedRequest) -> StreamOutcome | None:
        """Block until the client disconnects, the test releases the stream, or the server closes.

        Returns the outcome that ends the stream, or None to go on streaming (released).
        """
        fake = self.server.fake
        fake._hang_started()
        try:
            while True:
                if fake._stopping.is_set():
                    return "server_closed"
                if fake._released.is_set():
                    return None
                readable, _, _ = select.select([self.connection], [], [], 0.02)
                if readable:
                    try:
                        peek = self.connection.recv(1, socket.MSG_PEEK)
                    except OSError:
                        peek = b""
                    if not peek:
                        # close() shuts connections down too: tell the two apart.
                        return "server_closed" if fake._stopping.is_set() else "client_disconnected"
                    # The client sent data (it should not); don't spin on it.
                    fake._stopping.wait(0.02)
        finally:
            fake._hang_ended()


class FakeBedrock:
    """A local fake Amazon Bedrock Runtime server replaying scripted model turns.

    Args:
        turns: The script: a sequence of turns (mapping, ``str``, or callable getting the
            request body), or one callable used for every request. More turns can be added
            later with :meth:`add_turns`.
        model_ids: If given, only these model ids are accepted; others get the real service's
            ``ValidationException`` ("The provided model identifier is invalid.").
        chunk_size: Default characters per streamed text delta / tool-input chunk.
        chunk_delay: Default seconds to wait before each event-stream message.
        host: Interface to bind (default ``127.0.0.1``); the port is ephemeral.

    Attributes:
        endpoint_url: ``http://127.0.0.1:<port>``, for ``endpoint_url=`` of boto3/Strands.
        requests: Every request received, in order (:class:`RecordedRequest`).
    """

    def __init__(
        self,
        turns: Iterable[TurnSource] | Callable[[dict[str, Any]], TurnLike] | None = None,
        *,
        model_ids: Iterable[str] | None = None,
        chunk_size: int = 8,
        chunk_delay: float = 0.0,
        host: str = "127.0.0.1",
    ) -> None:
        self._lock = threading.Lock()
        self._script: list[TurnSource] = []
        self._responder: Callable[[dict[str, Any]], TurnLike] | None = None
        if callable(turns):
            self._responder = turns
        elif turns is not None:
            self._script.extend(turns)
        self.model_ids: frozenset[str] | None = frozenset(model_ids) if model_ids is not None else None
        self.chunk_size = chunk_size
        self.chunk_delay = chunk_delay
        self.requests: list[RecordedRequest] = []
        self.server_errors: list[BaseException] = []
        self._connections: set[socket.socket] = set()
        self._clients: list[Any] = []
        self._stopping = threading.Event()
        self._released = threading.Event()
        self._hang_cond = threading.Condition(self._lock)
        self._hanging = 0
        self._hangs_total = 0
        self._streams_open = 0
        self._closed = False

        self._server = _HTTPServer((host, 0), _Handler)
        self._server.fake = self
        fake = self

        def handle_error(request: Any, client_address: Any) -> None:
            error = sys.exc_info()[1]
            if error is not None and not isinstance(error, (ConnectionError, OSError)):
                fake.server_errors.append(error)

        self._server.handle_error = handle_error  # type: ignore[method-assign]
        port = self._server.server_address[1]
        self.endpoint_url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"FakeBedrock:{port}", daemon=True
        )
        self._thread.start()

    # -- script ----------------------------------------------------------------------------

    def add_turns(self, *turns: TurnSource) -> FakeBedrock:
        """Append turns to the script (returns self)."""
        with self._lock:
            self._script.extend(turns)
        return self

    @property
    def remaining_turns(self) -> int:
        """Scripted turns not used yet (0 when the script is a single callable)."""
        with self._lock:
            return len(self._script)

    def _next_turn(self, body: dict[str, Any]) -> Mapping[str, Any] | None:
        with self._lock:
            if self._script:
                source: TurnSource | None = self._script.pop(0)
            else:
                source = self._responder
        if source is None:
            return None
        turn = source(body) if callable(source) else source
        if isinstance(turn, str):
            return {"text": turn}
        return turn

    def _record(self, record: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(record)

    # -- hanging streams -------------------------------------------------------------------

    def _hang_started(self) -> None:
        with self._hang_cond:
            self._hanging += 1
            self._hangs_total += 1
            self._hang_cond.notify_all()

    def _hang_ended(self) -> None:
        with self._hang_cond:
            self._hanging -= 1
            self._hang_cond.notify_all()

    def _stream_started(self) -> None:
        with self._hang_cond:
            self._streams_open += 1

    def _stream_ended(self) -> None:
        with self._hang_cond:
            self._streams_open -= 1
            self._hang_cond.notify_all()

    def wait_hanging(self, timeout: float = 10.0, count: int = 1) -> bool:
        """Wait until ``count`` streams (in total) have reached their ``hang_after`` point.

        Returns False on timeout.
        """
        with self._hang_cond:
            return self._hang_cond.wait_for(lambda: self._hangs_total >= count, timeout)

    def wait_streams_ended(self, timeout: float = 10.0) -> bool:
        """Wait until every ``ConverseStream`` reply so far has ended (any outcome)."""
        with self._hang_cond:
            return self._hang_cond.wait_for(lambda: self._streams_open == 0, timeout)

    @property
    def hanging(self) -> int:
        """Number of streams currently blocked at their ``hang_after`` point."""
        with self._lock:
            return self._hanging

    def release(self) -> None:
        """Let hung streams (and later ones) go on and complete normally."""
        self._released.set()

    # -- clients ---------------------------------------------------------------------------

    def client(self, *, retries: int = 1, read_timeout: float = 30, **kwargs: Any) -> Any:
        """A real boto3 ``bedrock-runtime`` client for this server (imports boto3).

        Uses dummy credentials and ``us-east-1`` unless given in ``kwargs``. ``retries`` is
        botocore's ``total_max_attempts`` (1 = botocore does not retry, so every scripted
        error reaches the caller). The client is closed by :meth:`close`.
        """
        import boto3
        from botocore.config import Config

        kwargs.setdefault("region_name", "us-east-1")
        kwargs.setdefault("aws_access_key_id", "test")
        kwargs.setdefault("aws_secret_access_key", "test")
        kwargs.setdefault(
            "config",
            Config(retries={"mode": "standard", "total_max_attempts": retries}, read_timeout=read_timeout),
        )
        return self.track_client(boto3.client("bedrock-runtime", endpoint_url=self.endpoint_url, **kwargs))

    def track_client(self, client: Any) -> Any:
        """Have :meth:`close` also close ``client`` (e.g. a Strands ``BedrockModel().client``).

        Unclosed boto3 clients leave pooled sockets to the garbage collector, which reports
        them as ``ResourceWarning``. Returns ``client``.
        """
        with self._lock:
            self._clients.append(client)
        return client

    # -- lifecycle -------------------------------------------------------------------------

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def close(self) -> None:
        """Stop the server: end hung and paced streams, drop connections, join all threads."""
        if self._closed:
            return
        self._closed = True
        self._stopping.set()
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()  # closes pooled client sockets (no ResourceWarning later)
        self._server.shutdown()  # stops serve_forever, no new connections are accepted
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            # Wakes handlers blocked reading the next request on a keep-alive connection.
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()  # closes the socket and joins the handler threads
        self._thread.join()

    def __enter__(self) -> FakeBedrock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FakeBedrock({self.endpoint_url!r}, requests={len(self.requests)}, remaining={self.remaining_turns})"


def dummy_aws_env(region: str = "us-east-1") -> dict[str, str]:
    """Environment variables for offline AWS clients: dummy keys, no config files, no IMDS.

    Set them (e.g. with ``monkeypatch.setenv``) so boto3 never finds real credentials.
    ``AWS_PROFILE`` should be removed as well (``monkeypatch.delenv("AWS_PROFILE", raising=False)``).
    """
    return {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_SESSION_TOKEN": "test",
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": "/nonexistent/agent-apps-fake-bedrock/config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/agent-apps-fake-bedrock/credentials",
    }
