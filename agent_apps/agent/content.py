"""What a run report keeps of a run's content, bounded.

A report holds what the model said and ran and what its calls returned, so that people
can read a run afterwards (``agent-apps runs show``, the console). A model can write
megabytes, and a tool can return them, so every piece is cut to a limit, and one
agent's report keeps at most :data:`REPORT_LIMIT` characters of content in all.

A field ``F`` that was cut holds the start of the text (for a value that is not a
string, the start of its JSON), and a field ``F_cut`` beside it holds the whole size
in characters: readers say that it was cut, and by how much.
"""

from __future__ import annotations

import json
import json.scanner
from typing import Any

from .._json import encoder

__all__ = ["REPORT_LIMIT", "TEXT_LIMIT", "VALUE_LIMIT", "ContentBudget", "dumps", "json_size"]

#: Characters kept of one text: the model's text or reasoning in a turn, the code of an
#: invoke call, the result the model read.
TEXT_LIMIT = 16_000
#: Characters kept of one value's JSON: a host call's args, its result, its error.
VALUE_LIMIT = 4_000
#: Characters of content one agent's report keeps in all; past it every field is cut.
REPORT_LIMIT = 1_000_000


#: ``value`` as compact JSON (what is not JSON, as its ``repr``): one encoder for every
#: report write, and a run's report serializes each host call's args and result.
dumps = encoder(ensure_ascii=False, separators=(",", ":"), default=repr)
#: The parser of the copies a report keeps, called directly: their text is
#: :func:`dumps`' own, one JSON value with nothing around it, so ``JSONDecoder.decode``'s
#: two Python frames and its whitespace matches have nothing to do.
_scan = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # the stubs type it as a class


def json_size(value: Any, text: str | None = None) -> int:
    """The size in bytes of ``value`` as JSON (a string: of its UTF-8 text); ``text``:
    its JSON, when the caller has it already."""
    text = value if isinstance(value, str) else dumps(value) if text is None else text
    return len(text.encode("utf-8", "surrogatepass"))


class ContentBudget:
    """The content one agent's report may still keep (see the module docstring)."""

    __slots__ = ("room",)

    def __init__(self, room: int | None = None) -> None:
        self.room = REPORT_LIMIT if room is None else room

    def text(self, entry: dict[str, Any], field: str, text: str, limit: int = TEXT_LIMIT) -> None:
        """Keep ``text`` as ``entry[field]``, cut to ``limit`` (and to what room is left)."""
        self._keep(entry, field, text, text, limit)

    def value(
        self, entry: dict[str, Any], field: str, value: Any, limit: int = VALUE_LIMIT, *, text: str | None = None
    ) -> None:
        """Keep ``value`` (any JSON) as ``entry[field]``: a copy, or the start of its JSON
        (``text``, when the caller has it already: :func:`dumps`)."""
        if isinstance(value, str):
            self._keep(entry, field, value, value, limit)
            return
        text = dumps(value) if text is None else text
        self._keep(entry, field, text, None, limit)
        if field not in entry:  # it fits: a copy, so later changes to the value do not show
            entry[field] = value if value is None or isinstance(value, (bool, int)) else _scan(text, 0)[0]

    def _keep(self, entry: dict[str, Any], field: str, text: str, whole: str | None, limit: int) -> None:
        room = min(limit, self.room)
        if len(text) <= room:
            self.room -= len(text)
            if whole is not None:
                entry[field] = whole
            return
        entry[field] = text[:room]
        entry[field + "_cut"] = len(text)
        self.room -= room
