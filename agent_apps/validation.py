"""Args and result validation: JSON Schema Draft 2020-12, with schema defaults applied.

Validators are compiled once per skill and cached on it. jsonschema is imported on
first use, so listing skills never pays for it. Schemas and values are untrusted, so
every validator is bounded in what it fetches (nothing), in how patterns match (RE2)
and in time: see :mod:`agent_apps._schema`.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import _schema, _simple_schema
from ._json import MAX_DEPTH
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
    params_check, fills_defaults, _ = _quick_checks(skill)
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ArgsInvalid(skill.name, "", f"args must be a JSON object, not {type(args).__name__}")
    problem = json_problem(args, "")  # NaN, Infinity, 500-deep lists: from MCP, Python, anyone
    if problem is not None:
        raise ArgsInvalid(skill.name, problem[0].lstrip("."), problem[1])
    if skill.params is None:
        if args:
            raise ArgsInvalid(skill.name, next(iter(args)), "this skill takes no args")
        return args
    if params_check is not None:
        quick = copy.deepcopy(args) if fills_defaults else args
        try:
            if params_check(quick, True):
                return quick
        except RecursionError:  # jsonschema below says what is wrong
            pass
    validator, has_defaults = _compiled(skill, "params")
    if has_defaults:
        args = copy.deepcopy(args)
    try:
        error = _schema.first_error(validator, args)
    except _schema.Unvalidatable as exc:
        raise ArgsInvalid(skill.name, "", str(exc)) from None
    if error is not None:
        raise ArgsInvalid(skill.name, format_path(error.absolute_path), _schema.message(error))
    return args


def validate_result(skill: Skill, result: object) -> None:
    """Raise :class:`ResultInvalid` unless ``result`` is JSON and matches ``returns``."""
    problem = json_problem(result)
    if problem is not None:
        raise ResultInvalid(skill.name, *problem)
    returns_check = _quick_checks(skill)[2]
    if returns_check is _NO_SCHEMA:
        return
    if returns_check is not None:
        try:
            if returns_check(result, False):
                return
        except RecursionError:  # jsonschema below says what is wrong
            pass
    validator, _ = _compiled(skill, "returns")
    try:
        error = _schema.first_error(validator, result)
    except _schema.Unvalidatable as exc:
        raise ResultInvalid(skill.name, "result", str(exc)) from None
    if error is not None:
        raise ResultInvalid(skill.name, format_path(error.absolute_path, root="result"), _schema.message(error))


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
#: Values that are JSON whatever they hold: exactly these types (not float: NaN).
_JSON_LEAVES = frozenset(_JSON_SCALARS)


def json_problem(value: object, path: str = "result", depth: int = 0) -> tuple[str, str] | None:
    """``(path, problem)`` for the first part of ``value`` that is not JSON, else None.

    Nesting deeper than ``_json.MAX_DEPTH`` counts as not JSON: whatever walks the value
    next (validation, encoding, events) would run out of stack."""
    if isinstance(value, _JSON_SCALARS):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, f"{value} is not a JSON number")
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_DEPTH:
        return path, f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return path, f"object keys must be strings, found {type(key).__name__} key {key!r}"
            if type(item) in _JSON_LEAVES:  # no call (and no path) for each string, number, bool
                continue
            problem = json_problem(item, f"{path}.{key}", depth + 1)
            if problem:
                return problem
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            if type(item) in _JSON_LEAVES:
                continue
            problem = json_problem(item, f"{path}[{index}]", depth + 1)
            if problem:
                return problem
        return None
    return path, f"{type(value).__name__} is not JSON-serializable (use dicts, lists, strings, numbers, bools, None)"


# -- internals -----------------------------------------------------------------------


#: The quick check of a skill without ``metadata.returns``: every JSON value passes.
_NO_SCHEMA: _simple_schema.Check = _simple_schema.compile_check(True)


def _quick_checks(skill: Skill) -> tuple[_simple_schema.Check | None, bool, _simple_schema.Check | None]:
    """The skill's ``params`` and ``returns`` as compiled quick checks (None where the
    schema is not simple, :data:`_NO_SCHEMA` for no ``returns``), and whether ``params``
    fills in defaults. Built once per skill and cached on it, as the compiled validators
    are. A ``returns`` the quick check cannot take is compiled by jsonschema here, so a
    broken one fails before the skill runs; then nothing is cached, and it fails again."""
    checks = skill._cache.get("quick_checks")
    if checks is None:
        params, returns = skill.params, skill.returns
        if returns is not None and not _simple_schema.is_simple(returns):
            _compiled(skill, "returns")
        checks = skill._cache["quick_checks"] = (
            _simple_schema.compile_check(params) if _simple_schema.is_simple(params) else None,
            _has_defaults(params),
            _NO_SCHEMA if returns is None else
            _simple_schema.compile_check(returns) if _simple_schema.is_simple(returns) else None,
        )  # fmt: skip
    return checks  # type: ignore[no-any-return]


def _compiled(skill: Skill, which: str) -> tuple[Validator, bool]:
    key = f"validator:{which}"
    cached = skill._cache.get(key)
    if cached is None:
        schema = skill.params if which == "params" else skill.returns
        cached = (_make_validator(skill, which, schema), _has_defaults(schema))
        skill._cache[key] = cached
    return cached


def _make_validator(skill: Skill, which: str, schema: Any) -> Validator:
    try:
        _schema.check_schema(schema)
    except _schema.SchemaProblem as exc:
        key = "params" if which == "params" else "metadata"
        where = format_path(exc.path, root=which if which == "params" else "metadata.returns")
        raise SkillLoadError(
            f"{where or which} is not a valid JSON Schema: {exc}",
            path=skill.path or f"<{skill.origin} skill>",
            line=skill.key_lines.get(key, skill.line),
            skill=skill.name,
        ) from None
    return _schema.validator_for(schema, defaulting=which == "params")  # type: ignore[no-any-return]


def _has_defaults(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "default" in schema or any(_has_defaults(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_defaults(v) for v in schema)
    return False


def coerce_params(schema: dict[str, Any] | None, pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """``key=value`` strings (command line, ``name(key=value)``) typed by the schema.

    ``count=3`` gives an int when ``count`` is an integer; ``on=true`` a bool; objects
    and arrays are read as JSON. A value that cannot be coerced stays a string, so the
    validator reports it with its path.
    """
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
    """Why ``schema`` is not a usable JSON Schema (``not a valid JSON Schema at
    properties.n.type: ...``), or None. Usable means valid Draft 2020-12, self-contained
    (no remote or file ``$ref``) and RE2-compatible, checked within the same bounds as
    values, so a schema from agent code (the agent's ``returns``) is data, never an
    instruction to fetch or a pattern that hangs the host."""
    try:
        _schema.check_schema(schema)
    except _schema.SchemaProblem as exc:
        where = format_path(exc.path)
        return f"not a valid JSON Schema{f' at {where}' if where else ''}: {exc}"
    return None


def schema_problem(schema: Any, value: object) -> tuple[str, str] | None:
    """``(path, problem)`` if ``value`` fails the JSON Schema ``schema``, else None.

    For schemas that arrive at run time (the agent's ``returns`` arg), within the same
    bounds as every other schema; check them first with :func:`schema_error`.
    Validators are cached by the schema's JSON text (at most 256: they come from
    agent code). A simple schema's valid value is proven in plain Python, as for
    args: every model response of every run is checked here.
    """
    key = json.dumps(schema, sort_keys=True)
    cached = _RUNTIME.get(key)
    if cached is None:
        problem = schema_error(schema)
        if problem is not None:
            raise ValueError(problem)
        quick = _simple_schema.compile_check(schema) if _simple_schema.is_simple(schema) else None
        cached = (_schema.validator_for(schema), quick)
        if len(_RUNTIME) >= 256:
            _RUNTIME.pop(next(iter(_RUNTIME)))
        _RUNTIME[key] = cached
    validator, quick = cached
    if quick is not None and quick(value, False):  # a valid value of a simple schema: no jsonschema walk
        return None
    try:
        error = _schema.first_error(validator, value)
    except _schema.Unvalidatable as exc:
        return "value", str(exc)
    return None if error is None else (format_path(error.absolute_path, root="value"), _schema.message(error))


#: Validators of run-time schemas by their JSON text: the validator, and the compiled
#: quick check if the schema is simple (:mod:`._simple_schema`).
_RUNTIME: dict[str, tuple[Any, _simple_schema.Check | None]] = {}
