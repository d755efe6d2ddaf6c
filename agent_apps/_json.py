"""JSON that comes from untrusted code, parsed with bounds.

Everything agent code hands the host (call batches, run results, memory snapshots)
arrives as JSON text. Python's ``json.loads`` accepts ``NaN``, ``Infinity`` and
``1e999`` (which becomes an infinite float), so a value like ``{"timeout": NaN}``
would slip past every numeric check (``min(nan, 120)`` is ``nan``); and it nests as
deep as the text does, so a 5,000-deep list raises ``RecursionError`` later, in
whatever walks the value. :func:`loads` refuses both with a ``ValueError`` that says
what was wrong, so callers report it instead of crashing.

The same holds for JSON from peers (a model endpoint, an MCP server, an ACP agent): a
message :func:`loads` refuses can still say whom it answers, which
:func:`top_level_scalar` reads without parsing the rest, so the request it answers
fails at once instead of waiting for an answer that never comes.
"""

from __future__ import annotations

import json
import json.encoder
import math
import re
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_DEPTH", "encoder", "loads", "too_deep", "top_level_scalar"]

#: How deep JSON from untrusted code may nest (as serde_json's default recursion limit).
MAX_DEPTH = 128


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large for a JSON number")
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


def loads(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for untrusted text: no NaN/Infinity, at most ``max_depth`` levels.

    Raises ``ValueError`` (a ``json.JSONDecodeError`` for syntax errors) naming the
    problem. Measuring the depth walks the containers only, so a payload that is one
    big string pays nothing for it.
    """
    try:
        if isinstance(text, str) and not text.startswith("\ufeff"):  # json.loads builds a decoder per call
            value = _DECODER.decode(text)
        else:
            value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {max_depth} levels") from None
    # Each level opens with a bracket: text with at most max_depth of them cannot be too
    # deep, which spares the walk for most texts (counting runs at C speed).
    brackets = text.count("[") + text.count("{") if isinstance(text, str) else max_depth + 1
    if brackets > max_depth and too_deep(value, max_depth):
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    return value


def encoder(
    *,
    ensure_ascii: bool = True,
    separators: tuple[str, str] = (", ", ": "),
    allow_nan: bool = True,
    default: Callable[[Any], Any] | None = None,
) -> Callable[[Any], str]:
    """``json.JSONEncoder(...).encode`` with these options, without its two Python
    frames (``encode``, then ``iterencode``): the C encoder, made per value as
    ``iterencode`` makes it (so its circular-reference markers are that value's own),
    called directly. A host call encodes its result for the guest and its report
    entry's args and result: one frame each is what is left.

    Where the C accelerator is missing, the encoder's own ``encode``."""
    base = json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators, allow_nan=allow_nan, default=default)
    make = getattr(json.encoder, "c_make_encoder", None)  # the C accelerator, absent from the stubs
    if make is None:
        return base.encode
    quote = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    item_separator, key_separator = separators
    fallback = base.default

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return quote(value)  # type: ignore[no-any-return]
        chunks = make({}, fallback, quote, None, key_separator, item_separator, False, False, allow_nan)(value, 0)
        return "".join(chunks)

    return encode


def too_deep(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether lists and dicts in ``value`` nest more than ``max_depth`` levels (an
    iterative walk: it cannot run out of stack on the values it exists to refuse)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= max_depth:
                    return True
                stack.append((child, depth + 1))
    return False


#: A JSON string (unrolled, so that a long one is matched in a loop), or a bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
#: After a key: its value, when that is a number, a string, true, false or null.
_SCALAR = re.compile(r'\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|"[^"\\]*(?:\\.[^"\\]*)*"|true|false|null)\s*[,}]')


def top_level_scalar(text: str, key: str) -> Any:
    """The value of ``key`` in the JSON object ``text`` when it is a scalar (a number,
    string, boolean or null), else None: found by scanning the brackets and strings,
    never by parsing, so the rest may nest as deep as it likes (or be cut off).

    Used on a message that :func:`loads` refused, to learn the ``id`` it answers.
    """
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "{[":
            depth += 1
        elif token in "}]":
            depth -= 1
        elif depth == 1 and len(token) <= len(key) * 6 + 2 and json.loads(token) == key:
            value = _SCALAR.match(text, match.end())
            if value is not None:
                return json.loads(value.group(1))
    return None
