"""Test utilities for agent-apps and for projects built on it.

Attributes are loaded lazily, so ``import agent_apps.testing`` stays cheap and imports
neither boto3 nor strands. ``FakeBedrock`` is a local fake Amazon Bedrock Runtime server
(see :mod:`agent_apps.testing.bedrock`); ``FakeAnthropic``, ``FakeOpenAI`` and
``FakeOllama`` fake those APIs (see :mod:`agent_apps.testing.llm`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from agent_apps.testing.bedrock import FakeBedrock, RecordedRequest, Turn, dummy_aws_env  # noqa: F401
    from agent_apps.testing.llm import FakeAnthropic, FakeOllama, FakeOpenAI, ModelRequest  # noqa: F401

_LAZY = {
    "FakeBedrock": "agent_apps.testing.bedrock",
    "RecordedRequest": "agent_apps.testing.bedrock",
    "Turn": "agent_apps.testing.bedrock",
    "dummy_aws_env": "agent_apps.testing.bedrock",
    "FakeAnthropic": "agent_apps.testing.llm",
    "FakeOpenAI": "agent_apps.testing.llm",
    "FakeOllama": "agent_apps.testing.llm",
    "ModelRequest": "agent_apps.testing.llm",
}

__all__ = [*sorted(_LAZY), "default_sigint"]


def default_sigint() -> None:
    """``subprocess.Popen(..., preexec_fn=default_sigint)`` for tests that press Ctrl-C.

    A process started in the background by a non-interactive shell (as CI jobs are)
    inherits SIGINT *ignored*, and Python then installs no KeyboardInterrupt handler;
    this puts the default back in the child so that ``send_signal(SIGINT)`` works.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
