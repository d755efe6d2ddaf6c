"""A frontmatter read into a :class:`~agent_apps.skill.Skill`, checked.

Every way a skill is made from a frontmatter (a skill file, a tools.yaml entry, an
inline or anonymous skill) goes through :func:`skill_from_frontmatter`. It checks the
structure (:func:`check_frontmatter`), the name, the ``metadata`` config keys
(config.py), the ``allowed-tools`` grammar (allowed_tools.py), and notes what the
Agent Skills specification would flag (agentskills.py) as warnings. The checks sit
above the :class:`~agent_apps.skill.Skill` they build, so skill.py imports none of them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .agentskills import spec_warnings
from .allowed_tools import parse_specs
from .config import config_problem
from .errors import SkillLoadError
from .skill import CATEGORIES, FOLDER_FILES, GUARDRAIL_KINDS, LEVELS, Skill, SkillKind, is_skill_name

__all__ = ["check_frontmatter", "skill_from_frontmatter"]

# Keys a frontmatter may have, with the type each must be.
_KEYS: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "description": (str,),
    "params": (dict,),
    "allowed-tools": (str,),
    "middleware": (list,),
    "metadata": (dict,),
}
# Keys of the open Agent Skills format (SKILL.md) that we keep but do not interpret, so
# skills written for other agent tools load as they are.
_AGENT_SKILLS_KEYS = {"license", "compatibility", "version", "author", "tags"}


def skill_from_frontmatter(
    frontmatter: Mapping[str, Any],
    *,
    default_name: str | None,
    path: str | None = None,
    line: int | None = None,
    key_lines: Mapping[str, int] | None = None,
    kind: SkillKind = "code",
    origin: str = "anonymous",
    lenient_keys: bool = False,
    **fields: Any,
) -> Skill:
    """Check a frontmatter and build the skill, or raise :class:`SkillLoadError`."""
    key_lines = dict(key_lines or {})
    extra = check_frontmatter(
        frontmatter, path=path or "<anonymous>", line=line, key_lines=key_lines, lenient_keys=lenient_keys
    )
    name = frontmatter.get("name", default_name)
    if not is_skill_name(name):
        where_line = key_lines.get("name", line)
        shown = name if name is not None else "(none)"
        raise SkillLoadError(
            f"invalid skill name {shown!r}: names use only a-z, 0-9 and '-'",
            path=path or "<anonymous>",
            line=where_line,
        )
    warnings = list(fields.pop("warnings", ()))
    if path and not path.startswith("<"):
        folder = os.path.basename(os.path.dirname(path)) if os.path.basename(path) in FOLDER_FILES else None
        problems = spec_warnings(frontmatter, name, folder)
        category = (frontmatter.get("metadata") or {}).get("category")
        if category is not None and category not in CATEGORIES:
            problems.append((f"metadata.category {category!r} is not one of {', '.join(CATEGORIES)}; "
                             "the permission policy ignores it", "metadata"))
        warnings += [f"{path}:{key_lines.get(key, line) if key else line}: {message}" for message, key in problems]
    return Skill(
        name=name,
        description=frontmatter.get("description", ""),
        params=frontmatter.get("params"),
        allowed_tools=frontmatter.get("allowed-tools"),
        middleware=tuple(frontmatter.get("middleware", ())),
        metadata=dict(frontmatter.get("metadata") or {}),
        kind=kind,
        origin=origin,
        path=path,
        line=line,
        key_lines=key_lines,
        extra=extra,
        warnings=warnings,
        **fields,
    )


def check_frontmatter(
    frontmatter: object,
    *,
    path: str,
    line: int | None,
    key_lines: Mapping[str, int],
    lenient_keys: bool = False,
) -> dict[str, Any]:
    """Raise :class:`SkillLoadError` naming the first problem in a frontmatter.

    The structural checks are hand-written rather than a JSON Schema on purpose: they
    run for every file on every ``agent-apps list``, where importing jsonschema would
    cost more than the listing. ``params`` and ``returns`` are checked against the JSON
    Schema meta-schema when the skill is first validated or described.

    Returns the unknown keys that ``lenient_keys`` allowed through.
    """

    def fail(message: str, key: str | None = None) -> SkillLoadError:
        return SkillLoadError(message, path=path, line=key_lines.get(key, line) if key else line)

    if not isinstance(frontmatter, dict):
        raise fail(f"frontmatter must be a mapping, not {type(frontmatter).__name__}")
    extra: dict[str, Any] = {}
    for key, value in frontmatter.items():
        if key not in _KEYS:
            if lenient_keys or key in _AGENT_SKILLS_KEYS:
                extra[key] = value
                continue
            import difflib

            close = difflib.get_close_matches(str(key), list(_KEYS), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise fail(f"unknown frontmatter key {key!r}{hint}; known keys: {', '.join(_KEYS)}", str(key))
        if not isinstance(value, _KEYS[key]):
            expected = " or ".join(t.__name__ for t in _KEYS[key])
            raise fail(f"frontmatter {key!r} must be a {expected}, not {type(value).__name__}", key)
    params = frontmatter.get("params")
    if params is not None and params.get("type", "object") != "object":
        raise fail("'params' must describe an object: args are always a JSON object", "params")
    for entry in frontmatter.get("middleware", ()):
        if not isinstance(entry, str):
            raise fail(
                f"'middleware' entries must be strings like 'name' or 'name(key=value)', not {entry!r}", "middleware"
            )
    metadata = frontmatter.get("metadata") or {}
    returns = metadata.get("returns")
    if returns is not None and not isinstance(returns, (dict, bool)):
        raise fail("'metadata.returns' must be a JSON Schema (a mapping)", "metadata")
    if metadata.get("visibility") not in (None, "hidden", "visible"):
        raise fail("'metadata.visibility' must be 'hidden' or 'visible'", "metadata")
    role = metadata.get("role")
    if role not in (None, "middleware", "guardrail"):
        raise fail("'metadata.role' must be 'middleware' or 'guardrail' when given", "metadata")
    if role == "middleware" and metadata.get("level", "tool") not in LEVELS:
        raise fail(f"'metadata.level' of a middleware must be one of {', '.join(LEVELS)}", "metadata")
    if role == "guardrail" and metadata.get("kind") not in GUARDRAIL_KINDS:
        raise fail("a guardrail needs 'metadata.kind': input (before each model call) or output (after)", "metadata")
    config_keys = metadata.get("config_keys", [])
    if not isinstance(config_keys, list) or not all(isinstance(k, str) and k for k in config_keys):
        raise fail("'metadata.config_keys' must be a list of dotted config keys ('model.profile')", "metadata")
    problem = config_problem(metadata)
    if problem is not None:
        raise fail(f"'metadata.{'.'.join(problem[0])}' must be {problem[1]}", "metadata")
    allowed = frontmatter.get("allowed-tools")
    if allowed is not None:
        try:
            parse_specs(allowed)
        except ValueError as exc:
            raise fail(str(exc), "allowed-tools") from None
    return extra
