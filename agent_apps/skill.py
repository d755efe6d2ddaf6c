"""The :class:`Skill`: what the search path finds and the pipeline runs.

A skill is data (name, description, schemas, metadata) plus a way to run it. For code
skills the ``main`` function is imported on first use, so listing a thousand skills
never executes any of them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import SkillLoadError

__all__ = [
    "CATEGORIES",
    "FOLDER_FILES",
    "GUARDRAIL_KINDS",
    "LEVELS",
    "NAME_PATTERN",
    "PROMPT_EXECUTOR",
    "PROMPT_PARAMS",
    "Skill",
    "SkillKind",
    "as_skill_name",
    "is_skill_name",
    "mounted_tool_name",
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

#: The args of a prompt skill that declares no ``params``: a free-form task.
PROMPT_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What to do; becomes the agent's first message."}},
}
#: The skill that runs prompt skills (CONTRACT section 7).
PROMPT_EXECUTOR = "agent-execute"

def is_skill_name(ref: object) -> bool:
    """True for a bare skill name: ``[a-z0-9-]+``, ASCII only."""
    return isinstance(ref, str) and NAME_PATTERN.fullmatch(ref) is not None


def as_skill_name(text: str) -> str:
    """``text`` made a skill name: camelCase split, lowercased, every run of other
    characters one ``-``; ``tool`` when nothing is left."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", text)  # camelCase -> camel-case
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "tool"


def mounted_tool_name(server: str, tool: str) -> str:
    """The skill name of tool ``tool`` of the mounted MCP server ``server``:
    ``SERVER-TOOL`` made a skill name (see :func:`as_skill_name`)."""
    return as_skill_name(f"{as_skill_name(server)}-{as_skill_name(tool)}")


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
