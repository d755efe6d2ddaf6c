"""MCP both ways (docs/mcp.md).

* :mod:`agent_apps.mcp.server`: serve skills as MCP tools (``agent-apps mcp``), with
  agent events as progress notifications (:mod:`.tool_call`), cancellation, and
  tool-list changes; :mod:`.transports`: stdio, streamable HTTP, and
  :func:`expose_refs`, an ephemeral loopback endpoint that lets a provider in another
  process call callback refs (``invoke_ref``, ``hook_ref``) over MCP.
* :mod:`agent_apps.mcp.plugin` and :mod:`agent_apps.mcp.client`: external MCP servers
  configured under ``mcp_servers:`` become skills named ``SERVER-TOOL``.
* :mod:`agent_apps.mcp.schemas`: how a skill looks as an MCP tool, for both ends.
* :mod:`agent_apps.mcp.approval`: an approver that asks the MCP client's user
  (elicitation).

This package imports ``mcp`` only in the submodules that need it, so importing
``agent_apps.mcp`` (or its plugin) costs nothing when no MCP feature is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .server import SkillServer, build_server
    from .transports import Endpoint, expose_refs, serve_http, serve_stdio, serving_http

__all__ = ["Endpoint", "SkillServer", "build_server", "expose_refs", "serve_http", "serve_stdio", "serving_http"]

#: Where each public name lives: imported on first access (_lazy.py).
_LAZY = {
    "SkillServer": "server",
    "build_server": "server",
    "Endpoint": "transports",
    "expose_refs": "transports",
    "serve_http": "transports",
    "serve_stdio": "transports",
    "serving_http": "transports",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
