"""Bounded JSON Schema validators: untrusted schemas, untrusted values, the host's time.

Schemas are untrusted input (a skill file, or agent code handing a ``returns`` schema
to a sub-agent), and so are the values checked against them. Validation runs on the
host, on the event loop, where no sandbox time limit reaches it. So the validators
made here are Draft 2020-12 with these bounds:

* ``$ref`` and ``$dynamicRef`` resolve only inside the schema itself (and to the JSON
  Schema meta-schemas): nothing is fetched from a URL or read from a file. A schema
  that points elsewhere is refused when it is checked, and the registry refuses any
  retrieval as a second line;
* ``pattern``, ``patternProperties`` (also where ``additionalProperties`` consults
  them) and ``format: regex`` run on RE2, which matches in linear time and bounds the
  memory of a compiled pattern, so ``^(a+)+$`` cannot hang the process. RE2 has no
  lookaround and no backreferences: schemas using them are refused with a clear error,
  as is ``unevaluatedProperties`` next to ``patternProperties`` (jsonschema matches
  those with Python's backtracking ``re``);
* ``uniqueItems`` compares canonical forms in a set (linear, not quadratic);
* one validation may take :data:`TIME_LIMIT` seconds, checked before every keyword
  that applies subschemas, which stops schemas whose ``anyOf``/``$ref`` trees explode
  combinatorially;
* a schema or value nested so deep that validation would exhaust the stack is an
  error (:class:`Unvalidatable`), never an uncaught ``RecursionError``.

jsonschema, referencing and RE2 are imported on first use.
"""

from __future__ import annotations

import copy
import functools
import json
import threading
import time
from collections.abc import Iterable
from typing import Any

__all__ = [
    "TIME_LIMIT",
    "SchemaProblem",
    "Unvalidatable",
    "check_pattern",
    "check_schema",
    "first_error",
    "matches_pattern",
    "message",
    "validator_for",
]

#: Wall-clock seconds one validation may take.
TIME_LIMIT = 2.0
#: How long a validation error message may be (values are quoted in them).
MAX_MESSAGE = 1000

#: Keywords whose values are data, not schemas: never searched for references.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


class SchemaProblem(ValueError):
    """A schema agent-apps will not use; ``path`` is where in the schema."""

    def __init__(self, message: str, path: Iterable[object] = ()) -> None:
        super().__init__(message)
        self.path = list(path)


class Unvalidatable(Exception):
    """Validation could not finish within its bounds (time, depth, references)."""


def validator_for(schema: Any, *, defaulting: bool = False) -> Any:
    """A bounded validator for a schema already passed by :func:`check_schema`.

    With ``defaulting``, ``default`` values are filled in for missing properties as it
    validates (callers pass a copy of the instance)."""
    return _bounded(defaulting)(schema, format_checker=_format_checker(), registry=_registry())


def check_schema(schema: Any) -> None:
    """Raise :class:`SchemaProblem` unless ``schema`` is a valid, self-contained,
    RE2-compatible Draft 2020-12 schema (checked within the same bounds as values)."""
    from jsonschema import Draft202012Validator

    problem = _foreign_part(schema, base="", path=[], ids=None)
    if problem is not None:
        raise SchemaProblem(*problem)
    meta = _bounded(False)(Draft202012Validator.META_SCHEMA, format_checker=_format_checker())
    try:
        error = first_error(meta, schema)
    except Unvalidatable as exc:
        raise SchemaProblem(str(exc)) from None
    if error is not None:
        raise SchemaProblem(message(error), error.absolute_path)


_BUDGET = threading.local()  # .deadline: when the validation running on this thread must stop


