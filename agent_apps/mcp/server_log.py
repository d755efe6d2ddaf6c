"""A mounted MCP server's log: its stderr and what the ``mcp`` library says about it.

A stdio server's stderr is a pipe that agent-apps reads (on the MCP runtime's event
loop) into ``~/.agent-apps/logs/mcp-SERVER.log``, never the file itself, so its size
is checked as it grows: past ``mcp_servers.SERVER.log_kb`` (default 1024) the file
becomes ``.log.1`` (replacing the one before) and a new one starts. A server writes at
most twice that much to disk, however long it runs and whatever it writes.

The ``mcp`` library logs what goes wrong on a connection (a line on the server's stdout
that is not JSON-RPC comes with a full traceback). Those records go to the log of the
server whose connection logged them (:func:`route_library_logging`), not to the
terminal: a chatty or broken server cannot flood the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import time
from pathlib import Path
from typing import Any, TextIO

from ..host_files import private_file, private_folder

__all__ = ["DEFAULT_LOG_KB", "ServerLog", "StderrPipe", "current_log", "route_library_logging"]

#: ``mcp_servers.SERVER.log_kb``: a log's size past which it is rotated.
DEFAULT_LOG_KB = 1024
#: What is kept in memory of what a server wrote last (for a failure message).
_TAIL = 4096

#: The log of the server whose connection the current task serves (set by the connection).
current_log: contextvars.ContextVar[ServerLog | None] = contextvars.ContextVar("agent_apps_mcp_log", default=None)


class ServerLog:
    """One server's log file, written through a size check."""

    def __init__(self, path: Path, *, limit_kb: int = DEFAULT_LOG_KB) -> None:
        self.path = path
        self.limit = max(1, limit_kb) * 1024
        #: The last bytes written since :meth:`start` (the server's last words).
        self.tail = b""
        self._file: Any = None

    def start(self, what: str) -> None:
        """Open the log (rotating a full one) and mark where this run of the server starts."""
        self.tail = b""
        if self._file is None:
            self._file = self._open()
        self.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {what}\n".encode(), tail=False)

    def write(self, data: bytes, *, tail: bool = True) -> None:
        """Append ``data``; past the limit, rotate first (best effort: a full disk loses lines)."""
        if self._file is None:
            return
        with contextlib.suppress(OSError):
            if self._file.tell() + len(data) > self.limit:
                self._rotate()
            self._file.write(data[-self.limit :])
            self._file.flush()
        if tail:
            self.tail = (self.tail + data)[-_TAIL:]

    def _rotate(self) -> None:
        self._file.close()
        self.path.replace(self.path.with_name(self.path.name + ".1"))
        self._file = self._open()

    def _open(self) -> Any:
        """The log, private to the user: what a server prints may be the user's data."""
        private_folder(self.path.parent)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        private_file(self.path)  # a log an older version made wider
        return os.fdopen(fd, "ab")

    def last_line(self) -> str:
        lines = self.tail.decode("utf-8", "replace").strip().splitlines()
        return lines[-1][-200:] if lines else ""

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    async def stderr_pipe(self) -> StderrPipe:
        """A pipe for the server's stderr, read into this log on the running loop."""
        read_fd, write_fd = os.pipe()
        ended = asyncio.Event()
        log = self

        class _Reader(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                log.write(data)

            def connection_lost(self, exc: Exception | None) -> None:
                ended.set()

        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_read_pipe(_Reader, os.fdopen(read_fd, "rb", 0))
        return StderrPipe(os.fdopen(write_fd, "w", encoding="utf-8"), transport, ended)


class StderrPipe:
    """A server's stderr on its way to its :class:`ServerLog`."""

    def __init__(self, writer: TextIO, transport: asyncio.BaseTransport, ended: asyncio.Event) -> None:
        #: The write end, for the server process. Close it once the process started:
        #: the server then holds the only copy, and the pipe ends when the server does.
        self.writer = writer
        self._transport = transport
        self._ended = ended

    async def finish(self, timeout: float) -> None:
        """Wait (up to ``timeout`` seconds) until the server's last words are read."""
        self.writer.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ended.wait(), timeout)

    def close(self) -> None:
        self.writer.close()
        self._transport.close()


class _ToServerLog(logging.Handler):
    """Records logged while serving a connection go to that server's log; others go on
    to the root logger's handlers, as if the ``mcp`` logger still propagated."""

    def emit(self, record: logging.LogRecord) -> None:
        log = current_log.get()
        if log is None:
            logging.getLogger().handle(record)
            return
        try:
            log.write((self.format(record) + "\n").encode("utf-8", "replace"), tail=False)
        except Exception:  # logging must never fail the connection
            self.handleError(record)


_routed = False


def route_library_logging() -> None:
    """Once per process: the ``mcp`` library's records go to the log of the server they
    are about (see the module docstring)."""
    global _routed
    if _routed:
        return
    _routed = True
    handler = _ToServerLog()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    library = logging.getLogger("mcp")
    library.addHandler(handler)
    library.propagate = False
