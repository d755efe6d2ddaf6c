"""The permission policy: allow, ask or deny a call, by skill name and by category.

A skill's category is ``metadata.category``: ``read``, ``write`` or ``admin`` (seed 002
section 6.1). The decision for a call, first match wins:

1. a skill-name glob in a ``deny`` list (the mode's or the shared one) -> deny;
2. a glob in an ``ask`` list -> ask;
3. a glob in an ``allow`` list -> allow;
4. the mode's ``categories`` entry for the skill's category;
5. a skill with no category -> allow (it is the caller's own code; the tools it calls
   carry categories and are checked when called).

So deny always wins: a job may list ``kubectl-apply`` under ``allow``, but cannot
re-enable a skill the project denies. Defaults (``security.policy``)::

                  interactive   unattended
        read      allow         allow
        write     allow         deny   (allow it by listing it)
        admin     ask           deny   (allow it by listing it)

The *mode* is ``security.mode``: ``interactive`` or ``unattended``, or ``auto`` (the
default): the mode of the enclosing :func:`~agent_apps.tools.approval.session` if
one set it, else interactive exactly when stdin is a terminal. Cron, CI and servers
are therefore unattended unless they say otherwise.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from ..errors import ConfigError
from ..skill import CATEGORIES

__all__ = ["ACTIONS", "CATEGORIES", "Decision", "category_of", "decide", "resolve_mode"]

Action = Literal["allow", "ask", "deny"]
ACTIONS: tuple[Action, ...] = ("allow", "ask", "deny")
MODES = ("interactive", "unattended")
def category_of(metadata: Mapping[str, Any]) -> str | None:
    """A skill's category, if it is one of agent-apps' own (:data:`~agent_apps.skill.CATEGORIES`).
    Another value (``documentation``, valid in the Agent Skills specification's free-form
    metadata) does not count: such a skill is uncategorized, and loading it warns."""
    category = metadata.get("category")
    return category if category in CATEGORIES else None


@dataclass(frozen=True)
class Decision:
    """What the policy says about one call, and the config key that said it."""

    action: Action
    rule: str
    mode: str
    category: str | None


def resolve_mode(security: Mapping[str, Any], session_mode: str | None = None) -> str:
    """``interactive`` or ``unattended`` (see the module docstring)."""
    mode = security.get("mode") or "auto"
    if mode in MODES:
        return str(mode)
    if mode != "auto":
        raise ConfigError(f"security.mode must be interactive, unattended or auto, not {mode!r}")
    if session_mode in MODES:
        return session_mode
    return "interactive" if _stdin_is_terminal() else "unattended"


#: ``(sys.stdin, whether it is a terminal)`` as last asked.
_stdin_seen: tuple[object, bool] | None = None


def _stdin_is_terminal() -> bool:
    """Whether stdin is a terminal, asked once per ``sys.stdin`` object. The check is a
    system call, and every call of a skill resolves the mode (a sandbox calling tools in
    a loop made one per call); replacing ``sys.stdin`` asks again."""
    global _stdin_seen
    stdin = sys.stdin
    if _stdin_seen is None or _stdin_seen[0] is not stdin:
        try:
            terminal = stdin is not None and stdin.isatty()
        except (ValueError, OSError):  # closed or detached stdin
            terminal = False
        _stdin_seen = (stdin, terminal)
    return _stdin_seen[1]


def decide(name: str, category: str | None, security: Mapping[str, Any], mode: str) -> Decision:
    """The decision for calling skill ``name`` of ``category`` in ``mode``."""
    policy = security.get("policy") or {}
    per_mode = policy.get(mode) or {}
    for listed in ACTIONS[::-1]:  # deny, ask, allow
        for where, section in ((f"security.policy.{mode}.{listed}", per_mode), (f"security.policy.{listed}", policy)):
            for pattern in _globs(section.get(listed), where):
                if fnmatchcase(name, pattern):
                    return Decision(listed, f"{where}: {pattern}", mode, category)
    if category is None:
        return Decision("allow", "uncategorized skill", mode, None)
    categories = per_mode.get("categories") or {}
    action = categories.get(category)
    key = f"security.policy.{mode}.categories.{category}"
    if action is None:
        # An unknown category is treated as the most dangerous known one.
        action, key = categories.get("admin", "deny"), f"unknown category {category!r} treated as admin"
    if action not in ACTIONS:
        raise ConfigError(f"{key} must be one of allow, ask, deny; not {action!r}")
    return Decision(action, key, mode, category)


def _globs(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise ConfigError(f"{where} must be a list of skill-name globs, not {value!r}")
