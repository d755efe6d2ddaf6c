"""The built-in plugin that mounts external MCP servers (``mcp_servers:``) as skills.

Registered in every ContextManager (``agent_apps.plugins.BUILTIN_PLUGINS``). It imports
``mcp`` only when servers are configured, so ``agent-apps list`` stays fast otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..plugins import hookimpl

if TYPE_CHECKING:
    from ..manager import ContextManager


@hookimpl
def agent_apps_skills(manager: ContextManager) -> Iterable[Any]:
    from ..errors import AgentAppsError

    try:
        resolved = manager.config_for(None)
    except AgentAppsError:  # a broken config file is reported by whoever reads it next
        return []
    servers = resolved.values.get("mcp_servers")
    if not servers:
        return []
    from .client import MOUNTED_ENV, mcp_skills

    if os.environ.get(MOUNTED_ENV):  # started by an agent-apps that mounts servers
        return []
    return list(mcp_skills(manager, servers, resolved.sources))
