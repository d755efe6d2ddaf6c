"""The neutral message format of session history, and token estimates.

Providers differ in how they shape a conversation; the history does not. A message is
a JSON object with a ``role``:

==========  =======================================================================
user        ``text``; optional ``media``
assistant   ``text`` (may be empty) and ``tool_calls``: ``[{id, name, input}]``
tool        the result of one tool call: ``tool_call_id``, ``name``, ``text``, ``error``
summary     ``text``: what a compaction left of the older messages
==========  =======================================================================

``media`` is a list of ``{type: image|audio|video|document, format, data}`` parts (data
base64); each costs a fixed :data:`MEDIA_TOKENS` in the estimate. Each provider turns
these messages into its own wire format (``agent-strands``: Bedrock Converse messages).

Token estimates follow one rule: four characters a token (rounded up), plus a fixed cost
per media part. :class:`History` anchors the total to the last input-token count a
provider actually reported and estimates only what came after it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

__all__ = [
    "CHARS_PER_TOKEN",
    "MEDIA_TOKENS",
    "MESSAGE_SCHEMA",
    "Entry",
    "History",
    "Message",
    "ToolCall",
    "estimate_text",
    "estimate_tokens",
    "summary_message",
]

CHARS_PER_TOKEN = 4
#: What one image (or audio, video, document part) counts for, whatever its size.
MEDIA_TOKENS = 250

Role = Literal["user", "assistant", "tool", "summary"]


class ToolCall(TypedDict):
    id: str
    name: str
    input: dict[str, Any]


class Message(TypedDict, total=False):
    role: Role
    text: str
    tool_calls: list[ToolCall]
    tool_call_id: str
    name: str
    error: bool
    media: list[dict[str, Any]]


#: JSON Schema of one message (checked on import).
MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {"enum": ["user", "assistant", "tool", "summary"]},
        "text": {"type": "string"},
        "tool_calls": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "input": {"type": "object"}},
                "required": ["id", "name", "input"],
            },
        },
        "tool_call_id": {"type": "string"},
        "name": {"type": "string"},
        "error": {"type": "boolean"},
        "media": {
            "type": "array",
            "items": {"type": "object", "properties": {"type": {"type": "string"}}, "required": ["type"]},
        },
    },
    "required": ["role"],
    "allOf": [{"if": {"properties": {"role": {"const": "tool"}}}, "then": {"required": ["tool_call_id"]}}],
}


def estimate_text(text: str) -> int:
    """Tokens of a text: four characters a token, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def estimate_tokens(message: Message) -> int:
    """Tokens of one message: its text and tool calls, plus a fixed cost per media part."""
    chars = len(message.get("text") or "")
    for call in message.get("tool_calls") or ():
        chars += len(call.get("name") or "") + len(json.dumps(call.get("input"), ensure_ascii=False))
    return -(-chars // CHARS_PER_TOKEN) + MEDIA_TOKENS * len(message.get("media") or ())


def summary_message(text: str) -> Message:
    return {"role": "summary", "text": text}


@dataclass
class Entry:
    """A stored message: its position in the session and its token estimate."""

    seq: int
    message: Message
    tokens: int


@dataclass
class History:
    """A session's history as the prompt window sees it (seed: ConversationHistory).

    ``entries`` are the messages after the last compaction (``summary_through``), which
    ``summary`` stands for. ``anchor_tokens`` is the last input-token count a provider
    reported for this history (without the system prompt), covering the messages up to
    ``anchor_seq``.
    """

    session_id: str
    entries: list[Entry] = field(default_factory=list)
    summary: str | None = None
    summary_through: int = 0
    anchor_tokens: int | None = None
    anchor_seq: int | None = None

    def messages(self) -> list[Message]:
        head = [summary_message(self.summary)] if self.summary else []
        return head + [entry.message for entry in self.entries]

    def estimated_tokens(self) -> int:
        """Tokens of :meth:`messages`: the anchor plus estimates of what came after it,
        or all estimates when no valid anchor exists (none reported yet, or a compaction
        since replaced what it measured)."""
        if self.anchor_tokens is not None and self.anchor_seq is not None and self.anchor_seq >= self.summary_through:
            after = sum(entry.tokens for entry in self.entries if entry.seq > self.anchor_seq)
            return self.anchor_tokens + after
        head = estimate_text(self.summary) if self.summary else 0
        return head + sum(entry.tokens for entry in self.entries)
