"""A quick yes for simple schemas, so a valid call need not import jsonschema.

Importing jsonschema (and referencing, attrs and the meta-schemas below it) costs a
command-line invocation more than everything else it does together, while most skills
declare small schemas: an object of typed properties, some required, with defaults.
For those, :func:`accepts` proves a value valid in plain Python. It only ever answers
"valid"; anything else (a value that fails, a keyword or a type it does not know) is
False, and the caller asks jsonschema, which stays the one judge of what is wrong and
the one source of error messages. :func:`compile_check` turns a schema into that
check once (the validation module keeps a skill's on the skill), so a call does not
walk the schema's dicts again. :func:`is_simple` admits a schema only if it is made
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
from collections.abc import Callable
from typing import Any

from ._schema import check_pattern, matches_pattern

__all__ = ["Check", "accepts", "compile_check", "is_simple"]

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
    that have a ``default`` are filled in on ``instance`` (pass a copy). A schema
    checked often is worth compiling once with :func:`compile_check`."""
    try:
        return compile_check(schema)(instance, defaults)
    except RecursionError:
        return False


#: A compiled schema: ``check(instance, defaults) -> bool``, :func:`accepts` for it.
Check = Callable[[Any, bool], bool]


def compile_check(schema: Any) -> Check:
    """:func:`accepts` for ``schema`` (one :func:`is_simple` admits) as a function
    built once. Each keyword becomes one step, in the schema's own order, and the
    schema's dicts are read here, not on every value: agent code checks the same
    schema on each of thousands of calls. A check may raise RecursionError, which
    :func:`accepts` answers with False."""
    if schema is True:
        return _yes
    if schema is False:
        return _no
    steps = [step for step in (_step(key, value, schema) for key, value in schema.items()) if step is not None]
    if not steps:
        return _yes
    if len(steps) == 1:
        return steps[0]

    def check(instance: Any, defaults: bool) -> bool:
        for step in steps:
            if not step(instance, defaults):
                return False
        return True

    return check


def _step(key: str, value: Any, schema: dict[str, Any]) -> Check | None:
    """The check of one keyword, or None for an annotation (it never fails a value)."""
    if key == "type":
        names = value if isinstance(value, list) else [value]
        kinds = [_TYPE_CHECKS.get(name, _no) for name in names]  # an unknown type: cannot tell
        if len(kinds) == 1:
            return kinds[0]
        return lambda instance, defaults: any(kind(instance, defaults) for kind in kinds)
    if key == "properties":
        return _properties(value)
    if key == "required":
        return lambda instance, defaults: not isinstance(instance, dict) or all(name in instance for name in value)
    if key == "additionalProperties":
        known, extra = frozenset(schema.get("properties", {})), compile_check(value)
        return lambda instance, defaults: (
            not isinstance(instance, dict)
            or all(name in known or extra(item, defaults) for name, item in instance.items())
        )
    if key == "items":
        item_check = compile_check(value)
        return lambda instance, defaults: (
            not isinstance(instance, list) or all(item_check(item, defaults) for item in instance)
        )
    if key == "enum":
        return lambda instance, defaults: isinstance(instance, str) and instance in value
    if key == "pattern":
        prefix = _literal_prefix(value)
        if prefix is not None:  # ^callback://: RE2 would release the GIL for each match
            return lambda instance, defaults: not isinstance(instance, str) or instance.startswith(prefix)
        return lambda instance, defaults: not isinstance(instance, str) or matches_pattern(value, instance)
    if key in _BOUNDS:
        # NaN, Decimal, ...: jsonschema compares any number, so this cannot tell
        return lambda instance, defaults: (
            _within(key, value, instance) if _is_number(instance) else isinstance(instance, _NOT_NUMBERS)
        )
    if key in _COUNTS:
        sized, at_least = (str if key.endswith("Length") else list), key.startswith("min")
        return lambda instance, defaults: (
            not isinstance(instance, sized) or (len(instance) >= value if at_least else len(instance) <= value)
        )
    return None


def _properties(properties: dict[str, Any]) -> Check:
    """The ``properties`` step: defaults filled in first (when asked), then each
    property present checked."""
    fills = [(name, sub["default"]) for name, sub in properties.items() if isinstance(sub, dict) and "default" in sub]
    checks = [(name, compile_check(sub)) for name, sub in properties.items()]

    def check(instance: Any, defaults: bool) -> bool:
        if not isinstance(instance, dict):
            return True
        if defaults:
            for name, default in fills:
                if name not in instance:
                    instance[name] = copy.deepcopy(default)
        for name, sub_check in checks:
            if name in instance and not sub_check(instance[name], defaults):
                return False
        return True

    return check


def _yes(instance: Any, defaults: bool) -> bool:
    return True


def _no(instance: Any, defaults: bool) -> bool:
    return False


#: The characters that mean more than themselves in a pattern (outside a class).
_META = frozenset("\\.^$|?*+()[]{}")


def _literal_prefix(pattern: str) -> str | None:
    """The text a pattern ``^TEXT`` asks a string to start with, when ``TEXT`` has no
    character that means more than itself; else None. Such a pattern is matched with
    ``str.startswith``, which answers as RE2 does: RE2's matching releases the GIL,
    and each release on the event loop's thread is a wait to take it back."""
    if not pattern.startswith("^") or not _META.isdisjoint(pattern[1:]):
        return None
    return pattern[1:]


def _usable_pattern(pattern: str) -> bool:
    """Whether RE2 runs ``pattern`` (the engine jsonschema is given here too); one it
    refuses is jsonschema's to report."""
    try:
        check_pattern(pattern)
    except ValueError:
        return False
    return True


#: The ``type`` keyword's names as checks. An ``integer`` that is a float (2.0) is
#: one jsonschema takes too: the check answers "cannot tell" for it.
_TYPE_CHECKS: dict[str, Check] = {
    "string": lambda instance, defaults: isinstance(instance, str),
    "object": lambda instance, defaults: isinstance(instance, dict),
    "array": lambda instance, defaults: isinstance(instance, list),
    "boolean": lambda instance, defaults: isinstance(instance, bool),
    "null": lambda instance, defaults: instance is None,
    "integer": lambda instance, defaults: isinstance(instance, int) and not isinstance(instance, bool),
    "number": lambda instance, defaults: _is_number(instance),
}
#: What a bound keyword passes without comparing: every JSON value but a number.
_NOT_NUMBERS = (bool, str, list, dict, type(None))


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
