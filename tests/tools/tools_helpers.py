"""Shared helpers for the tools tests (a plain module: tests/ is not a package)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_apps import ContextManager
from agent_apps.tools import ToolsPlugin

INTERACTIVE = {"security": {"mode": "interactive"}}
#: What a scheduled job that writes files has: the unattended mode, the write tools
#: allowed by its policy (unattended runs deny the write category by default).
UNATTENDED_WRITER = {"mode": "unattended", "policy": {"unattended": {"allow": ["file-write", "file-edit"]}}}


def security(mode: str = "interactive", **values: Any) -> dict[str, Any]:
    """A call-layer config: ``mode`` plus ``values`` under ``security``. Unattended, it
    is a job allowed to write, so what a test sees is the path limits alone."""
    base = UNATTENDED_WRITER if mode == "unattended" else {"mode": mode}
    return {"security": {**base, **values}}


def make_manager(workspace: Path, tmp_path: Path, **kwargs: Any) -> ContextManager:
    """A hermetic manager rooted at ``workspace`` with the tools plugin (unless given)."""
    options: dict[str, Any] = {"env": False, "project": False, "user": False, "entry_points": False}
    options.update(kwargs)
    options.setdefault("plugins", [ToolsPlugin()])
    return ContextManager(cwd=workspace, home=tmp_path / "agent-apps-home", **options)