def first_error(validator: Any, instance: object) -> Any:
    """The most relevant error, or None; :class:`Unvalidatable` past the bounds.

    The valid case (the common one) stops at the first check; ranking errors with
    ``best_match`` only happens when there are some.
    """
    best_match, Unresolvable = _error_tools()
    outer = getattr(_BUDGET, "deadline", None)
    if outer is None:  # not inside another validation on this thread: start the clock
        _BUDGET.deadline = time.monotonic() + TIME_LIMIT
    try:
        if next(validator.iter_errors(instance), None) is None:
            return None
        return best_match(validator.iter_errors(instance))
    except _TooSlow:
        raise Unvalidatable(
            f"validation took longer than {TIME_LIMIT:g} s and was stopped (the schema or the value is too complex)"
        ) from None
    except RecursionError:
        raise Unvalidatable(
            "validation recursed too deeply (a schema that refers to itself in a loop, or a value nested too deeply)"
        ) from None
    except Unresolvable as exc:
        raise Unvalidatable(f"cannot resolve {exc}: only references inside the schema are followed") from None
    finally:
        if outer is None:
            _BUDGET.deadline = None


@functools.cache
def _error_tools() -> tuple[Any, Any]:
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    return best_match, Unresolvable


def message(error: Any) -> str:
    """A validation error's message, cut to :data:`MAX_MESSAGE` characters."""
    text = str(error.message)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


# -- what a schema may refer to --------------------------------------------------------


def _foreign_part(schema: Any, *, base: str, path: list[object], ids: frozenset[str] | None) -> tuple[str, list] | None:
    """``(problem, path)`` for the first reference that leaves the schema (a URL, a
    file, another document), or for features whose matching cannot be bounded."""
    from urllib.parse import urldefrag, urljoin

    if ids is None:
        ids = frozenset(_ids(schema, ""))
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            found = _foreign_part(item, base=base, path=[*path, index], ids=ids)
            if found:
                return found
        return None
    if not isinstance(schema, dict):
        return None
    if isinstance(schema.get("$id"), str):
        base = urljoin(base, schema["$id"])
    if "patternProperties" in schema and "unevaluatedProperties" in json.dumps(schema):
        return "'unevaluatedProperties' next to 'patternProperties' is not supported (unbounded matching)", path
    for key in ("$ref", "$dynamicRef"):
        ref = schema.get(key)
        if isinstance(ref, str):
            target = urldefrag(urljoin(base, ref)).url
            if target and target not in ids and not _is_meta_schema(target):
                return (
                    f"{key} {ref!r} points outside the schema; agent-apps never fetches schemas from URLs "
                    "or files (put shared definitions under '$defs' and refer to '#/$defs/NAME')",
                    [*path, key],
                )
    for key, value in schema.items():
        if key not in _DATA_KEYWORDS and isinstance(value, (dict, list)):
            found = _foreign_part(value, base=base, path=[*path, key], ids=ids)
            if found:
                return found
    return None


def _ids(schema: Any, base: str) -> Iterable[str]:
    """Every ``$id`` declared in ``schema``, made absolute."""
    from urllib.parse import urldefrag, urljoin

    if isinstance(schema, dict):
        if isinstance(schema.get("$id"), str):
            base = urljoin(base, schema["$id"])
            yield urldefrag(base).url
        for key, value in schema.items():
            if key not in _DATA_KEYWORDS:
                yield from _ids(value, base)
    elif isinstance(schema, list):
        for item in schema:
            yield from _ids(item, base)


def _is_meta_schema(uri: str) -> bool:
    from jsonschema_specifications import REGISTRY

    return uri in REGISTRY


@functools.cache
def _registry() -> Any:
    """The meta-schemas and nothing else: jsonschema's default registry would open any
    URL (``file://`` too) that a ``$ref`` names."""
    import referencing
    from jsonschema_specifications import REGISTRY
    from referencing.exceptions import NoSuchResource

    def refuse(uri: str) -> Any:
        raise NoSuchResource(ref=uri)  # type: ignore[call-arg]

    return REGISTRY.combine(referencing.Registry(retrieve=refuse))  # type: ignore[call-arg]


# -- the bounded keywords --------------------------------------------------------------


class _TooSlow(Exception):
    pass


