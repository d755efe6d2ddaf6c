"""Args and result validation: JSON Schema Draft 2020-12, with schema defaults applied.

Validators are compiled once per skill and cached on it. jsonschema is imported on
first use, so listing skills never pays for it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import _simple_schema
from .errors import ArgsInvalid, ResultInvalid, SkillLoadError
from .skill import Skill

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["check_schemas", "format_path", "json_problem", "schema_error", "validate_args", "validate_result"]


def validate_args(skill: Skill, args: object) -> dict[str, Any]:
    """Validated args with schema defaults filled in; never mutates the caller's dict.

    A broken ``metadata.returns`` fails here too, before the skill (or a prompt skill's
    model) runs, rather than after the work is done.

    Simple schemas that a valid value passes never reach jsonschema (see
    :mod:`._simple_schema`): a command-line invocation then does not import it."""
    if skill.returns is not None and not _simple(skill, "returns"):
        _compiled(skill, "returns")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ArgsInvalid(skill.name, "", f"args must be a JSON object, not {type(args).__name__}")
    if skill.params is None:
        if args:
            raise ArgsInvalid(skill.name, next(iter(args)), "this skill takes no args")
        return args
    if _simple(skill, "params"):
        quick = copy.deepcopy(args) if skill._cache["simple:params"] == "defaults" else args
        if _simple_schema.accepts(skill.params, quick, defaults=True):
            return quick
    validator, has_defaults = _compiled(skill, "params")
    if has_defaults:
        args = copy.deepcopy(args)
    error = _first_error(validator, args)
    if error is not None:
        raise ArgsInvalid(skill.name, format_path(error.absolute_path), error.message)
    return args


def validate_result(skill: Skill, result: object) -> None:
    """Raise :class:`ResultInvalid` unless ``result`` is JSON and matches ``returns``."""
    problem = json_problem(result)
    if problem is not None:
        raise ResultInvalid(skill.name, *problem)
    if skill.returns is None or (_simple(skill, "returns") and _simple_schema.accepts(skill.returns, result)):
        return
    validator, _ = _compiled(skill, "returns")
    error = _first_error(validator, result)
    if error is not None:
        raise ResultInvalid(skill.name, format_path(error.absolute_path, root="result"), error.message)


def check_schemas(skill: Skill) -> None:
    """Check ``params`` and ``returns`` against the meta-schema (clear error with line)."""
    if skill.params is not None:
        _compiled(skill, "params")
    if skill.returns is not None:
        _compiled(skill, "returns")


def format_path(path: Iterable[object], root: str = "") -> str:
    """``deque(['items', 2, 'name'])`` -> ``items[2].name``."""
    out = root
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_JSON_SCALARS = (str, int, bool, type(None))


def json_problem(value: object, path: str = "result") -> tuple[str, str] | None:
    """``(path, problem)`` for the first part of ``value`` that is not JSON, else None."""
    if isinstance(value, _JSON_SCALARS):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, f"{value} is not a JSON number")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return path, f"object keys must be strings, found {type(key).__name__} key {key!r}"
            problem = json_problem(item, f"{path}.{key}")
            if problem:
                return problem
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            problem = json_problem(item, f"{path}[{index}]")
            if problem:
                return problem
        return None
    return path, f"{type(value).__name__} is not JSON-serializable (use dicts, lists, strings, numbers, bools, None)"


# -- internals -----------------------------------------------------------------------


def _simple(skill: Skill, which: str) -> bool:
    """Whether the skill's ``params`` or ``returns`` schema is one :mod:`._simple_schema`
    can check (cached on the skill, as the compiled validators are)."""
    key = f"simple:{which}"
    simple = skill._cache.get(key)
    if simple is None:
        schema = skill.params if which == "params" else skill.returns
        simple = _simple_schema.is_simple(schema) and ("defaults" if _has_defaults(schema) else "plain")
        skill._cache[key] = simple
    return bool(simple)


def _compiled(skill: Skill, which: str) -> tuple[Validator, bool]:
    key = f"validator:{which}"
    cached = skill._cache.get(key)
    if cached is None:
        schema = skill.params if which == "params" else skill.returns
        cached = (_make_validator(skill, which, schema), _has_defaults(schema))
        skill._cache[key] = cached
    return cached


def _make_validator(skill: Skill, which: str, schema: Any) -> Validator:
    from jsonschema import Draft202012Validator, exceptions

    try:
        Draft202012Validator.check_schema(schema)
    except exceptions.SchemaError as exc:
        key = "params" if which == "params" else "metadata"
        where = format_path(exc.absolute_path, root=which if which == "params" else "metadata.returns")
        raise SkillLoadError(
            f"{where or which} is not a valid JSON Schema: {exc.message}",
            path=skill.path or f"<{skill.origin} skill>",
            line=skill.key_lines.get(key, skill.line),
            skill=skill.name,
        ) from None
    cls = _defaulting_validator() if which == "params" else Draft202012Validator
    return cls(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


_DEFAULTING: Any = None


def _defaulting_validator() -> Any:
    """Draft 2020-12 that fills in ``default`` for missing properties as it validates."""
    global _DEFAULTING
    if _DEFAULTING is None:
        from jsonschema import Draft202012Validator, validators

        validate_properties = Draft202012Validator.VALIDATORS["properties"]

        def properties(validator: Any, props: dict[str, Any], instance: Any, schema: Any) -> Any:
            if isinstance(instance, dict):
                for name, sub in props.items():
                    if isinstance(sub, dict) and "default" in sub and name not in instance:
                        instance[name] = copy.deepcopy(sub["default"])
            yield from validate_properties(validator, props, instance, schema)

        _DEFAULTING = validators.extend(Draft202012Validator, {"properties": properties})
    return _DEFAULTING


def _has_defaults(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "default" in schema or any(_has_defaults(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_defaults(v) for v in schema)
    return False


def _first_error(validator: Any, instance: object) -> Any:
    """The most relevant error, or None. The valid case (the common one) stops at the
    first check; ranking errors with ``best_match`` only happens when there are some."""
    if next(validator.iter_errors(instance), None) is None:
        return None
    from jsonschema.exceptions import best_match

    return best_match(validator.iter_errors(instance))


def coerce_params(schema: dict[str, Any] | None, pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """``key=value`` strings (command line, ``name(key=value)``) typed by the schema.

    ``count=3`` gives an int when ``count`` is an integer; ``on=true`` a bool; objects
    and arrays are read as JSON. A value that cannot be coerced stays a string, so the
    validator reports it with its path.
    """
    import json

    props = (schema or {}).get("properties", {})
    out: dict[str, Any] = {}
    for key, text in pairs:
        kind = props.get(key, {}).get("type") if isinstance(props.get(key), dict) else None
        kinds = kind if isinstance(kind, list) else [kind]
        value: Any = text
        for candidate in kinds:
            try:
                if candidate == "integer":
                    value = int(text)
                elif candidate == "number":
                    value = float(text) if any(c in text for c in ".eE") else int(text)
                elif candidate == "boolean" and text.lower() in ("true", "false", "1", "0", "yes", "no"):
                    value = text.lower() in ("true", "1", "yes")
                elif candidate in ("object", "array", "null"):
                    value = json.loads(text)
                else:
                    continue
                break
            except ValueError:
                continue
        out[key] = value
    return out


def schema_error(schema: Any) -> str | None:
    """Why ``schema`` is not a valid JSON Schema (``at properties.n.type: ...``), or None."""
    from jsonschema import Draft202012Validator, exceptions

    try:
        Draft202012Validator.check_schema(schema)
    except exceptions.SchemaError as exc:
        where = format_path(exc.absolute_path)
        return f"not a valid JSON Schema{f' at {where}' if where else ''}: {exc.message}"
    return None


def schema_problem(schema: Any, value: object) -> tuple[str, str] | None:
    """``(path, problem)`` if ``value`` fails the JSON Schema ``schema``, else None.

    For schemas that arrive at run time (the agent's ``returns`` arg); validators are
    cached by the schema's JSON text.
    """
    import json

    from jsonschema import Draft202012Validator

    key = json.dumps(schema, sort_keys=True)
    validator = _RUNTIME.get(key)
    if validator is None:
        Draft202012Validator.check_schema(schema)
        validator = _RUNTIME[key] = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    error = _first_error(validator, value)
    return None if error is None else (format_path(error.absolute_path, root="value"), error.message)


_RUNTIME: dict[str, Any] = {}
