"""The agent as a tool: the policy behind the ``agent`` skill and what providers need.

Provider authors need two things from here: :data:`INVOKE_TOOL` (the one tool to give
the model) and the hook protocol documented in :mod:`agent_apps.agent.turns`.
"""

from .prompt import INVOKE_TOOL
from .run import AgentRun
from .turns import HOOK_PARAMS

__all__ = ["HOOK_PARAMS", "INVOKE_TOOL", "AgentRun"]
