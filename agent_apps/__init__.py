"""agent-apps: build LLM agents out of skills.

Everything is a skill: a named, described unit with JSON Schemas for its args and
result. A :class:`ContextManager` finds skills on a search path and runs every
invocation through one pipeline (see :mod:`agent_apps.pipeline`)::

    from agent_apps import ContextManager

    cm = ContextManager(search_path=["skills"])
    result = cm.invoke_sync("word-count", {"text": "a b c"})

Importing this package is cheap: the sandbox, providers and MCP load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from .config import DEFAULTS
    from .context import Context, Manager, Signal
    from .errors import (
        AgentAppsError,
        ApprovalPending,
        ArgsInvalid,
        BudgetExceeded,
        Cancelled,
        ConfigError,
        GuardrailTripped,
        LimitExceeded,
        MiddlewareError,
        MiddlewareTermination,
        ReplayDiverged,
        ResultInvalid,
        RunStopped,
        SandboxError,
        SkillFailed,
        SkillLoadError,
        SkillNotFound,
        ToolNotAllowed,
    )
    from .events import EventBus
    from .manager import ContextManager
    from .plugins import hookimpl
    from .skill import Skill

__version__ = "0.1.0"

__all__ = [
    "DEFAULTS",
    "AgentAppsError",
    "ApprovalPending",
    "ArgsInvalid",
    "BudgetExceeded",
    "Cancelled",
    "ConfigError",
    "Context",
    "ContextManager",
    "EventBus",
    "GuardrailTripped",
    "LimitExceeded",
    "Manager",
    "MiddlewareError",
    "MiddlewareTermination",
    "ReplayDiverged",
    "ResultInvalid",
    "RunStopped",
    "SandboxError",
    "Signal",
    "Skill",
    "SkillFailed",
    "SkillLoadError",
    "SkillNotFound",
    "ToolNotAllowed",
    "__version__",
    "hookimpl",
]

#: Where each public name lives: imported on first access (_lazy.py), so that
#: ``import agent_apps`` and the command line's start pay only for what they use.
_LAZY = {
    "DEFAULTS": "config",
    "Context": "context",
    "Manager": "context",
    "Signal": "context",
    "AgentAppsError": "errors",
    "ApprovalPending": "errors",
    "ArgsInvalid": "errors",
    "BudgetExceeded": "errors",
    "Cancelled": "errors",
    "ConfigError": "errors",
    "GuardrailTripped": "errors",
    "LimitExceeded": "errors",
    "MiddlewareError": "errors",
    "MiddlewareTermination": "errors",
    "ReplayDiverged": "errors",
    "ResultInvalid": "errors",
    "RunStopped": "errors",
    "SandboxError": "errors",
    "SkillFailed": "errors",
    "SkillLoadError": "errors",
    "SkillNotFound": "errors",
    "ToolNotAllowed": "errors",
    "EventBus": "events",
    "ContextManager": "manager",
    "hookimpl": "plugins",
    "Skill": "skill",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
