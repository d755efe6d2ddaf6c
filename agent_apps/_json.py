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
import math
import re
from typing import Any

__all__ = ["MAX_DEPTH", "loads", "too_deep", "top_level_scalar"]

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
