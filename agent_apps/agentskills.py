"""Skills written for other agent tools: the open Agent Skills specification.

A ``NAME/SKILL.md`` folder follows the Agent Skills layout (agentskills.io). Such files
come from a world with other conventions, so this module reads them leniently and says
what it did, rather than refusing them:

* **diagnostics**: what the specification asks of a skill (a description; a name of at
  most 64 characters, without a leading or trailing hyphen or ``--``, that matches its
  folder; limits on ``description`` and ``compatibility``) is checked, and a problem is a
  *warning* naming the file and line. The skill still loads; ``agent-apps list --strict``
  turns warnings into errors.
* **tolerated forms**: a lowercase ``skill.md``; a byte-order mark; YAML that other
  clients' parsers accept although it is invalid (an unquoted value holding ``": "``).
* **foreign frontmatter**: the specification makes ``metadata`` a map of strings, so
  ``metadata.model: claude-x`` or ``metadata.role: reviewer`` mean something else there.
  Values of keys agent-apps reads itself that do not have agent-apps' shape are set
  aside (kept in ``Skill.extra["metadata"]``) with a warning; a ``category`` that is not
  one of agent-apps' own values does not count.
* **tool names**: in the specification ``allowed-tools`` *pre-approves* tools by their
  Claude-style names (``Bash(git:*) Read``); in agent-apps it *restricts* a skill to the
  skills it names. :func:`translate_allowed_tools` maps the foreign names to the
  agent-apps skills that do the same thing, so the list keeps restricting.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ._syntax import split_top_level
from .config import config_problem
from .skill import CATEGORIES, mounted_tool_name

__all__ = [
    "TOOL_NAMES",
    "foreign_metadata",
    "lenient_yaml",
    "spec_warnings",
    "translate_allowed_tools",
]

MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500

#: Claude-style tool names and the agent-apps skills that do the same. Names absent
#: here (WebSearch, TodoWrite, NotebookEdit, ...) have no equivalent and are dropped.
TOOL_NAMES: dict[str, tuple[str, ...]] = {
    "Bash": ("shell",),
    "Read": ("file-read",),
    "Write": ("file-write",),
    "Edit": ("file-edit",),
    "MultiEdit": ("file-edit",),
    "Glob": ("file-list",),
    "LS": ("file-list",),
    "Grep": ("file-list", "file-read"),  # no search skill: the agent lists and reads
    "WebFetch": ("http-fetch",),
    "Task": ("agent",),
    "Agent": ("agent",),
}
# Which argument a pattern in parentheses constrains, per Claude tool name.
_PATTERN_ARG = {
    "Bash": "command",
    "Read": "path",
    "Write": "path",
    "Edit": "path",
    "MultiEdit": "path",
    "Glob": "path",
    "LS": "path",
    "Grep": "path",
}

# Keys agent-apps reads under ``metadata`` and the shape it expects.
_METADATA_SHAPES: dict[str, tuple[type, ...]] = {
    "model": (dict,),
    "returns": (dict, bool),
    "tags": (list,),
}
_METADATA_VALUES = {"visibility": ("hidden", "visible"), "role": ("middleware", "guardrail"), "category": CATEGORIES}


# -- allowed-tools ----------------------------------------------------------------------


def translate_allowed_tools(text: str) -> tuple[str, list[str]]:
    """``text`` with Claude-style tool names replaced by agent-apps specs, and a note
    for each name that was dropped or read in a particular way.

    ``Read`` -> ``file-read``; ``Bash`` -> ``shell``; ``Bash(git:*)`` (a command prefix)
    -> ``shell(command=git) shell(command="git *")``; ``Bash(git status)`` ->
    ``shell(command="git status")``; ``Read(./docs/**)`` -> ``file-read(path=docs/**)``;
    ``WebFetch(domain:example.com)`` -> ``http-fetch`` limited to that host;
    ``mcp__server__tool`` -> the mounted skill ``server-tool``. agent-apps specs pass
    through unchanged. An empty result means "no tools".
    """
    out: list[str] = []
    notes: list[str] = []
    for token in split_top_level(text, " \t\n,"):
        head, paren, inner = token.partition("(")
        if head.startswith("mcp__"):
            out.append(_mcp_spec(head))
            continue
        if head not in TOOL_NAMES:
            if head != head.lower() or (head and not re.fullmatch(r"[a-z0-9*?\[\]!-]+", head)):
                notes.append(f"allowed-tools: {token!r} has no agent-apps equivalent; it is left out")
                continue
            out.append(token)  # an agent-apps spec
            continue
        names = TOOL_NAMES[head]
        pattern = inner[:-1].strip() if paren and inner.endswith(")") else None
        if pattern in (None, "", "*", "**"):
            out.extend(names)
        elif head not in _PATTERN_ARG and head != "WebFetch":
            notes.append(f"allowed-tools: {token!r}: agent-apps cannot apply this pattern; the tool is left out")
        elif head == "WebFetch":
            out.extend(_domain_specs(pattern, notes, token))
        else:
            out.extend(_pattern_specs(names, _PATTERN_ARG.get(head, "path"), head, pattern))
    return " ".join(dict.fromkeys(out)), notes


def _pattern_specs(names: tuple[str, ...], arg: str, head: str, pattern: str) -> list[str]:
    if head == "Bash":
        # Claude Code: "Bash(npm run test:*)" is a command prefix; newer "Bash(git *)" a glob.
        if pattern.endswith(":*"):
            prefix = pattern[:-2].strip()
            return [f"{name}({arg}={_quote(prefix)})" for name in names] + [
                f"{name}({arg}={_quote(prefix + ' *')})" for name in names
            ]
        return [f"{name}({arg}={_quote(pattern)})" for name in names]
    path = pattern[1:] if pattern.startswith("//") else pattern  # "//abs" is an absolute path
    path = path[2:] if path.startswith("./") else path
    return [f"{name}({arg}={_quote(path)})" for name in names]


def _domain_specs(pattern: str, notes: list[str], token: str) -> list[str]:
    if not pattern.startswith("domain:"):
        notes.append(f"allowed-tools: {token!r}: only 'domain:HOST' patterns are understood; http-fetch is left out")
        return []
    host = pattern[len("domain:") :].strip()
    return [f"http-fetch(url={scheme}://{host}{tail})" for scheme in ("https", "http") for tail in ("", "/*")]


def _mcp_spec(head: str) -> str:
    server, _, tool = head[len("mcp__") :].partition("__")
    if tool:
        return mounted_tool_name(server, tool)
    return mounted_tool_name(server, "x").removesuffix("-x") + "-*"  # every tool of the server


def _quote(value: str) -> str:
    if not re.search(r"[\s,()=\"']", value):
        return value
    return f"'{value}'" if '"' in value else f'"{value}"'


# -- metadata -----------------------------------------------------------------------------


def foreign_metadata(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[tuple[str, str]]]:
    """Split ``metadata`` into what agent-apps reads and what it sets aside.

    Returns ``(kept, set_aside, notes)``; each note is ``(message, key)``.
    """
    kept: dict[str, Any] = {}
    aside: dict[str, Any] = {}
    notes: list[tuple[str, str]] = []
    for key, value in metadata.items():
        shapes = _METADATA_SHAPES.get(key)
        values = _METADATA_VALUES.get(key)
        if shapes is not None and not isinstance(value, shapes):
            expected = " or ".join("a mapping" if t is dict else f"a {t.__name__}" for t in shapes)
            notes.append((f"metadata.{key} is {_shown(value)}, not {expected} as agent-apps reads it; ignored", key))
        elif values is not None and value not in values:
            notes.append(
                (f"metadata.{key} {_shown(value)} is not an agent-apps value ({', '.join(values)}); ignored", key)
            )
        elif key == "model" and _model_problem(value):
            notes.append((f"metadata.model: {_model_problem(value)}; ignored", key))
        else:
            kept[key] = value
            continue
        aside[key] = value
    return kept, aside, notes


def _model_problem(value: Any) -> str | None:
    problem = config_problem({"model": value})
    return f"{'.'.join(problem[0][1:])} must be {problem[1]}" if problem else None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# -- diagnostics --------------------------------------------------------------------------


def spec_warnings(frontmatter: Mapping[str, Any], name: str, folder: str | None) -> list[tuple[str, str | None]]:
    """What the specification asks that ``frontmatter`` does not do: ``(message, key)``.

    ``folder``: the folder's name for an Agent Skills folder (its name must match), else
    None (then only the name rules apply, which hold for every skill).
    """
    problems: list[tuple[str, str | None]] = []
    if len(name) > MAX_NAME:
        problems.append((f"name {name!r} is {len(name)} characters long; at most {MAX_NAME}", "name"))
    if name.startswith("-") or name.endswith("-"):
        problems.append((f"name {name!r} starts or ends with a hyphen", "name"))
    if "--" in name:
        problems.append((f"name {name!r} contains '--'", "name"))
    if folder is None:
        return problems
    if name != folder:
        problems.append((f"name {name!r} differs from its folder {folder!r}; the skill is called {name!r}", "name"))
    description = frontmatter.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append(("no description: other agents (and yours) choose skills by it", "description"))
    elif len(description) > MAX_DESCRIPTION:
        problems.append(
            (f"description is {len(description)} characters long; at most {MAX_DESCRIPTION}", "description")
        )
    compatibility = frontmatter.get("compatibility")
    if compatibility is not None and (
        not isinstance(compatibility, str) or not 0 < len(compatibility) <= MAX_COMPATIBILITY
    ):
        problems.append((f"compatibility must be a string of 1 to {MAX_COMPATIBILITY} characters", "compatibility"))
    return problems


# -- lenient YAML -------------------------------------------------------------------------

_PLAIN_VALUE = re.compile(r"^(?P<key>[A-Za-z0-9_-]+):[ \t]+(?P<value>[^'\"\[{|>&*!#\s].*?)\s*$")


def lenient_yaml(block: str, loader: Any) -> tuple[Any, list[str], str] | None:
    """Parse frontmatter that other clients accept although it is not valid YAML:
    a top-level plain value holding ``": "`` (``description: Use when: ...``) is
    quoted. Returns ``(data, keys quoted, the repaired text)``, or None if that does
    not help."""
    import yaml

    quoted: list[str] = []
    lines = []
    for line in block.splitlines():
        match = _PLAIN_VALUE.match(line)
        if match and ": " in match["value"]:
            value = match["value"].replace("\\", "\\\\").replace('"', '\\"')
            line = f'{match["key"]}: "{value}"'
            quoted.append(match["key"])
        lines.append(line)
    if not quoted:
        return None
    text = "\n".join(lines)
    try:
        return yaml.load(text, Loader=loader) or {}, quoted, text
    except yaml.YAMLError:
        return None
