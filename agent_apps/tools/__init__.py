"""Built-in tools with real safety: the helpers behind the bundled ``file-*``,
``shell`` and ``http-fetch`` skills, CLI tools from ``tools.yaml``, and the permission
policy with human approval. See docs/security.md for the model as a whole.

* :mod:`.paths`: path boundaries (allowed/denied, symlinks resolved first);
* :mod:`.subprocess`: environment allow-list, output cap, group-killing timeout;
* :mod:`.blocklist`: the shell tool's destructive-command blocklist;
* :mod:`.cli_tools`: ``tools.yaml`` entries as skills;
* :mod:`.policy`, :mod:`.approval`, :mod:`.middleware`: allow/ask/deny and approvers;
* :mod:`.plugin`: puts tools.yaml tools and the permission middleware on a manager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..context import Context
    from .approval import ApprovalRequest, Approver, TerminalApprover, session, set_approver
    from .errors import PermissionDenied
    from .paths import PathPolicy
    from .plugin import ToolsPlugin
    from .settings import security_for

__all__ = [
    "ApprovalRequest",
    "Approver",
    "PathPolicy",
    "PermissionDenied",
    "TerminalApprover",
    "ToolsPlugin",
    "own_skill_folder",
    "path_policy",
    "readable_folders",
    "security_for",
    "session",
    "set_approver",
]

#: Where the classes and helpers above live: imported on first access (_lazy.py), since
#: every manager registers :class:`ToolsPlugin` and the approval machinery needs asyncio.
_LAZY = {
    "ApprovalRequest": "approval",
    "Approver": "approval",
    "TerminalApprover": "approval",
    "session": "approval",
    "set_approver": "approval",
    "PermissionDenied": "errors",
    "PathPolicy": "paths",
    "ToolsPlugin": "plugin",
    "security_for": "settings",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)


def path_policy(ctx: Context, *, reading: bool = False) -> PathPolicy:
    """The path boundaries that hold for the invocation ``ctx``.

    ``reading``: the tool only reads (``file-read``, ``file-list``). Then, when agent
    code called it, the folder of the skill that agent runs (a ``NAME/SKILL.md``
    skill's own files) and the folders of the guidance skills it loaded are readable
    too. Only that agent's code gets them: not the skills it calls, not sub-agents,
    not other agents, never for writing.
    """
    from .paths import PathPolicy
    from .settings import security_for

    cm = ctx.manager.context_manager
    readable = readable_folders(ctx) if reading else ()
    return PathPolicy.from_security(security_for(ctx), cwd=cm.cwd, agent_home=cm.home, readable=readable)


def own_skill_folder(ctx: Context) -> str | None:
    """The folder of the skill whose agent's code made the call ``ctx``, if any."""
    from ..context import agent_scope  # here: context imports asyncio, and every manager imports this package

    scope = agent_scope(ctx)
    folder = scope.get("skill_dir") if scope is not None else None
    return folder if isinstance(folder, str) else None


def readable_folders(ctx: Context) -> tuple[str, ...]:
    """The folders the agent code that made the call ``ctx`` may read beyond the
    allowed paths: its skill's own, and those of the guidance skills it loaded."""
    from ..context import agent_scope

    own = own_skill_folder(ctx)
    scope = agent_scope(ctx) or {}
    loaded = [f for f in scope.get("loaded_folders") or () if isinstance(f, str)]
    return tuple(dict.fromkeys([own, *loaded] if own else loaded))
