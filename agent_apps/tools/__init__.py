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

from .approval import ApprovalRequest, Approver, TerminalApprover, session, set_approver
from .errors import PermissionDenied
from .paths import PathPolicy
from .plugin import ToolsPlugin
from .settings import security_for

if TYPE_CHECKING:
    from ..context import Context

__all__ = [
    "ApprovalRequest",
    "Approver",
    "PathPolicy",
    "PermissionDenied",
    "TerminalApprover",
    "ToolsPlugin",
    "own_skill_folder",
    "path_policy",
    "security_for",
    "session",
    "set_approver",
]


def path_policy(ctx: Context, *, reading: bool = False) -> PathPolicy:
    """The path boundaries that hold for the invocation ``ctx``.

    ``reading``: the tool only reads (``file-read``, ``file-list``). Then, when agent
    code called it, the folder of the skill that agent runs (a ``NAME/SKILL.md``
    skill's own files) is readable too. Only that agent's code gets it: not the
    skills it calls, not sub-agents, not other agents, never for writing.
    """
    cm = ctx.manager.context_manager
    readable = (own,) if reading and (own := own_skill_folder(ctx)) else ()
    return PathPolicy.from_security(security_for(ctx), cwd=cm.cwd, agent_home=cm.home, readable=readable)


def own_skill_folder(ctx: Context) -> str | None:
    """The folder of the skill whose agent's code made the call ``ctx``, if any."""
    caller = ctx.parent
    if caller is None or not caller.internals.get("untrusted"):
        return None
    scope = caller.nonlocals.get("agent")
    folder = scope.get("skill_dir") if isinstance(scope, dict) else None
    return folder if isinstance(folder, str) else None
