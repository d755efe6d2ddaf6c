"""Shared helpers for the tools tests (a plain module: tests/ is not a package)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_apps import ContextManager
from agent_apps.tools import ToolsPlugin

INTERACTIVE = {"security": {"mode": "interactive"}}


def security(**values: Any) -> dict[str, Any]:
    """A call-layer config: interactive mode plus ``values`` under ``security``."""
    return {"security": {"mode": "interactive", **values}}


def make_manager(workspace: Path, tmp_path: Path, **kwargs: Any) -> ContextManager:
    """A hermetic manager rooted at ``workspace`` with the tools plugin (unless given)."""
    options: dict[str, Any] = {"env": False, "project": False, "user": False, "entry_points": False}
    options.update(kwargs)
    options.setdefault("plugins", [ToolsPlugin()])
    return ContextManager(cwd=workspace, home=tmp_path / "agent-apps-home", **options)
