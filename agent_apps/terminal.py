"""Text from agents and skill files, made safe to show on a terminal.

What agent code prints, the code a model writes, a sub-agent's name, a tool's result,
an error message quoting any of them, a skill file's description: all of it is
untrusted, and a terminal obeys control sequences in what it is sent. ``ESC ] 52``
writes the clipboard, ``ESC [ 2 J`` clears the screen, a carriage return or a
right-to-left override hides text. So every character that can steer a terminal is
shown escaped instead (``\\x1b``, ``\\r``, ``\\u202e``): C0 controls but newline and
tab, DEL, the C1 controls (``\\x9b`` is a one-byte CSI on some terminals) and the
Unicode bidirectional overrides and isolates.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["UNSAFE_CHARS", "json_line", "printable", "printable_data"]

#: The characters that can steer a terminal, as a regex class body: C0 but tab and
#: newline; DEL and C1; bidi marks, embeddings, overrides and isolates.
UNSAFE_CHARS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[{UNSAFE_CHARS}]")
# The same, for text that json.dumps already wrote (it escapes C0 itself).
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\r": "\\r", "\x1b": "\\x1b"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def printable(text: str) -> str:
    """``text`` with every character that could steer a terminal escaped."""
    return _UNSAFE.sub(_escape, text)


def printable_data(value: Any) -> Any:
    """``value`` (an event, a result) with :func:`printable` applied to every string."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_data(k): printable_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_data(v) for v in value]
    return value


def json_line(value: Any, **dumps: Any) -> str:
    """``json.dumps`` (non-ASCII kept readable) with terminal-steering characters as
    ``\\uXXXX`` escapes: the same JSON value, safe to print."""
    text = json.dumps(value, ensure_ascii=False, **dumps)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
