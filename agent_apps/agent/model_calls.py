"""The policy's seat around each model call (hook events ``model-call`` and ``model-response``).

A provider makes the model calls, maybe in another process, but several features must
sit around each one: a journal answers a resumed run's calls from what the model said
before, model-level middleware and guardrails see (and may change) what is sent and
what comes back, the context may change the system prompt per call. A provider that
declares ``metadata: {provider: {model_calls: true}}`` reports each call twice:

``model-call`` (before the request)::

    {"type": "model-call", "turn": N, "attempt": A,
     "messages": [...], "system": "..."}    # only when started with model_messages: true

    directive: {"response": R}   do not call the model, act on R as its answer
               {"messages": [...]}  send these (neutral messages) instead
               {"system": "..."}    use this system prompt for this call

``model-response`` (after a successful request, before the provider acts on it)::

    {"type": "model-response", "turn": N, "attempt": A, "response": R,
     "latency_ms": F, "replayed": bool}

    directive: {"response": R2}  act on R2 instead (only when started with
                                 buffer_responses: true: a streaming provider has
                                 otherwise shown R's text already)

``R`` is a :class:`ModelResponse`. A replayed ``R`` is acted on like a live one: the
provider reports its text and tool calls through the usual events and runs the calls.

Features plug in as :class:`ModelInterceptor` objects, layered like an onion: the
first is the outermost. ``model-call`` goes through them first to last, each seeing the
event as the ones before it left it, and the first ``response`` ends the round (nothing
after it sees that call); ``model-response`` comes back last to first, so the outermost
sees the answer the provider will act on. An answer comes back only through the
interceptors that saw its call: the one that answered it (with ``replayed: true``) and
those before it, all of them when the model answered. The journal of durable runs is the outermost (``durable.py``):
a replayed answer meets no middleware or guardrail (they saw it, and changed it, the
first time), and the journal records the answer as they left it, the model's or a
middleware's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from ..errors import AgentAppsError
from ..state.messages import TOOL_CALLS_SCHEMA, ToolCall

if TYPE_CHECKING:
    from ..skill import Skill

__all__ = [
    "RESPONSE_SCHEMA",
    "ModelCalls",
    "ModelInterceptor",
    "ModelResponse",
    "declares_model_calls",
    "require_model_calls",
]


class ModelResponse(TypedDict, total=False):
    """One answer of the model, whatever the provider's wire format."""

    text: str
    reasoning: str
    tool_calls: list[ToolCall]
    usage: dict[str, int]
    stop_reason: str
    #: provider-private data the provider needs to act on a replayed answer (e.g. the
    #: scripted provider's position in its script); others pass it through untouched
    meta: dict[str, Any]


#: JSON Schema of a :class:`ModelResponse`: what a directive may hand a provider.
RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "reasoning": {"type": "string"},
        "tool_calls": TOOL_CALLS_SCHEMA,
        "usage": {"type": "object"},
        "stop_reason": {"type": "string"},
        "meta": {"type": "object"},
    },
}


class ModelInterceptor(Protocol):
    """A feature that sits around model calls. Both methods return a directive or None."""

    #: wants ``messages`` and ``system`` in model-call events (they cost a copy per call)
    needs_messages: bool
    #: may replace responses (the provider then buffers each answer before acting on it)
    changes_responses: bool

    async def model_call(self, event: dict[str, Any]) -> dict[str, Any] | None: ...

    async def model_response(self, event: dict[str, Any]) -> dict[str, Any] | None: ...


class ModelCalls:
    """The ordered interceptors of one agent run."""

    def __init__(self, interceptors: Sequence[ModelInterceptor] = ()) -> None:
        self.interceptors: list[ModelInterceptor] = list(interceptors)
        #: how many interceptors saw the last call (its answer comes back through them)
        self._saw: int | None = None

    def __bool__(self) -> bool:
        return bool(self.interceptors)

    def provider_args(self) -> dict[str, bool]:
        """What the provider must send and do for these interceptors (its args)."""
        args = {}
        if any(i.needs_messages for i in self.interceptors):
            args["model_messages"] = True
        if any(i.changes_responses for i in self.interceptors):
            args["buffer_responses"] = True
        return args

    async def on_call(self, event: dict[str, Any]) -> dict[str, Any]:
        directive: dict[str, Any] = {}
        self._saw = 0
        for index, interceptor in enumerate(self.interceptors):
            answer = await interceptor.model_call(event)
            if not answer:
                continue
            if "response" in answer:
                self._saw = index + 1
                return {"response": answer["response"]}
            for key in ("messages", "system"):
                if key in answer:
                    directive[key] = event[key] = answer[key]
        self._saw = len(self.interceptors)
        return directive

    async def on_response(self, event: dict[str, Any]) -> dict[str, Any]:
        original = event.get("response")
        for interceptor in reversed(self.interceptors[: self._saw]):
            answer = await interceptor.model_response(event)
            if answer and "response" in answer:
                event["response"] = answer["response"]
        return {"response": event["response"]} if event.get("response") is not original else {}


def declares_model_calls(provider: Skill) -> bool:
    """Whether the provider skill reports its model calls (``metadata.provider.model_calls``)."""
    declared = provider.metadata.get("provider")
    return isinstance(declared, dict) and bool(declared.get("model_calls"))


def require_model_calls(provider: Skill) -> None:
    """A feature that sits around model calls needs a provider that reports them."""
    if not declares_model_calls(provider):
        raise AgentAppsError(
            f"provider {provider.name!r} does not report its model calls (metadata.provider.model_calls), which "
            "this run needs (a resumed durable run, model-level middleware or guardrails); use a provider that "
            "does, such as agent-strands or agent-scripted",
            skill=provider.name,
        )
