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

A turn can also play a hostile endpoint (see ``ScriptedHandler.send_stream``):
``flood`` streams text deltas for ever, ``trickle`` writes one byte at a time,
``no_stop`` cuts the reply off before its stop event, ``raw_usage`` sends token counts
as given (``{"input": -1e9, "output": "many"}``), ``redirect`` answers ``307`` to a URL.

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
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

from ._scripted import (
    Rendered,
    ScriptedHandler,
    ScriptedServer,
    StreamOutcome,
    ToolUse,
    Turn,
    TurnLike,
    TurnSource,
    chunks,
    flood_text,
    render,
)

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


def _usage(turn: Mapping[str, Any], rendered: Rendered) -> dict[str, Any]:
    """Converse usage: the turn's own keys (cache counts...) and the token counts."""
    tokens_in, tokens_out = rendered.counts()
    usage = {**dict(turn.get("usage") or {}), "inputTokens": tokens_in, "outputTokens": tokens_out}
    usage.setdefault("totalTokens", rendered.input_tokens + rendered.output_tokens)
    return usage


def _converse_body(rendered: Rendered, usage: dict[str, Any]) -> dict[str, Any]:
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
        "usage": usage,
        "metrics": {"latencyMs": rendered.latency_ms},
    }


def _content_events(rendered: Rendered, chunk_size: int) -> list[bytes]:
    """``messageStart`` and the content blocks, as the real service streams them.

    Like the real service, text and reasoning blocks have no ``contentBlockStart``; tool-use
    blocks do.
    """
    events = [_event("messageStart", {"role": "assistant"})]
    index = 0
    if rendered.reasoning is not None:
        for piece in chunks(rendered.reasoning, chunk_size):
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
        for piece in chunks(rendered.text, chunk_size):
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
        for piece in chunks(json.dumps(tool_use["input"]), chunk_size):
            events.append(
                _event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}})
            )
        events.append(_event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    return events


def _final_events(rendered: Rendered, usage: dict[str, Any]) -> list[bytes]:
    return [
        _event("messageStop", {"stopReason": rendered.stop_reason}),
        _event("metadata", {"usage": usage, "metrics": {"latencyMs": rendered.latency_ms}}),
    ]


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class _Handler(ScriptedHandler):
    server_version = "FakeBedrock/1.0"

    def _send_error(self, code: str, message: str, status: int, request_id: str) -> None:
        self.send_json(
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
        if not body_read:
            self.read_body()
        self._send_error("UnknownOperationException", f"Unknown operation {self.command} {self.path}", 404, "")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        fake: FakeBedrock = self.server.fake  # type: ignore[assignment]
        request_id = str(uuid.uuid4())
        raw = self.read_body()
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
        if turn.get("redirect"):
            self.send_redirect(str(turn["redirect"]))
            return

        error = turn.get("error")
        mid_stream = bool(turn.get("mid_stream", error == "ModelStreamErrorException"))
        if error and not (operation == "ConverseStream" and mid_stream):
            status, message, _ = ERRORS.get(error, (400, error, None))
            self._send_error(
                error, turn.get("message") or message, int(turn.get("status") or status), request_id
            )
            return

        prompt = {k: body.get(k) for k in ("system", "messages", "toolConfig")}
        rendered = render(turn, prompt, len(fake.requests))
        usage = _usage(turn, rendered)
        if operation == "Converse":
            self.send_json(200, _converse_body(rendered, usage), {"x-amzn-RequestId": request_id})
            return
        size = int(turn.get("chunk_size") or fake.chunk_size)
        events = _content_events(rendered, size)
        ending: list[bytes] = []
        if error:
            _, default_message, member = ERRORS.get(error, (400, error, None))
            member = member or (error[:1].lower() + error[1:])
            exception_body: dict[str, Any] = {"message": turn.get("message") or default_message}
            if member == "modelStreamErrorException":
                exception_body["originalStatusCode"] = int(turn.get("status") or 424)
                exception_body["originalMessage"] = exception_body["message"]
            ending.append(_exception_event(member, exception_body))
        else:
            ending.extend(_final_events(rendered, usage))
        index = max(0, (rendered.reasoning is not None) + (rendered.text is not None) - 1)

        def flood(n: int) -> bytes:
            return _event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": flood_text(n, size)}})

        self.send_stream(
            record,
            turn,
            events,
            ending=ending,
            flood=flood,
            content_type="application/vnd.amazon.eventstream",
            error=bool(error),
            headers={"x-amzn-RequestId": request_id},
        )


class FakeBedrock(ScriptedServer):
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

    handler = _Handler
    requests: list[RecordedRequest]

    def __init__(
        self,
        turns: Iterable[TurnSource] | Callable[[dict[str, Any]], TurnLike] | None = None,
        *,
        model_ids: Iterable[str] | None = None,
        chunk_size: int = 8,
        chunk_delay: float = 0.0,
        host: str = "127.0.0.1",
    ) -> None:
        self.model_ids: frozenset[str] | None = frozenset(model_ids) if model_ids is not None else None
        super().__init__(turns, chunk_size=chunk_size, chunk_delay=chunk_delay, host=host)
        self.endpoint_url = f"http://{host}:{self.port}"

    def add_turns(self, *turns: TurnSource) -> FakeBedrock:
        """Append turns to the script (returns self)."""
        super().add_turns(*turns)
        return self

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
        return super().track_client(client)

    def __enter__(self) -> FakeBedrock:
        return self

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
