"""Test utilities for agent-apps and for projects built on it.

Attributes are loaded lazily, so ``import agent_apps.testing`` stays cheap and imports
neither boto3 nor strands. ``FakeBedrock`` is a local fake Amazon Bedrock Runtime server
(see :mod:`agent_apps.testing.bedrock`); ``FakeAnthropic``, ``FakeOpenAI`` and
``FakeOllama`` fake those APIs (see :mod:`agent_apps.testing.llm`); ``provider_suite``
is the provider conformance suite (see :mod:`agent_apps.testing.conformance`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover
    from .bedrock import FakeBedrock, RecordedRequest, Turn, dummy_aws_env
    from .conformance import Harness, provider_suite
    from .llm import FakeAnthropic, FakeOllama, FakeOpenAI, ModelRequest

#: Where the fakes and the suite live: imported on first access (_lazy.py).
_LAZY = {
    "FakeBedrock": "bedrock",
    "RecordedRequest": "bedrock",
    "Turn": "bedrock",
    "dummy_aws_env": "bedrock",
    "Harness": "conformance",
    "provider_suite": "conformance",
    "FakeAnthropic": "llm",
    "FakeOpenAI": "llm",
    "FakeOllama": "llm",
    "ModelRequest": "llm",
}

__all__ = [
    "FakeAnthropic",
    "FakeBedrock",
    "FakeOllama",
    "FakeOpenAI",
    "Harness",
    "ModelRequest",
    "RecordedRequest",
    "Turn",
    "default_sigint",
    "dummy_aws_env",
    "probe_model",
    "provider_suite",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)

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

