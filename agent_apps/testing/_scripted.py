"""What every fake model endpoint shares: a real HTTP server in a thread that replays
scripted model turns, records each request, streams replies (paced, stalled or cut on
demand) and leaves no thread or socket behind when closed.

:class:`ScriptedServer` is the base of :class:`~agent_apps.testing.bedrock.FakeBedrock`
and of the fakes in :mod:`agent_apps.testing.llm` (Anthropic, OpenAI, Ollama); each
subclass only says how its API's requests are routed and its replies framed. A turn
(:class:`Turn`) means the same to all of them.
"""

from __future__ import annotations

import itertools
import json
import select
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, TypedDict

__all__ = ["ScriptedHandler", "ScriptedServer", "StreamOutcome", "ToolUse", "Turn", "TurnLike", "TurnSource"]


class ToolUse(TypedDict, total=False):
    """A tool call the fake model makes: ``name`` and ``input`` are required."""

    name: str
    input: Any
    id: str


class Turn(TypedDict, total=False):
    """One scripted model reply (every key is optional; see the fake's module docstring)."""

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
    flood: bool
    trickle: float
    no_stop: bool | str
    raw_usage: Any
    redirect: str


TurnLike = Turn | Mapping[str, Any] | str
"""A turn mapping, or a ``str`` meaning ``{"text": s}``."""

TurnSource = TurnLike | Callable[[dict[str, Any]], TurnLike]
"""A turn, or a callable that gets the parsed request body and returns one."""

StreamOutcome = Literal["complete", "error", "client_disconnected", "server_closed"]

#: How many frames a ``flood`` turn sends at most: endless for any client under test
#: (a few hundred MB), finite so that a client that never stops cannot hang the test.
_FLOOD_FRAMES = 10_000_000


# -- turns --------------------------------------------------------------------------------------


