"""The :class:`Skill`: what the search path finds and the pipeline runs.

A skill is data (name, description, schemas, metadata) plus a way to run it. For code
skills the ``main`` function is imported on first use, so listing a thousand skills
never executes any of them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import SkillLoadError

__all__ = [
    "CATEGORIES",
    "FOLDER_FILES",
    "GUARDRAIL_KINDS",
    "LEVELS",
    "NAME_PATTERN",
    "Skill",
    "SkillKind",
    "check_frontmatter",
    "is_skill_name",
]

#: Skill names, and the only refs agent code may use.
NAME_PATTERN = re.compile(r"[a-z0-9-]+")

SkillKind = Literal["code", "prompt", "anonymous", "callback"]

#: The file of an Agent Skills folder (``NAME/SKILL.md``; a lowercase ``skill.md`` is
#: tolerated, as the specification's reference implementation does).
FOLDER_FILES = ("SKILL.md", "skill.md")

#: The ``metadata.category`` values the permission policy knows (docs/security.md).
CATEGORIES = ("read", "write", "admin")

#: What a middleware may wrap (``metadata.level``), and a guardrail's ``metadata.kind``.
LEVELS = ("tool", "model", "run")
GUARDRAIL_KINDS = ("input", "output")

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


def is_skill_name(ref: object) -> bool:
    """True for a bare skill name: ``[a-z0-9-]+``, ASCII only."""
    return isinstance(ref, str) and NAME_PATTERN.fullmatch(ref) is not None


@dataclass(eq=False)
class Skill:
    """A named, described, schema-checked unit the ContextManager can invoke.

    Attributes mirror the frontmatter (``allowed-tools`` becomes ``allowed_tools``).
    ``origin`` says where the skill came from (``path``, ``project``, ``user``,
    ``package:NAME``, ``bundled``, ``file``, ``inline``, ``anonymous``, ``callback``);
    ``path`` and ``line`` point at its file and frontmatter, when it has one.
    """

    name: str
    description: str = ""
    params: dict[str, Any] | None = None
    allowed_tools: str | None = None
    middleware: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: SkillKind = "code"
    origin: str = "anonymous"
    path: str | None = None
    line: int | None = None
    #: The Markdown body of a prompt skill: the agent's prompt.
    body: str | None = None
    #: Frontmatter keys of the Agent Skills format that agent-apps keeps but ignores.
    extra: dict[str, Any] = field(default_factory=dict)
    #: Where each top-level frontmatter key is (file line), for error messages.
    key_lines: dict[str, int] = field(default_factory=dict, repr=False)
    #: The search-path root this skill was found under (for the config cascade).
    root: str | None = None
    #: Problems that do not stop the skill from loading, each ``file:line: message``
    #: (``agent-apps list`` counts them; ``--strict`` makes them errors).
    warnings: list[str] = field(default_factory=list)
    _main: Callable[..., Any] | None = field(default=None, repr=False)
    _loader: Callable[[Skill], Callable[..., Any]] | None = field(default=None, repr=False)
    # Per-skill caches owned by the pipeline (validators, middleware chain).
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- derived facts -------------------------------------------------------------

    @property
    def returns(self) -> dict[str, Any] | None:
        """The JSON Schema of the result (``metadata.returns``), if any."""
        returns = self.metadata.get("returns")
        return returns if isinstance(returns, dict) else None

    @property
    def hidden(self) -> bool:
        """Hidden skills are left out of discovery and callable only when named."""
        return self.metadata.get("visibility") == "hidden"

    @property
    def is_middleware(self) -> bool:
        return self.metadata.get("role") == "middleware"

    @property
    def level(self) -> str:
        """What a middleware wraps (``metadata.level``): ``tool`` (every invocation, the
        default), ``model`` (each model call of an agent run) or ``run`` (agent runs)."""
        return str(self.metadata.get("level") or "tool")

    @property
    def tags(self) -> list[str]:
        tags = self.metadata.get("tags")
        return list(tags) if isinstance(tags, list) else []

    @property
    def guidance(self) -> bool:
        """A guidance skill: instructions an agent loads into its own context on demand
        (the ``load-skills`` skill) rather than a sub-agent it calls. ``metadata.kind:
        guidance`` makes a prompt skill one and ``kind: agent`` does not; without it, a
        ``NAME/SKILL.md`` folder (the Agent Skills layout) is guidance unless it declares
        ``params`` or ``metadata.returns`` (a typed interface only a sub-agent has).
        Middleware never is. Invoked directly, any prompt skill still runs as an agent."""
        if self.kind != "prompt" or self.is_middleware:
            return False
        kind = self.metadata.get("kind")
        if kind is not None:
            return kind == "guidance"
        from .loading import PROMPT_PARAMS

        return self.folder is not None and self.params is PROMPT_PARAMS and self.returns is None

    @property
    def folder(self) -> str | None:
        """The skill's own folder, for a ``NAME/SKILL.md`` skill (the Agent Skills
        layout): the agent running the skill may read the files in it."""
        if self.path and os.path.basename(self.path) in FOLDER_FILES:
            return os.path.dirname(self.path)
        return None

    @property
    def mounted(self) -> bool:
        """A tool of a mounted MCP server (``origin`` ``mcp:SERVER``)."""
        return self.origin.startswith("mcp:")

    @property
    def main(self) -> Callable[..., Any]:
        """The function that runs the skill, imported on first use and then cached."""
        if self._main is None:
            if self._loader is None:
                raise SkillLoadError("skill has no main function", path=self.path or self.name, skill=self.name)
            self._main = self._loader(self)
        return self._main

    @property
    def loaded(self) -> bool:
        """Whether ``main`` has been imported yet."""
        return self._main is not None

    def where(self, key: str | None = None) -> str:
        """``file:line`` of the skill (or of one of its frontmatter keys)."""
        if not self.path:
            return f"<{self.origin} skill {self.name}>"
        line = self.key_lines.get(key, self.line) if key else self.line
        return f"{self.path}:{line}" if line else self.path

    def describe(self) -> dict[str, Any]:
        """A JSON description, as ``agent-apps describe --json`` prints it."""
        data: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "kind": self.kind,
            "origin": self.origin,
        }
        if self.path:
            data["path"] = self.path
        data["params"] = self.params
        if self.returns is not None:
            data["returns"] = self.returns
        if self.allowed_tools is not None:
            data["allowed-tools"] = self.allowed_tools
        if self.middleware:
            data["middleware"] = list(self.middleware)
        if self.metadata:
            data["metadata"] = self.metadata
        if self.guidance:
            data["guidance"] = True
        for key in ("license", "compatibility"):
            if self.extra.get(key) is not None:
                data[key] = self.extra[key]
        if self.warnings:
            data["warnings"] = list(self.warnings)
        return data

    # -- construction --------------------------------------------------------------

    @classmethod
    def from_frontmatter(
        cls,
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
            from .agentskills import spec_warnings

            folder = os.path.basename(os.path.dirname(path)) if os.path.basename(path) in FOLDER_FILES else None
            problems = spec_warnings(frontmatter, name, folder)
            category = (frontmatter.get("metadata") or {}).get("category")
            if category is not None and category not in CATEGORIES:
                problems.append((f"metadata.category {category!r} is not one of {', '.join(CATEGORIES)}; "
                                 "the permission policy ignores it", "metadata"))
            warnings += [f"{path}:{key_lines.get(key, line) if key else line}: {message}" for message, key in problems]
        return cls(
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
    from .config import config_problem

    problem = config_problem(metadata)
    if problem is not None:
        raise fail(f"'metadata.{'.'.join(problem[0])}' must be {problem[1]}", "metadata")
    allowed = frontmatter.get("allowed-tools")
    if allowed is not None:
        from .allowed_tools import parse_specs

        try:
            parse_specs(allowed)
        except ValueError as exc:
            raise fail(str(exc), "allowed-tools") from None
    return extra
