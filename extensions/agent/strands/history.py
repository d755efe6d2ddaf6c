"""A session's prompt window (neutral messages) as Bedrock Converse messages.

Bedrock is strict where a window cut may be loose: roles alternate, the first message is
the user's, every ``toolUse`` is answered by a ``toolResult`` in the next message and
every ``toolResult`` answers a ``toolUse`` just before it, and no text block is blank.
:func:`to_converse` keeps all of that true, dropping only the halves of tool-call pairs
that a cut separated. Pure data in, data out: no Strands import.
"""

from __future__ import annotations

import base64
import re
from typing import Any

__all__ = ["OMITTED", "from_converse", "to_converse"]

#: Stands in for the start of a window that a cut left beginning with the model's turn.
OMITTED = "[Earlier messages of this conversation were left out.]"

_MEDIA = {"image", "document", "video"}
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9\s\-()\[\]]")


def to_converse(
    messages: list[dict[str, Any]], user_message: str | None, media: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """``messages`` then the user's message (when given) with its ``media`` parts
    (attachments: image and document blocks), as Converse messages."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, text = message.get("role"), str(message.get("text") or "")
        if role == "assistant":
            blocks: list[dict[str, Any]] = [{"text": text}] if text.strip() else []
            for call in message.get("tool_calls") or ():
                tool_use = {"toolUseId": str(call["id"]), "name": str(call["name"]), "input": call.get("input") or {}}
                blocks.append({"toolUse": tool_use})
            _add(out, "assistant", blocks)
        elif role == "tool":
            result = {
                "toolUseId": str(message.get("tool_call_id")),
                "content": [{"text": text or "(no output)"}],
                "status": "error" if message.get("error") else "success",
            }
            _add(out, "user", [{"toolResult": result}])
        elif role == "summary":
            _add(out, "user", [{"text": f"[Previous conversation summary: {text}]"}] if text.strip() else [])
        else:
            _add(out, "user", ([{"text": text}] if text.strip() else []) + _media(message.get("media") or ()))
    if user_message is not None:
        _add(out, "user", [{"text": user_message or "Do the task."}, *_media(media or ())])
    return _paired(out)


def _add(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": list(blocks)})


def _media(parts: Any) -> list[dict[str, Any]]:
    blocks = []
    for part in parts:
        kind, data = part.get("type"), part.get("data")
        if kind in _MEDIA and isinstance(data, str):
            block: dict[str, Any] = {"format": part.get("format") or "png", "source": {"bytes": base64.b64decode(data)}}
            if kind == "document":
                block["name"] = _document_name(part.get("name"))
            blocks.append({kind: block})
    return blocks


def _document_name(name: Any) -> str:
    """A document's name as Bedrock takes it: letters, digits, hyphens, parentheses,
    brackets and single spaces (``notes.md`` is sent as ``notes-md``)."""
    cleaned = " ".join(_NAME_UNSAFE.sub("-", str(name or "")).split())
    return cleaned or "document"


def _paired(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop unanswered tool uses and orphan tool results; re-merge; start with the user."""
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        answered = {
            block["toolResult"]["toolUseId"] for block in (following or {}).get("content", ()) if "toolResult" in block
        }
        message["content"] = [
            b for b in message["content"] if "toolUse" not in b or b["toolUse"]["toolUseId"] in answered
        ]
    for index, message in enumerate(messages):
        if message["role"] != "user":
            continue
        previous = messages[index - 1] if index > 0 else None
        asked = {
            block["toolUse"]["toolUseId"]
            for block in (previous or {}).get("content", ())
            if previous is not None and previous["role"] == "assistant" and "toolUse" in block
        }
        message["content"] = [
            b for b in message["content"] if "toolResult" not in b or b["toolResult"]["toolUseId"] in asked
        ]
    out: list[dict[str, Any]] = []
    for message in messages:
        _add(out, message["role"], message["content"])
    if out and out[0]["role"] == "assistant":
        out.insert(0, {"role": "user", "content": [{"text": OMITTED}]})
    return out


def from_converse(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Converse messages as neutral ones (what ``model-call`` events carry)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content") or []
        text = "".join(str(block["text"]) for block in content if "text" in block)
        if message.get("role") == "assistant":
            calls = [
                {"id": str(use["toolUseId"]), "name": str(use["name"]), "input": use.get("input") or {}}
                for use in (block["toolUse"] for block in content if "toolUse" in block)
            ]
            out.append({"role": "assistant", "text": text, "tool_calls": calls})
            continue
        for result in (block["toolResult"] for block in content if "toolResult" in block):
            parts = result.get("content") or []
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": str(result.get("toolUseId")),
                    "text": "".join(str(p.get("text", p.get("json", ""))) for p in parts),
                    "error": result.get("status") == "error",
                }
            )
        if text:
            out.append({"role": "user", "text": text})
    return out
