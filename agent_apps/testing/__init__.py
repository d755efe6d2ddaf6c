"""Test utilities for agent-apps and for projects built on it.

Attributes are loaded lazily, so ``import agent_apps.testing`` stays cheap and imports
neither boto3 nor strands. ``FakeBedrock`` is a local fake Amazon Bedrock Runtime server
(see :mod:`agent_apps.testing.bedrock`); ``FakeAnthropic``, ``FakeOpenAI`` and
``FakeOllama`` fake those APIs (see :mod:`agent_apps.testing.llm`); ``provider_suite``
is the provider conformance suite (see :mod:`agent_apps.testing.conformance`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from agent_apps.testing.bedrock import FakeBedrock, RecordedRequest, Turn, dummy_aws_env  # noqa: F401
    from agent_apps.testing.conformance import Harness, provider_suite  # noqa: F401
    from agent_apps.testing.llm import FakeAnthropic, FakeOllama, FakeOpenAI, ModelRequest  # noqa: F401

_LAZY = {
    "FakeBedrock": "agent_apps.testing.bedrock",
    "RecordedRequest": "agent_apps.testing.bedrock",
    "Turn": "agent_apps.testing.bedrock",
    "dummy_aws_env": "agent_apps.testing.bedrock",
    "Harness": "agent_apps.testing.conformance",
    "provider_suite": "agent_apps.testing.conformance",
    "FakeAnthropic": "agent_apps.testing.llm",
    "FakeOpenAI": "agent_apps.testing.llm",
    "FakeOllama": "agent_apps.testing.llm",
    "ModelRequest": "agent_apps.testing.llm",
}

__all__ = [*sorted(_LAZY), "default_sigint", "probe_model"]

# The probe's code: each call in turn; a refusal's message instead of its result.
_PROBE = """
import json
results = {}
for key, (name, args) in json.loads(CALLS).items():
    try:
        value = await ctx.manager.invoke(name, args)
        results[key] = "ok: " + (value if isinstance(value, str) else json.dumps(value))
    except Exception as exc:
        results[key] = "refused: " + str(exc)
ctx.manager.finish(results)
"""


def probe_model(calls: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Model config for ``agent-scripted`` whose one turn makes ``calls`` (``{key:
    (skill, args)}``) from agent code and finishes with ``{key: "ok: RESULT" |
    "refused: WHY"}``: what an agent may and may not do, in one run.

    ::

        config = probe_model({"read": ("file-read", {"path": "/etc/hosts"})})
        result = await cm.invoke("agent", {"prompt": "p", "config": config})
        assert result["read"].startswith("refused: ")
    """
    import json

    code = f"CALLS = {json.dumps(json.dumps(calls))}\n" + _PROBE
    return {"agent": "agent-scripted", "script": [{"code": code}]}


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
