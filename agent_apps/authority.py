"""What agent code may ask of a sub-agent: the limits that keep a caller from widening
itself through the agent it starts.

A call from agent code to the ``agent`` skill (directly, or through anything that calls
``agent`` for it later) is untrusted. Its ``config`` may set only
:data:`UNTRUSTED_CONFIG_KEYS`, its provider must be a provider skill, and its
``allowed_tools`` may differ from the caller's own only when the caller's allowed-tools
say so (a bare ``*``, or a constraint on ``agent(allowed_tools=...)``, which the
pipeline checks like any constraint). The agent run applies these checks when it
starts; ``ref_args`` applies the same ones to what a ref-taking skill stores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .allowed_tools import parse_specs
from .errors import ToolNotAllowed
from .skill import Skill, is_skill_name

__all__ = ["UNTRUSTED_CONFIG_KEYS", "check_untrusted_agent_args"]

#: The model config keys agent code may set when it starts a sub-agent. Everything else
#: (endpoints, credentials, regions, sandbox limits) stays with the user's config: agent
#: code must not redirect model traffic or lift its own limits.
#: ``sandbox`` and the turn and step limits are allowed because a nested agent never gets
#: more than its caller has (the agent's limits are the tighter of both): agent code can
#: only lower them.
UNTRUSTED_CONFIG_KEYS = frozenset(
    {"agent", "model_id", "max_turns", "max_steps", "temperature", "max_tokens", "top_p", "script", "stream", "sandbox"}
)


def check_untrusted_agent_args(
    caller: Skill, agent: Skill, args: Mapping[str, Any], providers: Mapping[str, Skill]
) -> None:
    """Refuse ``args`` for the agent skill ``agent`` that would let agent code running as
    ``caller`` widen what agent code can do. ``providers`` maps skill names to skills (the
    catalog), to check that ``config.agent`` names a provider."""
    name = caller.name
    config = args.get("config") or {}
    refused = sorted(set(config) - UNTRUSTED_CONFIG_KEYS)
    if refused:
        raise ToolNotAllowed(
            name, agent.name, f"agent code may not set config {', '.join(refused)} (it may set "
            f"{', '.join(sorted(UNTRUSTED_CONFIG_KEYS))})"
        )
    provider = config.get("agent")
    if provider is not None:
        skill = providers.get(provider) if is_skill_name(provider) else None
        if skill is None or "provider" not in skill.tags:
            raise ToolNotAllowed(name, agent.name, f"config.agent {provider!r} is not a provider skill")
    requested = args.get("allowed_tools")
    own = caller.allowed_tools
    if requested is None or requested == own:
        return
    specs = parse_specs(own) if own else ()
    widening_ok = any(s.glob == "*" for s in specs) or any(
        s.matches_name(agent) and any(k == "allowed_tools" for k, _ in s.constraints) for s in specs
    )
    if not widening_ok:
        raise ToolNotAllowed(
            name, agent.name, "agent code may start a sub-agent only with its own allowed-tools, unless its "
            "allowed-tools says which, as in agent(allowed_tools=file-*)"
        )
