"""The neutral message format of session history, and token estimates.

Providers differ in how they shape a conversation; the history does not. A message is
a JSON object with a ``role``:

==========  =======================================================================
user        ``text``; optional ``media``
assistant   ``text`` (may be empty) and ``tool_calls``: ``[{id, name, input}]``; optional
            ``reasoning``: the model's extended thinking before it answered
tool        the result of one tool call: ``tool_call_id``, ``name``, ``text``, ``error``
summary     ``text``: what a compaction left of the older messages
==========  =======================================================================

``media`` is a list of ``{type: image|audio|video|document, format, data, name?}`` parts
(data base64; :mod:`agent_apps.attachments` makes and checks them). Each provider turns
these messages into its own wire format (``agent-strands``: Bedrock Converse messages).
``reasoning`` is kept for people (reports, exports); providers do not send it back.

Token estimates follow one rule: four characters a token (rounded up), plus per media
part a fixed :data:`MEDIA_TOKENS` (an image, a PDF), or a text document's characters.
:class:`History` anchors the total to the last input-token count a provider actually
reported and estimates only what came after it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from ..attachments import part_bytes

__all__ = [
    "CHARS_PER_TOKEN",
    "MEDIA_TOKENS",
    "MESSAGE_SCHEMA",
    "TOOL_CALLS_SCHEMA",
    "Entry",
    "History",
    "Message",
    "ToolCall",
    "estimate_text",
    "media_tokens",
    "decode",
    "describe_content",
    "reasoning_summary",
    "estimate_tokens",
    "stale_form",
    "summary_message",
]

CHARS_PER_TOKEN = 4
#: What one image (or audio, video, PDF part) counts for, whatever its size (seed 003).
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
    reasoning: str


#: JSON Schema of the tool calls of a model answer, in messages and model responses alike.
TOOL_CALLS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "input": {"type": "object"}},
        "required": ["id", "name", "input"],
    },
}

#: JSON Schema of one message (checked on import).
MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {"enum": ["user", "assistant", "tool", "summary"]},
        "text": {"type": "string"},
        "tool_calls": TOOL_CALLS_SCHEMA,
        "tool_call_id": {"type": "string"},
        "name": {"type": "string"},
        "error": {"type": "boolean"},
        "reasoning": {"type": "string"},
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
    """Tokens of one message: its text and tool calls, plus its media parts."""
    chars = len(message.get("text") or "")
    for call in message.get("tool_calls") or ():
        chars += len(call.get("name") or "") + len(json.dumps(call.get("input"), ensure_ascii=False))
    return -(-chars // CHARS_PER_TOKEN) + sum(media_tokens(part) for part in message.get("media") or ())


def media_tokens(part: dict[str, Any]) -> int:
    """Tokens of one media part: a text document's characters (from the size of its
    data: UTF-8 text of this kind is mostly one byte a character), else
    :data:`MEDIA_TOKENS`."""
    if part.get("type") == "document" and part.get("format") in ("txt", "md"):
        return max(1, -(-part_bytes(part) // CHARS_PER_TOKEN))
    return MEDIA_TOKENS


def summary_message(text: str) -> Message:
    return {"role": "summary", "text": text}


class Entry:
    """A stored message: its position in the session and its token estimate.

    Entries read from the store keep the message as JSON text until :attr:`message` is
    first read, so a window that shows only the newest messages decodes only those.
    """

    __slots__ = ("_body", "_message", "_role", "_stale", "seq", "tokens")

    def __init__(
        self,
        seq: int,
        message: Message | None,
        tokens: int,
        *,
        body: str | None = None,
        role: str = "",
        stale: str | None = None,
    ) -> None:
        self.seq = seq
        self.tokens = tokens
        self._message = message
        self._body = body
        self._role = role or (message.get("role", "") if message is not None else "")
        self._stale = stale

    def show_stale(self) -> None:
        """From now on :attr:`message` is the one-line form of a long tool result."""
        if self._stale is not None:  # decoded with the others, in decode()'s one pass
            self._message, self._body = None, self._stale
        elif self._body is None and self._message is not None:
            self._message = stale_form(self._message) or self._message

    @property
    def message(self) -> Message:
        if self._message is None:
            self._message = json.loads(self._body or "{}")
        return self._message

    @property
    def role(self) -> str:
        return self._role

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        return (self.seq, self.tokens, self.message) == (other.seq, other.tokens, other.message)

    def __repr__(self) -> str:
        return f"Entry(seq={self.seq}, tokens={self.tokens}, role={self.role!r})"


def decode(entries: list[Entry]) -> list[Message]:
    """The messages of ``entries``, decoding the stored ones in one pass."""
    pending = [entry for entry in entries if entry._message is None]
    if pending:
        decoded = json.loads("[" + ",".join(e._body or "{}" for e in pending) + "]")
        for entry, message in zip(pending, decoded, strict=True):
            entry._message = message
    return [entry.message for entry in entries]


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
        return head + decode(self.entries)

    def estimated_tokens(self) -> int:
        """Tokens of :meth:`messages`: the anchor plus estimates of what came after it,
        or all estimates when no valid anchor exists (none reported yet, or a compaction
        since replaced what it measured)."""
        if self.anchor_tokens is not None and self.anchor_seq is not None and self.anchor_seq >= self.summary_through:
            after = sum(entry.tokens for entry in self.entries if entry.seq > self.anchor_seq)
            return self.anchor_tokens + after
        head = estimate_text(self.summary) if self.summary else 0
        return head + sum(entry.tokens for entry in self.entries)


# -- stale tool results: their one-line form ----------------------------------------------

#: Tool results up to this long are shown whole even when stale.
STALE_MIN_CHARS = 200

# One pass over the head of a result names its kind.
_KINDS = re.compile(
    r"^[ \t]*(?:(?P<python>def |class |import |from \S+ import |async def )"
    r"|(?P<go>package \w+$|func \w*\()"
    r"|(?P<javascript>function |const |let |export |import .* from )"
    r"|(?P<html><(?:!doctype|html|head|body|div))"
    r"|(?P<markdown>#{1,6} \S)"
    r"|(?P<traceback>Traceback \(most recent call last\)))",
    re.M | re.I,
)
_KIND_NAMES = {  # by priority: a Python file's '# comment' does not make it Markdown
    "traceback": "a traceback",
    "python": "Python source",
    "go": "Go source",
    "javascript": "JavaScript source",
    "html": "HTML",
    "markdown": "Markdown",
}
_HEAD = 2000  # characters looked at


def describe_content(text: str) -> str:
    """``Returned 4500 bytes (120 lines) of Python source``: size and a guessed kind."""
    size = len(text.encode("utf-8"))
    lines = text.count("\n") + 1
    return f"Returned {size} bytes ({lines} lines) of {_kind(text)}"


def _kind(text: str) -> str:
    head = text[:_HEAD]
    stripped = text.strip()
    if stripped[:1] in "[{" and stripped[-1:] in "]}":
        try:
            json.loads(stripped)
            return "JSON"
        except ValueError:
            pass
    found = {match.lastgroup for match in _KINDS.finditer(head)}
    for group, kind in _KIND_NAMES.items():
        if group in found:
            return kind
    lines = [line for line in head.splitlines()[:20] if line]
    if len(lines) > 1 and "," in lines[0] and len({line.count(",") for line in lines}) == 1:
        return "CSV"
    return "text"


#: Characters of reasoning its summary quotes at most.
SUMMARY_CHARS = 160
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def reasoning_summary(text: str) -> str:
    """A short summary of a model's reasoning: its first sentence (cut at
    :data:`SUMMARY_CHARS` characters), and how long the whole is when there is more."""
    whole = " ".join(text.split())
    if not whole:
        return ""
    end = _SENTENCE_END.search(whole)
    first = whole[: end.start()] if end is not None else whole
    if len(first) > SUMMARY_CHARS:
        first = first[: SUMMARY_CHARS - 1].rstrip() + "…"
    return first if first == whole else f"{first} ({len(text):,} characters)"


def stale_form(message: Message) -> Message | None:
    """How a long tool result is shown once stale (None: it is shown whole)."""
    text = message.get("text") or ""
    if message.get("role") != "tool" or len(text) <= STALE_MIN_CHARS:
        return None
    return {**message, "text": f"[Summary: {describe_content(text)}]"}
