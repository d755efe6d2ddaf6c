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
    "path_policy",
    "security_for",
    "session",
    "set_approver",
]


def path_policy(ctx: Context) -> PathPolicy:
    """The path boundaries that hold for the invocation ``ctx``."""
    cm = ctx.manager.context_manager
    return PathPolicy.from_security(security_for(ctx), cwd=cm.cwd, agent_home=cm.home)
