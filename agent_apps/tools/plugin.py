"""The tools plugin: tools.yaml entries onto the catalog, the permission middleware
around every invocation.

Every ContextManager registers one (``agent_apps.plugins.BUILTIN_PLUGINS``); pass your
own ``ContextManager(plugins=[ToolsPlugin(files=[...])])`` to configure it. It looks for
``tools.yaml``

1. in the files given to ``ToolsPlugin(files=[...])``;
2. in the project: the working directory, and next to the project's ``agent-apps.yaml``
   (when the manager's project layer is on);
3. in the user's ``~/.agent-apps/tools.yaml`` (when the user layer is on).

Earlier files win on a name clash; tools come after every skill directory, so a skill
file of the same name shadows a tool (``agent-apps list --all`` shows it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..plugins import hookimpl

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["TOOLS_FILE", "ToolsPlugin"]

TOOLS_FILE = "tools.yaml"


class ToolsPlugin:
    """See the module docstring. ``permissions=False`` leaves the middleware out."""

    def __init__(self, files: Iterable[str | os.PathLike[str]] = (), *, permissions: bool = True) -> None:
        self.files = [Path(f) for f in files]
        self.permissions = permissions

    def tools_files(self, manager: ContextManager) -> list[Path]:
        origins = {root.origin for root in manager.roots()}
        candidates = list(self.files)
        if "project" in origins:
            candidates.append(manager.cwd / TOOLS_FILE)
            layer = manager.cascade.project_file()
            if layer is not None and layer.source.endswith("agent-apps.yaml"):
                candidates.append(Path(layer.source).parent / TOOLS_FILE)
        if "user" in origins:
            candidates.append(manager.home / TOOLS_FILE)
        seen: set[Path] = set()
        out = []
        for path in candidates:
            resolved = path.resolve()
            if resolved not in seen and resolved.is_file():
                seen.add(resolved)
                out.append(resolved)
        return out

    @hookimpl
    def agent_apps_configure(self, manager: ContextManager) -> None:
        catalog = manager.catalog
        for path in self.tools_files(manager):
            from .cli_tools import load_tools_file  # only when there is a tools.yaml

            skills, errors = load_tools_file(path)
            for skill in skills:
                catalog.add(skill)
            catalog.errors.extend(errors)

    @hookimpl
    def agent_apps_middleware(self) -> Sequence[Any]:
        from .middleware import permission_middleware  # asked for when something runs

        return [permission_middleware] if self.permissions else []
