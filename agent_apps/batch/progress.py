"""A batch's progress on stderr: a bar on a terminal, a line now and then in a log, or
JSON lines (``--events``).

The bar (redrawn at most ten times a second)::

    word-count [#########-----------]  450/1000  3 failed  41.2/s  ETA 0:13

Not on a terminal, the same figures are one line every :data:`LOG_INTERVAL` seconds.
``--events`` writes ``batch-start``, one ``batch-result`` per finished input and
``batch-end``, each a JSON object with ``type`` and ``timestamp``.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from ..terminal import json_line
from .runner import BatchResult

__all__ = ["LOG_INTERVAL", "Progress"]

#: Seconds between two progress lines when stderr is not a terminal.
LOG_INTERVAL = 10.0
_BAR = 20


class Progress:
    """Counts the results of one batch and shows them on ``stream``."""

    def __init__(self, stream: TextIO, name: str, total: int, *, events: bool = False) -> None:
        self.stream = stream
        self.name = name
        self.total = total
        self.events = events
        self.done = 0
        self.failed = 0
        self.first_failure: BatchResult | None = None
        self.tty = stream.isatty() and not events
        self.started = time.monotonic()
        self._shown = self.started

    def start(self, *, concurrency: int | None, workers: int | None = None, skipped: int = 0,
              output: str | None = None) -> None:
        if self.events:
            self._event("batch-start", name=self.name, total=self.total, concurrency=concurrency, workers=workers,
                        skipped=skipped, output=output)
            return
        where = f" on {workers} Ray worker{'s' if workers != 1 else ''}" if workers else ""
        before = f"; {skipped} done before, in {output}" if skipped else ""
        self._line(f"{self.name}: {self.total} to run, {concurrency} at a time{where}{before}")

    def add(self, result: BatchResult) -> None:
        self.done += 1
        if not result.ok:
            self.failed += 1
            if self.first_failure is None:
                self.first_failure = result
        if self.events:
            error = {"error": result.error} if not result.ok else {}
            self._event("batch-result", index=result.index, ok=result.ok, run_id=result.run_id,
                        seconds=round(result.seconds, 4), done=self.done, failed=self.failed, total=self.total,
                        **error)
            return
        now = time.monotonic()
        if now - self._shown >= (0.1 if self.tty else LOG_INTERVAL):
            self._shown = now
            self._status()

    def end(self, *, interrupted: bool = False) -> None:
        elapsed = time.monotonic() - self.started
        if self.events:
            self._event("batch-end", done=self.done, failed=self.failed, total=self.total,
                        interrupted=interrupted, seconds=round(elapsed, 3), rate=round(self.rate(), 3))
            return
        self._status(final=True)

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def _status(self, final: bool = False) -> None:
        rate = self.rate()
        left = self.total - self.done
        eta = _clock(left / rate) if rate > 0 and left else "-"
        failed = f"  {self.failed} failed" if self.failed else ""
        figures = f"{self.done:>{len(str(self.total))}}/{self.total}{failed}  {rate:.1f}/s"
        if final:
            text = f"{self.name}: {figures} in {_clock(time.monotonic() - self.started)}"
        elif self.tty:
            filled = _BAR * self.done // max(self.total, 1)
            text = f"{self.name} [{'#' * filled}{'-' * (_BAR - filled)}]  {figures}  ETA {eta}"
        else:
            text = f"{self.name}: {figures}  ETA {eta}"
        if self.tty:
            self.stream.write("\r\033[2K" + text + ("\n" if final else ""))
            self.stream.flush()
        else:
            self._line(text)

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def _event(self, kind: str, **fields: Any) -> None:
        event = {"type": kind, "timestamp": time.time(), **fields}
        self.stream.write(json_line(event, default=repr) + "\n")  # errors quote the skills' output
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"

