"""Attachments: images and documents that go to the model with the user's message.

An attachment becomes a **media part** of the user message in the neutral message
format (:mod:`agent_apps.state.messages`)::

    {"type": "image" | "document", "format": "png", "data": BASE64, "name": "chart.png"}

Formats: images ``png``, ``jpeg``, ``gif``, ``webp``; documents ``pdf``, ``txt``, ``md``.
The type is read from the bytes (their magic numbers), not from a file's suffix: a
``photo.png`` holding JPEG bytes is a ``jpeg``, and a ``report.pdf`` holding text is
refused as a PDF would be. Text is UTF-8 without control characters; its suffix only
tells Markdown (``.md``, ``.markdown``) from plain text.

The caps are the strictest of the providers that take attachments (Amazon Bedrock's),
so an attachment accepted here is accepted by every one of them; they also bound what a
session stores (the parts are kept with the message, base64 and all):

==========================  ============  =========================================
cap                         value         why
==========================  ============  =========================================
:data:`MAX_IMAGE_BYTES`     3.75 MB       Bedrock's limit for one image
:data:`MAX_DOCUMENT_BYTES`  4.5 MB        Bedrock's limit for one document
:data:`MAX_ATTACHMENTS`     20            Bedrock's images per request
:data:`MAX_DOCUMENTS`       5             Bedrock's documents per request
:data:`MAX_TOTAL_BYTES`     20 MB         one message, all parts (what a session row may hold)
==========================  ============  =========================================

:func:`load` takes what a caller gives (a path, bytes, or a part already made) and
returns checked parts; :class:`AttachmentInvalid` says what is wrong with which one.
Only the caller's side (Python, the command line) may name files: agent code may pass
parts only, never a path (``files=False``), so it reads no file of the host.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .host_files import HostFileRefused, read_host_file

__all__ = [
    "DOCUMENT_FORMATS",
    "IMAGE_FORMATS",
    "MAX_ATTACHMENTS",
    "MAX_DOCUMENTS",
    "MAX_DOCUMENT_BYTES",
    "MAX_IMAGE_BYTES",
    "MAX_TOTAL_BYTES",
    "AttachmentInvalid",
    "describe",
    "load",
    "part_bytes",
]

IMAGE_FORMATS = ("png", "jpeg", "gif", "webp")
DOCUMENT_FORMATS = ("pdf", "txt", "md")
MAX_IMAGE_BYTES = 3_750_000
MAX_DOCUMENT_BYTES = 4_500_000
MAX_ATTACHMENTS = 20
MAX_DOCUMENTS = 5
MAX_TOTAL_BYTES = 20_000_000

_KINDS = "an image (png, jpeg, gif, webp) or a document (pdf, txt, md)"
_MARKDOWN = (".md", ".markdown")
#: Control characters text may hold: tab, line feed, form feed, carriage return.
_TEXT_CONTROLS = frozenset(b"\t\n\f\r")
#: Suffixes that name a binary format: bytes that are not that format are refused.
_CLAIMS = {
    ".png": "a PNG image",
    ".jpg": "a JPEG image",
    ".jpeg": "a JPEG image",
    ".gif": "a GIF image",
    ".webp": "a WebP image",
    ".pdf": "a PDF",
}


class AttachmentInvalid(ValueError):
    """One attachment cannot go to the model: ``index`` is its place in the list (None:
    the list as a whole), ``name`` its file or given name, ``problem`` why."""

    def __init__(self, index: int | None, problem: str, *, name: str | None = None) -> None:
        self.index = index
        self.name = name
        self.problem = problem
        super().__init__(f"{name}: {problem}" if name else problem)

    @property
    def path(self) -> str:
        """Where it is among a call's args: ``attachments[2]``."""
        return "attachments" if self.index is None else f"attachments[{self.index}]"


def load(
    items: Iterable[Any], *, files: bool = True, cwd: str | os.PathLike[str] | None = None
) -> list[dict[str, Any]]:
    """Checked media parts for ``items``: each a path (``str`` or ``PathLike``, relative
    to ``cwd``; only with ``files``), ``bytes``, or a part (a mapping with ``type``,
    ``format``, ``data`` in base64 and an optional ``name``). Raises
    :class:`AttachmentInvalid` for the first that fails, or for the list past a cap."""
    if isinstance(items, (str, bytes, os.PathLike)) or not isinstance(items, Iterable):
        raise AttachmentInvalid(None, f"attachments are a list (of paths, bytes or parts), not {type(items).__name__}")
    parts: list[dict[str, Any]] = []
    total = 0
    for index, item in enumerate(items):
        if index >= MAX_ATTACHMENTS:
            raise AttachmentInvalid(None, f"at most {MAX_ATTACHMENTS} attachments go with one message")
        part = _part(index, item, files=files, cwd=cwd)
        parts.append(part)
        total += part_bytes(part)
        if total > MAX_TOTAL_BYTES:
            raise AttachmentInvalid(
                index, f"the attachments come to more than {_mb(MAX_TOTAL_BYTES)} together", name=part.get("name")
            )
    documents = sum(1 for part in parts if part["type"] == "document")
    if documents > MAX_DOCUMENTS:
        raise AttachmentInvalid(None, f"at most {MAX_DOCUMENTS} documents go with one message ({documents} given)")
    return parts


