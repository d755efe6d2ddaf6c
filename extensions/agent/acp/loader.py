"""What agent-acp and agent-kiro share before the ACP package is imported."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_apps.errors import AgentAppsError


async def provide(ctx: Any, args: dict[str, Any], skill: str, default_command: list[str] | None = None) -> Any:
    """Run the provider; ``acp`` and ``mcp`` are imported off the event loop."""
    run = await asyncio.to_thread(_load, skill)
    return await run(ctx, args, skill=skill, default_command=default_command)


def _load(skill: str) -> Any:
    """The implementation, or one clear line naming the missing extra."""
    for module in ("acp", "mcp"):
        try:
            __import__(module)
        except ImportError:
            raise AgentAppsError(
                f"{skill}: the ACP provider needs the {module!r} package, which is not installed: "
                "pip install 'agent-apps[acp]'",
                skill=skill,
            ) from None
    from .session import run

    return run
