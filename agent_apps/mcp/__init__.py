"""MCP both ways (docs/mcp.md).

* :mod:`agent_apps.mcp.server`: serve skills as MCP tools (``agent-apps mcp``), with
  agent events as progress notifications, cancellation, and tool-list changes; and
  :func:`expose_refs`, an ephemeral loopback endpoint that lets a provider in another
  process call callback refs (``invoke_ref``, ``hook_ref``) over MCP.
* :mod:`agent_apps.mcp.plugin` and :mod:`agent_apps.mcp.client`: external MCP servers
  configured under ``mcp_servers:`` become skills named ``SERVER-TOOL``.
* :mod:`agent_apps.mcp.approval`: an approver that asks the MCP client's user
  (elicitation).

This package imports ``mcp`` only in the submodules that need it, so importing
``agent_apps.mcp`` (or its plugin) costs nothing when no MCP feature is used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Endpoint", "build_server", "expose_refs", "serve_http", "serve_stdio"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import server

        return getattr(server, name)
    raise AttributeError(name)
