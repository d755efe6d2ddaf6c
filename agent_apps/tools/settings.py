"""The ``security`` section of the config cascade, with the built-in defaults beneath it.

The kernel's cascade knows nothing about security; this module lays our defaults under
whatever the cascade resolves for the running skill. It also carries the *call* layer
(``invoke(..., config={...})``) down the invocation tree: a job that runs an agent with
``config={"security": {...}}`` wants that policy to hold for every tool the agent calls,
not only for the agent skill itself.

Config shape (every key optional)::

    security:
      mode: auto              # interactive | unattended | auto (interactive iff stdin is a TTY)
      workspace: null         # default: the ContextManager's working directory
      allowed_paths: null     # default: [workspace, <tmp>/agent-apps]
      denied_paths: []        # added to the built-in list (see paths.BUILTIN_DENIED)
      builtin_denied_paths: true
      timeout: 120            # seconds, subprocesses (the ceiling a call may lower)
      output_kb: 200          # captured output kept per subprocess run / file read
      env: []                 # extra host variables every subprocess gets, by name
      http: {timeout: 30, max_kb: 1024, allow_private: false}
      policy:
        allow: []             # skill-name globs, both modes (also ask: [], deny: [])
        interactive: {categories: {read: allow, write: allow, admin: ask}, allow: [], ask: [], deny: []}
        unattended:  {categories: {read: allow, write: deny, admin: deny}, allow: [], ask: [], deny: []}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..config import call_config

if TYPE_CHECKING:
    from ..context import Context
    from ..skill import Skill

__all__ = ["DEFAULT_SECURITY", "call_config", "security_for"]

#: The built-in ``security`` defaults (the lowest layer).
DEFAULT_SECURITY: dict[str, Any] = {
    "mode": "auto",
    "workspace": None,
    "allowed_paths": None,
    "denied_paths": [],
    "builtin_denied_paths": True,
    "timeout": 120,
    "output_kb": 200,
    "env": [],
    "http": {"timeout": 30, "max_kb": 1024, "allow_private": False},
    "policy": {
        "allow": [],
        "ask": [],
        "deny": [],
        "interactive": {"categories": {"read": "allow", "write": "allow", "admin": "ask"}},
        "unattended": {"categories": {"read": "allow", "write": "deny", "admin": "deny"}},
    },
}


#: Without a call layer, a skill's security config is cached on the skill until the
#: manager reloads, as the kernel caches a skill's middleware list: the permission
#: check runs on every invocation and must not re-read the cascade each time.
_CACHE_KEY = "agent_apps.tools.security"


def security_for(ctx: Context, skill: Skill | None = None) -> dict[str, Any]:
    """The resolved ``security`` mapping for ``skill`` (default: ``ctx.skill``) as
    invoked under ``ctx``, defaults filled in. Read-only: it may share the defaults."""
    target = skill or ctx.skill
    call = call_config(ctx)
    if call is None:
        cached = target._cache.get(_CACHE_KEY)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
    resolved = ctx._cm.config_for(target, call).values.get("security")
    result = _overlay(DEFAULT_SECURITY, resolved) if isinstance(resolved, Mapping) else DEFAULT_SECURITY
    if call is None:
        target._cache[_CACHE_KEY] = result
    return result


def _overlay(base: Mapping[str, Any], data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` over ``base``, sharing leaves (callers only read the result; the
    cascade already hands out copies), so a check costs no deep copies."""
    out = dict(base)
    for key, value in data.items():
        below = out.get(key)
        out[key] = _overlay(below, value) if isinstance(value, Mapping) and isinstance(below, Mapping) else value
    return out
