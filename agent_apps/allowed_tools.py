"""``allowed-tools``: which skills a skill may call, and with which args.

A spec list is space-delimited. Each spec is a glob over skill names (``fnmatch``),
optionally followed by argument constraints::

    file-* agent(allowed_tools=file-read) schedule-create(ref=my-*)

Rules (CONTRACT section 3, plus what it leaves open):

* No ``allowed-tools``: every *visible* skill. A bare ``*``: every skill.
* Hidden skills match only a spec that names them exactly (or a bare ``*``).
* A constrained argument must be given, and its value must match the glob. When the
  glob has no whitespace, a string value is split on whitespace and every item must
  match (so ``agent(allowed_tools=file-*)`` refuses ``"file-read shell"``); a list
  value likewise item by item. A glob with whitespace matches the whole string.
* Path-like words (those with a ``/``) are matched in normal form: ``./docs//a`` as
  ``docs/a``, the path of a URL likewise (percent-escapes decoded). A word with a
  ``..`` segment matches only a glob that has one too, so ``file-read(path=docs/*)``
  refuses ``docs/../.env`` (a glob's ``*`` would otherwise match the ``../``).

:func:`visible_tools` is the one place that decides which skills a caller sees; the
agent uses it to build its tool documentation, the MCP server to list tools.
"""

from __future__ import annotations

import json
import posixpath
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cached_property, lru_cache
from typing import Any, Literal

from ._syntax import parse_call, split_top_level
from .errors import ToolNotAllowed
from .skill import Skill

__all__ = ["Spec", "Visible", "check_call", "parse_specs", "visible_tools"]

_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class Spec:
    """One allowed-tools entry: a name glob and argument constraints."""

    text: str
    glob: str
    constraints: tuple[tuple[str, str], ...] = ()

    @cached_property
    def exact(self) -> bool:
        """True when the glob names one skill (no wildcard). Cached: specs are parsed
        once per allowed-tools string and checked on every call."""
        return not (_GLOB_CHARS & set(self.glob))

    def matches_name(self, skill: Skill) -> bool:
        if self.glob == "*":
            return True
        if self.exact:
            return self.glob == skill.name
        return not skill.hidden and fnmatchcase(skill.name, self.glob)

    def args_problem(self, args: dict[str, Any] | None) -> str | None:
        """Why ``args`` break this spec's constraints, or None."""
        args = args or {}
        for key, glob in self.constraints:
            if key not in args:
                return f"argument {key!r} must be given and match {glob!r}"
            if not _value_matches(args[key], glob):
                return f"argument {key}={_short(args[key])} does not match {glob!r}"
        return None


@lru_cache(maxsize=1024)
def parse_specs(text: str) -> tuple[Spec, ...]:
    """Parse a space-delimited allowed-tools string (whitespace inside ``()`` is kept)."""
    specs = []
    for token in split_top_level(text, " \t\n"):
        try:
            glob, constraints = parse_call(token)
        except ValueError as exc:
            raise ValueError(f"allowed-tools spec {exc}") from None
        specs.append(Spec(token, glob, tuple(constraints)))
    return tuple(specs)


def check_call(caller: Skill, callee: Skill, args: dict[str, Any] | None) -> None:
    """Raise :class:`ToolNotAllowed` unless ``caller`` may call ``callee`` with ``args``."""
    allowed = caller.allowed_tools
    if allowed is None:
        if callee.hidden:
            raise ToolNotAllowed(
                caller.name, callee.name, "it is hidden; name it in the caller's allowed-tools to call it"
            )
        return
    problems = []
    for spec in _specs_naming(caller, callee, allowed):
        problem = spec.args_problem(args) if spec.constraints else None
        if problem is None:
            return
        problems.append(f"{problem} (spec {spec.text!r})")
    if problems:
        raise ToolNotAllowed(caller.name, callee.name, "; ".join(problems), spec=allowed)
    hidden = " (it is hidden: only a spec naming it exactly matches)" if callee.hidden else ""
    raise ToolNotAllowed(caller.name, callee.name, f"not in allowed-tools {allowed!r}{hidden}", spec=allowed)


#: Where :func:`_specs_naming` keeps its answers (in the caller's ``skill._cache``).
_NAMING_KEY = "allowed_tools.naming"