def describe(parts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the parts are, without their bytes (for reports and events)."""
    return [
        {"type": part.get("type"), "format": part.get("format"), "name": part.get("name"), "bytes": part_bytes(part)}
        for part in parts
    ]


def part_bytes(part: dict[str, Any]) -> int:
    """The size of a part's data once decoded, from its base64 length."""
    data = part.get("data")
    if not isinstance(data, str):
        return 0
    return len(data) * 3 // 4 - data[-2:].count("=")


# -- one attachment -------------------------------------------------------------------


def _part(index: int, item: Any, *, files: bool, cwd: str | os.PathLike[str] | None) -> dict[str, Any]:
    if isinstance(item, (bytes, bytearray, memoryview)):
        data = bytes(item)
        return _checked(index, data, name=None)
    if isinstance(item, dict):
        return _given_part(index, item)
    if isinstance(item, (str, os.PathLike)):
        if not files:
            raise AttachmentInvalid(
                index, "a path is not an attachment here: give {type, format, data (base64), name?}"
            )
        return _file(index, Path(cwd or ".") / Path(item))
    raise AttachmentInvalid(index, f"an attachment is a path, bytes or a part, not {type(item).__name__}")


def _file(index: int, path: Path) -> dict[str, Any]:
    """The checked part for the file at ``path``, read by the host's bounded reader: a
    regular file only (a FIFO or a device is never opened to wait), outside the
    credentials folders, and never more than the larger cap read."""
    shown = str(path)
    try:
        data = read_host_file(path, limit=max(MAX_IMAGE_BYTES, MAX_DOCUMENT_BYTES), folder=None)
    except HostFileRefused as exc:
        problem = exc.reason.removeprefix("is ")
        if problem.startswith("larger than"):
            problem = f"{problem}, more than an attachment may be ({_caps()})"
        raise AttachmentInvalid(index, problem, name=shown) from None
    except OSError as exc:
        raise AttachmentInvalid(index, f"cannot read it ({exc.strerror or exc})", name=shown) from None
    return _checked(index, data, name=path.name, shown=shown)


def _given_part(index: int, part: dict[str, Any]) -> dict[str, Any]:
    """A part made by the caller: its data decoded and judged like a file's bytes; the
    bytes decide its type, and a ``format`` that says otherwise is refused."""
    name = part.get("name")
    if name is not None and not isinstance(name, str):
        raise AttachmentInvalid(index, "a part's name is a string")
    unknown = sorted(set(part) - {"type", "format", "data", "name"})
    if unknown:
        raise AttachmentInvalid(index, f"a part has type, format, data and name, not {', '.join(unknown)}", name=name)
    data = part.get("data")
    if not isinstance(data, str):
        raise AttachmentInvalid(index, "a part's data is its bytes in base64 (a string)", name=name)
    if len(data) > (max(MAX_IMAGE_BYTES, MAX_DOCUMENT_BYTES) * 4) // 3 + 4:
        raise AttachmentInvalid(index, f"more than an attachment may be ({_caps()})", name=name)
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise AttachmentInvalid(index, "a part's data is not valid base64", name=name) from None
    checked = _checked(index, raw, name=name)
    text_formats = ("txt", "md")
    if checked["format"] in text_formats and part.get("format") in text_formats:
        checked["format"] = part["format"]  # text: Markdown or not is the caller's to say
        if name is None:
            checked["name"] = f"attachment-{index + 1}.{part['format']}"
    for key in ("type", "format"):
        given = part.get(key)
        if given is not None and given != checked[key]:
            raise AttachmentInvalid(index, f"its {key} says {given!r} but its bytes are {checked[key]!r}", name=name)
    return checked


def _checked(index: int, data: bytes, *, name: str | None, shown: str | None = None) -> dict[str, Any]:
    """The part for ``data``, typed by its bytes and held to its cap."""
    kind, fmt = _sniff(index, data, name, shown)
    limit = MAX_IMAGE_BYTES if kind == "image" else MAX_DOCUMENT_BYTES
    if len(data) > limit:
        raise AttachmentInvalid(
            index, f"{len(data):,} bytes is more than an {kind} may be ({_mb(limit)})", name=shown or name
        )
    if not data:
        raise AttachmentInvalid(index, "it is empty", name=shown or name)
    return {
        "type": kind,
        "format": fmt,
        "data": base64.b64encode(data).decode("ascii"),
        "name": name or f"attachment-{index + 1}.{fmt}",
    }


def _sniff(index: int, data: bytes, name: str | None, shown: str | None) -> tuple[str, str]:
    """``(type, format)`` from the bytes' magic numbers, else UTF-8 text."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image", "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image", "jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image", "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image", "webp"
    if data.startswith(b"%PDF-"):
        return "document", "pdf"
    suffix = Path(name or "").suffix.lower()
    claimed = _CLAIMS.get(suffix)
    if claimed is not None:  # a binary suffix over bytes that are not that
        raise AttachmentInvalid(index, f"its name says {claimed}, but its bytes are not one", name=shown or name)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or any(b < 0x20 and b not in _TEXT_CONTROLS for b in data) or "\x7f" in text:
        raise AttachmentInvalid(index, f"not {_KINDS}: its bytes are none of them", name=shown or name)
    return "document", "md" if suffix in _MARKDOWN else "txt"


def _mb(size: int) -> str:
    return f"{size / 1_000_000:g} MB"


def _caps() -> str:
    return f"images {_mb(MAX_IMAGE_BYTES)}, documents {_mb(MAX_DOCUMENT_BYTES)}"