@functools.cache
def _bounded(defaulting: bool) -> Any:
    from jsonschema import Draft202012Validator, validators

    base = Draft202012Validator.VALIDATORS
    keywords: dict[str, Any] = {
        **base,
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
    }
    if defaulting:
        validate_properties = base["properties"]

        def properties(validator: Any, props: dict[str, Any], instance: Any, schema: Any) -> Any:
            if isinstance(instance, dict):
                for name, sub in props.items():
                    if isinstance(sub, dict) and "default" in sub and name not in instance:
                        instance[name] = copy.deepcopy(sub["default"])
            yield from validate_properties(validator, props, instance, schema)

        keywords["properties"] = properties
    timed = {name: _timed(fn) if name in _APPLICATORS else fn for name, fn in keywords.items()}
    return validators.extend(Draft202012Validator, timed)


#: Keywords that apply subschemas: the only way one validation's work can multiply
#: (``anyOf`` of ``$ref`` of ``anyOf``...), so the clock is checked before each. The
#: others do work linear in the value they look at.
_APPLICATORS = frozenset({
    "$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "not", "if", "dependentSchemas", "items", "prefixItems",
    "contains", "properties", "patternProperties", "additionalProperties", "propertyNames", "unevaluatedItems",
    "unevaluatedProperties",
})


def _timed(keyword: Any) -> Any:
    """``keyword`` behind the thread's validation deadline."""

    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        deadline = getattr(_BUDGET, "deadline", None)
        if deadline is not None and time.monotonic() > deadline:
            raise _TooSlow
        return keyword(validator, value, instance, schema)

    return check


@functools.lru_cache(maxsize=1024)
def _re2(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (linear-time matching, bounded compile memory)."""
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 logs to stderr otherwise; the error says it all
    return re2.compile(pattern, options)


def check_pattern(pattern: str) -> None:
    """Raise ``ValueError`` saying why RE2 cannot run ``pattern`` (lookaround,
    backreferences, a repetition count over 1000, a program too large...)."""
    try:
        _re2(pattern)
    except Exception as exc:  # re2.error carries RE2's own reason, as bytes
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"{reason} (patterns run on RE2: no lookaround or backreferences)") from None


def _search(pattern: str, text: str) -> bool:
    try:
        check_pattern(pattern)  # cached: check_schema refused such patterns already
    except ValueError as exc:
        raise Unvalidatable(f"pattern {pattern[:100]!r} cannot be used: {exc}") from None
    return matches_pattern(pattern, text)


def matches_pattern(pattern: str, text: str) -> bool:
    """Whether ``text`` matches ``pattern`` anywhere, as JSON Schema's ``pattern`` asks
    (RE2; the pattern passed :func:`check_pattern`)."""
    return _re2(pattern).search(text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{_short(instance)} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Any:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Any:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in known and not any(_search(p, k) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        shown = ", ".join(_short(k) for k in sorted(extras)[:10]) + (", ..." if len(extras) > 10 else "")
        if patterns:
            yield ValidationError(f"{shown} do not match any of the regexes: {', '.join(map(repr, patterns))}")
        else:
            yield ValidationError(f"Additional properties are not allowed ({shown} unexpected)")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Any:
    from jsonschema.exceptions import ValidationError

    if unique and validator.is_type(instance, "array"):
        seen: set[str] = set()
        for item in instance:
            key = json.dumps(_canonical(item), sort_keys=True, default=repr)
            if key in seen:
                yield ValidationError(f"{_short(instance)} has non-unique elements")
                return
            seen.add(key)


def _canonical(value: Any) -> Any:
    """JSON Schema equality as plain data: ``1 == 1.0``, but ``true != 1``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


@functools.cache
def _format_checker() -> Any:
    """Draft 2020-12's format checker, with ``regex`` meaning "RE2 compiles it"."""
    from jsonschema import Draft202012Validator, FormatChecker

    checker = FormatChecker(formats=())
    checker.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)

    def is_regex(instance: object) -> bool:
        if isinstance(instance, str):
            check_pattern(instance)
        return True

    checker.checks("regex", raises=ValueError)(is_regex)
    return checker
