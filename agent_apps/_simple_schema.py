"""A quick yes for simple schemas, so a valid call need not import jsonschema.

Importing jsonschema (and referencing, attrs and the meta-schemas below it) costs a
command-line invocation more than everything else it does together, while most skills
declare small schemas: an object of typed properties, some required, with defaults.
For those, :func:`accepts` proves a value valid in plain Python. It only ever answers
"valid"; anything else (a value that fails, a keyword or a type it does not know) is
False, and the caller asks jsonschema, which stays the one judge of what is wrong and
the one source of error messages. :func:`is_simple` admits a schema only if it is made
of the keywords below, each well-formed for the Draft 2020-12 meta-schema, so a broken
schema still reaches jsonschema's check. A ``pattern`` is matched by RE2, the engine
jsonschema is given too (:mod:`._schema`); one RE2 refuses is left to jsonschema. RE2
costs little to import, and providers' params carry patterns (``^callback://``), so
an agent run's provider call needs no jsonschema walk.

The keywords are evaluated as jsonschema's Draft 2020-12 validator does: in the
schema's own order, ``properties`` filling in ``default`` values first when asked
(as :func:`agent_apps.validation`'s defaulting validator does), then descending into
every property present. tests/test_simple_schema.py compares both on many schemas
and values.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from ._schema import check_pattern, matches_pattern

__all__ = ["accepts", "is_simple"]

_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
#: Keywords that never fail a value (annotations), with the type the meta-schema wants.
_ANNOTATIONS: dict[str, type | tuple[type, ...] | None] = {
    "title": str,
    "description": str,
    "$comment": str,
    "default": None,
    "examples": list,
    "deprecated": bool,
    "readOnly": bool,
    "writeOnly": bool,
}
_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_COUNTS = frozenset({"minLength", "maxLength", "minItems", "maxItems"})
_SUBSCHEMA = frozenset({"additionalProperties", "items"})


def is_simple(schema: Any, depth: int = 0) -> bool:
    """Whether ``schema`` uses only what :func:`accepts` knows, each keyword well-formed."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > 32:
        return False
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            kind = _ANNOTATIONS[key]
            if kind is not None and not isinstance(value, kind):
                return False
        elif key == "type":
            names = value if isinstance(value, list) else [value]
            if not names or len(set(map(str, names))) != len(names):
                return False
            if not all(isinstance(name, str) and name in _TYPES for name in names):
                return False
        elif key == "properties":
            if not isinstance(value, dict) or not all(isinstance(name, str) for name in value):
                return False
            if not all(is_simple(sub, depth + 1) for sub in value.values()):
                return False
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
                return False
            if len(set(value)) != len(value):
                return False
        elif key in _SUBSCHEMA:
            if not is_simple(value, depth + 1):
                return False
        elif key == "enum":
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                return False
        elif key == "pattern":
            if not isinstance(value, str) or not _usable_pattern(value):
                return False
        elif key in _BOUNDS:
            if type(value) not in (int, float) or not math.isfinite(value):
                return False
        elif key in _COUNTS:
            if type(value) is not int or value < 0:
                return False
        else:
            return False
    return True


def accepts(schema: Any, instance: Any, *, defaults: bool = False) -> bool:
    """True if ``instance`` is valid against ``schema`` (one :func:`is_simple` admits);
    False if it is not, or if this cannot tell. With ``defaults``, missing properties
    that have a ``default`` are filled in on ``instance`` (pass a copy)."""
    try:
        return _accepts(schema, instance, defaults)
    except RecursionError:
        return False


def _accepts(schema: Any, instance: Any, defaults: bool) -> bool:
    if schema is True:
        return True
    if schema is False:
        return False
    for key, value in schema.items():
        if key == "type":
            if not any(_is_type(instance, name) for name in (value if isinstance(value, list) else [value])):
                return False
        elif key == "properties":
            if not isinstance(instance, dict):
                continue
            if defaults:
                for name, sub in value.items():
                    if isinstance(sub, dict) and "default" in sub and name not in instance:
                        instance[name] = copy.deepcopy(sub["default"])
            for name, sub in value.items():
                if name in instance and not _accepts(sub, instance[name], defaults):
                    return False
        elif key == "required":
            if isinstance(instance, dict) and any(name not in instance for name in value):
                return False
        elif key == "additionalProperties":
            if isinstance(instance, dict):
                known = schema.get("properties", {})
                for name, item in instance.items():
                    if name not in known and not _accepts(value, item, defaults):
                        return False
        elif key == "items":
            if isinstance(instance, list) and not all(_accepts(value, item, defaults) for item in instance):
                return False
        elif key == "enum":
            if not (isinstance(instance, str) and instance in value):
                return False
        elif key == "pattern":
            if isinstance(instance, str) and not matches_pattern(value, instance):
                return False
        elif key in _BOUNDS:
            if _is_number(instance):
                if not _within(key, value, instance):
                    return False
            elif not isinstance(instance, (bool, str, list, dict, type(None))):
                return False  # NaN, Decimal, ...: jsonschema compares any number
        elif key in _COUNTS:
            if isinstance(instance, str if key.endswith("Length") else list):
                size = len(instance)
                if (size < value) if key.startswith("min") else (size > value):
                    return False
    return True


def _usable_pattern(pattern: str) -> bool:
    """Whether RE2 runs ``pattern`` (the engine jsonschema is given here too); one it
    refuses is jsonschema's to report."""
    try:
        check_pattern(pattern)
    except ValueError:
        return False
    return True


def _is_type(instance: Any, name: str) -> bool:
    if name == "string":
        return isinstance(instance, str)
    if name == "object":
        return isinstance(instance, dict)
    if name == "array":
        return isinstance(instance, list)
    if name == "boolean":
        return isinstance(instance, bool)
    if name == "null":
        return instance is None
    if name == "integer":  # jsonschema also takes 2.0; this answers "cannot tell" for it
        return isinstance(instance, int) and not isinstance(instance, bool)
    return _is_number(instance)  # "number"


def _is_number(instance: Any) -> bool:
    """An int or a finite float (not a bool): other numbers are jsonschema's to judge."""
    if isinstance(instance, bool):
        return False
    return isinstance(instance, int) or (isinstance(instance, float) and math.isfinite(instance))


def _within(key: str, bound: float, value: float) -> bool:
    if key == "minimum":
        return value >= bound
    if key == "maximum":
        return value <= bound
    if key == "exclusiveMinimum":
        return value > bound
    return value < bound  # exclusiveMaximum
