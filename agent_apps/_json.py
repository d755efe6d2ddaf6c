"""JSON that comes from untrusted code, parsed with bounds.

Everything agent code hands the host (call batches, run results, memory snapshots)
arrives as JSON text. Python's ``json.loads`` accepts ``NaN``, ``Infinity`` and
``1e999`` (which becomes an infinite float), so a value like ``{"timeout": NaN}``
would slip past every numeric check (``min(nan, 120)`` is ``nan``); and it nests as
deep as the text does, so a 5,000-deep list raises ``RecursionError`` later, in
whatever walks the value. :func:`loads` refuses both with a ``ValueError`` that says
what was wrong, so callers report it instead of crashing.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MAX_DEPTH", "loads", "too_deep"]

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
