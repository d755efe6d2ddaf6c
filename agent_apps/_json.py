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
import re
from itertools import accumulate
from typing import Any

__all__ = ["MAX_DEPTH", "depth_of", "loads"]

#: How deep JSON from untrusted code may nest (as serde_json's default recursion limit).
MAX_DEPTH = 128

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large for a JSON number")
    return value


def loads(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for untrusted text: no NaN/Infinity, at most ``max_depth`` levels.

    Raises ``ValueError`` (a ``json.JSONDecodeError`` for syntax errors) naming the
    problem. The depth is measured only when the text could be that deep (it has more
    opening brackets than ``max_depth``), so small payloads pay nothing for it.
    """
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {max_depth} levels") from None
    if text.count("[") + text.count("{") > max_depth and depth_of(text) > max_depth:
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    return value


def depth_of(text: str) -> int:
    """The nesting depth of *valid* JSON text (strings skipped), in linear time."""
    skeleton = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, skeleton)), default=0)
