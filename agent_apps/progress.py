"""A running agent's progress on the terminal (``agent-apps invoke``).

Readable by default (turns, the code the model runs, results, errors), coloured when
the stream is a terminal and ``NO_COLOR`` is unset; ``--events`` prints the raw event
stream as JSON lines instead, for tools. Either way, what agents wrote reaches the
terminal with its control characters escaped (:mod:`agent_apps.terminal`).
"""

from __future__ import annotations

import os
from typing import Any, TextIO

from .terminal import json_line, printable_data

__all__ = ["JsonLines", "ProgressPrinter"]

_CODE_LINES = 12
_RESULT_CHARS = 400


class JsonLines:
    """Each event as one JSON line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __call__(self, topic: str, event: dict[str, Any]) -> None:
        self.stream.write(json_line(event, default=repr) + "\n")
        self.stream.flush()


class ProgressPrinter:
    """Human-readable progress; nested agents are indented under their parent."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.colour = stream.isatty() and not os.environ.get("NO_COLOR")
        self._depth: dict[str, int] = {}
        self._streaming = False

    def __call__(self, topic: str, event: dict[str, Any]) -> None:
        kind = event.get("type", "")
        handler = getattr(self, "_" + kind.replace("-", "_"), None)
        if handler is not None:
            event = printable_data(event)
            handler(event, "  " * self._depth.get(event.get("context_id", ""), 0))
            self.stream.flush()

    def _agent_start(self, e: dict[str, Any], pad: str) -> None:
        parent = e.get("ancestor_context_id")
        depth = self._depth.get(parent, -1) + 1 if parent else 0
        self._depth[e.get("context_id", "")] = depth
        pad = "  " * depth
        tools = ", ".join(e.get("tools") or []) or "none"
        self._line(
            pad, self._style("1", f"▶ {e.get('agent')}") + self._style("2", f" ({e.get('provider')}; tools: {tools})")
        )

    def _turn_start(self, e: dict[str, Any], pad: str) -> None:
        self._line(pad, self._style("2", f"— turn {e.get('turn')}"))

    def _agent_message(self, e: dict[str, Any], pad: str) -> None:
        text = str(e.get("text") or "")
        style = "2;3" if e.get("reasoning") else "0"
        if e.get("delta"):
            if not self._streaming:
                self.stream.write(pad)
                self._streaming = True
            self.stream.write(self._style(style, text.replace("\n", "\n" + pad)))
        elif text.strip():
            self._line(pad, self._style(style, text.strip().replace("\n", "\n" + pad)))

    def _tool_call(self, e: dict[str, Any], pad: str) -> None:
        code = str(e.get("code") or "").rstrip().splitlines()
        shown = code[:_CODE_LINES] + (
            [f"... ({len(code) - _CODE_LINES} more lines)"] if len(code) > _CODE_LINES else []
        )
        self._line(pad, self._style("36", "⚙ invoke"))
        for line in shown:
            self._line(pad, self._style("2", "  │ " + line))

    def _tool_result(self, e: dict[str, Any], pad: str) -> None:
        self._line(pad, self._style("32", "  → ") + self._short(e.get("result")).replace("\n", "\n" + pad + "    "))

    def _tool_error(self, e: dict[str, Any], pad: str) -> None:
        self._line(pad, self._style("31", "  ✗ ") + self._short(e.get("result")).replace("\n", "\n" + pad + "    "))

    def _agent_error(self, e: dict[str, Any], pad: str) -> None:
        if e.get("retrying"):
            self._line(pad, self._style("33", f"↻ retry {e.get('attempt')} in {e.get('delay')} s"))
            return
        error = e.get("error") or {}
        message = error.get("message") if isinstance(error, dict) else str(error)
        self._line(pad, self._style("31", f"✗ {e.get('agent')}: {message}"))

    def _agent_complete(self, e: dict[str, Any], pad: str) -> None:
        usage = e.get("usage") or {}
        tokens = f", {usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens" if usage else ""
        self._line(
            pad,
            self._style("1;32", f"✓ {e.get('agent')}")
            + self._style("2", f" ({e.get('turns')} turns, {e.get('steps')} steps{tokens})"),
        )

    def _line(self, pad: str, text: str) -> None:
        if self._streaming:
            self.stream.write("\n")
            self._streaming = False
        self.stream.write(pad + text + "\n")

    def _style(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.colour else text

    @staticmethod
    def _short(text: Any) -> str:
        text = str(text or "").strip()
        return text if len(text) <= _RESULT_CHARS else text[:_RESULT_CHARS] + " …"