def _specs_naming(caller: Skill, callee: Skill, allowed: str) -> tuple[Spec, ...]:
    """The specs of ``allowed`` (the caller's allowed-tools) whose glob matches
    ``callee``, in order. Cached on the caller per callee, for as long as both are the
    same: agent code calls the same few skills in loops, and a reload makes new Skill
    objects. A spec list that does not parse raises every time."""
    memo: dict[str, tuple[Skill, str, tuple[Spec, ...]]] = caller._cache.setdefault(_NAMING_KEY, {})
    known = memo.get(callee.name)
    if known is not None and known[0] is callee and known[1] is allowed:
        return known[2]
    try:
        specs = parse_specs(allowed)
    except ValueError as exc:
        raise ToolNotAllowed(caller.name, callee.name, str(exc), spec=allowed) from None
    naming = tuple(spec for spec in specs if spec.matches_name(callee))
    memo[callee.name] = (callee, allowed, naming)
    return naming


@dataclass(frozen=True)
class Visible:
    """What a caller may see: tools, middleware, and which discovery mode applies."""

    mode: Literal["constrained", "discovery"]
    tools: list[Skill]
    middleware: list[Skill]
    #: In discovery mode, the tools named explicitly (the rest is found by exploring).
    named: list[Skill]


def visible_tools(
    skills: Iterable[Skill],
    allowed: str | None,
    *,
    caller: str | None = None,
    exclude: Iterable[str] = (),
) -> Visible:
    """Decide which skills a caller with ``allowed`` sees.

    * hidden skills only when named exactly;
    * the caller itself only when named exactly (no ``greeter -> agent -> greeter``);
    * ``exclude`` (the agent passes itself and its provider), and skills tagged
      ``meta-internal`` (providers, executors), never;
    * discovery mode when ``allowed`` is None or has a bare ``*``, else constrained.
    """
    specs = parse_specs(allowed) if allowed else ()
    named_exact = {s.glob for s in specs if s.exact}
    excluded = set(exclude)
    discovery = allowed is None or any(s.glob == "*" for s in specs)
    tools: list[Skill] = []
    middleware: list[Skill] = []
    named: list[Skill] = []
    for skill in skills:
        if skill.name in excluded or skill.kind == "callback" or "meta-internal" in skill.tags:
            continue
        if skill.name == caller and skill.name not in named_exact:
            continue
        if skill.hidden and skill.name not in named_exact:
            continue
        if allowed is not None and not any(s.matches_name(skill) for s in specs):
            continue  # (an empty allowed-tools allows nothing, as check_call says)
        if skill.metadata.get("role") == "guardrail" or (skill.is_middleware and skill.level == "model"):
            continue  # they judge or wrap model calls: nothing agent code can call or activate
        (middleware if skill.is_middleware else tools).append(skill)
        if skill.name in named_exact:
            named.append(skill)
    return Visible("discovery" if discovery else "constrained", tools, middleware, named)


# -- internals -----------------------------------------------------------------------


def _value_matches(value: object, glob: str) -> bool:
    if isinstance(value, str):
        if any(c.isspace() for c in glob):
            return _text_matches(value, glob)
        items = value.split()
        return bool(items) and all(_text_matches(item, glob) for item in items)
    if isinstance(value, list):
        return bool(value) and all(_value_matches(item, glob) for item in value)
    return fnmatchcase(json.dumps(value), glob)


_WORD = re.compile(r"\S+")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _text_matches(text: str, glob: str) -> bool:
    """``fnmatchcase`` with the path-like words of ``text`` in normal form, and none
    climbing (``..``) unless the glob climbs too."""
    if "/" not in text and ".." not in text:
        return fnmatchcase(text, glob)
    words = _WORD.findall(text)
    if any(_climbs(w) for w in words) and not _climbs(glob):
        return False
    return fnmatchcase(_WORD.sub(lambda m: _normal(m.group()), text), glob)


def _path_part(word: str) -> str:
    """The part of a word that names a path: all of it, or a URL's decoded path."""
    if _URL.match(word):
        return urllib.parse.unquote(urllib.parse.urlsplit(word).path)
    return word


def _climbs(word: str) -> bool:
    return any(part == ".." for part in _WORD.sub(lambda m: _path_part(m.group()), word).split("/"))


def _normal(word: str) -> str:
    if "/" not in word:
        return word
    if _URL.match(word):
        parts = urllib.parse.urlsplit(word)
        path = _normal(urllib.parse.unquote(parts.path)) if parts.path else ""
        return urllib.parse.urlunsplit(parts._replace(path=path))
    normal = posixpath.normpath(word)
    return normal + "/" if word.endswith("/") and not normal.endswith("/") else normal


def _short(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
