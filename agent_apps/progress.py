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

    def __init__(self, stream: TextIO, *, verbose: bool = False) -> None:
        self.stream = stream
        self.verbose = verbose  # code and results whole (``-v``), not cut to a few lines
        self.colour = stream.isatty() and not os.environ.get("NO_COLOR")
        self._depth: dict[str, int] = {}
        self._streaming = False
        self._model_errors: dict[str, str] = {}  # per run: the last failed model call

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
        for warning in e.get("warnings") or ():  # what the agent's context had to leave out
            self._line(pad, self._style("33", f"⚠ {warning}"))

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
        shown = code if self.verbose else code[:_CODE_LINES] + (
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
        """Each error once: a failed model call shows with its retry (if none follows, it is
        the run's error); the run's error shows for nested agents only, since the command
        line prints the outermost one itself."""
        run = e.get("context_id", "")
        if e.get("retrying"):
            failed = self._model_errors.pop(run, "the model call failed")
            self._line(pad, self._style("33", f"↻ {failed}: retry {e.get('attempt')} in {e.get('delay')} s"))
            return
        if e.get("status") == "waiting-approval":  # the command line says which call, once
            self._line(pad, self._style("1;33", f"■ {e.get('agent')}: paused, waiting for approval"))
            return
        error = e.get("error") or {}
        message = error.get("message") if isinstance(error, dict) else str(error)
        if e.get("attempt") is not None:
            self._model_errors[run] = str(message)
        elif e.get("ancestor_context_id"):
            self._line(pad, self._style("31", f"✗ {e.get('agent')}: {message}"))

    def _guardrail(self, e: dict[str, Any], pad: str) -> None:
        if e.get("pass"):  # only what a guardrail objected to
            return
        mark = "⛔" if e.get("tripwire") else "⚠"
        text = f"{mark} guardrail {e.get('guardrail')} ({e.get('kind')}): {e.get('reason')}"
        self._line(pad, self._style("33", text))

    def _agent_complete(self, e: dict[str, Any], pad: str) -> None:
        usage = e.get("usage") or {}
        about = "~" if usage.get("estimated") else ""
        tokens = f", {about}{usage.get('input_tokens', 0)} in / {about}{usage.get('output_tokens', 0)} out tokens"
        tokens = (tokens + (" (estimated)" if about else "")) if usage else ""
        counts = f"{_count(e.get('turns'), 'turn')}, {_count(e.get('steps'), 'step')}"
        stopped = e.get("status") not in (None, "done")  # max_turns, max_steps: partial work
        head = f"■ {e.get('agent')}: {e.get('message') or e.get('status')}" if stopped else f"✓ {e.get('agent')}"
        self._line(pad, self._style("1;33" if stopped else "1;32", head) + self._style("2", f" ({counts}{tokens})"))

    def _line(self, pad: str, text: str) -> None:
        if self._streaming:
            self.stream.write("\n")
            self._streaming = False
        self.stream.write(pad + text + "\n")

    def _style(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.colour else text

    def _short(self, text: Any) -> str:
        text = str(text or "").strip()
        return text if self.verbose or len(text) <= _RESULT_CHARS else text[:_RESULT_CHARS] + " …"


def _count(n: Any, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