def chunks(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def flood_text(number: int, size: int) -> str:
    """The text of a flood's ``number``-th delta: ``size`` characters, each delta
    different (a client may drop repeated chunks)."""
    return f"{number:x} ".ljust(max(1, size), "~")


def estimate_tokens(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return max(1, len(text) // 4)


@dataclass
class Rendered:
    """A turn turned into response content, whatever the API's framing."""

    reasoning: str | None
    reasoning_signature: str | None
    text: str | None
    tool_uses: list[dict[str, Any]]
    #: Bedrock's words: ``end_turn``, ``tool_use``, ``max_tokens``; each API maps them.
    stop_reason: str
    input_tokens: int
    output_tokens: int
    latency_ms: int
    #: prompt-cache reads and writes, beside ``input_tokens`` (Bedrock's and Anthropic's
    #: convention; an OpenAI-shaped fake adds them into its ``prompt_tokens``)
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    #: ``{"input": ..., "output": ...}`` sent as the token counts verbatim (a lying peer).
    raw_usage: Mapping[str, Any] | None = None

    def counts(self) -> tuple[Any, Any]:
        """The input and output token counts to send: the turn's ``raw_usage`` if any."""
        if self.raw_usage is not None:
            return self.raw_usage.get("input"), self.raw_usage.get("output")
        return self.input_tokens, self.output_tokens


def render(turn: Mapping[str, Any], prompt: Any, request_number: int) -> Rendered:
    """``turn`` as content; usage not given is estimated (4 characters a token) from
    ``prompt`` (what the request sent) and the turn's output. Usage keys may be
    Bedrock's (``inputTokens``) or snake_case (``input_tokens``)."""
    tool_uses = [
        {
            "toolUseId": tool_use.get("id") or f"tooluse_{request_number}_{index}",
            "name": tool_use["name"],
            "input": tool_use.get("input", {}),
        }
        for index, tool_use in enumerate(turn.get("tool_uses") or [])
    ]
    text, reasoning = turn.get("text"), turn.get("reasoning")
    usage = dict(turn.get("usage") or {})
    input_tokens = usage.get("inputTokens", usage.get("input_tokens"))
    output_tokens = usage.get("outputTokens", usage.get("output_tokens"))
    if input_tokens is None:
        input_tokens = estimate_tokens(prompt)
    if output_tokens is None:
        output_tokens = estimate_tokens((reasoning or "") + (text or "") + json.dumps(tool_uses))
    return Rendered(
        reasoning=reasoning,
        reasoning_signature=turn.get("reasoning_signature"),
        text=text,
        tool_uses=tool_uses,
        stop_reason=turn.get("stop_reason") or ("tool_use" if tool_uses else "end_turn"),
        input_tokens=int(input_tokens),
        output_tokens=int(output_tokens),
        latency_ms=int(turn.get("latency_ms", 1)),
        cache_read_tokens=int(usage.get("cacheReadInputTokens", usage.get("cache_read_tokens")) or 0),
        cache_write_tokens=int(usage.get("cacheWriteInputTokens", usage.get("cache_write_tokens")) or 0),
        raw_usage=turn.get("raw_usage"),
    )


# -- the HTTP side ------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    # Handler threads are joined by server_close(), so close() leaves no thread behind.
    daemon_threads = False
    block_on_close = True
    fake: ScriptedServer


class ScriptedHandler(BaseHTTPRequestHandler):
    """Plumbing for a fake's request handler: JSON replies and streamed replies."""

    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    # Small responses must not wait ~40 ms for TCP's Nagle buffering (a real endpoint
    # is not that slow, and the tests and benchmarks would measure the wait).
    disable_nagle_algorithm = True

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

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_redirect(self, location: str) -> None:
        """A ``307 Temporary Redirect`` to ``location`` (a turn's ``redirect``)."""
        self.send_response(307)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def send_stream(
        self,
        record: Any,
        turn: Mapping[str, Any],
        frames: list[bytes],
        *,
        content_type: str,
        error: bool = False,
        headers: Mapping[str, str] | None = None,
        ending: Sequence[bytes] = (),
        flood: Callable[[int], bytes] | None = None,
    ) -> None:
        """Send ``frames`` then ``ending`` as a chunked body, paced by the turn's ``delay``
        and stalled at its ``hang_after``; ``record.events_sent`` and
        ``record.stream_outcome`` say how far it got and how it ended (``error``: the
        last frame reports an error).

        A hostile peer, by the turn's keys: ``flood`` sends ``flood(n)`` frames (content
        deltas, ``n`` counting from 0) after ``frames`` forever instead of the ending; ``trickle``
        (seconds) writes the body one byte at a time; ``no_stop`` replaces the ending
        with the first half of its first frame (``"clean"``: with nothing), then ends
        the body cleanly (a reply cut off mid-frame, with no stop event)."""
        fake = self.server.fake
        delay = float(turn.get("delay", fake.chunk_delay))
        hang_after = turn.get("hang_after")
        outcome: StreamOutcome = "error" if error else "complete"
        if turn.get("flood") and flood is not None:
            body: Iterable[bytes] = itertools.chain(frames, map(flood, range(_FLOOD_FRAMES)))
            count = len(frames) + _FLOOD_FRAMES
        else:
            tail = list(ending)
            if turn.get("no_stop"):  # true: cut mid-frame; "clean": the content, then nothing
                tail = [ending[0][: len(ending[0]) // 2]] if ending and turn["no_stop"] is True else []
            body = [*frames, *tail]
            count = len(frames) + len(tail)
        trickle = float(turn.get("trickle") or 0)
        fake._stream_started()  # before the headers, so wait_streams_ended() can't miss it
        try:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            for number, data in enumerate(body):
                if hang_after is not None and number == int(hang_after):
                    hang_result = self._hang()
                    if hang_result is not None:
                        outcome = hang_result
                        break
                if delay > 0 and fake._stopping.wait(delay):
                    outcome = "server_closed"
                    break
                # Bookkeeping first: the client may act on this frame before write() returns.
                record.events_sent += 1
                if number == count - 1:
                    record.stream_outcome = outcome
                if trickle:
                    self._trickle(data, trickle)
                else:
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

    def _trickle(self, data: bytes, pause: float) -> None:
        """One chunk of one byte at a time, ``pause`` seconds apart (until the server closes)."""
        fake = self.server.fake
        for byte in data:
            if fake._stopping.wait(pause):
                raise ConnectionAbortedError("the server is closing")
            self.wfile.write(b"1\r\n%c\r\n" % byte)
            self.wfile.flush()

    def _hang(self) -> StreamOutcome | None:
        """Block until the client disconnects, the test releases the stream, or the server
        closes. Returns the outcome that ends the stream, or None to go on (released)."""
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


class ScriptedServer:
    """A local HTTP server (``127.0.0.1``, ephemeral port) replaying scripted turns.

    Args:
        turns: The script: a sequence of turns (mapping, ``str``, or callable getting the
            request body), or one callable used for every request. More turns can be added
            later with :meth:`add_turns`.
        chunk_size: Default characters per streamed text delta / tool-input chunk.
        chunk_delay: Default seconds to wait before each streamed frame.
        host: Interface to bind; the port is ephemeral.

    Attributes:
        requests: Every request received, in order.
        server_errors: Unexpected exceptions of the handlers (a test asserts it is empty).
    """

    handler: type[ScriptedHandler]

    def __init__(
        self,
        turns: Iterable[TurnSource] | Callable[[dict[str, Any]], TurnLike] | None = None,
        *,
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
        self.chunk_size = chunk_size
        self.chunk_delay = chunk_delay
        self.requests: list[Any] = []
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

        self._server = _HTTPServer((host, 0), self.handler)
        self._server.fake = self
        fake = self

        def handle_error(request: Any, client_address: Any) -> None:
            error = sys.exc_info()[1]
            if error is not None and not isinstance(error, (ConnectionError, OSError)):
                fake.server_errors.append(error)

        self._server.handle_error = handle_error  # type: ignore[method-assign]
        self.port: int = self._server.server_address[1]
        self.host = host
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{type(self).__name__}:{self.port}",
            daemon=True,
        )
        self._thread.start()

    # -- script ------------------------------------------------------------------------------

    def add_turns(self, *turns: TurnSource) -> Any:
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

    def _record(self, record: Any) -> None:
        with self._lock:
            self.requests.append(record)

    # -- stalled and paced streams -------------------------------------------------------------

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
        """Wait until every streamed reply so far has ended (any outcome)."""
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

    # -- lifecycle -----------------------------------------------------------------------------

    def track_client(self, client: Any) -> Any:
        """Have :meth:`close` also close ``client`` (anything with a ``close()``); returns it."""
        with self._lock:
            self._clients.append(client)
        return client

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

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
